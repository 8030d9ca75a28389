// Internal: not exported from the package entry.
// Resident mode: the whole dataset is held on the device; each batch is one gather per column over
// the epoch's sample ids. Nothing is read ahead, because a gather is cheaper than a hand-off.
// The rule: the epoch's ids reach the device with its first batch, not at the run's start, so that
// a transient out-of-memory there is retried (oom-retry.ts) and, past the last attempt, fails that
// batch under `errors` like any other batch failure.

import type { DeviceBatch, ResidentStore } from '../device/device.js';
import { EpochRun } from './epoch-run.js';
import { oomPause, retriesOom } from './oom-retry.js';

export class ResidentRun extends EpochRun {
  #store: ResidentStore | undefined;
  #prepared = false;

  bind(store: ResidentStore): this {
    this.#store = store;
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
    if (!this.#prepared) {
      // Throws before changing anything when the id buffer cannot be allocated.
      this.#store!.prepare(p.samples);
      this.#prepared = true;
    }
    return this.#store!.gather(p.samples, p.start(index), p.end(index));
  }

  protected cleanup(): void {}
}
