// Internal: not exported from the package entry.
// The CUDA backend of the accelerator device: device memory, a dedicated copy stream and a consumer
// stream (both non-blocking), pooled events, the gather kernel, and page-locking of staging buffers,
// over the driver binding in driver.ts. The rule: every buffer and event handed out belongs to this
// backend's context; close() waits for the device, then disposes them all with the context.

import { type Backend, type DeviceBuffer, type DeviceEvent, type MappedHost, type PiecesOp, type StreamName, checkPiecesOp, gatherColsWidth, rowCopyWidth } from '../backend.js';
import type { KernelHost } from '../user-kernel.js';
import { CudaModule, type KernelArg } from './module.js';
import type { ImagePlan } from '../../image/image-plan.js';

/** Row copies through address tables (kernels/rows.cu), beside the package root from src/ or dist/. */
const ROWS_PTX = new URL('../../../kernels/rows.ptx', import.meta.url);
/** All columns of a resident batch in one launch (kernels/gather-cols.cu). */
const GATHER_COLS_PTX = new URL('../../../kernels/gather-cols.ptx', import.meta.url);
/** The built-in image transform (kernels/image.cu). */
const IMAGE_PTX = new URL('../../../kernels/image.ptx', import.meta.url);
/** Ragged collates through piece tables (kernels/ragged.cu). */
const RAGGED_PTX = new URL('../../../kernels/ragged.ptx', import.meta.url);
import type { MemInfo } from '../device.js';
import { NvJpegDecoder } from './nvjpeg.js';
import { CudaContext } from './context.js';
import { DeviceMemory } from './device-memory.js';
import { CudaEvent } from './event.js';
import { gatherRows } from './gather.js';
import { piecesLaunch } from './pieces-grid.js';
import { RegisteredHost } from './registered-host.js';
import { driver } from './driver.js';
import { CudaStream } from './stream.js';
import { type AllocationFault, cudaAllocationFault, injectedOutOfMemory } from './allocation-faults.js';

interface CudaEventRef extends DeviceEvent {
  readonly event: CudaEvent;
}

/**
 * Host buffers mapped for a device, shared by every loader of the process on that context: pages can
 * be registered once per process (a second cuMemHostRegister of them fails), so two loaders over the
 * same in-memory columns share one registration, released with its last user.
 */
const mappings = new Map<ArrayBufferLike, { registered: RegisteredHost; offset: number; length: number; refs: number }>();

export class CudaBackend implements Backend, KernelHost {
  readonly name: string;
  readonly context: CudaContext;
  readonly #streams: Record<StreamName, CudaStream>;
  readonly #memory = new Map<bigint, DeviceMemory>();
  readonly #pinned = new Set<RegisteredHost>();
  readonly #events: CudaEventRef[] = [];
  #deviceBytes = 0;
  #closed = false;

  /** Tests only (allocation-faults.ts): which allocations fail as a full device would. */
  readonly #fault: AllocationFault | undefined = cudaAllocationFault();
  #allocations = 0;

  private constructor(context: CudaContext) {
    this.context = context;
    this.name = `cuda:${context.ordinal}`;
    this.#streams = { copy: new CudaStream(context), consumer: new CudaStream(context) };
  }

