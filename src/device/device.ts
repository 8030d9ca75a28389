// Internal: not exported from the package entry.
// What a device must provide to the pipeline: staging memory for readers, an "upload" that turns
// staged rows into batch memory the device owns, a resident store with a row gather, and a memory
// probe for the budget law. The rule: memory handed out in a DeviceBatch stays untouched until its
// `free()` runs, and `free()` runs exactly once, when the batch's last lease ends.

import type { Allocate, StagedBatch } from '../dataset/source-reader.js';
import type { Tensor } from '../tensor/tensor.js';
import type { AnyTensor } from './device-tensor.js';

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
  dispose(): void;
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
  upload(staged: StagedBatch, route?: unknown): DeviceBatch;
  /** Hold `columns` (batch dimension = dataset rows) for resident gathers. */
  resident(columns: readonly Tensor[]): ResidentStore;
  close(): void;
}
