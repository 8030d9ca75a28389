// Internal: not exported from the package entry.
// The `sim` backend: a simulated accelerator for CI and for planning without a GPU. Device memory is
// host memory with a fixed capacity and real out-of-memory errors; streams are FIFO queues whose work
// runs later (on a later turn of the event loop), so events, waits and slot reuse follow the same
// rules as on CUDA and every device-side policy runs the same code paths.

import { LoaderError, cudaFailure, invalidOption, invalidTensorError, unknownOption } from '../../errors.js';
import { type Backend, type DeviceBuffer, type DeviceEvent, type MappedHost, type PiecesOp, type StreamName, checkPiecesOp, gatherColsWidth, rowCopyWidth } from '../backend.js';
import { PIECE_INTS, applyPieces } from '../../collate/pieces.js';
import type { MemInfo } from '../device.js';
import { SimJpegDecoder } from '../jpeg/sim-jpeg.js';
import { type ImagePlan, runImagePlan } from '../../image/image-plan.js';

export interface SimOptions {
  /** Device memory in bytes. Default 16 GiB. */
  readonly totalBytes?: number;
  /** Bytes already in use by others (a model, another process). Default 0. */
  readonly usedBytes?: number;
  /** Fault injection: allocation `ordinal` (0, 1, …) of `bytes` fails with out-of-memory when this returns true. */
  readonly failAllocation?: (ordinal: number, bytes: number) => boolean;
  /** Simulate a driver without batched row copies (cuMemcpyBatchAsync): rows are then copied by kernels. Default true. */
  readonly rowDma?: boolean;
  /** Fault injection: mapping host memory for the device fails (as a driver refusing to page-lock it). */
  readonly failMapHost?: boolean;
}

/** Device memory of a simulated GPU when `totalBytes` is not given. */
const SIM_DEFAULT_TOTAL_BYTES = 16 * 2 ** 30;
const SIM_KEYS = ['totalBytes', 'usedBytes', 'failAllocation', 'rowDma', 'failMapHost'] as const;

/** Check the `sim` option at create: known keys only, each of its type, and no more memory used than there is. */
export function checkSimOptions(value: unknown): SimOptions {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalidOption('sim', '{ totalBytes?, usedBytes?, failAllocation?, rowDma?, failMapHost? }', value);
  }
  const v = value as Record<string, unknown>;
  for (const key of Object.keys(v)) if (!(SIM_KEYS as readonly string[]).includes(key)) throw unknownOption('sim', key, SIM_KEYS);
  const bytes = (key: string, min: number) => {
    const b = v[key];
    if (b !== undefined && (typeof b !== 'number' || !Number.isSafeInteger(b) || b < min)) throw invalidOption(`sim.${key}`, `a byte count ≥ ${min}`, b);
  };
  bytes('totalBytes', 1);
  bytes('usedBytes', 0);
  const total = (v.totalBytes as number | undefined) ?? SIM_DEFAULT_TOTAL_BYTES;
  if (v.usedBytes !== undefined && (v.usedBytes as number) > total) {
    throw invalidOption('sim.usedBytes', `at most sim.totalBytes (${total})`, v.usedBytes, 'Raise totalBytes or lower usedBytes');
  }
  if (v.failAllocation !== undefined && typeof v.failAllocation !== 'function') throw invalidOption('sim.failAllocation', 'a function (ordinal, bytes) => boolean', v.failAllocation);
  for (const key of ['rowDma', 'failMapHost']) {
    if (v[key] !== undefined && typeof v[key] !== 'boolean') throw invalidOption(`sim.${key}`, 'true or false', v[key]);
  }
  return v as SimOptions;
}

/**
 * Where a host buffer's first byte sits past a page boundary, as simulated: a large malloc returns an
 * address 16 bytes into a page, so mapping (whole pages only) leaves a partial page at each end, as on CUDA.
 */
const SIM_HOST_MISALIGN = 16;
const SIM_PAGE = 4096;

class SimOutOfMemory extends LoaderError {
  readonly driverName = 'CUDA_ERROR_OUT_OF_MEMORY';
  readonly result = 2;
}

interface SimBuffer extends DeviceBuffer {
  readonly data: Uint8Array;
}

interface SimEvent extends DeviceEvent {
  readonly stream: SimStream;
  readonly mark: number;
}

class SimStream {
  readonly #queue: (() => void)[] = [];
  #completed = 0;
  #enqueued = 0;
  #scheduled = false;

  get enqueued(): number {
    return this.#enqueued;
  }

  get completed(): number {
    return this.#completed;
  }

  push(op: () => void): void {
    this.#queue.push(op);
    this.#enqueued++;
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        this.runUntil(this.#enqueued);
      });
    }
  }

  /** Run queued work in order until `mark` operations have completed. */
  runUntil(mark: number): void {
    while (this.#completed < mark) {
      const op = this.#queue.shift();
      if (op === undefined) return;
      this.#completed++;
      op();
    }
  }
}

