// Internal: not exported from the package entry.
// Resident mode: the whole dataset is held on the device; each batch is one gather per column over
// the epoch's sample ids. Nothing is read ahead, because a gather is cheaper than a hand-off.
// Two rules. Samples whose read failed while the store was built are known by id, and a batch
// holding one fails with that sample's cause, as the same batch would while streaming. The epoch's
// ids reach the device with its first batch, not at the run's start, so that a transient
// out-of-memory there is retried (oom-retry.ts) and, past the last attempt, fails that batch under
// `errors` like any other batch failure.

import type { DeviceBatch, ResidentStore } from '../device/device.js';
import { EpochRun } from './epoch-run.js';
import { oomPause, retriesOom } from './oom-retry.js';

export class ResidentRun extends EpochRun {
  #store: ResidentStore | undefined;
  #failed: ReadonlyMap<number, unknown> = new Map();
  #prepared = false;

  /** `failed`: sample id → why its read failed when the store was built (its rows are zeros). */
  bind(store: ResidentStore, failed?: ReadonlyMap<number, unknown>): this {
    this.#store = store;
    if (failed !== undefined) this.#failed = failed;
    return this;
  }

  /** Synchronous unless the device runs out of memory (the common path pays no promise). */
  protected produce(index: number): DeviceBatch | Promise<DeviceBatch> {
    try {
      return this.#gather(index);
    } catch (error) {
      if (!retriesOom(error, 0, this.signal)) throw error;
      return this.#retry(index, error);
    }
  }

  async #retry(index: number, error: unknown): Promise<DeviceBatch> {
    for (let attempt = 0; ; attempt++) {
      if (!retriesOom(error, attempt, this.signal)) throw error;
      this.stats.oomRetries++;
      await oomPause(this.signal);
      try {
        return this.#gather(index);
      } catch (next) {
        error = next;
      }
    }
  }

  #gather(index: number): DeviceBatch {
    const p = this.plan;
    const start = p.start(index);
    const end = p.end(index);
    if (this.#failed.size > 0) {
      for (let i = start; i < end; i++) {
        const id = p.samples[i]!;
        if (this.#failed.has(id)) throw this.#failed.get(id);
      }
    }
    if (!this.#prepared) {
      // Throws before changing anything when the id buffer cannot be allocated.
      this.#store!.prepare(p.samples);
      this.#prepared = true;
    }
    return this.#store!.gather(p.samples, start, end);
  }

  protected cleanup(): void {}
}
