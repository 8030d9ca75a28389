// Internal: not exported from the package entry.
// What a device must provide to the pipeline: staging memory for readers, an "upload" that turns
// staged rows into batch memory the device owns, a resident store with a row gather, and a memory
// probe for the budget law. The rule: memory handed out in a DeviceBatch stays untouched until its
// `free()` runs, and `free()` runs exactly once, when the batch's last lease ends.

import type { MemInfo } from '../base/budget.js';
import type { Allocate, StagedBatch } from '../dataset/source-reader.js';
import type { Tensor } from '../tensor/tensor.js';
import type { DType } from '../tensor/dtype.js';
import type { PoolPayoff } from './pool-payoff.js';
import type { DeviceBuffer } from './backend.js';
import type { AnyTensor } from './device-tensor.js';
import type { StreamName } from './backend.js';
import type { CropBoxes, JpegBatchOutput, JpegOutputDtype } from '../image/jpeg-plan.js';
import type { KernelHost } from './user-kernel.js';

/** The device's memory probe (defined with the budget law that reads it). */
export type { MemInfo };

/** Batch memory on a device. */
export interface DeviceBatch {
  readonly tensors: readonly AnyTensor[];
  /** Order the consumer after the batch's data (accelerators: the consumer stream waits on its event). */
  beforeDelivery?(): void;
  /** Give the memory back to the device. Called once. */
  free(): void;
}

/** The whole dataset held on a device (resident mode). */
export interface ResidentStore {
  readonly bytes: number;
  /** Called at the start of each epoch with its sample ids (accelerators upload them once). */
  prepare(samples: Uint32Array): void;
  /** Rows `ids[start] … ids[end − 1]` of every column, as one gather per column. */
  gather(ids: Uint32Array, start: number, end: number): DeviceBatch;
  /**
   * The columns themselves, for a consumer in another process that gathers its own batches
   * (`stoker serve`'s client gather): host bytes on the CPU, a device address on an accelerator.
   * Valid until `dispose`; nothing may write to them.
   */
  columns(): readonly ResidentColumn[];
  dispose(): void;
}

/** One field of a resident store: `rows` rows of `shape` (per row), contiguous in row order. */
export interface ResidentColumn {
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly rows: number;
  readonly bytes: number;
  /** The device address of row 0 (accelerators). */
  readonly ptr?: bigint;
  /** The bytes (the CPU). */
  readonly data?: Uint8Array;
}

export interface Device {
  /** 'cpu', 'cuda:0', 'sim', … */
  readonly name: string;
  /**
   * False for the CPU: no memory probe, the budget law's non-device branch applies (resident always
   * fits, prefetch depth 2).
   */
  readonly probesMemory: boolean;
  /** End each batch's delivery lease when the consumer asks for the next one (scarce device memory). */
  readonly autoRelease: boolean;
  /** Driver-level usage; undefined when the probe failed. */
  memInfo(): MemInfo | undefined;
  /** Memory this device holds for the loader right now (device bytes, page-locked host bytes). */
  live(): { device: number; pinned: number };
  /** Host staging memory for readers; memory from here may be adopted by `upload` without a copy. */
  readonly allocate: Allocate;
  /**
   * Page-lock a staging buffer that readers write into (once per buffer), from its first
   * page-aligned byte to its last whole page; returns that first byte's offset (0 on the CPU).
   */
  pinStaging(memory: SharedArrayBuffer): number;
  /**
   * Move staged rows into batch memory; staged memory that is `owned` came from `allocate`. On
   * success the device calls `staged.done()` once it no longer reads the staged memory — by itself,
   * not at a later call (a reader may be waiting for that memory before it can read the batch the
   * next call would upload); when it throws (out of memory), the caller still owns the staged memory.
   */
  upload(staged: StagedBatch): DeviceBatch;
  /** Hold `columns` (batch dimension = dataset rows) for resident gathers. */
  resident(columns: readonly Tensor[]): ResidentStore;
  /** Wait until the work queued on the batches' stream is done (no-op on the CPU). */
  synchronize(): void;
  /** Host-to-device bytes copied so far (0 on the CPU). */
  readonly h2dBytes: number;
  /**
   * Capabilities: what the loader wires a route by — never by the device's class. Absent on the CPU.
   * `pooling`: a VRAM sample pool, uploads that stitch and capture pooled rows, promotion to resident.
   * `inPlace`: in-memory columns mapped for the device and batches gathered from them in place.
   * `kernels`: user kernels from PTX (CUDA).
   * `jpeg`: a GPU JPEG decoder writing batch rows in place (nvJPEG on CUDA, the CPU behind sim).
   */
  readonly pooling?: PoolingDevice;
  readonly inPlace?: InPlaceDevice;
  readonly kernels?: KernelHost;
  readonly jpeg?: JpegDevice;
  close(): void;
}

