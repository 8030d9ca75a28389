// Internal: not exported from the package entry.
// The fetcher is the streaming pipeline's source stage: given a batch's sample ids, it produces the
// staged rows. The rule: the pipeline owns order, window, errors and cancellation; a fetcher only
// reads. Today rows are read on the main thread; the reader-worker pool replaces this class, not the
// pipeline.

import type { Allocate, SourceReader, StagedBatch } from '../dataset/source-reader.js';
import type { PickKeys } from '../sampler/pick-key.js';

export interface Fetcher {
  /**
   * Read the rows of `sampleIds` in that order. May reject (the batch fails, the fetcher survives).
   * Should stop early, rejecting, once `signal` aborts; the pipeline never waits on it after that.
   * `inFlight` is how many batches the pipeline may have in flight: a fetcher with parallel readers
   * splits a batch among them only when fewer batches than readers are in flight. `keys`: the
   * picks of the rows, for a keyed dataset (NOTE [keyed reads], dataset.ts).
   */
  fetch(sampleIds: Uint32Array, signal: AbortSignal, inFlight?: number, keys?: PickKeys): Promise<StagedBatch>;
  close(): Promise<void>;
}

export class MainThreadFetcher implements Fetcher {
  readonly #reader: SourceReader;
  readonly #alloc: Allocate;

  constructor(reader: SourceReader, alloc: Allocate) {
    this.#reader = reader;
    this.#alloc = alloc;
  }

  async fetch(sampleIds: Uint32Array, signal: AbortSignal, _inFlight?: number, keys?: PickKeys): Promise<StagedBatch> {
    signal.throwIfAborted();
    return this.#reader.read(sampleIds, { signal }, this.#alloc, keys);
  }

  async close(): Promise<void> {}
}
