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
import { type CpuRowFilter, type SimDecoded, cpuDecode, packPil } from './jpeg-jobs.js';
import type { DecodeCall, DecodeResult } from '../device.js';
import { GpuJpegDecoder } from './gpu-jpeg-decoder.js';
import { type JpegSlot, JpegSlots, type SlotTicket, slotThreads } from './jpeg-slots.js';
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
      const box = boxFor(boxes, k, image.width, image.height, out.size);
      rows.push({ k, bytes: encodeRow(cropResize(image.rgb, image.width * 3, box, out.size[0], out.size[1], image), out, scaleBias) });
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

/**
 * One view per file over one SharedArrayBuffer (what a decode thread can read): the files' own when
 * they all lie in one (the route's page-locked batch memory), else a copy.
 */
function sharedFiles(files: readonly Uint8Array[]): { memory: SharedArrayBuffer; offsets: Float64Array; lengths: Float64Array } {
  const n = files.length;
  const offsets = new Float64Array(n);
  const lengths = new Float64Array(n);
  const first = files[0]?.buffer;
  if (first instanceof SharedArrayBuffer && files.every((f) => f.buffer === first)) {
    files.forEach((f, k) => {
      offsets[k] = f.byteOffset;
      lengths[k] = f.byteLength;
    });
    return { memory: first, offsets, lengths };
  }
  let total = 0;
  for (const f of files) total += f.byteLength;
  const memory = new SharedArrayBuffer(Math.max(1, total));
  const all = new Uint8Array(memory);
  let at = 0;
  files.forEach((f, k) => {
    all.set(f, at);
    offsets[k] = at;
    lengths[k] = f.byteLength;
    at += f.byteLength;
  });
  return { memory, offsets, lengths };
}

/** The sim backend's GpuJpegDecoder: the CPU decodes on the slots' threads, the rows are uploaded (SimBackend.openJpeg opens it). */
export class SimJpegDecoder extends GpuJpegDecoder {
  readonly kind = 'sim';
  readonly chroma = 'interpolate';
  readonly #rows: CpuJpegRows;
  readonly #slots: JpegSlots;
  #closed = false;

  constructor(backend: Backend, slots: number) {
    super();
    this.#rows = new CpuJpegRows(backend);
    this.#slots = new JpegSlots(slots, slotThreads(true));
  }

  reserve(): SlotTicket {
    return this.#slots.reserve();
  }

  async decodeInto(files: readonly Uint8Array[], boxes: CropBoxes, out: JpegBatchOutput, stream: StreamName = 'copy', call?: DecodeCall<JpegSlot>): Promise<DecodeResult> {
    const timing = call?.timing;
    const tw = performance.now();
    // The slot first, then the checks: a ticket's slot is this call's to release once claimed.
    const slot = await (call?.ticket?.take() ?? this.#slots.acquire());
    try {
      if (this.#closed) throw new Error('this GPU JPEG decoder is closed');
      checkBoxCount(boxes, files.length);
      checkOutput(out);
      const t0 = performance.now();
      if (timing !== undefined) timing.slotMs += t0 - tw;
      this.stats.calls++;
      // What nvJPEG's hardware engine takes is decoded on the slot's thread; the rest is the caller's CPU fallback, as on a GPU.
      const { widths, heights } = await slot.run<SimDecoded>({ op: 'sim-decode', ...sharedFiles(files), filter: 'gpu-jpeg' });
      const t1 = performance.now();
      this.stats.decodeMs += t1 - t0;
      if (timing !== undefined) timing.decodeMs += t1 - t0;
      const fallback: number[] = [];
      const table = new Int32Array(5 * files.length);
      const pil = new Float64Array(8 * files.length);
      const written: number[] = [];
      for (let k = 0; k < files.length; k++) {
        if (widths[k] === 0) {
          fallback.push(k);
          continue;
        }
        // A bad box is the caller's bug, not the file's: it throws.
        const box = boxFor(boxes, k, widths[k]!, heights[k]!, out.size);
        table.set([box.left, box.top, box.width, box.height, box.flip ? 1 : 0], 5 * k);
        packPil(pil, k, box);
        written.push(k);
      }
      const spec = { size: out.size, layout: out.layout, dtype: out.dtype, ...(out.mean !== undefined ? { mean: out.mean } : {}), ...(out.std !== undefined ? { std: out.std } : {}) };
      const { rows } = await slot.run<{ rows: Uint8Array }>({ op: 'sim-rows', boxes: table, pil, out: spec });
      const payload = CHANNELS * out.size[0] * out.size[1] * dtypeBytes(out.dtype);
      if (written.length > 0) this.#rows.upload(written.map((k, r) => ({ k, bytes: rows.subarray(r * payload, (r + 1) * payload) })), payload, out, stream);
      this.stats.launchMs += performance.now() - t1;
      if (timing !== undefined) timing.launchMs += performance.now() - t1;
      return { fallback };
    } finally {
      this.#slots.release(slot);
    }
  }

  async decodeOnCpu(files: readonly Uint8Array[], which: readonly number[], boxes: CropBoxes, out: JpegBatchOutput, stream: StreamName = 'copy'): Promise<{ failed: number[] }> {
    return { failed: (await this.#rows.write(files, boxes, out, stream, which, 'any')).skipped };
  }

  whenIdle(): Promise<void> {
    return this.#slots.whenIdle();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const finish = () => {
      this.#slots.close();
      this.#rows.close();
    };
    if (this.#slots.held === 0) finish();
    else void this.#slots.whenIdle().then(finish);
  }
}