export interface PoolingDevice {
  /** A VRAM sample pool for `rowBytes` fields of `length` samples (dormant until installed). */
  createPool(rowBytes: readonly number[], length: number, enabled: boolean): VramPool;
  /** As Device.upload, with the rows' ids: pooled rows are stitched in, fresh ones captured. */
  upload(staged: StagedBatch, route: PoolRoute): DeviceBatch;
  /** Free a pool's slab buffers once the work queued on the copy stream is done. */
  releaseSlabs(buffers: readonly DeviceBuffer[]): void;
  /** A pool that holds every sample, as a resident store (its slabs freed); undefined when it cannot fit. */
  promote(pool: VramPool, length: number, fields: readonly UploadField[]): ResidentStore | undefined;
}

export interface InPlaceDevice {
  /** Page-lock and map in-memory columns for in-place reads; throws when the driver refuses. */
  mapColumns(columns: readonly Tensor[]): MappedColumns;
  /** A batch gathered on the device from mapped rows (pooled rows from `pool` when given). */
  uploadRows(ids: Uint32Array, mapped: MappedColumns, fields: readonly UploadField[], pool: VramPool | undefined): DeviceBatch;
}

// The capability types: what a capability hands the pipeline, declared here with the interface so
// that the pipeline (and this file) never import an implementation (accelerator/, cuda/, sim/, jpeg/).

/** One field of a batch as a device lays it out: a sample's shape and bytes. */
export interface UploadField {
  readonly dtype: DType;
  /** Shape of one sample's field. */
  readonly shape: readonly number[];
  readonly rowBytes: number;
}

/**
 * Where a batch's rows come from, for the VRAM pool: the sample id of each row, and — when the
 * batch was planned against the pool before it was read — which rows are pooled (staging then
 * holds only the misses, in order).
 */
export interface PoolRoute {
  readonly ids: Uint32Array;
  readonly pool: VramPool;
  readonly fields: readonly UploadField[];
  readonly split: { readonly hits: readonly number[]; readonly misses: readonly number[] } | undefined;
}

/** How a mapped column's rows are addressed: rows [lo, hi) in place, the others in `edge` (device). */
export interface MappedField {
  readonly rowBytes: number;
  readonly lo: number;
  readonly hi: number;
  /** Device address row 0 would have in the mapping (rows [lo, hi) are at base + id × rowBytes). */
  readonly base: number;
  /** Device copy of rows [0, lo) then [hi, n) (0 when there are none). */
  readonly edge: number;
  /** Alignment of `base` (a power of two ≤ 16): row copies and gathers move units no wider. */
  readonly align: number;
  /** The whole column is on the device (`edge`, which `base` then equals): every id is in place there. */
  readonly onDevice: boolean;
}

/** A source's columns mapped for the device (see mapColumns). */
export interface MappedColumns {
  readonly fields: readonly MappedField[];
  /** Device-visible address of field `f` of sample `id`, as an exact number. */
  address(f: number, id: number): number;
  /** Unmap once the copy stream has passed every batch that read the columns. Idempotent. */
  release(): void;
}

