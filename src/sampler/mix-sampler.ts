// Internal: not exported from the package entry.
// The pick order of a mixture (`sources.mix`): a pure function of the seed, the epoch and an anchor
// (each part's draw count at the start of one epoch, and the weights in force from which position
// of it). The rule: the proportions are exact per window — window k of a segment holds exactly the
// largest-remainder apportionment of its size among the weights — and each part draws from its own
// endless stream of shuffled epochs, so a small part repeats and a large one is sampled without
// replacement across the mixture's epochs.
//
// NOTE [Mixture order]
// - Picks use the concat layout: part p's picks are [offset_p·augment, (offset_p + n_p)·augment).
// - Part p's stream is its own epochs' permutations of its n_p·augment picks, one after another;
//   draw d of part p is permutation ⌊d / (n_p·augment)⌋ at d mod (n_p·augment). A part's "epoch and
//   offset" is that quotient and remainder.
// - A mixture epoch has `length` picks, cut into segments: one per weight change (a resume with other
//   weights or another window starts a segment at its position). A segment is cut into windows of
//   `window` picks from its start (the last may be shorter); each window's slots are apportioned by
//   largest remainder (ties to the lower part index), then shuffled (or, unshuffled, interleaved by
//   smooth weighted round-robin).
// - At the next epoch the segments collapse into one, with the latest weights: every later epoch is
//   a closed-form jump from the anchor, so any epoch's order costs one epoch of work.

import { invalidOption, resumeMismatchError, show } from '../errors.js';
import { type U64, Rng, deriveSeed as derive, epochPermutation, toU64, u64ToBigInt } from './rng.js';
import type { Sampler } from './sampler.js';

/** Weights from one position of an epoch on. */
export interface MixSegment {
  readonly from: number;
  readonly weights: readonly number[];
  readonly window: number;
}

/** A part's place in its own stream of epochs. */
export interface PartCursor {
  readonly epoch: number;
  readonly offset: number;
}

/** The mixture's place, in `loader.state().mix`: JSON-serializable. */
export interface MixState {
  /** The epoch this describes (the state's epoch). */
  readonly epoch: number;
  /** Each part's epoch and offset at the start of that epoch. */
  readonly parts: readonly PartCursor[];
  /** The weights in force in that epoch, from which pick on (the first from 0). */
  readonly segments: readonly MixSegment[];
  /** What a resume must match: the mixture's seed (decimal) and each part's picks per part epoch. */
  readonly seed: string;
  readonly sizes: readonly number[];
}

export interface MixShape {
  /** Picks per part (its length × augment). */
  readonly sizes: readonly number[];
  /** Picks per mixture epoch. */
  readonly length: number;
  readonly seed: U64;
  readonly shuffle: boolean;
}

/** Largest-remainder apportionment of `slots` among `weights` (ties: the lower index). */
export function apportion(slots: number, weights: readonly number[]): number[] {
  const total = weights.reduce((a, b) => a + b, 0);
  const quotas = weights.map((w) => (slots * w) / total);
  const counts = quotas.map((q) => Math.floor(q));
  let left = slots - counts.reduce((a, b) => a + b, 0);
  const byRemainder = quotas.map((q, i) => ({ i, r: q - Math.floor(q) })).sort((a, b) => b.r - a.r || a.i - b.i);
  for (let k = 0; left > 0; k = (k + 1) % byRemainder.length, left--) counts[byRemainder[k]!.i]!++;
  return counts;
}

/** Draws of each part over `[from, to)` of a segment cut into windows of `window` from `from`. */
function segmentCounts(from: number, to: number, seg: MixSegment): number[] {
  const span = to - from;
  const full = Math.floor(span / seg.window);
  const tail = span - full * seg.window;
  const a = apportion(seg.window, seg.weights);
  const b = apportion(tail, seg.weights);
  return a.map((c, p) => c * full + b[p]!);
}

/** Draws of each part in one epoch of `segments`. */
function epochCounts(length: number, segments: readonly MixSegment[]): number[] {
  const out = segments[0]!.weights.map(() => 0);
  segments.forEach((s, i) => {
    const to = i + 1 < segments.length ? segments[i + 1]!.from : length;
    segmentCounts(s.from, to, s).forEach((c, p) => (out[p]! += c));
  });
  return out;
}

export class MixSampler implements Sampler {
  readonly length: number;
  readonly #shape: MixShape;
  readonly #offsets: number[];
  /** The anchor: draws of each part before epoch `#epoch0`, and that epoch's segments. */
  readonly #epoch0: number;
  readonly #draws0: readonly number[];
  readonly #segments0: readonly MixSegment[];

