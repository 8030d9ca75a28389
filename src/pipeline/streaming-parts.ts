// Internal: not exported from the package entry.
// What a streaming loader holds between epochs: the fetcher (main thread or reader pool), the
// governor, the sample tiers and their counters. The rule: the RAM cache's budget is set once per
// epoch, before the epoch's first read, from one MemAvailable probe (NOTE [The budget law]).

import type { DiskStage } from '../cache/disk-stage.js';
import type { SampleCache } from '../cache/sample-cache.js';
import { type TierCounters, type TierSnapshot, diffSnapshots } from '../cache/tier-counters.js';
import type { ResolvedOptions } from '../options.js';
import { RING_SLOTS_WITH_CACHE, memAvailable, ringSlotsFromRam, sampleCacheBudget } from '../base/budget.js';
import type { Fetcher } from '../reader/fetcher.js';
import type { Governor } from './governor.js';
import type { ReaderPool } from '../reader/reader-pool.js';
import type { Device } from '../device/device.js';
import type { VramPool } from '../device/device.js';
import type { BatchAssembler } from './assemble/assembler.js';
import type { EpochStats } from './stats.js';

interface DeviceFigures {
  readonly h2dBytes: number;
  readonly rowsServed: number;
  readonly bytesSaved: number;
  readonly captured: number;
}

export class StreamingParts {
  readonly fetcher: Fetcher;
  readonly readers: ReaderPool | undefined;
  readonly governor: Governor;
  readonly counters: TierCounters;
  readonly cache: SampleCache | undefined;
  readonly disk: DiskStage | undefined;
  /** How this loader's batches become device memory (chosen once, in build.ts). */
  readonly assembler: BatchAssembler;
  readonly #device: Device;
  readonly #sampleBytes: number;
  readonly #starts = new WeakMap<EpochStats, TierSnapshot>();
  readonly #deviceStarts = new WeakMap<EpochStats, DeviceFigures>();
  #budget = 0;
  /** Batches the reader pool may stage at once this epoch (the ring's bound); unbounded on the main thread. */
  maxInFlight = Number.POSITIVE_INFINITY;
  readonly #rowsPerBatch: number;

  constructor(init: {
    fetcher: Fetcher;
    pool: ReaderPool | undefined;
    governor: Governor;
    counters: TierCounters;
    cache: SampleCache | undefined;
    disk: DiskStage | undefined;
    sampleBytes: number;
    /** The most rows a batch reads (batchSize, or more for packed batches: BatchPlanner.maxRows). */
    rowsPerBatch: number;
    device: Device;
    assembler: BatchAssembler;
  }) {
    this.#rowsPerBatch = init.rowsPerBatch;
    this.assembler = init.assembler;
    this.#device = init.device;
    this.fetcher = init.fetcher;
    this.readers = init.pool;
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
    // Ranks on one host share its RAM: each takes its equal part of the share (their holdings
    // already count against MemAvailable, so the parts settle below ramMaxUsage together).
    const share = opts.ramShare;
    if (this.readers !== undefined) {
      let slots = ringSlotsFromRam(this.#sampleBytes, this.#rowsPerBatch, share, available, batches);
      if (cache !== undefined) slots = Math.min(slots, RING_SLOTS_WITH_CACHE);
      this.maxInFlight = Math.max(slots, 1);
      // NOTE [A bounded ring] (reader-pool.ts): slots still held by an abandoned epoch's reads count.
      this.readers.ringLimit = this.maxInFlight;
    }
    if (cache === undefined || available === undefined) return;
    // The staging ring shares the RAM share with the cache: its bytes come off the top.
    const ringBytes = this.readers !== undefined ? Math.min(this.maxInFlight, batches) * this.readers.slotBytes : 0;
    this.#budget = sampleCacheBudget(available, cache.heldBytes, ringBytes, share);
    const chunks = cache.setCapacity(Math.floor(this.#budget / this.#sampleBytes));
    if (chunks !== undefined) this.readers?.shareChunks(chunks);
  }

  /** The VRAM pool the route fills, if any. */
  get pool(): VramPool | undefined {
    return this.assembler.pool;
  }

  /** The RAM cache's budget for the current epoch (bytes; 0 before the first epoch or without a cache). */
  get cacheBudget(): number {
    return this.#budget;
  }

  batchBytes(batchSize: number): number {
    return this.#sampleBytes * batchSize;
  }

  trackEpoch(stats: EpochStats): void {
    // NOTE [A pool that does not pay stays dormant]: the pool's phase is chosen once per epoch.
    this.assembler.beginEpoch(stats);
    this.#starts.set(stats, this.counters.snapshot());
    this.#deviceStarts.set(stats, { ...this.#deviceFigures() });
    this.refresh(stats);
  }

  finishEpoch(stats: EpochStats): void {
    this.refresh(stats);
    this.assembler.endEpoch(stats);
  }

  /**
   * Steps 5–8 of NOTE [Loader shutdown] (loader.ts), each stage closing what it owns: the fetcher
   * (reader workers joined before the memory they write into goes), then the route (mapped source,
   * pool slabs), then the disk stage.
   */
  async close(): Promise<void> {
    await this.fetcher.close();
    await this.assembler.close();
    this.disk?.close();
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
    stats.workers = this.readers?.workers ?? 0;
    stats.ringSlots = this.readers?.slots ?? 0;
    const now = this.#deviceFigures();
    const at = this.#deviceStarts.get(stats) ?? now;
    stats.h2dBytes = now.h2dBytes - at.h2dBytes;
    stats.rowsServedOnDevice = now.rowsServed - at.rowsServed;
    stats.h2dBytesSaved = now.bytesSaved - at.bytesSaved;
    stats.capturedRows = now.captured - at.captured;
    stats.pooledRows = this.pool?.pooledRows ?? 0;
    stats.pooledBytes = this.pool?.bytes ?? 0;
  }

  #deviceFigures(): DeviceFigures {
    const f = this.pool?.figures;
    return { h2dBytes: this.#device.h2dBytes, rowsServed: f?.rowsServed ?? 0, bytesSaved: f?.bytesSaved ?? 0, captured: f?.captured ?? 0 };
  }
}
