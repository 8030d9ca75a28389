// Internal: not exported from the package entry.
// Streaming mode: batches are read ahead of the consumer within the governor's window, uploaded as
// they arrive, and delivered strictly in plan order whatever order reads finish in.
// The rule: at most `governor.window` batches are in flight (launched, not yet taken); the window is
// re-read before every launch, so a resize takes effect at once. See NOTE [Epoch lifecycle].

import type { Device, DeviceBatch } from '../device/device.js';
import type { StagedBatch } from '../dataset/source-reader.js';
import type { VramPool } from '../device/vram-pool.js';
import type { UploadField } from '../device/accelerator-device.js';
import { oomPause, retriesOom } from './oom-retry.js';
import type { EpochPlan } from './epoch-plan.js';
import { EpochRun } from './epoch-run.js';
import type { Fetcher } from './fetcher.js';
import type { Governor } from './governor.js';

/** Main-thread time one turn of read-ahead may take before yielding to the event loop. */
const READ_AHEAD_SLICE_MS = 1;

type Outcome = { readonly memory: DeviceBatch } | { readonly error: unknown };

/** Makes a batch's device memory from its sample ids; `fromHost`: rows read from host memory (not the VRAM pool). */
export type DirectAssembler = (ids: Uint32Array) => { memory: DeviceBatch; fromHost: number };

export class StreamingRun extends EpochRun {
  #fetcher!: Fetcher;
  #device!: Device;
  #governor!: Governor;
  readonly #inflight = new Map<number, Promise<Outcome>>();
  #launched = 0;
  #taken = 0;
  #aheadScheduled = false;
  #abandoned: Promise<void> | undefined;

  /** Hard bound on batches in flight (the staging ring's slots), below the governor's window. */
  #limit = Number.POSITIVE_INFINITY;

  #pool: VramPool | undefined;
  #batchBytes = 0;

  #fields: readonly UploadField[] = [];

  bind(fetcher: Fetcher, device: Device, governor: Governor, limit = Number.POSITIVE_INFINITY, pool?: VramPool, batchBytes = 0, fields: readonly UploadField[] = []): this {
    this.#fields = fields;
    this.#limit = limit;
    this.#pool = pool;
    this.#batchBytes = batchBytes;
    this.#fetcher = fetcher;
    this.#device = device;
    this.#governor = governor;
    governor.beginEpoch();
    return this;
  }

  /** Batches launched and not yet taken by the consumer. */
  get inFlight(): number {
    return this.#launched - this.#taken;
  }

  protected async produce(index: number): Promise<DeviceBatch> {
    this.#taken = index;
    this.#fill(index);
    const pending = this.#inflight.get(index)!;
    const outcome = await Promise.race([pending, this.#whenAbandoned()]);
    // Abandoned: the pending read stays in the map, and cleanup() frees what it brings.
    if (outcome === undefined) throw new Error('epoch ended');
    this.#inflight.delete(index);
    // Read ahead while the consumer works on this batch: up to `window` batches beyond it, as
    // flodl's gate allows `target` batches sent and not yet consumed.
    this.#taken = index + 1;
    if ('error' in outcome) throw outcome.error;
    this.#scheduleReadAhead();
    return outcome.memory;
  }

  protected override onDelivered(): void {
    this.#governor.onConsumed();
  }

  #canLaunch(): boolean {
    return this.#launched < this.plan.batches && this.#launched - this.#taken < Math.min(this.#governor.window, this.#limit);
  }

  /** Launch up to batch `urgent` now (the consumer waits for it); read further ahead in the background. */
  #fill(urgent: number): void {
    while (this.#launched <= urgent && this.#canLaunch()) this.#launchNext();
    this.#scheduleReadAhead();
  }

  #launchNext(): void {
    const index = this.#launched++;
    this.#inflight.set(index, this.#launch(this.plan, index));
  }

  /**
   * Read-ahead in slices of at most READ_AHEAD_SLICE_MS of main-thread time per turn of the event
   * loop: a synchronous source (read on the main thread) then never holds the consumer for long, and
   * its reads overlap whatever the consumer awaits (device work, I/O) instead of running all at once
   * before the first delivery; cheap launches (pooled batches, worker reads) still go many per turn.
   */
  #scheduleReadAhead(): void {
    if (this.#aheadScheduled || this.ended || !this.#canLaunch()) return;
    this.#aheadScheduled = true;
    setImmediate(() => {
      this.#aheadScheduled = false;
      const t0 = performance.now();
      while (!this.ended && this.#canLaunch()) {
        this.#launchNext();
        if (performance.now() - t0 >= READ_AHEAD_SLICE_MS) break;
      }
      this.#scheduleReadAhead();
    });
  }