export class SimBackend implements Backend {
  readonly name = 'sim';
  readonly #total: number;
  readonly #baseUsed: number;
  readonly #fail: SimOptions['failAllocation'];
  readonly #streams: Record<StreamName, SimStream> = { copy: new SimStream(), consumer: new SimStream() };
  readonly #buffers = new Map<bigint, SimBuffer>();
  #allocated = 0;
  #pinned = 0;
  #ordinal = 0;
  #nextPtr = 0x1_0000_0000n;
  #nextEvent = 1n;
  #lastResolved: SimBuffer | undefined;

  readonly rowDma: boolean;
  readonly #failMapHost: boolean;

  constructor(options: SimOptions = {}) {
    this.rowDma = options.rowDma ?? true;
    this.#failMapHost = options.failMapHost ?? false;
    this.#total = options.totalBytes ?? SIM_DEFAULT_TOTAL_BYTES;
    this.#baseUsed = options.usedBytes ?? 0;
    this.#fail = options.failAllocation;
  }

  /** Bytes allocated through this backend and not freed, and host bytes pinned (leak checks). */
  live(): { device: number; pinned: number } {
    return { device: this.#allocated, pinned: this.#pinned };
  }

  /** The CPU decodes behind the same interface (chroma is libjpeg-turbo's interpolation). */
  openJpeg(_chroma: 'interpolate' | 'replicate', slots: number): SimJpegDecoder {
    return new SimJpegDecoder(this, slots);
  }

  memInfo(): MemInfo {
    return { used: this.#baseUsed + this.#allocated, total: this.#total };
  }

  alloc(bytes: number): DeviceBuffer {
    const ordinal = this.#ordinal++;
    const size = Math.max(bytes, 1);
    if (this.#fail?.(ordinal, bytes) || this.#baseUsed + this.#allocated + size > this.#total) {
      throw new SimOutOfMemory('ERR_DEVICE_OOM', `sim: out of device memory allocating ${bytes} bytes (CUDA_ERROR_OUT_OF_MEMORY)`);
    }
    const buffer: SimBuffer = { ptr: this.#nextPtr, bytes: size, data: new Uint8Array(size) };
    this.#nextPtr += BigInt(Math.ceil(size / 256) * 256 + 256);
    this.#buffers.set(buffer.ptr, buffer);
    this.#byAddress.push(buffer);
    this.#allocated += size;
    return buffer;
  }

  free(buffer: DeviceBuffer): void {
    if (this.#forget(buffer.ptr)) this.#allocated -= buffer.bytes;
  }

  /**
   * Drop every reference to the buffer at `ptr`: its bytes are host memory, which must go back to
   * the garbage collector when the simulated memory is freed, not when a later search compacts.
   */
  #forget(ptr: bigint): boolean {
    if (!this.#buffers.delete(ptr)) return false;
    if (this.#lastResolved?.ptr === ptr) this.#lastResolved = undefined;
    const k = this.#lastAtOrBefore(ptr);
    if (k >= 0 && this.#byAddress[k]!.ptr === ptr) this.#byAddress.splice(k, 1);
    return true;
  }

  pageOffset(_memory: ArrayBufferLike): number {
    return 0;
  }

  pin(memory: ArrayBufferLike, byteOffset: number, byteLength: number): () => void {
    if (byteOffset < 0 || byteOffset + byteLength > memory.byteLength) throw new RangeError(`sim: pin range [${byteOffset}, ${byteOffset + byteLength}) is outside the buffer`);
    const bytes = byteLength;
    this.#pinned += bytes;
    let pinned = true;
    return () => {
      if (!pinned) return;
      pinned = false;
      this.#pinned -= bytes;
    };
  }

  mapHost(memory: ArrayBufferLike, byteOffset: number, byteLength: number): MappedHost {
    if (byteOffset < 0 || byteOffset + byteLength > memory.byteLength) throw new RangeError(`sim: map range [${byteOffset}, ${byteOffset + byteLength}) is outside the buffer`);
    if (this.#failMapHost) throw cudaFailure('sim: mapping host memory failed (SimOptions.failMapHost; CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED on a real driver, say)');
    // Whole simulated pages only, as cuMemHostRegister.
    let start = Math.ceil((byteOffset + SIM_HOST_MISALIGN) / SIM_PAGE) * SIM_PAGE - SIM_HOST_MISALIGN;
    let end = Math.floor((byteOffset + byteLength + SIM_HOST_MISALIGN) / SIM_PAGE) * SIM_PAGE - SIM_HOST_MISALIGN;
    if (end <= start) start = end = byteOffset;
    const bytes = end - start;
    // The mapped pages become addressable like device memory (they are not device bytes: not counted as allocated).
    const buffer: SimBuffer = { ptr: this.#nextPtr, bytes: Math.max(bytes, 1), data: new Uint8Array(memory, start, bytes) };
    this.#nextPtr += BigInt(Math.ceil(Math.max(bytes, 1) / 256) * 256 + 256);
    this.#buffers.set(buffer.ptr, buffer);
    this.#byAddress.push(buffer);
    this.#pinned += bytes;
    let mapped = true;
    return {
      ptr: buffer.ptr,
      start,
      end,
      release: () => {
        if (!mapped) return;
        mapped = false;
        this.#forget(buffer.ptr);
        this.#pinned -= bytes;
      },
    };
  }

  copyRowsDma(table: BigInt64Array, rowBytes: number, rows: number, stream: StreamName): void {
    if (!this.rowDma) throw new Error('sim: row DMA is off (SimOptions.rowDma: false); use copyRows');
    // The driver reads the address arrays during the call: keep a copy for the queued work.
    const addr = new BigUint64Array(table.buffer, table.byteOffset, 2 * rows).slice();
    this.#streams[stream].push(() => {
      for (let r = 0; r < rows; r++) this.#resolve(addr[r]!, rowBytes).set(this.#resolve(addr[rows + r]!, rowBytes));
    });
  }

  copyToDevice(dst: DeviceBuffer, dstOffset: number, src: Uint8Array, stream: StreamName): void {
    const d = this.#data(dst);
    this.#streams[stream].push(() => d.set(src, dstOffset));
  }

  copyToHost(dst: Uint8Array, src: DeviceBuffer, srcOffset: number, stream: StreamName): void {
    const s = this.#data(src);
    this.#streams[stream].push(() => dst.set(s.subarray(srcOffset, srcOffset + dst.byteLength)));
  }

  gather(dst: DeviceBuffer, src: DeviceBuffer, rowBytes: number, ids: DeviceBuffer, idsOffset: number, rows: number, stream: StreamName): void {
    const d = this.#data(dst);
    const idx = this.#data(ids);
    // `src` is a buffer, or the address row 0 of mapped host memory would have (rows resolved one by one).
    const s = this.#buffers.get(src.ptr)?.data;
    this.#streams[stream].push(() => {
      const view = new Uint32Array(idx.buffer, idx.byteOffset + idsOffset * 4, rows);
      for (let r = 0; r < rows; r++) {
        const from = view[r]! * rowBytes;
        d.set(s !== undefined ? s.subarray(from, from + rowBytes) : this.#resolve(src.ptr + BigInt(from), rowBytes), r * rowBytes);
      }
    });
  }

  gatherColumns(columns: readonly { dst: DeviceBuffer; src: DeviceBuffer; rowBytes: number }[], ids: DeviceBuffer, idsOffset: number, rows: number, stream: StreamName): void {
    for (const c of columns) {
      // As the CUDA kernel: 16-, 4- or 1-byte units by the row size, so the source must be that aligned.
      const width = gatherColsWidth(c.rowBytes);
      if (c.src.ptr % BigInt(width) !== 0n) throw cudaFailure(`sim: misaligned gather source 0x${c.src.ptr.toString(16)} for ${width}-byte units (CUDA_ERROR_MISALIGNED_ADDRESS on a GPU)`);
      this.gather(c.dst, c.src, c.rowBytes, ids, idsOffset, rows, stream);
    }
  }

  copyRows(tables: DeviceBuffer, rowBytes: number, rows: number, stream: StreamName, align = 16): void {
    const t = this.#data(tables);
    const width = BigInt(rowCopyWidth(rowBytes, align));
    this.#streams[stream].push(() => {
      const addr = new BigUint64Array(t.buffer, t.byteOffset, 2 * rows);
      for (let r = 0; r < rows; r++) {
        // As the CUDA kernel, which moves rowCopyWidth-byte units: a misaligned address is a device fault.
        if (addr[r]! % width !== 0n || addr[rows + r]! % width !== 0n) {
          throw cudaFailure(`sim: misaligned row copy (${width}-byte units) between 0x${addr[rows + r]!.toString(16)} and 0x${addr[r]!.toString(16)} (CUDA_ERROR_MISALIGNED_ADDRESS on a GPU)`);
        }
        const dst = this.#resolve(addr[r]!, rowBytes);
        const src = this.#resolve(addr[rows + r]!, rowBytes);
        dst.set(src);
      }
    });
  }

  /** The bytes at device address `ptr` (inside any live buffer): a binary search over buffers by address. */
  #resolve(ptr: bigint, bytes: number): Uint8Array {
    const last = this.#lastResolved;
    if (last !== undefined && ptr >= last.ptr && ptr + BigInt(bytes) <= last.ptr + BigInt(last.bytes) && this.#buffers.has(last.ptr)) {
      const off = Number(ptr - last.ptr);
      return last.data.subarray(off, off + bytes);
    }
    const found = this.#lastAtOrBefore(ptr);
    const b = found >= 0 ? this.#byAddress[found]! : undefined;
    if (b !== undefined && this.#buffers.has(b.ptr) && ptr + BigInt(bytes) <= b.ptr + BigInt(b.bytes)) {
      const off = Number(ptr - b.ptr);
      this.#lastResolved = b;
      return b.data.subarray(off, off + bytes);
    }
    throw invalidTensorError(`sim: device address 0x${ptr.toString(16)} (+${bytes}) is in no live buffer`);
  }

  /** Every live buffer (mapped host memory included), in address order. */
  readonly #byAddress: SimBuffer[] = [];

  /** Index in #byAddress of the last buffer starting at or before `ptr`, or −1 (addresses are handed out in increasing order, so the list is sorted). */
  #lastAtOrBefore(ptr: bigint): number {
    const list = this.#byAddress;
    let lo = 0;
    let hi = list.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (list[mid]!.ptr <= ptr) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  }

  image(src: DeviceBuffer, srcOffset: number, dst: DeviceBuffer, _tables: DeviceBuffer, plan: ImagePlan, stream: StreamName): void {
    const s = this.#data(src);
    const d = this.#data(dst);
    this.#streams[stream].push(() => {
      const count = plan.n * plan.c * plan.oh * plan.ow;
      const input = s.subarray(srcOffset, srcOffset + plan.n * plan.c * plan.h * plan.w);
      const out =
        plan.output === 'uint8' ? d.subarray(0, count)
        : plan.output === 'float32' ? new Float32Array(d.buffer, d.byteOffset, count)
        : new Uint16Array(d.buffer, d.byteOffset, count);
      runImagePlan(input, plan, out);
    });
  }

  pieces(op: PiecesOp, stream: StreamName): void {
    checkPiecesOp(op);
    const s = this.#data(op.src);
    const d = this.#data(op.dst);
    const t = this.#data(op.table);
    const seg = op.segment && this.#data(op.segment.buffer);
    const pos = op.position && this.#data(op.position.buffer);
    this.#streams[stream].push(() => {
      // The table is read when the work runs (it was uploaded on this stream), as the kernel reads it.
      // A bad table throws here, where a GPU would fault with an illegal address.
      const table = new Int32Array(t.buffer.slice(t.byteOffset + op.tableOffset, t.byteOffset + op.tableOffset + op.count * PIECE_INTS * 4));
      const posBytes = op.per * op.elementBytes;
      applyPieces(
        s.subarray(op.srcOffset, op.srcOffset + op.rows * op.rowBytes),
        { rows: op.rows, rowBytes: op.rowBytes, elementBytes: op.elementBytes, per: op.per },
        { table, count: op.count, total: op.total, maxSpan: op.maxSpan },
        {
          data: d.subarray(op.dstOffset, op.dstOffset + op.total * posBytes),
          fill: op.fill,
          ...(seg !== undefined ? { segment: op.segment!.width === 4 ? new Int32Array(seg.buffer, seg.byteOffset + op.segment!.offset, op.total) : seg.subarray(op.segment!.offset, op.segment!.offset + op.total) } : {}),
          ...(pos !== undefined ? { position: new Int32Array(pos.buffer, pos.byteOffset + op.position!.offset, op.total) } : {}),
        },
      );
    });
  }

  record(stream: StreamName): DeviceEvent {
    const s = this.#streams[stream];
    const event: SimEvent = { handle: this.#nextEvent++, stream: s, mark: s.enqueued };
    return event;
  }

  done(event: DeviceEvent): boolean {
    const e = event as SimEvent;
    return e.stream.completed >= e.mark;
  }

  synchronize(event: DeviceEvent): void {
    const e = event as SimEvent;
    e.stream.runUntil(e.mark);
  }

  wait(stream: StreamName, event: DeviceEvent): void {
    const e = event as SimEvent;
    if (e.stream === this.#streams[stream]) return;
    this.#streams[stream].push(() => e.stream.runUntil(e.mark));
  }

  recycle(_event: DeviceEvent): void {}

  #closed = false;

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Finish queued work and let go of every buffer's bytes. Buffers still allocated stay counted in
   * `live()`: a leak shows, but holds no memory.
   */
  close(): void {
    for (const s of Object.values(this.#streams)) s.runUntil(s.enqueued);
    this.#closed = true;
    this.#buffers.clear();
    this.#byAddress.length = 0;
    this.#lastResolved = undefined;
  }

  #data(buffer: DeviceBuffer): Uint8Array {
    const b = this.#buffers.get(buffer.ptr);
    if (b === undefined) throw invalidTensorError(`sim: device buffer ${buffer.ptr.toString(16)} was freed or never allocated`);
    return b.data;
  }
}
