// Internal: not exported from the package entry.
// Resident mode: the whole dataset is held on the device; each batch is one gather per column over
// the epoch's sample ids. Nothing is read ahead, because a gather is cheaper than a hand-off.

import type { DeviceBatch, ResidentStore } from '../device/device.js';
import { EpochRun } from './epoch-run.js';

export class ResidentRun extends EpochRun {
  #store: ResidentStore | undefined;

  bind(store: ResidentStore): this {
    this.#store = store;
    store.prepare(this.plan.samples);
    return this;
  }

  protected produce(index: number): DeviceBatch {
    const p = this.plan;
    return this.#store!.gather(p.samples, p.start(index), p.end(index));
  }

  protected cleanup(): void {}
}
