// Internal: not exported from the package entry.
// Resident mode: the whole dataset is held on the device; each batch is one gather per column over
// the epoch's sample ids. Nothing is read ahead, because a gather is cheaper than a hand-off.
// The rule: samples whose read failed while the store was built are known by id, and a batch
// holding one fails with that sample's cause, as the same batch would while streaming.

import type { DeviceBatch, ResidentStore } from '../device/device.js';
import { EpochRun } from './epoch-run.js';

export class ResidentRun extends EpochRun {
  #store: ResidentStore | undefined;
  #failed: ReadonlyMap<number, unknown> = new Map();

  /** `failed`: sample id → why its read failed when the store was built (its rows are zeros). */
  bind(store: ResidentStore, failed?: ReadonlyMap<number, unknown>): this {
    this.#store = store;
    if (failed !== undefined) this.#failed = failed;
    store.prepare(this.plan.samples);
    return this;
  }

  protected produce(index: number): DeviceBatch {
    const p = this.plan;
    const start = p.start(index);
    const end = p.end(index);
    if (this.#failed.size > 0) {
      for (let i = start; i < end; i++) {
        const id = p.samples[i]!;
        if (this.#failed.has(id)) throw this.#failed.get(id);
      }
    }
    return this.#store!.gather(p.samples, start, end);
  }

  protected cleanup(): void {}
}
