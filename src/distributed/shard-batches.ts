// How ranks share an epoch of token-budget batches (whose sizes vary). The epoch's batch list is a
// pure function of (seed, epoch) (sampler/token-batches.ts); ranks consume it in global steps of one
// batch each: step s of W ranks takes the next W batches, rank r the r-th. After k steps the first
// k·W batches are consumed whatever W was, so a resume (at a batch boundary, counted in picks) and
// a new world size re-partition the rest exactly as shard.ts does for fixed batches.
//
// The rest of R batches cuts into W equal shares of m batches, so every rank has as many:
// - 'pad': m = ⌈R / W⌉, the rest extended by wrapping around to the epoch's first batches (some
//   samples come twice);
// - 'drop': m = ⌊R / W⌋, the last R − m·W batches of the list are not delivered this epoch, so no
//   sample comes twice (and with W = 1, or R divisible by W, each comes exactly once).

import { resumeMismatchError } from '../errors.js';
import type { ShardMode } from './shard.js';
import type { BatchList } from '../sampler/token-batches.js';

export interface BatchShare {
  readonly picks: Uint32Array;
  readonly bounds: Uint32Array;
  /** Index of the first batch of the segment in the list. */
  readonly first: number;
}

/** The batch that starts at pick `position` of the list; a position inside a batch is refused. */
export function batchAt(list: BatchList, position: number, epoch: number): number {
  const b = list.bounds;
  let lo = 0;
  let hi = b.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (b[mid]! < position) lo = mid + 1;
    else hi = mid;
  }
  if (b[lo] !== position) {
    throw resumeMismatchError(
      `\`resume.position\` ${position} falls inside a token-budget batch of epoch ${epoch}: the state was saved with other batchTokens, bucketWindow, batchSize or lengths. Resume with those, or from the start of an epoch`,
    );
  }
  return lo;
}

export function shareBatches(total: number, first: number, worldSize: number, shards: ShardMode): number {
  const rest = total - first;
  return shards === 'pad' ? Math.ceil(rest / worldSize) : Math.floor(rest / worldSize);
}

/** Rank `rank`'s batches of the segment that starts at batch `first`. */
export function shardBatches(list: BatchList, first: number, rank: number, worldSize: number, shards: ShardMode): BatchShare {
  const total = list.bounds.length - 1;
  const m = shareBatches(total, first, worldSize, shards);
  const ids: number[] = [];
  let rows = 0;
  for (let s = 0; s < m; s++) {
    const g = (first + s * worldSize + rank) % total;
    ids.push(g);
    rows += list.bounds[g + 1]! - list.bounds[g]!;
  }
  const picks = new Uint32Array(rows);
  const bounds = new Uint32Array(m + 1);
  let o = 0;
  ids.forEach((g, i) => {
    picks.set(list.picks.subarray(list.bounds[g]!, list.bounds[g + 1]!), o);
    o += list.bounds[g + 1]! - list.bounds[g]!;
    bounds[i + 1] = o;
  });
  return { picks, bounds, first };
}

/** Picks of the list consumed once every rank has taken `batches` batches of the segment from `first`. */
export function consumedBatchPicks(list: BatchList, first: number, worldSize: number, batches: number): number {
  const total = list.bounds.length - 1;
  return list.bounds[Math.min(total, first + batches * worldSize)]!;
}
