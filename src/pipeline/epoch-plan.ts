// Internal: not exported from the package entry.
// One epoch's plan: its picks, the sample id of each pick, and how they cut into batches.
// The rule: batch b holds picks [b·batchSize, min((b+1)·batchSize, picks)), and with `dropLast` a
// short tail is not a batch — unless the plan has `bounds` (token-budget batches, whose sizes vary):
// then batch b holds picks [bounds[b], bounds[b+1]), and batchSize is only their upper bound.
import type { PackPlan } from '../sampler/pack-plan.js';

export function countBatches(picks: number, batchSize: number, dropLast: boolean): number {
  return dropLast ? Math.floor(picks / batchSize) : Math.ceil(picks / batchSize);
}

/** A packed epoch's batches (sequence packing): batch b is windows [windowStart[b], + windowCount[b]) of `plan`. */
export interface Packing {
  readonly plan: PackPlan;
  readonly windowStart: Uint32Array;
  readonly windowCount: Uint32Array;
  readonly contextLength: number;
}

export class EpochPlan {
  readonly epoch: number;
  readonly picks: Uint32Array;
  /** Sample id of each pick: floor(pick / augment). */
  readonly samples: Uint32Array;
  /** Rows per batch, or (with `bounds`) the most rows a batch may have. */
  readonly batchSize: number;
  readonly batches: number;
  /** Where each batch starts in `picks`, and the end of the last (batches + 1 entries); undefined: fixed-size batches. */
  readonly bounds: Uint32Array | undefined;
  /** Sequence packing: which context windows each batch is. */
  readonly packing: Packing | undefined;

  constructor(epoch: number, picks: Uint32Array, augment: number, batchSize: number, dropLast: boolean, bounds?: Uint32Array, packing?: Packing) {
    this.packing = packing;
    this.epoch = epoch;
    this.picks = picks;
    if (augment <= 1) {
      this.samples = picks;
    } else {
      this.samples = new Uint32Array(picks.length);
      for (let i = 0; i < picks.length; i++) this.samples[i] = Math.floor(picks[i]! / augment);
    }
    this.batchSize = batchSize;
    this.bounds = bounds;
    this.batches = bounds !== undefined ? bounds.length - 1 : countBatches(picks.length, batchSize, dropLast);
  }

  start(b: number): number {
    return this.bounds !== undefined ? this.bounds[b]! : b * this.batchSize;
  }

  end(b: number): number {
    return this.bounds !== undefined ? this.bounds[b + 1]! : Math.min((b + 1) * this.batchSize, this.picks.length);
  }
}
