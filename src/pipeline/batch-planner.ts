// Internal: not exported from the package entry.
// How an epoch's order becomes this rank's batches, and how far a run got in that order: fixed
// batches of batchSize (distributed/shard.ts) or token-budget batches (sampler/token-batches.ts,
// distributed/shard-batches.ts). The rule: a position is always picks of the epoch's global order
// consumed by all ranks together, so `loader.state()` and resume mean the same in both.

import { LoaderError } from '../errors.js';
import type { World } from '../distributed/launch.js';
import { type ShardMode, consumedPicks, sharePicks, shardPicks } from '../distributed/shard.js';
import { batchAt, consumedBatchPicks, shardBatches, shareBatches } from '../distributed/shard-batches.js';
import { type BatchList, type TokenBudget, tokenBatches } from '../sampler/token-batches.js';
import { EpochPlan, countBatches } from './epoch-plan.js';

/** This rank's part of an epoch from a position on. */
export interface Segment {
  readonly plan: EpochPlan;
  /** Where the segment starts in the epoch's order, and the order's length. */
  readonly position: number;
  readonly total: number;
  /** Position in the epoch's order once this rank has taken `next` batches (and every rank as many). */
  consumed(next: number): number;
}

export interface BatchPlanner {
  segment(epoch: number, order: Uint32Array, position: number): Segment;
  /** This rank's batch count of the segment of `epoch` from `position`. */
  batches(epoch: number, position: number): number;
  /** What a resume must match mid-epoch (token budgets), for `loader.state()`. */
  readonly settings: TokenSettings | undefined;
}

interface Common {
  readonly world: World;
  readonly shards: ShardMode;
  readonly augment: number;
  readonly batchSize: number;
}

export class FixedPlanner implements BatchPlanner {
  readonly settings = undefined;
  constructor(
    readonly common: Common,
    readonly dropLast: boolean,
    readonly picks: number,
  ) {}

  #spec(position: number) {
    const { world, batchSize, shards } = this.common;
    return { rank: world.rank, worldSize: world.worldSize, batchSize, position, shards };
  }

  segment(epoch: number, order: Uint32Array, position: number): Segment {
    const spec = this.#spec(position);
    const plan = new EpochPlan(epoch, shardPicks(order, spec), this.common.augment, spec.batchSize, this.dropLast);
    return { plan, position, total: order.length, consumed: (next) => position + consumedPicks(order.length, spec, next) };
  }

  batches(_epoch: number, position: number): number {
    return countBatches(sharePicks(this.picks, this.#spec(position)), this.common.batchSize, this.dropLast);
  }
}

/** The knobs that cut token-budget batches: a resume mid-epoch must keep them (`loader.state().tokens`). */
export interface TokenSettings {
  readonly batchTokens: number;
  readonly bucketWindow: number;
  readonly batchSize: number;
}

export class TokenPlanner implements BatchPlanner {
  readonly settings: TokenSettings;
  #cached: { epoch: number; list: BatchList } | undefined;

  constructor(
    readonly common: Common,
    readonly budget: TokenBudget,
    /** The epoch's global order (the sampler's picks), for batch counts asked before the epoch runs. */
    readonly orderOf: (epoch: number) => Uint32Array,
  ) {
    this.settings = { batchTokens: budget.batchTokens, bucketWindow: budget.window, batchSize: budget.maxRows };
  }

  #list(epoch: number, order?: Uint32Array): BatchList {
    if (this.#cached?.epoch !== epoch) this.#cached = { epoch, list: tokenBatches(order ?? this.orderOf(epoch), epoch, this.budget) };
    return this.#cached.list;
  }

  segment(epoch: number, order: Uint32Array, position: number): Segment {
    const list = this.#list(epoch, order);
    const first = batchAt(list, position, epoch);
    const { world, shards, augment, batchSize } = this.common;
    const share = shardBatches(list, first, world.rank, world.worldSize, shards);
    const plan = new EpochPlan(epoch, share.picks, augment, batchSize, false, share.bounds);
    return { plan, position, total: order.length, consumed: (next) => consumedBatchPicks(list, first, world.worldSize, next) };
  }

  batches(epoch: number, position: number): number {
    const list = this.#list(epoch);
    return shareBatches(list.bounds.length - 1, batchAt(list, position, epoch), this.common.world.worldSize, this.common.shards);
  }

  /** Refuse a resume mid-epoch whose cut differs from the saved one's (its position would mean other batches). */
  static checkResume(saved: unknown, position: number, now: TokenSettings): void {
    if (position === 0) return;
    const s = (saved ?? {}) as Partial<TokenSettings>;
    for (const key of ['batchTokens', 'bucketWindow', 'batchSize'] as const) {
      if (s[key] !== now[key]) {
        throw new LoaderError(
          'ERR_RESUME_MISMATCH',
          `\`resume\`: the state was saved mid-epoch with ${key} ${String(s[key])} under token budgets, but this loader has ${now[key]}; other ${key} cut other batches. Resume with ${key}: ${String(s[key])}, or from an epoch's start`,
        );
      }
    }
  }
}
