// How ranks share an epoch. The epoch's global pick order is the sampler's permutation, a pure
// function of (seed, epoch). Ranks consume it in global steps: step s of W ranks with batch size B
// takes the next B·W picks of the order, rank r the r-th B of them. After k steps, exactly the
// first k·B·W picks of the order are consumed whatever W was — which is what makes resume exact and
// the world size elastic: a new world re-partitions the rest, `order[position:]`, the same way.
//
// The rest R = order.length − position cuts into W equal shares of m picks:
// - 'pad' (like PyTorch's DistributedSampler): m = ⌈R / W⌉, the rest extended by wrapping around to
//   the start of the epoch's order, so every pick is delivered at least once. In a fresh epoch (R = n)
//   the i-th pick of the order comes ⌊m·W / n⌋ times, once more when i < m·W mod n: once or twice
//   when n ≥ W, but up to ⌈W / n⌉ times when n < W;
// - 'drop': m = ⌊R / W⌋, the last R − m·W picks of the order are not delivered this epoch, so every
//   pick is delivered at most once.
// Rank shares of m = S·B + t picks: S full steps of B, then one tail step of t < B per rank
// (dropLast drops it). Each rank therefore has the same number of batches.

import { invalidOption } from '../errors.js';

export type ShardMode = 'pad' | 'drop';

export interface ShardSpec {
  readonly rank: number;
  readonly worldSize: number;
  readonly batchSize: number;
  /** Picks of the order consumed before this segment (0 for a fresh epoch). */
  readonly position: number;
  readonly shards: ShardMode;
}

/** Picks per rank of the segment that starts at `position` of an order of `total` picks. */
export function sharePicks(total: number, spec: Pick<ShardSpec, 'worldSize' | 'position' | 'shards'>): number {
  const rest = total - spec.position;
  return spec.shards === 'pad' ? Math.ceil(rest / spec.worldSize) : Math.floor(rest / spec.worldSize);
}

/** This rank's picks of the segment, in the order its batches take them. */
export function shardPicks(order: Uint32Array, spec: ShardSpec): Uint32Array {
  const { rank, worldSize: w, batchSize: b, position } = spec;
  if (position < 0 || position > order.length) throw invalidOption('resume.position', `an integer in [0, ${order.length}]`, position);
  if (w === 1 && position === 0) return order;
  const rest = order.length - position;
  const m = sharePicks(order.length, spec);
  const out = new Uint32Array(m);
  if (rest === 0) return out;
  const full = Math.floor(m / b);
  const tail = m - full * b;
  // Index into the rest; 'pad' wraps around to the start of the epoch's order (m·w may exceed the
  // rest; for 'drop' it never does), so a resumed segment pads exactly as the uninterrupted one.
  const at = (i: number) => order[(position + i) % order.length]!;
  let o = 0;
  for (let s = 0; s < full; s++) {
    const base = s * b * w + rank * b;
    for (let i = 0; i < b; i++) out[o++] = at(base + i);
  }
  const base = full * b * w + rank * tail;
  for (let i = 0; i < tail; i++) out[o++] = at(base + i);
  return out;
}

/**
 * Picks of the order consumed by `batches` delivered batches of every rank (a whole number of
 * global steps), counted from the segment's start.
 */
export function consumedPicks(total: number, spec: ShardSpec, batches: number): number {
  const m = sharePicks(total, spec);
  const full = Math.floor(m / spec.batchSize);
  const steps = Math.min(batches, full);
  const tail = batches > full ? m - full * spec.batchSize : 0;
  return Math.min(total - spec.position, (steps * spec.batchSize + tail) * spec.worldSize);
}
