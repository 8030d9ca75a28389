// A tensor in device memory: what another CUDA consumer needs (address, byte length, shape, dtype,
// strides, device, ready event) plus `toHost()` for checks. The rule: read it only after its ready
// event — Stoker makes the consumer stream wait on it before delivery — and never after its batch is
// released (every accessor then throws ERR_BATCH_RELEASED).

import { batchReleased, foreignDeviceTensor, loaderClosed } from '../errors.js';
import type { ImagePlan } from '../image/image-plan.js';
import { type DType, type StorageOf, allocStorage, elementSize } from '../tensor/dtype.js';
import type { Lease } from '../tensor/lease.js';
import { Tensor } from '../tensor/tensor.js';
import type { Backend, DeviceBuffer, DeviceEvent } from './backend.js';
import { PIECE_INTS, type PieceTable, tableBytes } from '../collate/pieces.js';

export class DeviceTensor<D extends DType = DType> {
  readonly dtype: D;
  readonly shape: readonly number[];
  readonly size: number;
  /** 'cuda:0', 'sim', … */
  readonly device: string;
  readonly #buffer: DeviceBuffer;
  readonly #offset: number;
  #ready: DeviceEvent | 'lazy' | undefined;
  readonly #backend: Backend;
  readonly #lease: Lease | undefined;
  readonly #owner: BatchScratch | undefined;

  /** Internal: device tensors are made by the loader. */
  /** `ready` may be 'lazy': the owner records the event when first asked for (work ordered on the consumer stream). */
  constructor(init: { backend: Backend; buffer: DeviceBuffer; offset: number; dtype: D; shape: readonly number[]; ready: DeviceEvent | 'lazy' | undefined; lease?: Lease; owner?: BatchScratch }) {
    if (init.ready === 'lazy' && init.owner === undefined) throw new Error('DeviceTensor: a lazy ready event needs an owner');
    this.#owner = init.owner;
    this.#backend = init.backend;
    this.#buffer = init.buffer;
    this.#offset = init.offset;
    this.dtype = init.dtype;
    this.shape = Object.freeze([...init.shape]);
    let size = 1;
    for (const d of this.shape) size *= d;
    this.size = size;
    this.device = init.backend.name;
    this.#ready = init.ready;
    this.#lease = init.lease;
  }

  /** Device address of element 0. */
  get ptr(): bigint {
    this.#check();
    return this.#buffer.ptr + BigInt(this.#offset);
  }

  get byteLength(): number {
    return this.size * elementSize(this.dtype);
  }

  /** Row-major strides, in elements. */
  get strides(): readonly number[] {
    const out = new Array<number>(this.shape.length);
    let s = 1;
    for (let i = this.shape.length - 1; i >= 0; i--) {
      out[i] = s;
      s *= this.shape[i]!;
    }
    return out;
  }

  get rowSize(): number {
    let n = 1;
    for (let i = 1; i < this.shape.length; i++) n *= this.shape[i]!;
    return n;
  }

  /** The event after which the data is complete (a CUevent handle on CUDA); undefined when already complete. */
  get readyEvent(): DeviceEvent | undefined {
    this.#check();
    return this.#event();
  }

  #event(): DeviceEvent | undefined {
    if (this.#ready === 'lazy') this.#ready = this.#owner!.readyEvent();
    return this.#ready;
  }

  /** Copy to a fresh host tensor (waits for the data to be ready; blocks the host for the copy). */
  async toHost(): Promise<Tensor<D>> {
    this.#check();
    const data = allocStorage(this.dtype, this.size) as StorageOf[D];
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const ready = this.#event();
    if (ready !== undefined) this.#backend.wait('copy', ready);
    this.#backend.copyToHost(bytes, this.#buffer, this.#offset, 'copy');
    const done = this.#backend.record('copy');
    this.#backend.synchronize(done);
    this.#backend.recycle(done);
    return new Tensor(data as never, this.shape, this.dtype);
  }

