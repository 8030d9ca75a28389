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
//
// NOTE [Blocks per node]: ranks take each global step's B·W picks in slices of B, rank by rank
// (distributed/shard.ts), and launchers number ranks node by node; so with one stream, every node
// reads from every block of the window. With `streams` G > 1 (the loader sets G = the number of
// nodes and `chunk` C = B × ranks per node), the permuted blocks are dealt round-robin into G
// streams, each cut into windows and shuffled as above, and the order takes C picks from stream 0,
// C from stream 1, …, C from stream G−1, again and again (a stream that ran out is passed over):
// step s's picks for node g then come from stream g, so each node reads only its own blocks, a
// G-th of the dataset. The order is still a pure function of (seed, epoch, blocks, window, within,
// G, C); a resume onto another world keeps the saved G and C for the epoch it continues.

import { type U64, Rng, deriveSeed, epochPermutation } from './rng.js';
import type { Sampler } from './sampler.js';

/** How the block shuffle cuts and mixes, once the blocks are known. */
export interface BlockMixing {
  /** Blocks (in permuted order) whose picks are shuffled together. */
  readonly window: number;
  /** Shuffle each window's picks together (true) or keep each block's own order (false: shard-only). */
  readonly within: boolean;
}

/** How the order is dealt to nodes (NOTE [Blocks per node]): `streams` of blocks, interleaved `chunk` picks at a time. */
export interface BlockLayout {
  readonly streams: number;
  readonly chunk: number;
}

export class BlockSampler implements Sampler {
  readonly length: number;
  /** Blocks in the pick space: block b is picks [bounds[b], bounds[b + 1]); empty blocks removed. */
  readonly #bounds: Uint32Array;
  readonly #seed: U64;
  readonly #mixing: BlockMixing;
  readonly #layout: BlockLayout;
  /** A resumed epoch's layout, when the state that resumes it was saved with another. */
  #resumed: { readonly epoch: number; readonly layout: BlockLayout } | undefined;

  /**
   * `starts`: each block's first sample, ascending, in [0, samples] (checked by the caller); repeated
   * starts and one at `samples` (empty blocks, e.g. an empty shard) are dropped, and a block starts
   * at 0 whatever `starts[0]` says.
   */
  constructor(starts: ArrayLike<number>, samples: number, augment: number, seed: U64, mixing: BlockMixing, layout: BlockLayout = { streams: 1, chunk: 1 }) {
    this.length = samples * augment;
    this.#bounds = pickBounds(starts, samples, augment);
    this.#seed = seed;
    this.#mixing = mixing;
    this.#layout = layout;
  }

  /** Epoch `epoch` continues a state saved with `layout` (NOTE [Blocks per node]). */
  resumeWith(epoch: number, layout: BlockLayout): void {
    this.#resumed = { epoch, layout };
  }

  /** The layout of epoch `epoch`'s order. */
  layoutOf(epoch: number): BlockLayout {
    return this.#resumed?.epoch === epoch ? this.#resumed.layout : this.#layout;
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
    const blocks = bounds.length - 1;
    const { streams, chunk } = this.layoutOf(epoch);
    // NOTE [Block order]: the block permutation, then windows of `window` blocks.
    const perm = epochPermutation(deriveSeed(this.#seed, 1), epoch, blocks);
    if (streams <= 1 || blocks < 2) return this.#stream(perm, epoch, -1);
    // NOTE [Blocks per node]: the blocks dealt into streams, their picks interleaved by chunks.
    const parts = Array.from({ length: Math.min(streams, blocks) }, (_, g) => this.#stream(perm.filter((_, k) => k % streams === g), epoch, g));
    const out = new Uint32Array(this.length);
    const at = parts.map(() => 0);
    let o = 0;
    while (o < out.length) {
      for (let g = 0; g < parts.length; g++) {
        const n = Math.min(chunk, parts[g]!.length - at[g]!);
        out.set(parts[g]!.subarray(at[g]!, at[g]! + n), o);
        at[g]! += n;
        o += n;
      }
    }
    return out;
  }

  /** The picks of `perm`'s blocks in windows (stream `g`'s own shuffles; −1: the one stream). */
  #stream(perm: ArrayLike<number>, epoch: number, g: number): Uint32Array {
    const bounds = this.#bounds;
    const { window, within } = this.#mixing;
    let total = 0;
    for (let k = 0; k < perm.length; k++) total += bounds[perm[k]! + 1]! - bounds[perm[k]!]!;
    const out = new Uint32Array(total);
    let at = 0;
    for (let w = 0; w * window < perm.length; w++) {
      const from = at;
      for (let k = w * window; k < Math.min(perm.length, (w + 1) * window); k++) {
        const b = perm[k]!;
        for (let p = bounds[b]!; p < bounds[b + 1]!; p++) out[at++] = p;
      }
      if (within) Rng.seed(g < 0 ? deriveSeed(this.#seed, 2, epoch, w) : deriveSeed(this.#seed, 3, epoch, g, w)).shuffle(out.subarray(from, at));
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
