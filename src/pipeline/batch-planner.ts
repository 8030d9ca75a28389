// Internal: not exported from the package entry.
// How an epoch's order becomes this rank's batches, and how far a run got in that order: fixed
// batches of batchSize (distributed/shard.ts) or token-budget batches (sampler/token-batches.ts,
// distributed/shard-batches.ts). The rule: a position is always picks of the epoch's global order
// consumed by all ranks together, so `loader.state()` and resume mean the same in both.

import { emptyDatasetError, resumeMismatchError } from '../errors.js';
import type { World } from '../distributed/launch.js';
import { type ShardMode, consumedPicks, sharePicks, shardPicks } from '../distributed/shard.js';
import { batchAt, consumedBatchPicks, shardBatches, shareBatches } from '../distributed/shard-batches.js';
import { type BatchList, type TokenBudget, tokenBatches } from '../sampler/token-batches.js';
import { EpochPlan, type Packing, countBatches } from './epoch-plan.js';
import { type PackPlan, type PackSettings, packPlan } from '../sampler/pack-plan.js';

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
  /** What a resume must match mid-epoch (token budgets, packing), for `loader.state()`. */
  readonly state: PlannedWith;
  /** The most rows (picks) one batch reads: staging is sized for it. */
  readonly maxRows: number;
  /** Refuse a resume mid-epoch whose batches this planner would cut otherwise (NOTE [resume batches]). */
  checkResume(saved: ResumePoint): void;
}

/** What cut a state's batches, as `loader.state()` records it: token budgets, packing, or neither. */
export interface PlannedWith {
  readonly tokens?: TokenSettings;
  readonly pack?: PackSettings;
}

/** The part of a saved state a planner checks: where it stopped, and what cut its batches. */
export interface ResumePoint extends PlannedWith {
  readonly position: number;
}

type BatchKind = 'pack' | 'tokens' | 'fixed';
const kindOf = (s: PlannedWith): BatchKind => (s.pack !== undefined ? 'pack' : s.tokens !== undefined ? 'tokens' : 'fixed');
const SAVED: Record<BatchKind, string> = {
  pack: '`pack` (its position counts context windows)',
  tokens: '`batchTokens` (its position counts the picks of token-budget batches, which reorder the picks)',
  fixed: 'no `pack` nor `batchTokens` (its position counts picks of the order)',
};
const HAS: Record<BatchKind, string> = { pack: '`pack`', tokens: '`batchTokens`', fixed: 'neither `pack` nor `batchTokens`' };

/**
 * NOTE [resume batches] A position means something only to the kind of batches that wrote it:
 * windows with `pack`, picks of the token-budget list with `batchTokens`, picks of the order without
 * either. A resume mid-epoch by a planner of another kind is refused with ERR_RESUME_MISMATCH naming
 * the option (read as its own unit, the position would repeat some documents and skip others); then
 * each planner checks the settings that cut its batches. At an epoch's start (position 0) nothing
 * was cut yet, so any batches may follow.
 */
function checkKind(saved: ResumePoint, now: PlannedWith): boolean {
  if (saved.position === 0) return false;
  const was = kindOf(saved);
  const is = kindOf(now);
  if (was !== is) {
    const knob = was === 'fixed' ? HAS[is] : HAS[was];
    throw resumeMismatchError(
      `\`resume\`: the state was saved mid-epoch with ${SAVED[was]}, but this loader has ${HAS[is]}; other batches would read its position otherwise, repeating some samples and skipping others. Create the loader ${was === 'fixed' ? `without ${knob}` : `with the same ${knob}`}, or resume from an epoch's start`,
    );
  }
  return true;
}

interface Common {
  readonly world: World;
  readonly shards: ShardMode;
  readonly augment: number;
  readonly batchSize: number;
}

export class FixedPlanner implements BatchPlanner {
  readonly state = {};
  readonly maxRows: number;
  constructor(
    readonly common: Common,
    readonly dropLast: boolean,
    readonly picks: number,
  ) {
    this.maxRows = common.batchSize;
  }

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

