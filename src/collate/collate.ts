// Internal: not exported from the package entry (the loader option `collate` reaches it).
// Host collates of ragged fields: the rows of one field of a batch (typed arrays of varying length,
// shape [len, ...rest] flattened, `rest` fixed) become one batch tensor. The rule: a collate is a
// pure function of its rows and its validated spec, so it can be compared byte for byte with any
// other implementation (the CUDA kernel's), and nothing it does depends on which rows came before.
//   pad:  rows padded with `value` to the longest row / a multiple of it / a fixed `length`,
//         plus `<field>_lengths` (int32 [B]) and/or `<field>_mask` (uint8 [B, L]).
//   pack: rows concatenated, plus `<field>_cu_seqlens` (int32 [B + 1]), as flash-attn varlen takes.
//   a function: called with the rows, host only.
// A row longer than the capacity (`length`, else `maxLength`) is truncated when `truncate: true`,
// else refused with ERR_TOO_LONG naming the field, the sample, its length and the capacity.

import { invalidOption, raggedTooLong, show, unknownOption } from '../errors.js';
import type { DType } from '../tensor/dtype.js';
import { toBFloat16Bits, toFloat16Bits } from '../tensor/half.js';

export type RaggedRow = Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array | Float32Array | Float64Array;

export interface PadSpec {
  readonly kind: 'pad';
  /** 'longest' (default), a fixed length, or `{ multiple }` of the longest. */
  readonly to: 'longest' | number | { readonly multiple: number };
  readonly value: number;
  readonly lengths: boolean;
  readonly mask: boolean;
  readonly truncate: boolean;
  readonly maxLength: number | undefined;
}
export interface PackSpec {
  readonly kind: 'pack';
  readonly truncate: boolean;
  readonly maxLength: number | undefined;
}
export interface FnSpec {
  readonly kind: 'function';
  readonly fn: (rows: readonly RaggedRow[], ids: readonly number[]) => Record<string, RaggedRow>;
}
export type CollateSpec = PadSpec | PackSpec | FnSpec;

const PAD_KEYS = ['to', 'value', 'lengths', 'mask', 'truncate', 'maxLength'];
const PACK_KEYS = ['truncate', 'maxLength'];

function posInt(knob: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw invalidOption(knob, 'a positive integer', v);
  return v;
}
function bool(knob: string, v: unknown, dflt: boolean): boolean {
  if (v === undefined) return dflt;
  if (typeof v !== 'boolean') throw invalidOption(knob, 'true or false', v);
  return v;
}

/**
 * Validate the loader option `collate` (at create): `{ field: { pad: {...} } | { pack: {...} } | 'pad'
 * | 'pack' | function }`. `ragged` names the dataset's ragged fields: a collate for any other field is
 * refused, and so is a ragged field left without one.
 */