/** Cumulative figures; the loader reports per-epoch differences. */
export interface PoolFigures {
  /** Rows served from the pool instead of crossing the bus. */
  rowsServed: number;
  /** Rows the pool was asked for (hits + misses) while active. */
  rowsSeen: number;
  /** Bytes of host-to-device traffic the hits saved. */
  bytesSaved: number;
  /** Rows captured into the pool. */
  captured: number;
}

/**
 * The VRAM sample pool (accelerator/vram-pool.ts, NOTE [VRAM pool budget]): samples captured on the
 * device from batches that crossed the bus anyway, gathered on the device in later epochs.
 */
export interface VramPool {
  readonly figures: PoolFigures;
  /** Whether stitching its rows pays, epoch by epoch (NOTE [A pool that does not pay stays dormant]). */
  readonly payoff: PoolPayoff;
  /** True once a budget was installed and not fully evicted: partition may return hits. */
  readonly active: boolean;
  /** Active and not yet full: `admit` may take rows. */
  readonly admitting: boolean;
  readonly decided: boolean;
  readonly budget: number;
  /** Bytes held in slabs. */
  readonly bytes: number;
  readonly pooledRows: number;
  /** Every sample of the dataset is pooled (and no eviction has happened since). */
  readonly complete: boolean;
  /** Install only a pool that can hold every sample (set before the budget decision). */
  wholeOnly: boolean;
  /** Bumped by every eviction: a batch planned under an older generation may name freed rows. */
  generation: number;
  /** The one budget decision (NOTE [VRAM pool budget]); a no-op before the honest probe or once decided. */
  maybeInstall(honest: boolean, target: number, batchBytes: number): void;
  installWithReserve(reserve: number): void;
  /** Split batch positions into pooled (hits) and not (misses), both in caller order; counted unless `count` is false. */
  partition(ids: ArrayLike<number>, count?: boolean): { hits: number[]; misses: number[] };
  /** Count a split made with `partition(ids, false)` in `figures`. */
  tally(split: { readonly hits: readonly number[]; readonly misses: readonly number[] }): void;
  /** Device address of field `f` of pooled sample `id` (which must be pooled), as an exact number (< 2^53). */
  address(f: number, id: number): number;
  /** Admit rows at `positions` of a batch of `ids`; returns the ones taken. */
  admit(ids: ArrayLike<number>, positions: readonly number[]): { position: number; id: number }[];
  /** Evict the newest slab (last resort under a device out-of-memory); its buffers to free. */
  evictOneSlab(): readonly DeviceBuffer[] | undefined;
  /** All slab buffers, for the device to free at close. */
  release(): readonly DeviceBuffer[];
}

// The `jpeg` capability (device/jpeg/jpeg-batch.ts implements it; nvJPEG on CUDA, the CPU behind sim).

/** The image field a decoded batch holds: 3 channels of `size`, in `layout` and `dtype`, normalized when mean/std are given. */
export interface JpegImageSpec {
  readonly size: readonly [number, number];
  readonly layout: 'chw' | 'hwc';
  readonly dtype: JpegOutputDtype;
  readonly mean?: readonly number[];
  readonly std?: readonly number[];
}

/** A batch's wall time (ms) by phase (env switch `decodeTiming`): the decoder's, plus the host's work around it. */

export interface JpegBatchTiming extends DecodeCallTiming {
  /** Before the decoder: retire, the batch's device buffers, the small fields' copies. */
  prepMs: number;
  /** The CPU decode of the files the GPU refused. */
  cpuMs: number;
}

/** Optional parts of a `decodeBatch` call: the batch's place in the decoder's slot order (`decoder.reserve()`), its timing. */

export interface JpegBatchCall {
  readonly ticket?: SlotTicket;
  readonly timing?: JpegBatchTiming;
}

