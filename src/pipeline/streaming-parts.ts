// Internal: not exported from the package entry.
// What a streaming loader holds between epochs: the fetcher (main thread or reader pool), the
// governor, the sample tiers and their counters. The rule: the RAM cache's budget is set once per
// epoch, before the epoch's first read, from one MemAvailable probe (NOTE [The budget law]).

import type { DiskStage } from '../cache/disk-stage.js';
import type { SampleCache } from '../cache/sample-cache.js';
import { type TierCounters, type TierSnapshot, diffSnapshots } from '../cache/tier-counters.js';
import type { ResolvedOptions } from '../options.js';
import { RING_SLOTS_WITH_CACHE, memAvailable, ringSlotsFromRam, sampleCacheBudget } from './budget.js';
import type { Fetcher } from './fetcher.js';
import type { Governor } from './governor.js';
import type { ReaderPool } from './reader-pool.js';
import type { EpochStats } from './stats.js';

export class StreamingParts {
  readonly fetcher: Fetcher;
  readonly pool: ReaderPool | undefined;
  readonly governor: Governor;
  readonly counters: TierCounters;
  readonly cache: SampleCache | undefined;
  readonly disk: DiskStage | undefined;
  readonly #sampleBytes: number;
  readonly #starts = new WeakMap<EpochStats, TierSnapshot>();
  #budget = 0;
  /** Batches the reader pool may stage at once this epoch (the ring's bound); unbounded on the main thread. */
  maxInFlight = Number.POSITIVE_INFINITY;

  constructor(init: {
    fetcher: Fetcher;
    pool: ReaderPool | undefined;
    governor: Governor;
    counters: TierCounters;
    cache: SampleCache | undefined;
    disk: DiskStage | undefined;
    sampleBytes: number;
  }) {
    this.fetcher = init.fetcher;
    this.pool = init.pool;
    this.governor = init.governor;
    this.counters = init.counters;
    this.cache = init.cache;
    this.disk = init.disk;
    this.#sampleBytes = init.sampleBytes;
  }

  /**
   * Size the staging ring and the RAM cache for the coming epoch from one MemAvailable probe. The ring
   * gets at least one slot (workers need somewhere to write); a host without the probe falls back to
   * 4 slots and never admits to the cache.
   */
  beginEpoch(opts: ResolvedOptions, batches: number): void {
    const cache = this.cache;
    const available = memAvailable();
    if (this.pool !== undefined) {
      let slots = ringSlotsFromRam(this.#sampleBytes, opts.batchSize, opts.ramMaxUsage, available, batches);
      if (cache !== undefined) slots = Math.min(slots, RING_SLOTS_WITH_CACHE);
      this.maxInFlight = Math.max(slots, 1);
    }
    if (cache === undefined || available === undefined) return;
    // The staging ring shares the RAM share with the cache: its bytes come off the top.
    const ringBytes = this.pool !== undefined ? Math.min(this.maxInFlight, batches) * this.pool.slotBytes : 0;
    this.#budget = sampleCacheBudget(available, cache.heldBytes, ringBytes, opts.ramMaxUsage);
    const chunks = cache.setCapacity(Math.floor(this.#budget / this.#sampleBytes));
    if (chunks !== undefined) this.pool?.shareChunks(chunks);
  }

  trackEpoch(stats: EpochStats): void {
    this.#starts.set(stats, this.counters.snapshot());
    this.refresh(stats);
  }

  finishEpoch(stats: EpochStats): void {
    this.refresh(stats);
  }

  /** Write the tier figures accumulated since the epoch started into `stats`. */
  refresh(stats: EpochStats): void {
    const start = this.#starts.get(stats);
    if (start === undefined) return;
    const d = diffSnapshots(this.counters.snapshot(), start);
    const b = this.#sampleBytes;
    stats.rowsFromCache = d.ramRows;
    stats.rowsFromDisk = d.diskRows;
    stats.rowsFromSource = d.sourceRows;
    stats.bytesFromCache = d.ramRows * b;
    stats.bytesFromDisk = d.diskRows * b;
    stats.bytesFromSource = d.sourceRows * b;
    stats.sourceReadMs = d.sourceNs / 1e6;
    stats.cacheHeldBytes = this.cache?.heldBytes ?? 0;
    stats.cacheBudgetBytes = this.cache !== undefined ? this.#budget : 0;
    const disk = this.disk?.stats;
    stats.diskStagedBytes = disk?.bytes ?? 0;
    stats.diskCorruptRecords = disk?.corrupt ?? 0;
    stats.workers = this.pool?.workers ?? 0;
    stats.ringSlots = this.pool?.slots ?? 0;
  }
}