  checkResume(saved: ResumePoint): void {
    checkKind(saved, this.state);
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
  readonly state: { readonly tokens: TokenSettings };
  readonly maxRows: number;
  #cached: { epoch: number; list: BatchList } | undefined;

  constructor(
    readonly common: Common,
    readonly budget: TokenBudget,
    /** The epoch's global order (the sampler's picks), for batch counts asked before the epoch runs. */
    readonly orderOf: (epoch: number) => Uint32Array,
  ) {
    this.settings = { batchTokens: budget.batchTokens, bucketWindow: budget.window, batchSize: budget.maxRows };
    this.state = { tokens: this.settings };
    this.maxRows = budget.maxRows;
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
  checkResume(saved: ResumePoint): void {
    if (!checkKind(saved, this.state)) return;
    const s = saved.tokens as Partial<TokenSettings>;
    const now = this.settings;
    for (const key of ['batchTokens', 'bucketWindow', 'batchSize'] as const) {
      if (s[key] !== now[key]) {
        throw resumeMismatchError(
          `\`resume\`: the state was saved mid-epoch with ${key} ${String(s[key])} under token budgets, but this loader has ${now[key]}; other ${key} cut other batches. Resume with ${key}: ${String(s[key])}, or from an epoch's start`,
        );
      }
    }
  }
}

/**
 * Sequence packing (option `pack`; sampler/pack-plan.ts): an epoch's order becomes context windows,
 * and a batch is `batchSize` consecutive windows. NOTE [pack-position] Its unit of progress is the
 * window, not the pick: 'concat' splits documents across windows, so no count of picks names a
 * cut. A position is windows consumed by all ranks together; ranks take global batches in turn as
 * token-budget batches do (shard-batches.ts), so a resume with another world size or batch size
 * re-partitions the rest exactly. With shards 'pad', the last step's missing batches wrap around to
 * the epoch's first batches (windows from 0), wherever the segment started. A resume mid-epoch must
 * keep the settings that cut the windows (`loader.state().pack`).
 */
export class PackPlanner implements BatchPlanner {
  readonly state: { readonly pack: PackSettings };
  readonly maxRows: number;
  #cached: { epoch: number; plan: PackPlan } | undefined;

  constructor(
    readonly common: Common,
    readonly settings: PackSettings,
    /** Tokens of each sample (document). */
    readonly lengths: Uint32Array,
    readonly orderOf: (epoch: number) => Uint32Array,
  ) {
    this.state = { pack: settings };
    this.maxRows = common.batchSize * maxDocsPerWindow(lengths, settings);
    // As flodl refuses an empty dataset at build: an epoch of no window would train on nothing.
    if (lengths.every((n) => n === 0)) {
      throw emptyDatasetError(`\`pack\`: all ${lengths.length} documents have 0 tokens, so no context window can be packed. Check the source's documents (or the \`lengths\` given), or drop \`pack\``);
    }
    if (settings.mode === 'best-fit' && !settings.truncate) {
      // Found at create, not at the epoch that would meet the document.
      const long = lengths.findIndex((n) => n > settings.contextLength);
      if (long >= 0) packPlan(Uint32Array.of(long), (i) => lengths[i]!, settings);
    }
  }

  /** The epoch's windows (the same for every rank and every resume). */
  plan(epoch: number, order?: Uint32Array): PackPlan {
    if (this.#cached?.epoch !== epoch) this.#cached = { epoch, plan: packPlan(order ?? this.orderOf(epoch), (i) => this.lengths[i]!, this.settings) };
    return this.#cached.plan;
  }

  segment(epoch: number, order: Uint32Array, position: number): Segment {
    const plan = this.plan(epoch, order);
    const nw = plan.windows.length - 1;
    const first = checkWindowPosition(position, nw, epoch);
    const { world, shards, augment, batchSize: B } = this.common;
    const total = Math.ceil((nw - first) / B);
    const m = total === 0 ? 0 : shareBatches(total, 0, world.worldSize, shards);
    const picks: number[] = [];
    const bounds = new Uint32Array(m + 1);
    const windowStart = new Uint32Array(m);
    const windowCount = new Uint32Array(m);
    const epochBatches = Math.ceil(nw / B);
    for (let s = 0; s < m; s++) {
      // The rest's batches, then (shards 'pad') the epoch's own from its first window — not the
      // rest's first again, so a resumed rank pads with what the uninterrupted run pads with.
      const g = s * world.worldSize + world.rank;
      const w0 = g < total ? first + g * B : ((g - total) % epochBatches) * B;
      const count = Math.min(B, nw - w0);
      windowStart[s] = w0;
      windowCount[s] = count;
      for (const p of batchPositions(plan, w0, count)) picks.push(order[p]!);
      bounds[s + 1] = picks.length;
    }
    const packing: Packing = { plan, windowStart, windowCount, contextLength: this.settings.contextLength };
    const epochPlan = new EpochPlan(epoch, Uint32Array.from(picks), augment, this.maxRows, false, bounds, packing);
    return { plan: epochPlan, position: first, total: nw, consumed: (next) => Math.min(nw, first + next * world.worldSize * B) };
  }

  batches(epoch: number, position: number): number {
    const nw = this.plan(epoch).windows.length - 1;
    const first = checkWindowPosition(position, nw, epoch);
    const total = Math.ceil((nw - first) / this.common.batchSize);
    return total === 0 ? 0 : shareBatches(total, 0, this.common.world.worldSize, this.common.shards);
  }

  /** Refuse a resume mid-epoch whose windows differ from the saved one's. */
  checkResume(saved: ResumePoint): void {
    if (!checkKind(saved, this.state)) return;
    const s = saved.pack as Partial<PackSettings>;
    const now = this.settings;
    for (const key of ['contextLength', 'mode', 'window', 'truncate'] as const) {
      if (s[key] !== now[key]) {
        throw resumeMismatchError(
          `\`resume\`: the state was saved mid-epoch with pack.${key} ${String(s[key])}, but this loader has ${String(now[key])}; other settings cut other context windows. Resume with pack.${key}: ${String(s[key])}, or from an epoch's start`,
        );
      }
    }
  }
}

function checkWindowPosition(position: number, windows: number, epoch: number): number {
  if (position > windows) {
    throw resumeMismatchError(`\`resume.position\` ${position} is past the ${windows} context windows of epoch ${epoch}: the state was saved with other pack settings or lengths. Resume with those, or from the start of an epoch`);
  }
  return position;
}

/**
 * The most documents one context window can hold: as many of the shortest (non-empty) documents
 * as fit, plus the two a 'concat' window may share with its neighbours. A bound from the lengths
 * alone, so staging sized for `batchSize ×` it fits every epoch's batches.
 */
export function maxDocsPerWindow(lengths: Uint32Array, s: PackSettings): number {
  const sorted = Uint32Array.from(lengths).sort();
  let sum = 0;
  let k = 0;
  for (const n of sorted) {
    if (n === 0) continue;
    if (sum + n > s.contextLength) break;
    sum += n;
    k++;
  }
  return Math.max(1, k) + (s.mode === 'concat' ? 2 : 0);
}

/**
 * The order positions a batch of windows reads, each once, in first-appearance order — the rows of
 * the batch (at least one: a window holds at least one token, pack-plan.ts).
 */
export function batchPositions(plan: PackPlan, firstWindow: number, count: number): number[] {
  const seen = new Set<number>();
  const out: number[] = [];
  for (let i = plan.windows[firstWindow]!; i < plan.windows[firstWindow + count]!; i++) {
    const piece = plan.pieces[i]!;
    if (seen.has(piece.pick)) continue;
    seen.add(piece.pick);
    out.push(piece.pick);
  }
  return out;
}