export interface JpegDevice {
  /** True when the decoder is the GPU's own (CUDA + nvJPEG); false on `sim`, whose decoder is the CPU (so `decode: 'auto'` never picks it). */
  readonly native: boolean;
  /** A decoder for this device; throws ERR_CUDA_UNAVAILABLE when nvJPEG cannot be loaded. */
  open(): JpegDecoder;
  /**
   * Page-locked host memory for one batch's files, at least `bytes` long (NOTE [files in page-locked
   * memory]): pass it to `decodeBatch`, which gives it back once the decoder is done with it, or
   * give it back with `releaseFiles` when the batch never gets there.
   */
  fileMemory(bytes: number): Uint8Array;
  releaseFiles(memory: Uint8Array): void;
  /**
   * One batch: `files[k]` decoded into row k of the image field (field `imageAt` of the batch), the
   * rows of `others` (host tensors [rows, …], in field order without the image) copied beside it.
   * `failed`: the files neither the GPU nor the CPU could decode (their rows hold garbage; the caller
   * frees the batch and fails it).
   */
  decodeBatch(decoder: JpegDecoder, files: readonly Uint8Array[], host: Uint8Array, boxes: CropBoxes, image: JpegImageSpec, imageAt: number, others: readonly Tensor[], call?: JpegBatchCall): Promise<{ batch: DeviceBatch; failed: number[] }>;
}

/** Host time spent per phase (ms), for benches. */
export interface DecodeStats {
  probeMs: number;
  decodeMs: number;
  launchMs: number;
  calls: number;
}

/** One call's wall time (ms) by phase, added to when given (env switch `decodeTiming`, decode.ts). */

export interface DecodeCallTiming {
  /** Waiting for the decode slot. */
  slotMs: number;
  /** The slot's header probes and nvjpegDecodeBatched (on sim: the CPU decode and the resampler). */
  probeMs: number;
  decodeMs: number;
  /** The slot's job round trip beyond probe and decode: the hand-off to a slot's thread and back (≈ 0 inline). */
  handoffMs: number;
  /** The crop kernel's table and launch (on sim: the rows' upload). */
  launchMs: number;
}

/** Optional parts of a `decodeInto` call. */

export interface DecodeCall<Slot = unknown> {
  /** The caller's place in the slot order, from `reserve` (claimed by the call, even when it throws). */
  readonly ticket?: SlotTicket<Slot>;
  readonly timing?: DecodeCallTiming;
}

export interface DecodeResult {
  /** Files not written (ascending): decode them on the CPU (decodeOnCpu) or fail their batch. */
  readonly fallback: number[];
}

/**
 * A place in a decoder's slot order, taken early (see `reserve`): `take` claims the slot (once; the
 * decode call then releases it), `cancel` gives the place back when the batch never decodes (a no-op
 * once taken). Exactly one of the two settles every ticket.
 */
export interface SlotTicket<Slot = unknown> {
  take(): Promise<Slot>;
  cancel(): void;
}

/** A GPU JPEG decoder (device/cuda/nvjpeg.ts: GpuJpegDecoder), as the pipeline holds it. */
export interface JpegDecoder {
  /** 'nvjpeg-hardware', 'nvjpeg-gpu-hybrid' or 'sim' (the CPU decoder behind the sim device). */
  readonly kind: string;
  /** The chroma upsampling in effect ('interpolate' on sim: libjpeg-turbo's). */
  readonly chroma: 'interpolate' | 'replicate';
  readonly stats: DecodeStats;
  /** Decode `files`, crop each by its box and write row k of `out`. */
  decodeInto(files: readonly Uint8Array[], boxes: CropBoxes, out: JpegBatchOutput, stream?: StreamName, call?: DecodeCall): Promise<DecodeResult>;
  /** A place in the slot order, taken now: pass it to a decode call as `call.ticket`, or `cancel` it. */
  reserve(): SlotTicket;
  /** Write rows `which` of `out` from the CPU decoder; `failed` are the files it could not decode. */
  decodeOnCpu(files: readonly Uint8Array[], which: readonly number[], boxes: CropBoxes, out: JpegBatchOutput, stream?: StreamName): Promise<{ failed: number[] }>;
  /** Resolves when no call is decoding (every slot free). */
  whenIdle(): Promise<void>;
  /** Waits for queued work, frees scratch memory and the library handles. Idempotent. */
  close(): void;
}
