// Internal: not exported from the package entry.
// Ragged collates as one mechanism: a piece table. A ragged field travels the tiers as fixed-capacity
// rows ([rows, capacity, ...rest], positions past a sample's length zero); every collate of such rows
// — pad, pack, sequence-packing windows — is a list of pieces, piece j copying `length` positions
// from position `srcStart` of row `srcRow` to output position `dstStart`, tagging them with `segment`
// (an optional int32 segment output, or a uint8 mask) and with `srcStart + k` (an optional int32
// position output). Every output position not covered by a piece gets the fill (`fill` for data, 0
// for the tags). The host (`applyPieces`, here) and the device (`Backend.pieces`, kernels/ragged.cu)
// run the same table, so the two are equal byte for byte.
// The rule: pieces are sorted by `dstStart` and do not overlap (NOTE [piece-spans]); a table that
// breaks it, or reads past a row's capacity, is refused before anything is written — the builders
// here make valid tables by construction, and a caller building its own runs `checkPieces` before
// uploading it (on a GPU a bad row is an illegal address that poisons the context).
//
// NOTE [piece-spans]: piece j owns the output positions [dstStart_j, dstStart_{j+1}) (the last one up
// to `total`; piece 0 from 0): its own copy, then the gap after it. Every output position is owned by
// exactly one piece, so one pass over the pieces writes every byte of the outputs exactly once — no
// separate fill pass (on the device: no memset before the copy, one launch per field per batch).
// `maxSpan` (the widest span) sizes the device grid.

import { LoaderError, invalidTensorError } from '../errors.js';
import { type PadSpec, type PackSpec, type RaggedRow, clipLength, padLength } from './collate.js';
import type { PackPlan } from '../sampler/pack-plan.js';
import { type DType, allocStorage } from '../tensor/dtype.js';

/** Int32 entries per piece in a table: srcRow, srcStart, dstStart, length, segment. */
export const PIECE_INTS = 5;

/** A piece table: `PIECE_INTS × count` int32 entries (the layout the device reads), and its output size. */
export interface PieceTable {
  readonly table: Int32Array;
  readonly count: number;
  /** Output positions (each `per` elements). */
  readonly total: number;
  /** The most output positions one piece owns (its copy and the gap after it; NOTE [piece-spans]). */
  readonly maxSpan: number;
}

/** The fixed-capacity rows a table reads: `rows` rows of `rowBytes` bytes (≥ capacity × per × elementBytes). */
export interface PieceRows {
  readonly rows: number;
  readonly rowBytes: number;
  /** Bytes of one element of the field's dtype. */
  readonly elementBytes: 1 | 2 | 4 | 8;
  /** Elements per position (the product of the field's trailing dimensions; 1 for token ids). */
  readonly per: number;
}

const MAX_INT32 = 0x7fffffff;

function badTable(message: string): LoaderError {
  return invalidTensorError(`piece table: ${message}`);
}

/**
 * Check a table against the rows it reads: every piece inside its row, pieces sorted by `dstStart`
 * without overlap, all inside `total`. Throws ERR_INVALID_TENSOR naming the piece. O(count).
 */
export function checkPieces(t: PieceTable, rows: PieceRows): void {
  const capacity = Math.floor(rows.rowBytes / (rows.per * rows.elementBytes));
  if (!(Number.isInteger(t.count) && t.count >= 0 && t.table.length >= t.count * PIECE_INTS)) throw badTable(`count ${t.count} does not fit a table of ${t.table.length} entries`);
  if (!(Number.isInteger(t.total) && t.total >= 0 && t.total <= MAX_INT32)) throw badTable(`total ${t.total} is not a position count below 2^31`);
  const tb = t.table;
  let end = 0;
  for (let j = 0; j < t.count; j++) {
    const o = j * PIECE_INTS;
    const row = tb[o]!, start = tb[o + 1]!, dst = tb[o + 2]!, len = tb[o + 3]!;
    if (row < 0 || row >= rows.rows) throw badTable(`piece ${j} reads row ${row} of ${rows.rows}`);
    if (start < 0 || len < 0 || start + len > capacity) throw badTable(`piece ${j} reads positions [${start}, ${start + len}) of a row with capacity ${capacity}`);
    if (dst < end) throw badTable(`piece ${j} starts at output position ${dst}, before the end (${end}) of the piece before it: pieces must be sorted by dstStart and not overlap`);
    end = dst + len;
    if (end > t.total) throw badTable(`piece ${j} ends at output position ${end}, past the output's ${t.total}`);
  }
}

/** Seal a built table: its widest span (NOTE [piece-spans]). */
function seal(table: Int32Array, count: number, total: number): PieceTable {
  if (total > MAX_INT32) throw badTable(`an output of ${total} positions is over 2^31 − 1; split the batch`);
  let maxSpan = count === 0 ? total : 0;
  for (let j = 0; j < count; j++) {
    const from = j === 0 ? 0 : table[j * PIECE_INTS + 2]!;
    const to = j + 1 < count ? table[(j + 1) * PIECE_INTS + 2]! : total;
    if (to - from > maxSpan) maxSpan = to - from;
  }
  return { table, count, total, maxSpan };
}

