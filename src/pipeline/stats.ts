// Figures of one epoch, as `loader.stats()` reports them. The rule: times are wall-clock
// milliseconds measured on the main thread; `waitMs` is the time the consumer spent inside the
// loader waiting for its next batch (the stall a training loop feels).

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
  /** From the first request for a batch to the end of the epoch (or now, while it runs). */
  wallMs: number;
  /** The consumer received every batch of the epoch. */
  complete: boolean;
}

export function newEpochStats(epoch: number, mode: 'resident' | 'streaming'): EpochStats {
  return {
    epoch, mode, batches: 0, rowsDelivered: 0, rowsFetched: 0, fetchMs: 0, waitMs: 0, transformMs: 0,
    failedBatches: 0, skippedBatches: 0, wallMs: 0, complete: false,
  };
}