export function parseCollate(option: unknown, ragged: readonly string[], raggedMax: Readonly<Record<string, number>> = {}): Map<string, CollateSpec> {
  const out = new Map<string, CollateSpec>();
  if (option === undefined) option = {};
  if (option === null || typeof option !== 'object' || Array.isArray(option)) {
    throw invalidOption('collate', 'an object of ragged field name → { pad } | { pack } | function', option);
  }
  for (const [field, raw] of Object.entries(option as Record<string, unknown>)) {
    const knob = `collate.${field}`;
    if (!ragged.includes(field)) {
      throw invalidOption(knob, `a ragged field of the dataset (${ragged.length ? ragged.join(', ') : 'it has none'})`, field, 'Collates apply to ragged fields only; fixed-shape fields batch as before');
    }
    const cap = raggedMax[field];
    if (typeof raw === 'function') {
      out.set(field, { kind: 'function', fn: raw as FnSpec['fn'] });
      continue;
    }
    const entry = raw === 'pad' ? { pad: {} } : raw === 'pack' ? { pack: {} } : raw;
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) throw invalidOption(knob, "'pad', 'pack', { pad: {...} }, { pack: {...} } or a function", raw);
    const keys = Object.keys(entry);
    if (keys.length !== 1 || (keys[0] !== 'pad' && keys[0] !== 'pack')) throw invalidOption(knob, 'an object with exactly one of `pad` or `pack`', raw);
    // `null` is a value, not "left out": `{ pad: null }` is refused, `{ pad: undefined }` is `'pad'`.
    const body = (entry as Record<string, unknown>)[keys[0]!] === undefined ? {} : (entry as Record<string, unknown>)[keys[0]!];
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalidOption(`${knob}.${keys[0]}`, 'an object of options', body);
    const b = body as Record<string, unknown>;
    const known = keys[0] === 'pad' ? PAD_KEYS : PACK_KEYS;
    for (const k of Object.keys(b)) if (!known.includes(k)) throw unknownOption(`${knob}.${keys[0]}`, k, known);
    const maxLength = b.maxLength === undefined ? cap : posInt(`${knob}.${keys[0]}.maxLength`, b.maxLength);
    const truncate = bool(`${knob}.${keys[0]}.truncate`, b.truncate, false);
    if (keys[0] === 'pack') {
      out.set(field, { kind: 'pack', truncate, maxLength });
      continue;
    }
    let to: PadSpec['to'] = 'longest';
    if (b.to !== undefined) {
      if (b.to === 'longest') to = 'longest';
      else if (typeof b.to === 'number') to = posInt(`${knob}.pad.to`, b.to);
      else if (typeof b.to === 'object' && b.to !== null && Object.keys(b.to).length === 1 && 'multiple' in b.to) {
        to = { multiple: posInt(`${knob}.pad.to.multiple`, (b.to as { multiple: unknown }).multiple) };
      } else throw invalidOption(`${knob}.pad.to`, "'longest', a positive integer or { multiple: n }", b.to);
    }
    const value = b.value === undefined ? 0 : b.value;
    if (typeof value !== 'number' || !Number.isFinite(value)) throw invalidOption(`${knob}.pad.value`, 'a finite number', value);
    const lengths = bool(`${knob}.pad.lengths`, b.lengths, true);
    const mask = bool(`${knob}.pad.mask`, b.mask, false);
    out.set(field, { kind: 'pad', to, value, lengths, mask, truncate, maxLength: typeof to === 'number' ? to : maxLength });
  }
  for (const f of ragged) {
    if (!out.has(f)) {
      throw invalidOption(`collate.${f}`, 'a collate for the ragged field', undefined, `A batch needs one shape per field: give \`collate: { ${f}: 'pad' }\` (or 'pack', or a function)`);
    }
  }
  return out;
}

/** Integer dtypes' ranges (int64's: the integers a number holds exactly). */
const INT_RANGES: Partial<Record<DType, readonly [number, number]>> = {
  int8: [-128, 127], uint8: [0, 255], int16: [-32768, 32767], uint16: [0, 65535],
  int32: [-2147483648, 2147483647], uint32: [0, 4294967295], int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
};
const FLOAT32_MAX = 3.4028234663852886e38;

/**
 * Refuse a pad value (already a finite number) that the ragged field's storage would not hold as
 * given — a typed array's `fill` casts it silently (1.5 → 1 in int32, 2^40 → 0, −1 → 255 in uint8,
 * 1e39 → Infinity in float32). float16 and bfloat16 are stored as raw 16-bit patterns and padded
 * with the pattern given (as `fillBitsOf`, collate/pieces.ts), so their pad value is one.
 */
export function checkPadValue(field: string, value: number, dtype: DType): void {
  const knob = `collate.${field}.pad.value`;
  if (dtype === 'float16' || dtype === 'bfloat16') {
    if (!Number.isInteger(value) || value < 0 || value > 0xffff) {
      const one = dtype === 'float16' ? toFloat16Bits(1) : toBFloat16Bits(1);
      throw invalidOption(knob, `an integer in [0, 65535]: a ${dtype} field is padded with the raw 16-bit pattern given (1.0 is ${one})`, value);
    }
    return;
  }
  const range = INT_RANGES[dtype];
  if (range !== undefined) {
    const what = dtype === 'int64' ? `the integers a number holds exactly, for the int64 field \`${field}\`` : `the range of the ${dtype} field \`${field}\``;
    if (!Number.isInteger(value) || value < range[0] || value > range[1]) throw invalidOption(knob, `an integer in [${range[0]}, ${range[1]}] (${what})`, value);
    return;
  }
  if (dtype === 'float32' && Math.abs(value) > FLOAT32_MAX) throw invalidOption(knob, `a finite number within float32's range (±${FLOAT32_MAX})`, value);
}

