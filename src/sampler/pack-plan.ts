// Internal: not exported from the package entry.
// Sequence packing (option `pack: { contextLength, mode, window }`): an epoch's order becomes a list
// of context windows of `contextLength` token slots, each holding pieces of documents.
// The rule: the plan is a pure function of (order, lengths, settings) — the order is itself a pure
// function of (seed, epoch) — so every rank and every resume sees the same windows, and every pick
// of the order with a token is placed exactly once. An empty document has nothing to place: it gets
// no piece, so every window holds at least one token and every batch reads at least one row (a
// window of empty pieces would be a batch of no row, which a reader never answers):
//   'best-fit': the order is cut into groups of `window` picks; each group's documents, longest
//               first (ties: order position), go into the fullest open context window they fit
//               (best-fit decreasing). A document is never split; one longer than contextLength is
//               truncated to it (`truncate: true`) or refused with ERR_TOO_LONG.
//   'concat':   documents laid end to end in order, split across windows; every token exactly once.
// NOTE [pack-cut]: windows are grouped into batches of B in plan order, so a batch list is
// `bounds` over the windows; a position (picks consumed) is only meaningful at a group boundary in
// best-fit mode, which is why the state records the settings and a resume mismatch is refused.

import { invalidOption, tooLongError } from '../errors.js';

export interface PackSettings {
  readonly contextLength: number;
  readonly mode: 'concat' | 'best-fit';
  /** Picks per best-fit group. */
  readonly window: number;
  readonly truncate: boolean;
}

/** One piece of a document in a context window: pick index `pick` of the order, tokens [start, start + length); length ≥ 1. */
export interface Piece {
  readonly pick: number;
  readonly start: number;
  readonly length: number;
}

export interface PackPlan {
  /** Context window w holds pieces[windows[w], windows[w + 1]). */
  readonly windows: Uint32Array;
  readonly pieces: readonly Piece[];
  readonly realTokens: number;
  readonly slots: number;
}

/**
 * The most token positions one packed batch (batchSize windows of contextLength) may have: piece
 * tables address output positions as int32 (collate/pieces.ts), and each output is one typed array.
 */
export const MAX_PACKED_POSITIONS = 2 ** 31 - 1;

/** `pack` as given; `batchSize` (windows per batch) bounds contextLength, checked here at create. */
export function parsePack(option: unknown, batchSize = 1): PackSettings | undefined {
  if (option === undefined) return undefined;
  if (option === null || typeof option !== 'object' || Array.isArray(option)) throw invalidOption('pack', 'an object { contextLength, mode?, window?, truncate? }', option);
  const o = option as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!['contextLength', 'mode', 'window', 'truncate'].includes(k)) throw invalidOption(`pack.${k}`, 'one of contextLength, mode, window, truncate', k);
  const c = o.contextLength;
  if (typeof c !== 'number' || !Number.isInteger(c) || c < 1) throw invalidOption('pack.contextLength', 'a positive integer (tokens per context window)', c);
  const bound = Math.floor(MAX_PACKED_POSITIONS / batchSize);
  if (c > bound) {
    throw invalidOption('pack.contextLength', `at most ${bound} (a batch of batchSize ${batchSize} windows holds at most 2^31 − 1 token positions)`, c, 'Lower contextLength or batchSize');
  }
  const mode = o.mode ?? 'best-fit';
  if (mode !== 'best-fit' && mode !== 'concat') throw invalidOption('pack.mode', "'best-fit' or 'concat'", mode);
  if (mode === 'concat') {
    // Best-fit's settings: concat neither groups documents nor truncates one (it splits it across windows).
    for (const [k, what] of [['window', 'groups documents for best-fit'], ['truncate', 'cuts a document longer than a window in best-fit; concat splits it across windows instead']] as const) {
      if (o[k] !== undefined) throw invalidOption(`pack.${k}`, "left out with mode 'concat'", o[k], `\`${k}\` ${what}: drop it, or use mode 'best-fit'`);
    }
  }
  const window = o.window ?? 1024;
  if (typeof window !== 'number' || !Number.isInteger(window) || window < 1) throw invalidOption('pack.window', 'a positive integer (documents per best-fit group)', window);
  const truncate = o.truncate ?? false;
  if (typeof truncate !== 'boolean') throw invalidOption('pack.truncate', 'true or false', truncate);
  return { contextLength: c, mode, window, truncate };
}