  /** Retain device `ordinal`'s primary context; throws ERR_CUDA_UNAVAILABLE without a driver or device. */
  static open(ordinal: number): CudaBackend {
    return new CudaBackend(CudaContext.open(ordinal));
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The stream batches are ordered on; a consumer's own CUDA work should go on it (or wait on tensor.readyEvent). */
  get consumerStream(): CudaStream {
    return this.#streams.consumer;
  }

  /** The CUDA stream behind a stream name, for libraries that enqueue on it themselves (nvJPEG). */
  stream(name: StreamName): CudaStream {
    return this.#streams[name];
  }

  loadKernel(ptx: string | Uint8Array, name: string): ReturnType<KernelHost['loadKernel']> {
    const fn = CudaModule.load(this.context, ptx).getFunction(name);
    const stream = this.#streams.consumer;
    return (grid, block, args, sharedBytes) => fn.launch(grid, block, stream, args, sharedBytes);
  }

  /** Block until the consumer stream's queued work is done. */
  synchronizeConsumer(): void {
    this.#streams.consumer.synchronize();
  }

  openJpeg(chroma: 'interpolate' | 'replicate', slots: number): NvJpegDecoder {
    return NvJpegDecoder.create(this, chroma, slots);
  }

  memInfo(): MemInfo | undefined {
    try {
      const { used, total } = this.context.memInfo();
      return { used, total };
    } catch {
      return undefined;
    }
  }

  live(): { device: number; pinned: number } {
    let pinned = 0;
    for (const r of this.#pinned) pinned += r.bytes;
    return { device: this.#deviceBytes, pinned: pinned + this.#mappedBytes };
  }

  alloc(bytes: number): DeviceBuffer {
    if (this.#fault?.(this.#allocations++, bytes)) throw injectedOutOfMemory(bytes);
    const memory = new DeviceMemory(this.context, Math.max(bytes, 1));
    this.#memory.set(memory.ptr, memory);
    this.#deviceBytes += memory.bytes;
    return memory;
  }

  free(buffer: DeviceBuffer): void {
    const memory = this.#memory.get(buffer.ptr);
    if (memory === undefined) return;
    this.#memory.delete(buffer.ptr);
    this.#deviceBytes -= memory.bytes;
    memory.dispose();
  }

  pageOffset(memory: ArrayBufferLike): number {
    const address = driver().hostAddress(new Uint8Array(memory));
    return Number((4096n - (address % 4096n)) % 4096n);
  }

  mapHost(memory: ArrayBufferLike, byteOffset: number, byteLength: number): MappedHost {
    let entry = mappings.get(memory);
    if (entry !== undefined && (entry.registered.context.ordinal !== this.context.ordinal || entry.offset !== byteOffset || entry.length !== byteLength)) {
      throw new Error(`this memory is already mapped for cuda:${entry.registered.context.ordinal} over bytes [${entry.offset}, ${entry.offset + entry.length})`);
    }
    if (entry === undefined) {
      const registered = new RegisteredHost(this.context, memory, { byteOffset, byteLength, mapped: true });
      // Released by its last user, not by whichever loader's context closes first.
      this.context.untrack(registered);
      entry = { registered, offset: byteOffset, length: byteLength, refs: 0 };
      mappings.set(memory, entry);
    }
    entry.refs++;
    const held = entry;
    const bytes = held.registered.bytes;
    this.#mappedBytes += bytes;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.#mapped.delete(release);
      this.#mappedBytes -= bytes;
      if (--held.refs > 0) return;
      mappings.delete(memory);
      // SAFETY: the accelerator device releases a mapping only after the copy stream passed every
      // batch that read it; close() synchronizes the context first.
      held.registered.dispose(this.context);
    };
    this.#mapped.add(release);
    return { ptr: held.registered.devicePtr, start: held.registered.start, end: held.registered.end, release };
  }

  /** Releases of this backend's mappings, run at close if the device did not. */
  readonly #mapped = new Set<() => void>();
  /** Host bytes this backend's mappings hold page-locked (shared registrations counted by each user). */
  #mappedBytes = 0;

  get rowDma(): boolean {
    return driver().memcpyBatchAsync !== undefined;
  }

  #dmaSizes = new BigUint64Array(0);
  #dmaRowBytes = -1;

  copyRowsDma(table: BigInt64Array, rowBytes: number, rows: number, stream: StreamName): void {
    const batch = driver().memcpyBatchAsync;
    if (batch === undefined) throw new Error('cuda: this driver has no cuMemcpyBatchAsync (CUDA 12.8+); use copyRows');
    if (rows === 0) return;
    if (this.#dmaSizes.length < rows || this.#dmaRowBytes !== rowBytes) {
      this.#dmaSizes = new BigUint64Array(new ArrayBuffer(Math.max(rows, this.#dmaSizes.length) * 8)).fill(BigInt(rowBytes));
      this.#dmaRowBytes = rowBytes;
    }
    const words = new BigUint64Array(table.buffer, table.byteOffset, 2 * rows);
    // SAFETY: the driver reads the address arrays during the call; the rows stay valid until an
    // event recorded after this copy (the accelerator device's rule for every buffer).
    batch(words.subarray(0, rows), words.subarray(rows, 2 * rows), this.#dmaSizes, rows, this.#streams[stream].handle);
  }

  pin(memory: ArrayBufferLike, byteOffset: number, byteLength: number): () => void {
    const registered = new RegisteredHost(this.context, memory, { byteOffset, byteLength });
    this.#pinned.add(registered);
    return () => {
      if (!this.#pinned.delete(registered)) return;
      // SAFETY: the accelerator device unpins only after every copy from this buffer has completed
      // (its close() synchronizes all pending events first).
      registered.dispose();
    };
  }

  copyToDevice(dst: DeviceBuffer, dstOffset: number, src: Uint8Array, stream: StreamName): void {
    this.#mem(dst).copyFromHostAsync(src, this.#streams[stream], dstOffset);
  }

  copyToHost(dst: Uint8Array, src: DeviceBuffer, srcOffset: number, stream: StreamName): void {
    this.#mem(src).copyToHostAsync(dst, this.#streams[stream], srcOffset);
  }

  gather(dst: DeviceBuffer, src: DeviceBuffer, rowBytes: number, ids: DeviceBuffer, idsOffset: number, rows: number, stream: StreamName): void {
    gatherRows(this.context, this.#streams[stream], { dst, src, ids, idsOffset, rowBytes, rows });
  }

  gatherColumns(columns: readonly { dst: DeviceBuffer; src: DeviceBuffer; rowBytes: number }[], ids: DeviceBuffer, idsOffset: number, rows: number, stream: StreamName): void {
    if (rows === 0) return;
    // Loops, not closures: this runs once per resident batch.
    let most = 0;
    let fits = columns.length <= 4 && (idsOffset + rows) * 4 <= ids.bytes;
    for (let i = 0; i < columns.length && fits; i++) {
      const work = (columns[i]!.rowBytes / gatherColsWidth(columns[i]!.rowBytes)) * rows;
      if (work >= 2 ** 32) fits = false;
      if (work > most) most = work;
    }
    if (!fits) {
      for (const c of columns) this.gather(c.dst, c.src, c.rowBytes, ids, idsOffset, rows, stream);
      return;
    }
    const grid = Math.max(1, Math.min(Math.ceil(most / 256), this.context.multiprocessors * 8));
    const args = this.#colsArgs;
    for (let i = 0; i < 4; i++) {
      const c = columns[i];
      (args[3 * i] as { ptr: bigint }).ptr = c?.dst.ptr ?? 0n;
      (args[3 * i + 1] as { ptr: bigint }).ptr = c?.src.ptr ?? 0n;
      (args[3 * i + 2] as { u64: bigint }).u64 = BigInt(c?.rowBytes ?? 0);
    }
    (args[12] as { ptr: bigint }).ptr = ids.ptr + BigInt(idsOffset) * 4n;
    (args[13] as { u32: number }).u32 = rows;
    // SAFETY: every column buffer and the ids stay allocated until events recorded after this launch
    // (the accelerator device frees and reuses memory only through stream order or such events).
    this.context.module(GATHER_COLS_PTX).getFunction('stoker_gather_cols4').launch([grid, 1, 1], [256, 1, 1], this.#streams[stream], args);
  }

  /** The 14 arguments of stoker_gather_cols4, rewritten in place per launch (the driver copies them out during the call). */
  readonly #colsArgs: KernelArg[] = [
    ...Array.from({ length: 4 }, () => [{ ptr: 0n }, { ptr: 0n }, { u64: 0n }]).flat(),
    { ptr: 0n },
    { u32: 0 },
  ];

  copyRows(tables: DeviceBuffer, rowBytes: number, rows: number, stream: StreamName, align = 16): void {
    if (rows === 0) return;
    const width = rowCopyWidth(rowBytes, align);
    const units = rowBytes / width;
    const work = Math.ceil((units * rows) / 256);
    const grid = Math.max(1, Math.min(work, this.context.multiprocessors * 8));
    const fn = this.context.module(ROWS_PTX).getFunction(`stoker_copy_rows_w${width}`);
    // SAFETY: `tables` (and every row address in it) stays allocated until an event recorded on
    // `stream` after this launch has fired; the accelerator device frees only through such events.
    fn.launch([grid, 1, 1], [256, 1, 1], this.#streams[stream], [
      { ptr: tables.ptr },
      { ptr: tables.ptr + BigInt(rows) * 8n },
      { u64: BigInt(units) },
      { u32: rows },
    ]);
  }

  image(src: DeviceBuffer, srcOffset: number, dst: DeviceBuffer, tables: DeviceBuffer, plan: ImagePlan, stream: StreamName): void {
    const total = plan.n * plan.c * plan.oh * plan.ow;
    if (total === 0) return;
    const kernel = { uint8: 'stoker_image_u8', float32: 'stoker_image_f32', float16: 'stoker_image_f16', bfloat16: 'stoker_image_bf16' }[plan.output];
    const fn = this.context.module(IMAGE_PTX).getFunction(kernel);
    const grid = Math.max(1, Math.min(Math.ceil(total / 256), this.context.multiprocessors * 16));
    // SAFETY: src, dst and tables belong to the batch being delivered, freed only after an event
    // recorded on the consumer stream at its release, after this launch.
    fn.launch([grid, 1, 1], [256, 1, 1], this.#streams[stream], [
      { ptr: src.ptr + BigInt(srcOffset) },
      { ptr: dst.ptr },
      { ptr: tables.ptr },
      { ptr: tables.ptr + BigInt(plan.params.byteLength) },
      { u32: plan.n }, { u32: plan.c }, { u32: plan.h }, { u32: plan.w }, { u32: plan.oh }, { u32: plan.ow },
    ]);
  }

  pieces(op: PiecesOp, stream: StreamName): void {
    checkPiecesOp(op);
    if (op.total === 0) return;
    const { grid, block, args } = piecesLaunch(op);
    // SAFETY: the rows, the outputs and the table belong to the batch being collated, freed only
    // after an event recorded on `stream` after this launch (the accelerator device's rule).
    this.context.module(RAGGED_PTX).getFunction('stoker_pieces').launch(grid, block, this.#streams[stream], args);
  }

  record(stream: StreamName): DeviceEvent {
    const ref = this.#events.pop() ?? this.#newEvent();
    ref.event.record(this.#streams[stream]);
    return ref;
  }

  done(event: DeviceEvent): boolean {
    return (event as CudaEventRef).event.query();
  }

  synchronize(event: DeviceEvent): void {
    (event as CudaEventRef).event.synchronize();
  }

  wait(stream: StreamName, event: DeviceEvent): void {
    this.#streams[stream].waitEvent((event as CudaEventRef).event);
  }

  recycle(event: DeviceEvent): void {
    if (!this.#closed) this.#events.push(event as CudaEventRef);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#events.length = 0;
    if (this.#mapped.size > 0) {
      this.context.synchronize();
      for (const release of [...this.#mapped]) release();
    }
    // Waits for queued work, then disposes every stream, event, buffer and registration it made.
    // Buffers and registrations the device did not give back stay counted in live(): a leak shows.
    this.context.dispose();
  }

  #newEvent(): CudaEventRef {
    const event = new CudaEvent(this.context);
    return { event, handle: event.handle };
  }

  #mem(buffer: DeviceBuffer): DeviceMemory {
    const m = this.#memory.get(buffer.ptr);
    if (m === undefined) throw new RangeError(`cuda: device buffer 0x${buffer.ptr.toString(16)} was freed or belongs to another backend`);
    return m;
  }
}

