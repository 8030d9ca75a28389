// Picks and their keys. An epoch schedules `n × augment` picks; pick p is view `p mod augment` of
// sample `floor(p / augment)`. The rule: a transform takes its randomness only from `key.rng()`,
// so the same (seed, epoch, sample, repeat) always gives the same view, in any order, on any device.

import { type U64, Rng, addU64, mulU64, shrU64, toU64, xorU64 } from './rng.js';

// Frozen constants of flodl's PickKey::rng (cross-version reproducibility).
const K_SEED = toU64(0x9e3779b97f4a7c15n);
const K_EPOCH = toU64(0xbf58476d1ce4e5b9n);
const K_SAMPLE = toU64(0x94d049bb133111ebn);
const K_REPEAT = toU64(0xd6e8feb86659fd93n);

/**
 * The keys of a run of picks, as plain data (it crosses to reader workers): row r is
 * `PickKey.fromPick(picks[r], augment, epoch, seed)`.
 */
export interface PickKeys {
  readonly picks: Uint32Array;
  readonly augment: number;
  readonly epoch: number;
  readonly seed: U64;
}

/** Row r's key of `keys`. */
export function pickKeyAt(keys: PickKeys, r: number): PickKey {
  return PickKey.fromPick(keys.picks[r]!, keys.augment, keys.epoch, keys.seed);
}

export class PickKey {
  /** Dataset sample id. */
  readonly sample: number;
  /** Which of the `augment` views of the sample this is, 0-based. */
  readonly repeat: number;
  readonly epoch: number;
  /** The loader's seed. */
  readonly seed: U64;

  constructor(sample: number, repeat: number, epoch: number, seed: U64 | number | bigint) {
    this.sample = sample;
    this.repeat = repeat;
    this.epoch = epoch;
    this.seed = typeof seed === 'object' ? seed : toU64(seed);
  }

  /** Decode a pick: sample = floor(pick / k), repeat = pick mod k (k < 1 counts as 1). */
  static fromPick(pick: number, augment: number, epoch: number, seed: U64 | number | bigint): PickKey {
    const k = Math.max(augment, 1);
    return new PickKey(Math.floor(pick / k), pick % k, epoch, seed);
  }

  /**
   * A generator seeded by this key alone:
   * h = seed·0x9E3779B97F4A7C15 + epoch·0xBF58476D1CE4E5B9; h ^= sample·0x94D049BB133111EB;
   * h ^= repeat·0xD6E8FEB86659FD93; h ^= h >> 33; then xoshiro256++ seeded through SplitMix64 with h.
   */
  rng(): Rng {
    let h = addU64(mulU64(this.seed, K_SEED), mulU64(toU64(this.epoch), K_EPOCH));
    h = xorU64(h, mulU64(toU64(this.sample), K_SAMPLE));
    h = xorU64(h, mulU64(toU64(this.repeat), K_REPEAT));
    h = xorU64(h, shrU64(h, 33));
    return Rng.seed(h);
  }
}