  constructor(shape: MixShape, anchor: { epoch: number; draws: readonly number[]; segments: readonly MixSegment[] }) {
    this.#shape = shape;
    this.length = shape.length;
    this.#offsets = [0];
    for (const n of shape.sizes) this.#offsets.push(this.#offsets[this.#offsets.length - 1]! + n);
    this.#epoch0 = anchor.epoch;
    this.#draws0 = anchor.draws;
    this.#segments0 = anchor.segments;
  }

  /** A fresh mixture: epoch 0, every part at its start. */
  static fresh(shape: MixShape, weights: readonly number[], window: number): MixSampler {
    return new MixSampler(shape, { epoch: 0, draws: shape.sizes.map(() => 0), segments: [{ from: 0, weights, window }] });
  }

  /**
   * Continue a saved mixture at (epoch, position) with `weights` and `window`: the saved anchor when
   * they are those in force there, else a new segment from `position` on (they apply from the
   * resume point; the picks before it stay as they were drawn).
   */
  static resume(shape: MixShape, saved: unknown, epoch: number, position: number, weights: readonly number[], window: number): MixSampler {
    const state = checkMixState(saved, shape, epoch);
    const draws = state.parts.map((c, p) => c.epoch * shape.sizes[p]! + c.offset);
    const kept = state.segments.filter((s) => s.from < position || (position === 0 && s.from === 0));
    const last = kept[kept.length - 1]!;
    const same = last.window === window && last.weights.every((w, p) => w === weights[p]);
    const segments = same ? kept : position === 0 ? [{ from: 0, weights, window }] : [...kept, { from: position, weights, window }];
    return new MixSampler(shape, { epoch: state.epoch, draws, segments });
  }

