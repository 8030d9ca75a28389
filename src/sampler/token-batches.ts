// Internal: not exported from the package entry.
// Token-budget batches (option `batchTokens`): an epoch's order cut into batches of at most
// `batchTokens` tokens, padding counted (rows × the longest row), and at most `batchSize` rows.
// The rule: the cut is a pure function of (order, lengths, seed, epoch) — the order's windows of
// `bucketWindow` picks are each sorted by length (ties: order position), cut greedily, and their
// batches shuffled within the window — so every pick of the order is in exactly one batch, and a
// resume or another world size sees the same batches.

import { invalidOption } from '../errors.js';
import { type U64, Rng, addU64, mulU64, toU64, xorU64 } from './rng.js';

export interface TokenBudget {
  readonly batchTokens: number;
  /** Rows per batch at most (the loader's batchSize: what staging is sized for). */
  readonly maxRows: number;
  /** Picks per bucketing window. */
  readonly window: number;
  readonly seed: U64;
  readonly shuffle: boolean;
  readonly augment: number;
  /** Token count of each sample. */
  readonly lengths: Uint32Array;
}

/** An epoch's batches: batch b is picks[bounds[b], bounds[b + 1]). */
export interface BatchList {
  readonly picks: Uint32Array;
  readonly bounds: Uint32Array;
}

/** Default `bucketWindow`: about fifty batches of rows — wide enough for like lengths to meet, narrow enough to keep the epoch mixed. */
export const BUCKET_WINDOW_BATCHES = 50;

const K = toU64(0xbf58476d1ce4e5b9n);

export function tokenBatches(order: Uint32Array, epoch: number, b: TokenBudget): BatchList {
  const n = order.length;
  const picks = new Uint32Array(n);
  const bounds: number[] = [0];
  const len = (pick: number) => b.lengths[b.augment > 1 ? Math.floor(pick / b.augment) : pick]!;
  for (let start = 0, w = 0; start < n; start += b.window, w++) {
    const end = Math.min(n, start + b.window);
    const idx = Array.from({ length: end - start }, (_, i) => start + i);
    idx.sort((x, y) => len(order[x]!) - len(order[y]!) || x - y);
    // Greedy over ascending lengths: each row is the longest so far, so the padded size is rows × it.
    const cuts: [number, number][] = [];
    let from = 0;
    for (let i = 0; i < idx.length; i++) {
      const l = len(order[idx[i]!]!);
      const rows = i - from + 1;
      if (rows > 1 && (rows * l > b.batchTokens || rows > b.maxRows)) {
        cuts.push([from, i]);
        from = i;
      }
    }
    cuts.push([from, idx.length]);
    if (b.shuffle) Rng.seed(addU64(mulU64(xorU64(b.seed, toU64(epoch)), K), toU64(w))).shuffle(cuts);
    let o = start;
    for (const [f, t] of cuts) {
      for (let i = f; i < t; i++) picks[o++] = order[idx[i]!]!;
      bounds.push(o);
    }
  }
  return { picks, bounds: Uint32Array.from(bounds) };
}

/** The sample lengths for `batchTokens`: from the option, else the ones the dataset declares (`declared`: its `lengths`); each checked against the budget. */
export function resolveLengths(given: unknown, declared: unknown, count: number, batchTokens: number): Uint32Array {
  const source = given ?? declared;
  if (!(source instanceof Uint32Array) && typeof source !== 'function') {
    throw invalidOption(
      'lengths',
      'a Uint32Array of token counts (one per sample) or a function i => tokens',
      source,
      'batchTokens needs each sample\'s length: pass `lengths`, or use a source that declares them (dataset.lengths)',
    );
  }
  if (source instanceof Uint32Array && source.length !== count) throw invalidOption('lengths', `${count} entries (one per sample)`, `${source.length} entries`);
  const out = source instanceof Uint32Array ? source : new Uint32Array(count);
  for (let i = 0; i < count; i++) {
    const l = source instanceof Uint32Array ? source[i]! : (source as (i: number) => unknown)(i);
    if (typeof l !== 'number' || !Number.isSafeInteger(l) || l < 0) throw invalidOption(`lengths(${i})`, 'an integer ≥ 0 (tokens of sample i)', l);
    if (l > batchTokens) {
      throw invalidOption('batchTokens', `at least the longest sample (sample ${i} has ${l} tokens)`, batchTokens, 'Raise batchTokens, or cap the samples with maxLength');
    }
    out[i] = l;
  }
  return out;
}
