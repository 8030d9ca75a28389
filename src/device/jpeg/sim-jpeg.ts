// Internal: not exported from the package entry.
// Batch rows of cropped, resized images decoded on the CPU (sharp, through the project's decodeImage)
// and uploaded into device memory through the Backend interface: the `sim` device's GPU JPEG decoder,
// and the CPU fallback for the files the GPU decoder hands back. The rule: the rows come out as
// kernels/crop-resize.cu would write them from the same pixels (the same resampler, op for op);
// the bytes written are the caller's to keep untouched until an event recorded on `stream` after the
// call is done; a file that cannot be decoded is reported, never thrown.

import type { Backend, DeviceBuffer, StreamName } from '../backend.js';
import { addressAlign } from '../backend.js';
import { StreamScratch } from '../accelerator/stream-scratch.js';
import { type CpuRowFilter, cpuDecode } from './jpeg-jobs.js';
import { type CropBoxes, type JpegBatchOutput, boxFor, checkBoxCount, checkOutput, dtypeBytes, CHANNELS } from '../../image/jpeg-plan.js';
import { cropResize, encodeRow } from '../../image/jpeg-resample.js';

export type { CpuRowFilter };

export class CpuJpegRows {
  readonly #backend: Backend;
  #scratch: DeviceBuffer | undefined;
  #tables: DeviceBuffer | undefined;
  readonly #order: StreamScratch;
  #closed = false;

  constructor(backend: Backend) {
    this.#backend = backend;
    this.#order = new StreamScratch(backend);
  }

  /**
   * Decode files[k] for each k of `which` (default all), crop/resize by its box and enqueue the
   * upload of row k of `out` on `stream`. Returns the files not written: not decodable (or, with
   * filter 'gpu-jpeg', not a baseline RGB/grey JPEG).
   */
  async write(files: readonly Uint8Array[], boxes: CropBoxes, out: JpegBatchOutput, stream: StreamName, which?: readonly number[], filter: CpuRowFilter = 'any'): Promise<{ skipped: number[] }> {
    if (this.#closed) throw new Error('this JPEG decoder is closed');
    checkBoxCount(boxes, files.length);
    const scaleBias = checkOutput(out);
    const ks = which ?? files.map((_, k) => k);
    const payload = CHANNELS * out.size[0] * out.size[1] * dtypeBytes(out.dtype);
    const skipped: number[] = [];
    const rows: { k: number; bytes: Uint8Array }[] = [];
    const decoded = await Promise.all(ks.map((k) => cpuDecode(files[k]!, k, filter)));
    for (let i = 0; i < ks.length; i++) {
      const image = decoded[i];
      const k = ks[i]!;
      if (image === undefined) {
        skipped.push(k);
        continue;
      }
      // A bad box is the caller's bug, not the file's: it throws.
      const box = boxFor(boxes, k, image.width, image.height);
      rows.push({ k, bytes: encodeRow(cropResize(image.rgb, image.width * 3, box, out.size[0], out.size[1]), out, scaleBias) });
    }
    if (rows.length > 0) this.upload(rows, payload, out, stream);
    return { skipped };
  }

  /** Enqueue the upload of `rows` (each `payload` bytes) into rows k of `out` on `stream`. */
  upload(rows: readonly { k: number; bytes: Uint8Array }[], payload: number, out: JpegBatchOutput, stream: StreamName): void {
    if (this.#closed) throw new Error('this JPEG decoder is closed');
    const b = this.#backend;
    this.#order.use(stream);
    const scratch = (this.#scratch = this.#order.grow(this.#scratch, rows.length * payload, stream));
    const table = new BigInt64Array(new ArrayBuffer(rows.length * 16));
    let align = 16;
    for (let r = 0; r < rows.length; r++) {
      b.copyToDevice(scratch, r * payload, rows[r]!.bytes, stream);
      const dst = out.ptr + BigInt(rows[r]!.k) * BigInt(out.rowBytes);
      const src = scratch.ptr + BigInt(r * payload);
      table[r] = dst;
      table[rows.length + r] = src;
      align = Math.min(align, addressAlign(Number(dst % 16n) || 16), addressAlign(Number(src % 16n) || 16));
    }
    if (b.rowDma) {
      b.copyRowsDma(table, payload, rows.length, stream);
      return;
    }
    const tables = (this.#tables = this.#order.grow(this.#tables, table.byteLength, stream));
    b.copyToDevice(tables, 0, new Uint8Array(table.buffer), stream);
    b.copyRows(tables, payload, rows.length, stream, align);
  }

  /** Waits for the queued uploads, then frees the scratch memory. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#order.drain();
    for (const buffer of [this.#scratch, this.#tables]) if (buffer !== undefined && !this.#backend.closed) this.#backend.free(buffer);
    this.#scratch = this.#tables = undefined;
  }
}