/** Plan the context windows of an epoch's order; `lengthOf(sample)` is a document's token count. */
export function packPlan(order: Uint32Array, lengthOf: (sample: number) => number, s: PackSettings): PackPlan {
  const C = s.contextLength;
  const pieces: Piece[] = [];
  const windows: number[] = [0];
  let real = 0;
  const len = (p: number): number => {
    const n = lengthOf(order[p]!);
    if (s.mode === 'best-fit' && n > C) {
      if (!s.truncate) {
        throw tooLongError(`\`pack\`: document ${order[p]} has ${n} tokens, over contextLength ${C}; best-fit never splits a document. Set \`pack.truncate: true\` to keep its first ${C} tokens, or use mode 'concat'`);
      }
      return C;
    }
    return n;
  };
  if (s.mode === 'concat') {
    let fill = 0;
    for (let p = 0; p < order.length; p++) {
      const n = len(p);
      for (let start = 0; start < n; ) {
        const take = Math.min(n - start, C - fill);
        pieces.push({ pick: p, start, length: take });
        fill += take;
        start += take;
        real += take;
        if (fill === C) {
          windows.push(pieces.length);
          fill = 0;
        }
      }
    }
    if (fill > 0) windows.push(pieces.length);
  } else {
    for (let g = 0; g < order.length; g += s.window) {
      const end = Math.min(order.length, g + s.window);
      const idx: number[] = [];
      const lens = new Map<number, number>();
      for (let p = g; p < end; p++) {
        const n = len(p);
        if (n === 0) continue;
        idx.push(p);
        lens.set(p, n);
      }
      idx.sort((a, b) => lens.get(b)! - lens.get(a)! || a - b);
      const bins: { free: number; items: number[] }[] = [];
      for (const p of idx) {
        const n = lens.get(p)!;
        let best = -1;
        for (let b = 0; b < bins.length; b++) if (bins[b]!.free >= n && (best < 0 || bins[b]!.free < bins[best]!.free)) best = b;
        if (best < 0) {
          bins.push({ free: C, items: [] });
          best = bins.length - 1;
        }
        bins[best]!.free -= n;
        bins[best]!.items.push(p);
      }
      for (const bin of bins) {
        bin.items.sort((a, b) => a - b);
        for (const p of bin.items) {
          const n = lens.get(p)!;
          pieces.push({ pick: p, start: 0, length: n });
          real += n;
        }
        windows.push(pieces.length);
      }
    }
  }
  const nw = windows.length - 1;
  return { windows: Uint32Array.from(windows), pieces, realTokens: real, slots: nw * C };
}

/**
 * Build one batch of packed windows: `tokens [B, C]` (pad `value` after the last piece),
 * `segment_ids [B, C]` (int32: 1, 2, … per document in the window, 0 on padding) and
 * `position_ids [B, C]` (int32: the token's position within its document, so a split document
 * continues counting). `rowOf(pick)` returns the document's tokens.
 */
export function packBatch<T extends Int32Array | Uint16Array | Uint32Array>(
  plan: PackPlan,
  firstWindow: number,
  count: number,
  C: number,
  rowOf: (pick: number) => T,
  value = 0,
): { tokens: T; segment_ids: Int32Array; position_ids: Int32Array } {
  let tokens: T | undefined;
  const seg = new Int32Array(count * C);
  const pos = new Int32Array(count * C);
  for (let w = 0; w < count; w++) {
    let at = w * C;
    let s = 0;
    for (let i = plan.windows[firstWindow + w]!; i < plan.windows[firstWindow + w + 1]!; i++) {
      const piece = plan.pieces[i]!;
      const row = rowOf(piece.pick);
      if (tokens === undefined) {
        tokens = new (row.constructor as new (n: number) => T)(count * C);
        if (value !== 0) tokens.fill(value);
      }
      tokens.set(row.subarray(piece.start, piece.start + piece.length), at);
      s++;
      seg.fill(s, at, at + piece.length);
      for (let k = 0; k < piece.length; k++) pos[at + k] = piece.start + k;
      at += piece.length;
    }
  }
  return { tokens: tokens ?? (new Int32Array(count * C) as T), segment_ids: seg, position_ids: pos };
}
