// A fresh uniform shuffle every epoch, a pure function of (seed, epoch): xoshiro256++ seeded
// through SplitMix64 with `seed + epoch` (mod 2^64), permuting 0 … length−1 with rand's forward
// Fisher–Yates — the scheme of flodl's RandomSampler, so the same seed gives the same order.

import { type U64, epochPermutation, toU64 } from './rng.js';
import type { Sampler } from './sampler.js';

export class RandomSampler implements Sampler {
  readonly length: number;
  readonly #seed: U64;

  constructor(length: number, seed: U64 | number | bigint = 42) {
    this.length = length;
    this.#seed = typeof seed === 'object' ? seed : toU64(seed);
  }

  indices(epoch: number): Uint32Array {
    return epochPermutation(this.#seed, epoch, this.length);
  }
}
