// Internal: not exported from the package entry.
// The block shuffle (`shuffle: 'block'` or `{ block, window, within }`): an order that reads a few
// blocks (a dataset's parts — tar shards, Arrow record batches, Parquet row groups — or runs of
// `block` consecutive samples) at a time, for stores where a read is a whole block and costly. The
// rule: the order is a pure function of (seed, epoch, block boundaries, window, within), computed
// whole per epoch like the random sampler's, so resume and elastic re-sharding (distributed/shard.ts)
// work on it unchanged; nothing but the boundaries is stored.
//
// NOTE [Block order]
// - Blocks are runs of picks: block b holds the picks of its samples, [start_b·augment,
//   end_b·augment), so augmented views of one sample stay in its block, as the random sampler's
//   pick space [0, n·augment) does (sample = ⌊pick / augment⌋).
// - Each epoch permutes the blocks (its own stream, seeded from (seed, 1) and the epoch as the
//   random sampler seeds its one), then cuts the permuted list into windows of `window` consecutive
//   blocks (the last may hold fewer) and lists each window's picks block after block.
// - `within` (default): each window's picks are shuffled together (its own stream, seeded from
//   (seed, 2, epoch, window index)), so consecutive picks come from any of the window's blocks and
//   a node reads at most `window` blocks at a time. Without it (shard-only), each block's picks keep
//   their own order: one block at a time, the cheapest reads and the weakest mixing.
// - A window as wide as the dataset is a uniform shuffle of every pick (another stream than
//   `shuffle: true`'s, so another order).

import { type U64, Rng, deriveSeed, epochPermutation } from './rng.js';
import type { Sampler } from './sampler.js';

/** How the block shuffle cuts and mixes, once the blocks are known. */
export interface BlockMixing {
  /** Blocks (in permuted order) whose picks are shuffled together. */
  readonly window: number;
  /** Shuffle each window's picks together (true) or keep each block's own order (false: shard-only). */
  readonly within: boolean;
}

export class BlockSampler implements Sampler {
  readonly length: number;
  /** Blocks in the pick space: block b is picks [bounds[b], bounds[b + 1]); empty blocks removed. */
  readonly #bounds: Uint32Array;
  readonly #seed: U64;
  readonly #mixing: BlockMixing;

  /**
   * `starts`: each block's first sample, ascending, in [0, samples] (checked by the caller); repeated
   * starts and one at `samples` (empty blocks, e.g. an empty shard) are dropped, and a block starts
   * at 0 whatever `starts[0]` says.
   */
  constructor(starts: ArrayLike<number>, samples: number, augment: number, seed: U64, mixing: BlockMixing) {
    this.length = samples * augment;
    this.#bounds = pickBounds(starts, samples, augment);
    this.#seed = seed;
    this.#mixing = mixing;
  }

  /** Blocks after empty ones are dropped. */
  get blocks(): number {
    return this.#bounds.length - 1;
  }

  /** A fingerprint of the block boundaries (FNV-1a over them, 8 hex digits), for resume to match. */
  get boundsHash(): string {
    let h = 0x811c9dc5;
    for (const v of this.#bounds) {
      for (let k = 0; k < 32; k += 8) h = Math.imul(h ^ ((v >>> k) & 0xff), 0x01000193);
    }
    return (h >>> 0).toString(16).padStart(8, '0');
  }

  indices(epoch: number): Uint32Array {
    const bounds = this.#bounds;
    const { window, within } = this.#mixing;
    const blocks = bounds.length - 1;
    // NOTE [Block order]: the block permutation, then windows of `window` blocks.
    const perm = epochPermutation(deriveSeed(this.#seed, 1), epoch, blocks);
    const out = new Uint32Array(this.length);
    let at = 0;
    for (let w = 0; w * window < blocks; w++) {
      const from = at;
      for (let k = w * window; k < Math.min(blocks, (w + 1) * window); k++) {
        const b = perm[k]!;
        for (let p = bounds[b]!; p < bounds[b + 1]!; p++) out[at++] = p;
      }
      if (within) Rng.seed(deriveSeed(this.#seed, 2, epoch, w)).shuffle(out.subarray(from, at));
    }
    return out;
  }
}

/** Block starts (samples) → block bounds in the pick space, from 0 to the total, empty blocks dropped. */
function pickBounds(starts: ArrayLike<number>, samples: number, augment: number): Uint32Array {
  const total = samples * augment;
  const bounds = [0];
  for (let b = 0; b < starts.length; b++) {
    const at = starts[b]! * augment;
    if (at > bounds[bounds.length - 1]! && at < total) bounds.push(at);
  }
  bounds.push(total);
  return Uint32Array.from(bounds);
}

/** Starts of fixed blocks of `size` consecutive samples over `samples` samples (the last may be shorter). */
export function fixedBlockStarts(samples: number, size: number): Uint32Array {
  const out = new Uint32Array(Math.max(1, Math.ceil(samples / size)));
  for (let b = 0; b < out.length; b++) out[b] = b * size;
  return out;
}
