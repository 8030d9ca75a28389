// Figures of one epoch, as `loader.stats()` reports them. The rule: times are wall-clock
// milliseconds measured on the main thread; `waitMs` is the time the consumer spent inside the
// loader waiting for its next batch (the stall a training loop feels).

import type { BatchStage } from '../errors.js';
import type { PoolPhase } from '../device/pool-payoff.js';

/** How an epoch's batches were assembled (see `EpochStats.route`). */
export type EpochRoute = 'resident' | 'staged' | 'in-place' | 'decode';

/** Skipped batches listed per epoch; `skippedBatches` counts them all. */
export const SKIPPED_KEPT = 1000;

/** A batch skipped under `errors: 'skip'`. */
export interface SkippedBatch {
  /** Position of the batch in its epoch. */
  readonly index: number;
  /** Its sample ids, in batch order: the samples this epoch did not deliver. */
  readonly sampleIds: readonly number[];
  readonly stage: BatchStage;
  /** The cause's message. */
  readonly reason: string;
}

export interface EpochStats {
  readonly epoch: number;
  readonly mode: 'resident' | 'streaming';
  /** Batches handed to the consumer. */
  batches: number;
  rowsDelivered: number;
  /** Rows read from the dataset during this epoch (0 for resident mode: it read once, at create). */
  rowsFetched: number;
  /** Summed duration of the epoch's dataset reads (overlapping async reads each count in full). */
  fetchMs: number;
  /** Time the consumer waited inside the loader for batches. */
  waitMs: number;
  /** Time in the transform. */
  transformMs: number;
  /** Batches that failed (dataset or transform error). */
  failedBatches: number;
  /** Failed batches skipped under `errors: 'skip'`. */
  skippedBatches: number;
  /** The skipped batches (the first SKIPPED_KEPT of the epoch): which samples were lost, and why. */
  skipped: SkippedBatch[];
  /** From the first request for a batch to the end of the epoch (or now, while it runs). */
  wallMs: number;
  /** The consumer received every batch of the epoch. */
  complete: boolean;
  /** Streaming, per tier: rows served by the RAM sample cache, the disk stage, and the source. */
  rowsFromCache: number;
  rowsFromDisk: number;
  rowsFromSource: number;
  bytesFromCache: number;
  bytesFromDisk: number;
  bytesFromSource: number;
  /** Time spent in source reads, summed over reader threads. */
  sourceReadMs: number;
  /** Bytes the RAM cache holds, and its admission ceiling this epoch. */
  cacheHeldBytes: number;
  cacheBudgetBytes: number;
  /** Bytes staged on disk, and records that failed verification (read as misses). */
  diskStagedBytes: number;
  diskCorruptRecords: number;
  /** Reader workers alive, and staging slots (the ring's depth); 0 when reading on the main thread. */
  workers: number;
  ringSlots: number;
  /** Transient device out-of-memory errors retried (each halved the in-flight target). */
  oomRetries: number;
  /** Accelerators: bytes copied host → device this epoch. */
  h2dBytes: number;
  /**
   * VRAM pool's part in this epoch: 'none', 'filling', 'trial-stitch' / 'trial-bypass' (timing
   * both ways once it is full but partial), 'stitching' or 'dormant' (stitching cost more than it
   * saved). NOTE [A pool that does not pay stays dormant].
   */
  vramPool: PoolPhase;
  /**
   * How the epoch's batches were assembled: 'resident' (a gather over data held whole on the
   * device or in memory), 'staged' (rows read into host staging, then copied to the batch's memory:
   * the CPU's copy or the bus, with the VRAM pool's rows stitched in), 'in-place' (the device read
   * a page-locked in-memory source's rows where they lie: `pinSource`).
   */
  route: EpochRoute;
  /** VRAM pool: rows served on the device, the host → device bytes that saved, rows captured this epoch, and what the pool holds. */
  rowsServedOnDevice: number;
  h2dBytesSaved: number;
  capturedRows: number;
  pooledRows: number;
  pooledBytes: number;
  /**
   * Sequence packing (`pack`): the delivered context windows, their real tokens and token slots,
   * and utilization = realTokens / slots (the rest is padding). Undefined without packing.
   */
  packing?: { windows: number; realTokens: number; slots: number; utilization: number };
}

export function newEpochStats(epoch: number, mode: 'resident' | 'streaming'): EpochStats {
  return {
    epoch, mode, batches: 0, rowsDelivered: 0, rowsFetched: 0, fetchMs: 0, waitMs: 0, transformMs: 0,
    failedBatches: 0, skippedBatches: 0, skipped: [], wallMs: 0, complete: false,
    rowsFromCache: 0, rowsFromDisk: 0, rowsFromSource: 0, bytesFromCache: 0, bytesFromDisk: 0, bytesFromSource: 0,
    sourceReadMs: 0, cacheHeldBytes: 0, cacheBudgetBytes: 0, diskStagedBytes: 0, diskCorruptRecords: 0, workers: 0, ringSlots: 0, oomRetries: 0, vramPool: 'none', route: 'staged',
    h2dBytes: 0, rowsServedOnDevice: 0, h2dBytesSaved: 0, capturedRows: 0, pooledRows: 0, pooledBytes: 0,
  };
}