  async #launch(plan: EpochPlan, index: number): Promise<Outcome> {
    const ids = plan.samples.subarray(plan.start(index), plan.end(index));
    const t0 = performance.now();
    let staged: StagedBatch | undefined;
    try {
      const pool = this.#pool;
      pool?.maybeInstall(this.#governor.honestResizeDone, this.#governor.target, this.#batchBytes);
      if (this.#direct !== undefined) return await this.#assembleDirect(ids, t0);
      // Plan against the VRAM pool before reading: pooled rows are never read on the host.
      // A dormant pool (its stitching did not pay) leaves every row to the bus.
      let split = pool?.active && pool.payoff.stitching ? pool.partition(ids) : undefined;
      let generation = pool?.generation ?? 0;
      const read = async (): Promise<StagedBatch> => {
        if (split === undefined || split.hits.length === 0) return this.#fetch(ids);
        if (split.misses.length === 0) return { tensors: [], owned: false };
        return this.#fetch(Uint32Array.from(split.misses, (p) => ids[p]!));
      };
      staged = await read();
      for (let attempt = 0; ; attempt++) {
        if (split !== undefined && split.hits.length > 0 && pool!.generation !== generation) {
          // An eviction freed rows this batch planned to gather: read it whole instead.
          staged.done?.();
          split = undefined;
          staged = undefined;
          staged = await read();
          generation = pool!.generation;
        }
        try {
          const route = pool !== undefined ? { ids, pool, fields: this.#fields, split } : undefined;
          const memory = this.#device.upload(staged, route);
          this.stats.fetchMs += performance.now() - t0;
          return { memory };
        } catch (error) {
          await this.#backOff(error, attempt);
        }
      }
    } catch (error) {
      staged?.done?.();
      this.stats.fetchMs += performance.now() - t0;
      return { error };
    }
  }

  /** A batch the device assembles itself from rows it can read in place (see `direct`). */
  async #assembleDirect(ids: Uint32Array, t0: number): Promise<Outcome> {
    for (let attempt = 0; ; attempt++) {
      try {
        const { memory, fromHost } = this.#direct!(ids);
        this.stats.rowsFetched += fromHost;
        this.stats.fetchMs += performance.now() - t0;
        return { memory };
      } catch (error) {
        await this.#backOff(error, attempt);
      }
    }
  }

  /**
   * Reference §6.5: after a transient device out-of-memory, halve the in-flight target, wait, and let
   * the caller retry; the pool gives a slab back only once the target was already 1. Rethrows
   * anything else, and the last failure.
   */
  async #backOff(error: unknown, attempt: number): Promise<void> {
    if (!retriesOom(error, attempt, this.signal)) throw error;
    this.stats.oomRetries++;
    const atFloor = this.#governor.target <= 1;
    this.#governor.target = Math.max(Math.floor(this.#governor.target / 2), 1);
    await oomPause(this.signal);
    if (atFloor && this.#pool !== undefined) this.#onEvict?.(this.#pool);
  }

  #direct: DirectAssembler | undefined;

  /**
   * Assemble batches on the device from rows it reads in place (an in-memory source mapped for the
   * device) instead of reading them through the fetcher.
   */
  direct(assemble: DirectAssembler | undefined): this {
    this.#direct = assemble;
    return this;
  }

  async #fetch(ids: Uint32Array): Promise<StagedBatch> {
    const staged = await this.#fetcher.fetch(ids, this.signal, Math.min(this.#governor.window, this.#limit));
    this.stats.rowsFetched += ids.length;
    return staged;
  }

  #onEvict: ((pool: VramPool) => void) | undefined;

  /** How an evicted slab's memory is freed (after the device's queued work). */
  onEvict(free: (pool: VramPool) => void): this {
    this.#onEvict = free;
    return this;
  }

  #whenAbandoned(): Promise<undefined> {
    this.#abandoned ??= new Promise<void>((resolve) => {
      if (this.signal.aborted) resolve();
      else this.signal.addEventListener('abort', () => resolve(), { once: true });
    });
    return this.#abandoned.then(() => undefined);
  }

  protected cleanup(): void {
    // Reads still in flight finish on their own (they saw the abort); their memory goes back now.
    for (const pending of this.#inflight.values()) {
      void pending.then((o) => {
        if ('memory' in o) o.memory.free();
      });
    }
    this.#inflight.clear();
  }
}