  /** Internal: the same memory bound to a batch's lease. */
  withLease(lease: Lease): DeviceTensor<D> {
    return new DeviceTensor({ backend: this.#backend, buffer: this.#buffer, offset: this.#offset, dtype: this.dtype, shape: this.shape, ready: this.#ready, lease, owner: this.#owner });
  }

  /** Internal: run the built-in image transform on this uint8 tensor, into memory its batch owns. */
  runImage(plan: ImagePlan): DeviceTensor {
    this.#check();
    const owner = this.#owner;
    if (owner === undefined) throw foreignDeviceTensor('transforms.image');
    const backend = this.#backend;
    const dst = owner.alloc(plan.n * plan.c * plan.oh * plan.ow * elementSize(plan.output));
    const tables = owner.alloc(plan.params.byteLength + plan.scaleBias.byteLength);
    const readyIn = this.#event();
    if (readyIn !== undefined) backend.wait('consumer', readyIn);
    // SAFETY: both host arrays are fresh per call and kept alive by the plan until the copy ran.
    backend.copyToDevice(tables, 0, new Uint8Array(plan.params.buffer), 'consumer');
    backend.copyToDevice(tables, plan.params.byteLength, new Uint8Array(plan.scaleBias.buffer), 'consumer');
    backend.image(this.#buffer, this.#offset, dst, tables, plan, 'consumer');
    const ready = backend.record('consumer');
    owner.track(ready);
    return new DeviceTensor({ backend, buffer: dst, offset: 0, dtype: plan.output, shape: [plan.n, plan.c, plan.oh, plan.ow], ready, owner });
  }

  /**
   * Internal: run a ragged collate's piece table (collate/pieces.ts) over this tensor's
   * fixed-capacity rows [rows, capacity, …rest], into memory its batch owns, on the consumer stream
   * after this tensor's data. Returns the data output (`dtype` of this tensor, `shape`), and the
   * segment (int32 ids, or a uint8 mask) and position (int32) outputs when asked for.
   */
  runPieces(job: { table: PieceTable; fill: bigint; shape: readonly number[]; segment?: 'int32' | 'uint8'; position?: boolean }): { data: DeviceTensor; segment?: DeviceTensor; position?: DeviceTensor } {
    this.#check();
    const owner = this.#owner;
    if (owner === undefined) throw foreignDeviceTensor('collate');
    const backend = this.#backend;
    const { table, fill } = job;
    const rows = this.shape[0]!;
    const per = this.shape.slice(2).reduce((a, b) => a * b, 1);
    const elementBytes = elementSize(this.dtype) as 1 | 2 | 4 | 8;
    const rowBytes = rows === 0 ? 0 : this.byteLength / rows;
    const total = table.total;
    // Zero-size outputs still get a buffer: a DeviceTensor always has one.
    const dst = owner.alloc(Math.max(1, total * per * elementBytes));
    const tableBuffer = owner.alloc(Math.max(4, table.count * PIECE_INTS * 4));
    const segWidth = job.segment === undefined ? undefined : job.segment === 'int32' ? 4 : 1;
    const seg = segWidth === undefined ? undefined : owner.alloc(Math.max(4, total * segWidth));
    const pos = job.position ? owner.alloc(Math.max(4, total * 4)) : undefined;
    const readyIn = this.#event();
    if (readyIn !== undefined) backend.wait('consumer', readyIn);
    // SAFETY: a fresh pageable array per call: the driver stages pageable memory before the call returns (sim holds it in the queued copy).
    if (table.count > 0) backend.copyToDevice(tableBuffer, 0, tableBytes(table), 'consumer');
    backend.pieces(
      {
        src: this.#buffer, srcOffset: this.#offset, rows, rowBytes, elementBytes, per, dst, dstOffset: 0, fill,
        ...(seg !== undefined ? { segment: { buffer: seg, offset: 0, width: segWidth! } } : {}),
        ...(pos !== undefined ? { position: { buffer: pos, offset: 0 } } : {}),
        table: tableBuffer, tableOffset: 0, count: table.count, total, maxSpan: table.maxSpan,
      },
      'consumer',
    );
    const ready = backend.record('consumer');
    owner.track(ready);
    const tensor = <T extends DType>(buffer: DeviceBuffer, dtype: T, shape: readonly number[]) => new DeviceTensor({ backend, buffer, offset: 0, dtype, shape, ready, owner });
    const tagShape = job.shape.slice(0, job.shape.length - (this.shape.length - 2));
    return {
      data: tensor(dst, this.dtype, job.shape),
      ...(seg !== undefined ? { segment: tensor(seg, job.segment === 'int32' ? 'int32' : 'uint8', tagShape) } : {}),
      ...(pos !== undefined ? { position: tensor(pos, 'int32', tagShape) } : {}),
    };
  }

  /** Internal: a small host array (lengths, offsets) put beside this tensor, in memory its batch owns, on the consumer stream. */
  sibling<T extends DType>(host: Tensor<T>): DeviceTensor<T> {
    this.#check();
    const owner = this.#owner;
    if (owner === undefined) throw foreignDeviceTensor('collate');
    const backend = this.#backend;
    const buffer = owner.alloc(Math.max(4, host.byteLength));
    // SAFETY: `host` is fresh per batch and nothing writes to it; pageable memory is staged by the driver before the call returns.
    if (host.byteLength > 0) backend.copyToDevice(buffer, 0, host.bytes(), 'consumer');
    const ready = backend.record('consumer');
    owner.track(ready);
    return new DeviceTensor({ backend, buffer, offset: 0, dtype: host.dtype, shape: host.shape, ready, owner });
  }

  /** Internal: the backing buffer (for kernels of the loader). */
  get buffer(): DeviceBuffer {
    this.#check();
    return this.#buffer;
  }

  toString(): string {
    return `DeviceTensor(${this.dtype}, [${this.shape.join(', ')}], ${this.device})`;
  }

  #check(): void {
    if (this.#lease?.released) throw batchReleased();
    if (this.#backend.closed) throw loaderClosed();
  }
}

export type AnyTensor = Tensor | DeviceTensor;

/** Internal: memory a batch being delivered can hand out to its transform (freed with the batch). */
export interface BatchScratch {
  alloc(bytes: number): DeviceBuffer;
  /** An event to recycle when the batch is released. */
  track(event: DeviceEvent): void;
  /** An event recorded on the consumer stream after the batch was made (recorded once, on first ask). */
  readyEvent(): DeviceEvent;
}