/** Pad to L: piece i = (row i, 0, i·L, min(len_i, L)), segment 1 — so a uint8 segment output is collateField's mask. */
export function padPieces(lengths: ArrayLike<number>, L: number): PieceTable & { readonly lengths: Int32Array } {
  const B = lengths.length;
  const table = new Int32Array(B * PIECE_INTS);
  const clipped = new Int32Array(B);
  for (let i = 0; i < B; i++) {
    const n = Math.min(lengths[i]!, L);
    clipped[i] = n;
    table.set([i, 0, i * L, n, 1], i * PIECE_INTS);
  }
  return { ...seal(table, B, B * L), lengths: clipped };
}

/** Pack: piece i = (row i, 0, cu[i], len_i), segment i + 1; `cuSeqlens` (int32 [B + 1]) as flash-attn's varlen kernels take it. */
export function packPieces(lengths: ArrayLike<number>): PieceTable & { readonly cuSeqlens: Int32Array } {
  const B = lengths.length;
  const table = new Int32Array(B * PIECE_INTS);
  const cu = new Int32Array(B + 1);
  for (let i = 0; i < B; i++) {
    const n = lengths[i]!;
    if (cu[i]! + n > MAX_INT32) throw badTable(`a packed batch of more than 2^31 − 1 positions; split the batch`);
    cu[i + 1] = cu[i]! + n;
    table.set([i, 0, cu[i]!, n, i + 1], i * PIECE_INTS);
  }
  return { ...seal(table, B, cu[B]!), cuSeqlens: cu };
}

/**
 * Sequence-packing windows firstWindow … firstWindow + count − 1 of `plan` as a table: the piece of
 * pick p at window w, offset o becomes (rowOfPick(p), start, w·C + o, length), segment 1, 2, … within
 * its window — exactly packBatch's tokens / segment_ids / position_ids. `rowOfPick` maps a pick of the
 * order to its row among the batch's fixed-capacity rows (batch-planner.ts `batchPositions` order;
 * a plan has no empty piece: an empty document is in no window).
 */
export function windowPieces(plan: PackPlan, firstWindow: number, count: number, C: number, rowOfPick: (pick: number) => number): PieceTable {
  const n = plan.windows[firstWindow + count]! - plan.windows[firstWindow]!;
  const table = new Int32Array(n * PIECE_INTS);
  let j = 0;
  for (let w = 0; w < count; w++) {
    let at = w * C;
    let segment = 0;
    for (let i = plan.windows[firstWindow + w]!; i < plan.windows[firstWindow + w + 1]!; i++) {
      const p = plan.pieces[i]!;
      segment++;
      table.set([rowOfPick(p.pick), p.start, at, p.length, segment], j++ * PIECE_INTS);
      at += p.length;
    }
  }
  return seal(table, n, count * C);
}

/** The table's bytes as the device reads them (PIECE_INTS little-endian int32 per piece), for upload. */
export function tableBytes(t: PieceTable): Uint8Array {
  return new Uint8Array(t.table.buffer, t.table.byteOffset, t.count * PIECE_INTS * 4);
}

/** What a collate of fixed-capacity rows makes besides the data: the host-side companions and the data's shape. */
export interface CollatePieces {
  readonly pieces: PieceTable;
  /** The data output's shape: [B, L, ...rest] (pad) or [Σlen, ...rest] (pack). */
  readonly shape: number[];
  /** pad: the clipped lengths (int32 [B]), when the spec asks for them. */
  readonly lengths?: Int32Array;
  /** pad: whether a `<field>_mask` (uint8 [B, L], the segment output at width 1) is asked for. */
  readonly mask: boolean;
  /** pack: `<field>_cu_seqlens` (int32 [B + 1]). */
  readonly cuSeqlens?: Int32Array;
}

/**
 * The table for collating one field of a batch the way `collateField` does, from the rows' lengths
 * (known to the host for every row): same truncation, same ERR_TOO_LONG, same L. `rest` is the
 * field's trailing dimensions.
 */
export function collatePieces(field: string, spec: PadSpec | PackSpec, lengths: ArrayLike<number>, ids: readonly number[], rest: readonly number[] = []): CollatePieces {
  const lens = Int32Array.from({ length: lengths.length }, (_, i) => clipLength(field, lengths[i]!, ids[i]!, spec.maxLength, spec.truncate));
  if (spec.kind === 'pack') {
    const pieces = packPieces(lens);
    return { pieces, shape: [pieces.total, ...rest], mask: false, cuSeqlens: pieces.cuSeqlens };
  }
  const L = padLength(spec, lens);
  const pieces = padPieces(lens, L);
  return { pieces, shape: [lens.length, L, ...rest], mask: spec.mask, ...(spec.lengths ? { lengths: pieces.lengths } : {}) };
}

