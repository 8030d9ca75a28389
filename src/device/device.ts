// Internal: not exported from the package entry.
// What a device must provide to the pipeline: staging memory for readers, an "upload" that turns
// staged rows into batch memory the device owns, a resident store with a row gather, and a memory
// probe for the budget law. The rule: memory handed out in a DeviceBatch stays untouched until its
// `free()` runs, and `free()` runs exactly once, when the batch's last lease ends.

import type { Allocate, StagedBatch } from '../dataset/source-reader.js';
import type { Tensor } from '../tensor/tensor.js';
import type { DType } from '../tensor/dtype.js';
import type { DeviceBuffer } from './backend.js';
import type { AnyTensor } from './device-tensor.js';
import type { UploadField } from './accelerator/assembly.js';
import type { MappedColumns } from './accelerator/mapped-columns.js';
import type { PoolRoute } from './accelerator/staged-upload.js';
import type { JpegDevice } from './jpeg/jpeg-batch.js';
import type { KernelHost } from './user-kernel.js';
import type { VramPool } from './accelerator/vram-pool.js';

export interface MemInfo {
  /** Bytes in use on the device, as the driver counts them. */
  readonly used: number;
  readonly total: number;
}

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
   * success the device calls `staged.done()` once it no longer reads the staged memory; when it
   * throws (out of memory), the caller still owns the staged memory.
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
