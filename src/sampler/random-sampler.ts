// A fresh uniform shuffle every epoch, a pure function of (seed, epoch): xoshiro256++ seeded
// through SplitMix64 with `seed + epoch` (mod 2^64), permuting 0 … length−1 with rand's forward
// Fisher–Yates — the scheme of flodl's RandomSampler, so the same seed gives the same order.

import { availableParallelism } from 'node:os';
import { OrderAhead, ORDER_AHEAD_MIN, ORDER_AHEAD_MIN_CORES } from './order-ahead.js';
import { type U64, epochPermutation, toU64 } from './rng.js';
import type { Sampler } from './sampler.js';

export class RandomSampler implements Sampler {
  readonly length: number;
  readonly #seed: U64;

  constructor(length: number, seed: U64 | number | bigint = 42) {
    this.length = length;
    this.#seed = typeof seed === 'object' ? seed : toU64(seed);
  }

  #ahead: OrderAhead | undefined;

  /**
   * Compute each next epoch's order on a helper thread while the current epoch runs (the loader's
   * sampler does, for ORDER_AHEAD_MIN picks or more on a machine with ORDER_AHEAD_MIN_CORES cores or
   * more). Same orders; `close()` stops the helper.
   */
  planAhead(): this {
    if (this.length >= ORDER_AHEAD_MIN && availableParallelism() >= ORDER_AHEAD_MIN_CORES) this.#ahead ??= new OrderAhead(this.#seed, this.length);
    return this;
  }

  indices(epoch: number): Uint32Array {
    return this.#ahead !== undefined ? this.#ahead.take(epoch) : epochPermutation(this.#seed, epoch, this.length);
  }

  /** Stop the helper thread; resolves once it has exited. Step 10 of NOTE [Loader shutdown] (loader.ts). */
  async close(): Promise<void> {
    const ahead = this.#ahead;
    this.#ahead = undefined;
    await ahead?.close();
  }
}