  /** Draws of each part before `epoch`, and that epoch's segments. */
  #start(epoch: number): { draws: number[]; segments: readonly MixSegment[] } {
    if (epoch < this.#epoch0) {
      throw invalidOption('epoch', `≥ ${this.#epoch0}: this mixture was resumed at epoch ${this.#epoch0}, and its earlier epochs were drawn with other weights`, epoch);
    }
    if (epoch === this.#epoch0) return { draws: this.#draws0.slice(), segments: this.#segments0 };
    const first = epochCounts(this.length, this.#segments0);
    const last = this.#segments0[this.#segments0.length - 1]!;
    const steady = epochCounts(this.length, [{ ...last, from: 0 }]);
    const k = epoch - this.#epoch0 - 1;
    return { draws: this.#draws0.map((d, p) => d + first[p]! + k * steady[p]!), segments: [{ ...last, from: 0 }] };
  }

  /** The mixture's place at the start of `epoch` (for `loader.state()`). */
  stateFor(epoch: number): MixState {
    const { draws, segments } = this.#start(epoch);
    const sizes = this.#shape.sizes;
    return {
      epoch,
      parts: draws.map((d, p) => ({ epoch: Math.floor(d / sizes[p]!), offset: d % sizes[p]! })),
      segments: segments.map((s) => ({ from: s.from, weights: [...s.weights], window: s.window })),
      seed: u64ToBigInt(this.#shape.seed).toString(),
      sizes: [...sizes],
    };
  }

  /** The part each pick of `epoch` comes from (for tests and for counting proportions). */
  partsOf(epoch: number): Uint8Array | Uint16Array {
    const { segments } = this.#start(epoch);
    const out = this.#shape.sizes.length <= 256 ? new Uint8Array(this.length) : new Uint16Array(this.length);
    this.#slots(epoch, segments, (j, p) => (out[j] = p));
    return out;
  }

  indices(epoch: number): Uint32Array {
    const { draws, segments } = this.#start(epoch);
    const { sizes, seed, shuffle } = this.#shape;
    const out = new Uint32Array(this.length);
    const perms: { q: number; perm: Uint32Array | undefined }[] = sizes.map(() => ({ q: -1, perm: undefined }));
    this.#slots(epoch, segments, (j, p) => {
      const n = sizes[p]!;
      const d = draws[p]!++;
      const q = Math.floor(d / n);
      const c = perms[p]!;
      if (c.q !== q) {
        c.q = q;
        c.perm = shuffle ? epochPermutation(derive(seed, 1, p), q, n) : undefined;
      }
      const local = d - q * n;
      out[j] = this.#offsets[p]! + (c.perm === undefined ? local : c.perm[local]!);
    });
    return out;
  }

  /** Call `put(j, part)` for every pick j of the epoch, in order. */
  #slots(epoch: number, segments: readonly MixSegment[], put: (j: number, part: number) => void): void {
    const seed = this.#shape.seed;
    segments.forEach((s, i) => {
      const to = i + 1 < segments.length ? segments[i + 1]!.from : this.length;
      for (let start = s.from, k = 0; start < to; start += s.window, k++) {
        const size = Math.min(s.window, to - start);
        const slots = windowSlots(apportion(size, s.weights), this.#shape.shuffle ? Rng.seed(derive(seed, 2, epoch, s.from, k)) : undefined);
        for (let j = 0; j < size; j++) put(start + j, slots[j]!);
      }
    });
  }
}

/** One window's parts: `counts[p]` slots of part p, shuffled by `rng`, or spread by smooth weighted round-robin. */
function windowSlots(counts: readonly number[], rng: Rng | undefined): Uint32Array {
  const size = counts.reduce((a, b) => a + b, 0);
  const out = new Uint32Array(size);
  if (rng !== undefined) {
    let o = 0;
    counts.forEach((c, p) => out.fill(p, o, (o += c)));
    rng.shuffle(out);
    return out;
  }
  const credit = counts.map(() => 0);
  for (let j = 0; j < size; j++) {
    let best = -1;
    for (let p = 0; p < counts.length; p++) {
      credit[p]! += counts[p]!;
      if (best < 0 || credit[p]! > credit[best]!) best = p;
    }
    credit[best]! -= size;
    out[j] = best;
  }
  return out;
}

/** Weights as `sources.mix` and resume take them: finite, ≥ 0, one per part, not all 0. */
export function checkWeights(weights: readonly unknown[], where: string): number[] {
  weights.forEach((w, i) => {
    if (typeof w !== 'number' || !Number.isFinite(w) || w < 0) throw invalidOption(`${where}[${i}].weight`, 'a finite number ≥ 0', w);
  });
  if ((weights as number[]).every((w) => w === 0)) throw invalidOption(`${where}[].weight`, 'not all 0', weights, 'Give at least one part a positive weight');
  return weights as number[];
}

function checkMixState(saved: unknown, shape: MixShape, epoch: number): MixState {
  const corrupt = (what: string) =>
    resumeMismatchError(`\`resume.mix\`: ${what}. Pass the state loader.state() returned for this mixture, or start without \`resume\``);
  const s = saved as Partial<MixState> | null | undefined;
  if (s === null || typeof s !== 'object') throw corrupt(`the dataset is a mixture but the state has no mixture position (got ${show(saved)})`);
  if (s.epoch !== epoch) throw corrupt(`its epoch ${show(s.epoch)} is not the state's epoch ${epoch}`);
  const seed = u64ToBigInt(shape.seed).toString();
  if (s.seed !== seed) throw corrupt(`it was saved with the mixture seed ${show(s.seed)}, but this mixture has ${seed}; give sources.mix the same seed`);
  if (!Array.isArray(s.sizes) || s.sizes.length !== shape.sizes.length || s.sizes.some((n, p) => n !== shape.sizes[p])) {
    throw corrupt(`it was saved with parts of ${show(s.sizes)} picks, but this mixture's parts have ${show(shape.sizes)}; give sources.mix the same parts in the same order`);
  }
  const parts = s.parts;
  if (!Array.isArray(parts) || parts.length !== shape.sizes.length) {
    throw corrupt(`it has ${Array.isArray(parts) ? parts.length : show(parts)} parts but this mixture has ${shape.sizes.length}`);
  }
  parts.forEach((c: Partial<PartCursor> | null, p) => {
    const ok = c !== null && typeof c === 'object' && Number.isSafeInteger(c.epoch) && c.epoch! >= 0 && Number.isSafeInteger(c.offset) && c.offset! >= 0 && c.offset! < shape.sizes[p]!;
    if (!ok) throw corrupt(`part ${p}'s cursor ${show(c)} is not { epoch ≥ 0, offset in [0, ${shape.sizes[p]}) }`);
  });
  const segs = s.segments;
  if (!Array.isArray(segs) || segs.length === 0) throw corrupt(`segments ${show(segs)} must be a non-empty list`);
  segs.forEach((g: Partial<MixSegment> | null, i) => {
    const ok =
      g !== null && typeof g === 'object' && Number.isSafeInteger(g.from) && g.from! >= 0 && g.from! < shape.length && (i === 0 ? g.from === 0 : g.from! > segs[i - 1].from) &&
      Number.isSafeInteger(g.window) && g.window! >= 1 && Array.isArray(g.weights) && g.weights.length === shape.sizes.length;
    if (!ok) throw corrupt(`segment ${i} ${show(g)} is not { from, weights (one per part), window ≥ 1 } in increasing order from 0`);
    checkWeights(g.weights!, 'resume.mix.segments');
  });
  return s as MixState;
}