/** The little-endian bit pattern of `value` stored in an element of `like`'s dtype (as `typedArray.fill(value)` stores it). */
export function fillBits(value: number, like: RaggedRow): bigint {
  const one = new (like.constructor as new (n: number) => RaggedRow)(1);
  one[0] = value;
  const bytes = new Uint8Array(one.buffer);
  let bits = 0n;
  for (let k = bytes.length - 1; k >= 0; k--) bits = (bits << 8n) | BigInt(bytes[k]!);
  return bits;
}

/**
 * fillBits for a field's dtype (the device route knows dtypes, not arrays): the value as the dtype's
 * storage holds it after `fill(value)` — so float16 and bfloat16, stored as Uint16Array, hold the raw
 * 16-bit integer, exactly as the host collate fills them.
 */
export function fillBitsOf(value: number, dtype: DType): bigint {
  const one = allocStorage(dtype, 1);
  if (one instanceof BigInt64Array) {
    one[0] = BigInt(Math.trunc(value));
    return BigInt.asUintN(64, one[0]);
  }
  return fillBits(value, one);
}

/** Where applyPieces writes: the data (total × per elements), the fill's bits, and the optional tag outputs (total entries each). */
export interface PieceOutputs {
  readonly data: Uint8Array;
  readonly fill: bigint;
  /** int32 segment ids, or a uint8 mask (the segment's low byte: 1 for pad's pieces). */
  readonly segment?: Int32Array | Uint8Array;
  readonly position?: Int32Array;
}

/** A typed view of `bytes` for filling with `width`-byte elements (`bytes` aligned to the width). */
function fillView(bytes: Uint8Array, width: 1 | 2 | 4 | 8): Uint8Array | Uint16Array | Uint32Array | BigUint64Array {
  if (bytes.byteOffset % width !== 0) throw new RangeError(`applyPieces: the data output at byte offset ${bytes.byteOffset} is not aligned to its ${width}-byte elements`);
  const n = bytes.byteLength / width;
  return width === 1 ? bytes : width === 2 ? new Uint16Array(bytes.buffer, bytes.byteOffset, n) : width === 4 ? new Uint32Array(bytes.buffer, bytes.byteOffset, n) : new BigUint64Array(bytes.buffer, bytes.byteOffset, n);
}

/** Ramp 0, 1, 2, … for position outputs (grown on demand, shared). */
let ramp = new Int32Array(0);

/**
 * Run a piece table on the host: `src` holds the fixed-capacity rows (rows × rowBytes bytes). Writes
 * every byte of the outputs (NOTE [piece-spans]), so they need not be cleared first. The sim backend
 * runs this on its simulated memory: the reference the CUDA kernel is compared with.
 */
export function applyPieces(src: Uint8Array, rows: PieceRows, t: PieceTable, out: PieceOutputs): void {
  checkPieces(t, rows);
  const posBytes = rows.per * rows.elementBytes;
  if (src.byteLength < rows.rows * rows.rowBytes) throw new RangeError(`applyPieces: ${rows.rows} rows of ${rows.rowBytes} bytes need ${rows.rows * rows.rowBytes} source bytes, got ${src.byteLength}`);
  if (out.data.byteLength < t.total * posBytes) throw new RangeError(`applyPieces: ${t.total} positions of ${posBytes} bytes need ${t.total * posBytes} output bytes, got ${out.data.byteLength}`);
  for (const [name, a] of [['segment', out.segment], ['position', out.position]] as const) {
    if (a !== undefined && a.length < t.total) throw new RangeError(`applyPieces: the ${name} output holds ${a.length} entries, under the ${t.total} positions`);
  }
  const data = out.data.subarray(0, t.total * posBytes);
  const view = fillView(data, rows.elementBytes);
  const wide = view instanceof BigUint64Array ? view : undefined;
  const narrow = view instanceof BigUint64Array ? undefined : view;
  const narrowFill = Number(BigInt.asUintN(32, out.fill));
  const seg = out.segment;
  const pos = out.position;
  if (pos !== undefined && ramp.length < Math.floor(rows.rowBytes / posBytes)) ramp = Int32Array.from({ length: Math.floor(rows.rowBytes / posBytes) }, (_, k) => k);
  const tb = t.table;
  const gap = (from: number, to: number): void => {
    if (to <= from) return;
    if (wide !== undefined) wide.fill(out.fill, from * rows.per, to * rows.per);
    else narrow!.fill(narrowFill, from * rows.per, to * rows.per);
    seg?.fill(0, from, to);
    pos?.fill(0, from, to);
  };
  if (t.count === 0) gap(0, t.total);
  for (let j = 0; j < t.count; j++) {
    const o = j * PIECE_INTS;
    const row = tb[o]!, start = tb[o + 1]!, dst = tb[o + 2]!, len = tb[o + 3]!;
    if (j === 0) gap(0, dst);
    const from = row * rows.rowBytes + start * posBytes;
    data.set(src.subarray(from, from + len * posBytes), dst * posBytes);
    seg?.fill(tb[o + 4]!, dst, dst + len);
    pos?.set(ramp.subarray(start, start + len), dst);
    gap(dst + len, j + 1 < t.count ? tb[o + PIECE_INTS + 2]! : t.total);
  }
}