/** The row's elements per position (the product of `rest`). */
function clip(field: string, row: RaggedRow, id: number, per: number, cap: number | undefined, truncate: boolean): number {
  return clipLength(field, row.length / per, id, cap, truncate);
}

/** A row's collated length: `len` within the capacity, cut to it when `truncate`, else ERR_TOO_LONG. */
export function clipLength(field: string, len: number, id: number, cap: number | undefined, truncate: boolean): number {
  if (cap === undefined || len <= cap) return len;
  if (truncate) return cap;
  throw raggedTooLong(field, id, len, cap, 'collate');
}

function alloc(like: RaggedRow, n: number): RaggedRow {
  return new (like.constructor as new (n: number) => RaggedRow)(n);
}

/** Collate one field's rows. `per` is the element count of one position (1 for token ids). */
export function collateField(field: string, spec: CollateSpec, rows: readonly RaggedRow[], ids: readonly number[], per = 1): Record<string, { data: RaggedRow; shape: number[] }> {
  if (rows.length === 0) throw invalidOption(`collate.${field}`, 'a batch of at least one row', rows);
  if (spec.kind === 'function') {
    const got = spec.fn(rows, ids);
    if (got === null || typeof got !== 'object') throw invalidOption(`collate.${field}`, 'a function returning an object of typed arrays', got);
    const res: Record<string, { data: RaggedRow; shape: number[] }> = {};
    for (const [k, v] of Object.entries(got)) {
      if (!ArrayBuffer.isView(v)) throw invalidOption(`collate.${field}`, `a function returning typed arrays (key ${k})`, v);
      res[k] = { data: v, shape: [v.length] };
    }
    return res;
  }
  const lens = rows.map((r, i) => clip(field, r, ids[i]!, per, spec.maxLength, spec.truncate));
  const B = rows.length;
  if (spec.kind === 'pack') {
    const cu = new Int32Array(B + 1);
    for (let i = 0; i < B; i++) cu[i + 1] = cu[i]! + lens[i]!;
    const data = alloc(rows[0]!, cu[B]! * per);
    for (let i = 0; i < B; i++) data.set(rows[i]!.subarray(0, lens[i]! * per), cu[i]! * per);
    return { [field]: { data, shape: per === 1 ? [cu[B]!] : [cu[B]!, per] }, [`${field}_cu_seqlens`]: { data: cu, shape: [B + 1] } };
  }
  const L = padLength(spec, lens);
  const data = alloc(rows[0]!, B * L * per);
  // An int64 field's rows are BigInt64Arrays, which fill with a bigint only.
  if (spec.value !== 0) (data as unknown as { fill(v: number | bigint): void }).fill((data as unknown) instanceof BigInt64Array ? BigInt(spec.value) : spec.value);
  for (let i = 0; i < B; i++) data.set(rows[i]!.subarray(0, lens[i]! * per), i * L * per);
  const res: Record<string, { data: RaggedRow; shape: number[] }> = { [field]: { data, shape: per === 1 ? [B, L] : [B, L, per] } };
  if (spec.lengths) res[`${field}_lengths`] = { data: Int32Array.from(lens), shape: [B] };
  if (spec.mask) {
    const m = new Uint8Array(B * L);
    for (let i = 0; i < B; i++) m.fill(1, i * L, i * L + lens[i]!);
    res[`${field}_mask`] = { data: m, shape: [B, L] };
  }
  return res;
}

/** The padded length L of a batch whose clipped lengths are `lens`: fixed, the longest, or the longest rounded up to the multiple. */
export function padLength(spec: PadSpec, lens: ArrayLike<number>): number {
  if (typeof spec.to === 'number') return spec.to;
  let longest = 0;
  for (let i = 0; i < lens.length; i++) if (lens[i]! > longest) longest = lens[i]!;
  return spec.to === 'longest' ? longest : Math.ceil(longest / spec.to.multiple) * spec.to.multiple;
}

export function describeCollate(spec: CollateSpec): string {
  if (spec.kind === 'function') return 'function';
  if (spec.kind === 'pack') return `pack${spec.maxLength ? ` (max ${spec.maxLength}${spec.truncate ? ', truncated' : ''})` : ''}`;
  return `pad to ${typeof spec.to === 'object' ? `a multiple of ${spec.to.multiple}` : show(spec.to)} with ${spec.value}`;
}
