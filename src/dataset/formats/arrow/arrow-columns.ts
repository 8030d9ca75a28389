// Internal: not exported from the package entry.
// How Arrow columns become tensors. A column is planned once from the schema: numeric primitives
// (Bool as uint8, UInt64 as int64) give a scalar per row; fixed-size lists of them, nested, give a
// tensor of the list sizes; variable-length lists are accepted when every row has the shape of row 0;
// dictionary-encoded columns give their integer codes only when asked (`{ kind: 'codes' }`: a code
// is an index into the dictionary, not its value, so it is never delivered silently); binary and
// string columns (and Hugging Face's image struct<bytes, path>) give bytes for a decoder. The rule: every index into a decoded buffer is
// checked against that buffer first, so a forged offset or length is ERR_BAD_FILE, never a short
// read passed on as data; a null or a ragged row is a clear error naming the column and the row.

import { type Data, type DataType, type Field, Precision, type Schema, Type } from 'apache-arrow';
import { LoaderError, badFile, invalidDatasetError, show } from '../../../errors.js';
import type { DType, Storage } from '../../../tensor/dtype.js';

/** One list level of a tensor column, outermost first: a fixed size, or a list checked against `size`. */
export type Level = { readonly kind: 'fixed'; readonly size: number } | { readonly kind: 'list'; readonly size: number; /** LargeList: int64 offsets. */ readonly large: boolean };

/** How the elements at the bottom of a tensor column are stored. */
export type Leaf = 'plain' | 'bool' | 'uint64' | { readonly bytesPerElement: number };

/** Where the bytes of a decoder column sit. */
export type BytesKind = 'offsets32' | 'offsets64' | 'view' | { readonly fixed: number };

export interface TensorColumn {
  readonly kind: 'tensor';
  readonly name: string;
  /** Position among the schema's fields (and the record batch's children). */
  readonly field: number;
  readonly type: string;
  readonly dtype: DType;
  readonly levels: readonly Level[];
  readonly leaf: Leaf;
  /** Per-row shape: the level sizes, then the byte width of a fixed-size-binary leaf. */
  readonly rowShape: readonly number[];
  readonly rowSize: number;
}

export interface BytesColumn {
  readonly kind: 'bytes';
  readonly name: string;
  readonly field: number;
  readonly type: string;
  readonly bytes: BytesKind;
  /** For Hugging Face's struct<bytes, path>: the children holding the bytes and the path (-1: none). */
  readonly struct?: { readonly bytes: number; readonly path: number; readonly pathKind: BytesKind | undefined };
}

export type ColumnPlan = TensorColumn | BytesColumn;

/** A column that needs list shapes from the data (variable-length list levels) before it can be read. */
export function hasListLevels(plan: ColumnPlan): boolean {
  return plan.kind === 'tensor' && plan.levels.some((l) => l.kind === 'list');
}

/**
 * Plan the selected columns. `decoders` gives each column's decoder kind, if it has one ('codes':
 * a dictionary column's integer codes; any other kind: a bytes column). `listShapes` gives the
 * sizes of variable-length list levels learned from row 0 (absent: placeholders, filled by `withListShape`).
 * Throws one error listing every column that cannot be read, with the fix.
 */
export function planColumns(path: string, schema: Schema, names: readonly string[], decoders: { readonly [name: string]: { readonly kind: string } }, listShapes?: { readonly [name: string]: readonly number[] }): ColumnPlan[] {
  const plans: ColumnPlan[] = [];
  const needDecoder: { name: string; type: string }[] = [];
  const unsupported: string[] = [];
  for (const name of names) {
    const field = schema.fields.findIndex((f) => f.name === name);
    const f = schema.fields[field];
    if (f === undefined) throw invalidDatasetError(`${path}: the schema has no column ${show(name)} (did the file change?)`);
    const type = String(f.type);
    const bytes = bytesKind(f.type) ?? hfStruct(f.type);
    const decoder = Object.hasOwn(decoders, name) ? decoders[name]!.kind : undefined;
    const dictionary = leafType(f.type).typeId === Type.Dictionary;
    if (decoder === 'codes' && !dictionary) {
      unsupported.push(`${show(name)} (${type}) has decoder { kind: 'codes' }, but it is not dictionary-encoded (codes are a dictionary column's indices); drop that decoder`);
      continue;
    }
    if (decoder === undefined && dictionary) {
      unsupported.push(
        `${show(name)} (${type}) is dictionary-encoded: its rows are codes into a dictionary of values, not a tensor. Pass decoders: { ${show(name)}: { kind: 'codes' } } to take the integer codes (a code is the value's index in the dictionary)`,
      );
      continue;
    }
    if (decoder !== undefined && decoder !== 'codes') {
      if (bytes === undefined) {
        unsupported.push(`${show(name)} (${type}) has a decoder, but decoders read binary or string columns (or struct<bytes, path>)`);
      } else if (typeof bytes === 'object' && 'struct' in bytes) {
        plans.push({ kind: 'bytes', name, field, type, bytes: bytes.struct.kind, struct: bytes.struct.at });
      } else {
        plans.push({ kind: 'bytes', name, field, type, bytes });
      }
      continue;
    }
    const t = tensorType(f.type);
    if (typeof t === 'string') {
      if (isText(f.type)) {
        unsupported.push(
          `${show(name)} (${type}) holds text, which Stoker does not turn into a tensor yet: pass a module decoder that does (a tokenizer: decoders: { ${show(name)}: { kind: 'module', module, export } } gets each row's UTF-8 bytes)`,
        );
      } else if (bytes !== undefined) needDecoder.push({ name, type });
      else unsupported.push(`${show(name)} has type ${type}: ${t}`);
      continue;
    }
    const known = listShapes?.[name];
    const levels = t.levels.map((l, i) => (l.kind === 'list' ? { ...l, size: known?.[i] ?? 0 } : l));
    const extra = typeof t.leaf === 'object' ? [t.leaf.bytesPerElement] : [];
    const rowShape = [...levels.map((l) => l.size), ...extra];
    plans.push({ kind: 'tensor', name, field, type, dtype: t.dtype, levels, leaf: t.leaf, rowShape, rowSize: rowShape.reduce((a, b) => a * b, 1) });
  }
  const problems: string[] = [];
  if (needDecoder.length > 0) {
    const many = needDecoder.length > 1;
    problems.push(
      `column${many ? 's' : ''} ${needDecoder.map((c) => `${show(c.name)} (${c.type})`).join(', ')} hold${many ? '' : 's'} bytes or strings, which need a decoder: pass decoders: { ${show(needDecoder[0]!.name)}: { kind: 'image', size: [224, 224] } } (or { kind: 'module', module, export } for your own)`,
    );
  }
  problems.push(...unsupported.map((u) => `column ${u}`));
  if (problems.length > 0) {
    const usable = plans.map((p) => p.name);
    throw invalidDatasetError(
      `${path}: ${problems.join('; ')}. Or leave ${problems.length > 1 || needDecoder.length > 1 ? 'them' : 'it'} out with columns: ${show(usable.length > 0 ? usable : ['…'])}`,
    );
  }
  return plans;
}

/** The plan with the list sizes of row 0 filled in. */
export function withListShape(plan: TensorColumn, sizes: readonly number[]): TensorColumn {
  const levels = plan.levels.map((l, i) => (l.kind === 'list' ? { ...l, size: sizes[i]! } : l));
  const extra = typeof plan.leaf === 'object' ? [plan.leaf.bytesPerElement] : [];
  const rowShape = [...levels.map((l) => l.size), ...extra];
  return { ...plan, levels, rowShape, rowSize: rowShape.reduce((a, b) => a * b, 1) };
}

function tensorType(type: DataType): { dtype: DType; levels: Level[]; leaf: Leaf } | string {
  const levels: Level[] = [];
  let t = type;
  for (;;) {
    if (t.typeId === Type.FixedSizeList) {
      levels.push({ kind: 'fixed', size: (t as unknown as { listSize: number }).listSize });
    } else if (t.typeId === Type.List || t.typeId === Type.LargeList) {
      levels.push({ kind: 'list', size: 0, large: t.typeId === Type.LargeList });
    } else {
      break;
    }
    const child = (t.children as Field[] | undefined)?.[0];
    if (child === undefined) return 'a list without an element type';
    t = child.type;
  }
  for (const l of levels) if (l.kind === 'fixed' && !(Number.isSafeInteger(l.size) && l.size >= 0)) return `a fixed-size list of size ${l.size}`;
  switch (t.typeId) {
    case Type.Int: {
      const { bitWidth, isSigned } = t as unknown as { bitWidth: number; isSigned: boolean };
      const dtype = intDType(bitWidth, isSigned);
      return dtype === undefined ? `an integer of ${bitWidth} bits` : { dtype, levels, leaf: bitWidth === 64 && !isSigned ? 'uint64' : 'plain' };
    }
    case Type.Float: {
      const p = (t as unknown as { precision: Precision }).precision;
      const dtype: DType = p === Precision.HALF ? 'float16' : p === Precision.SINGLE ? 'float32' : 'float64';
      return { dtype, levels, leaf: 'plain' };
    }
    case Type.Bool:
      return { dtype: 'uint8', levels, leaf: 'bool' };
    case Type.Dictionary: {
      const idx = (t as unknown as { indices: { bitWidth: number; isSigned: boolean } }).indices;
      const dtype = intDType(idx.bitWidth, idx.isSigned);
      return dtype === undefined ? 'dictionary codes of an unknown width' : { dtype, levels, leaf: idx.bitWidth === 64 && !idx.isSigned ? 'uint64' : 'plain' };
    }
    case Type.FixedSizeBinary: {
      const w = (t as unknown as { byteWidth: number }).byteWidth;
      return Number.isSafeInteger(w) && w >= 0 ? { dtype: 'uint8', levels, leaf: { bytesPerElement: w } } : `fixed-size bytes of width ${w}`;
    }
    default:
      return `${String(t)} is not a numeric type Stoker turns into tensors (numbers, booleans, dictionary codes and fixed-size lists of them are)`;
  }
}

/** The element type under any list levels. */
function leafType(type: DataType): DataType {
  let t = type;
  while (t.typeId === Type.FixedSizeList || t.typeId === Type.List || t.typeId === Type.LargeList) {
    const child = (t.children as Field[] | undefined)?.[0];
    if (child === undefined) return t;
    t = child.type;
  }
  return t;
}

function isText(type: DataType): boolean {
  return type.typeId === Type.Utf8 || type.typeId === Type.LargeUtf8 || type.typeId === Type.Utf8View;
}

function intDType(bitWidth: number, signed: boolean): DType | undefined {
  switch (bitWidth) {
    case 8:
      return signed ? 'int8' : 'uint8';
    case 16:
      return signed ? 'int16' : 'uint16';
    case 32:
      return signed ? 'int32' : 'uint32';
    case 64:
      return 'int64';
    default:
      return undefined;
  }
}

function bytesKind(type: DataType): BytesKind | undefined {
  switch (type.typeId) {
    case Type.Binary:
    case Type.Utf8:
      return 'offsets32';
    case Type.LargeBinary:
    case Type.LargeUtf8:
      return 'offsets64';
    case Type.BinaryView:
    case Type.Utf8View:
      return 'view';
    case Type.FixedSizeBinary:
      return { fixed: (type as unknown as { byteWidth: number }).byteWidth };
    default:
      return undefined;
  }
}

/** Hugging Face's Image/Audio storage: struct<bytes: binary, path: string>. */
function hfStruct(type: DataType): { struct: { kind: BytesKind; at: { bytes: number; path: number; pathKind: BytesKind | undefined } } } | undefined {
  if (type.typeId !== Type.Struct) return undefined;
  const children = type.children as Field[];
  const b = children.findIndex((c) => c.name === 'bytes');
  if (b < 0) return undefined;
  const kind = bytesKind(children[b]!.type);
  if (kind === undefined) return undefined;
  const p = children.findIndex((c) => c.name === 'path');
  const pathKind = p >= 0 ? bytesKind(children[p]!.type) : undefined;
  return { struct: { kind, at: { bytes: b, path: pathKind === undefined ? -1 : p, pathKind } } };
}

/** Names the place a problem was found, for messages. */
export interface Where {
  readonly path: string;
  /** Byte offset of the record batch's message. */
  readonly offset: number;
  readonly column: string;
  /** Dataset row (global). */
  readonly row: number;
}

/** ERR_BAD_FILE at the record batch, naming the column and the row. */
export function corrupt(w: Where, what: string): LoaderError {
  return badFile(w.path, w.offset, `column ${show(w.column)}, row ${w.row}: ${what}`);
}

/** A null where a tensor needs a value. */
export function nullInTensor(w: Where): LoaderError {
  return invalidDatasetError(
    `${w.path}: column ${show(w.column)}, row ${w.row} holds a null; a tensor needs a value in every element. Fill the nulls (pyarrow: pyarrow.compute.fill_null) or leave the column out with \`columns\``,
  );
}

/** A row of a variable-length list column whose list at `level` is not the size row 0's is. */
export function raggedRow(w: Where, plan: TensorColumn, level: number, got: number): LoaderError {
  return invalidDatasetError(
    `${w.path}: column ${show(w.column)} is a variable-length list (${plan.type}): row ${w.row} holds a list of ${got} where row 0 holds ${plan.levels[level]!.size} (list level ${level}). Stoker needs one shape per column: pass a decoder for it (decoders: { ${show(w.column)}: { kind: 'module', module, export } }), or leave it out with \`columns\``,
  );
}

/** A uint64 value that int64 cannot hold. */
export function uint64Row(w: Where, v: bigint): LoaderError {
  return invalidDatasetError(`${w.path}: column ${show(w.column)}, row ${w.row} holds the uint64 ${v}, which int64 (Stoker's 64-bit integer) cannot hold. Leave the column out with \`columns\``);
}

function checkValid(d: Data, start: number, count: number, w: Where): void {
  const bitmap = d.nullBitmap;
  if (bitmap === undefined || bitmap === null || bitmap.length === 0) return;
  for (let i = 0; i < count; i++) {
    const bit = d.offset + start + i;
    const byte = bit >>> 3;
    if (byte >= bitmap.length) throw corrupt(w, `the validity bitmap holds ${bitmap.length * 8} bits, fewer than its ${d.length} values`);
    if ((bitmap[byte]! & (1 << (bit & 7))) === 0) throw nullInTensor(w);
  }
}

/** An offset from an Int32Array or BigInt64Array, as a safe number, or -1. */
function offsetAt(offsets: ArrayLike<number | bigint>, i: number): number {
  const v = offsets[i];
  if (typeof v === 'bigint') return v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : -1;
  return typeof v === 'number' ? v : -1;
}

/**
 * Copy elements [start, start + count) of `d` (logical indices, at list level `level` of `plan`)
 * into `out` at `pos`, checking every index first. With `out` undefined, only check (and learn
 * nothing: list sizes must already be in the plan).
 */
export function gather(plan: TensorColumn, d: Data, level: number, start: number, count: number, out: Storage | undefined, pos: number, w: Where): void {
  if (start < 0 || start + count > d.length) throw corrupt(w, `elements [${start}, ${start + count}) lie outside the ${d.length} values of level ${level}`);
  checkValid(d, start, count, w);
  const lv = plan.levels[level];
  if (lv === undefined) return copyLeaf(plan, d, start, count, out, pos, w);
  const child = d.children[0];
  if (child === undefined) throw corrupt(w, 'a list has no element data');
  if (lv.kind === 'fixed') return gather(plan, child, level + 1, (d.offset + start) * lv.size, count * lv.size, out, pos, w);
  const offsets = d.valueOffsets as ArrayLike<number | bigint> | undefined;
  const base = d.offset + start;
  if (offsets === undefined || offsets.length < base + count + 1) throw corrupt(w, 'the list offsets buffer is shorter than its rows');
  const first = offsetAt(offsets, base);
  let previous = first;
  for (let i = 1; i <= count; i++) {
    const next = offsetAt(offsets, base + i);
    if (previous < 0 || next < previous) throw corrupt(w, `list offsets go from ${previous} to ${next}`);
    if (next - previous !== lv.size) throw raggedRow(w, plan, level, next - previous);
    previous = next;
  }
  return gather(plan, child, level + 1, first, count * lv.size, out, pos, w);
}

function copyLeaf(plan: TensorColumn, d: Data, start: number, count: number, out: Storage | undefined, pos: number, w: Where): void {
  const values = d.values as unknown as (ArrayLike<number | bigint> & { subarray(a: number, b: number): unknown }) | undefined;
  if (values === undefined || values === null) throw corrupt(w, 'the column has no data buffer');
  const p = d.offset + start;
  const { leaf } = plan;
  if (leaf === 'bool') {
    if (((p + count + 7) >>> 3) > values.length) throw corrupt(w, `the data buffer holds ${values.length * 8} booleans, fewer than its ${d.length} values`);
    if (out === undefined) return;
    const bits = values as Uint8Array;
    for (let i = 0; i < count; i++) (out as Uint8Array)[pos + i] = (bits[(p + i) >>> 3]! >>> ((p + i) & 7)) & 1;
    return;
  }
  const width = typeof leaf === 'object' ? leaf.bytesPerElement : 1;
  if ((p + count) * width > values.length) throw corrupt(w, `the data buffer holds ${Math.floor(values.length / width)} values, fewer than its ${d.length}`);
  if (out === undefined) return;
  if (leaf === 'uint64') {
    const src = values as BigUint64Array;
    const dst = out as BigInt64Array;
    for (let i = 0; i < count; i++) {
      const v = src[p + i]!;
      if (v >= 2n ** 63n) throw uint64Row(w, v);
      dst[pos + i] = v;
    }
    return;
  }
  // `pos` counts output elements, which for fixed-size binary are already bytes.
  (out as unknown as { set(a: unknown, at: number): void }).set(values.subarray(p * width, (p + count) * width), pos);
}

/** The list sizes of row 0 (batch-local row `row` of `d`), for the list levels of `plan`. */
export function listShapeOf(plan: TensorColumn, d: Data, row: number, w: Where): number[] {
  const sizes: number[] = [];
  let data = d;
  let index = row;
  for (const [level, lv] of plan.levels.entries()) {
    if (index < 0 || index >= data.length) throw corrupt(w, `element ${index} lies outside the ${data.length} values of level ${level}`);
    checkValid(data, index, 1, w);
    const child = data.children[0];
    if (child === undefined) throw corrupt(w, 'a list has no element data');
    const at = data.offset + index;
    if (lv.kind === 'fixed') {
      sizes.push(lv.size);
      index = at * lv.size;
    } else {
      const offsets = data.valueOffsets as ArrayLike<number | bigint> | undefined;
      if (offsets === undefined || offsets.length < at + 2) throw corrupt(w, 'the list offsets buffer is shorter than its rows');
      const a = offsetAt(offsets, at);
      const b = offsetAt(offsets, at + 1);
      if (a < 0 || b < a) throw corrupt(w, `list offsets go from ${a} to ${b}`);
      sizes.push(b - a);
      index = a;
    }
    data = child;
  }
  return sizes;
}

/**
 * The bytes of batch-local row `row` of a decoder column, or the path a Hugging Face image struct
 * points at when its bytes are null (HF stores local images by path).
 */
export function rowBytes(plan: BytesColumn, d: Data, row: number, w: Where): Uint8Array | { readonly file: string } {
  if (row < 0 || row >= d.length) throw corrupt(w, `row ${row} lies outside the column's ${d.length} values`);
  checkValid(d, row, 1, w);
  if (plan.struct === undefined) {
    const b = bytesAt(plan.bytes, d, row, w);
    if (b === null) throw nullRow(w);
    return b;
  }
  const at = d.offset + row;
  const bytesData = d.children[plan.struct.bytes];
  if (bytesData === undefined) throw corrupt(w, 'the struct has no "bytes" data');
  if (at >= bytesData.length) throw corrupt(w, `the struct's "bytes" child holds ${bytesData.length} values, fewer than its rows`);
  const b = bytesAt(plan.bytes, bytesData, at, w);
  if (b !== null) return b;
  const pathData = plan.struct.path >= 0 ? d.children[plan.struct.path] : undefined;
  if (pathData === undefined || plan.struct.pathKind === undefined || at >= pathData.length) throw nullRow(w);
  const p = bytesAt(plan.struct.pathKind, pathData, at, w);
  if (p === null || p.length === 0) throw nullRow(w);
  return { file: new TextDecoder().decode(p) };
}

/** A decoder column's row without bytes. */
export function nullRow(w: Where): LoaderError {
  return invalidDatasetError(`${w.path}: column ${show(w.column)}, row ${w.row} is null; a decoder needs bytes in every row. Filter those rows out, or leave the column out with \`columns\``);
}

/** The bytes of element `i` of binary-like `d`, or null when it is null. */
export function bytesAt(kind: BytesKind, d: Data, i: number, w: Where): Uint8Array | null {
  const bitmap = d.nullBitmap;
  if (bitmap !== undefined && bitmap !== null && bitmap.length > 0) {
    const bit = d.offset + i;
    if (bit >>> 3 >= bitmap.length) throw corrupt(w, 'the validity bitmap is shorter than its values');
    if ((bitmap[bit >>> 3]! & (1 << (bit & 7))) === 0) return null;
  }
  const values = d.values as unknown as Uint8Array | undefined;
  if (values === undefined || values === null) throw corrupt(w, 'the column has no data buffer');
  const p = d.offset + i;
  if (typeof kind === 'object') {
    if ((p + 1) * kind.fixed > values.length) throw corrupt(w, 'the data buffer is shorter than its values');
    return values.subarray(p * kind.fixed, (p + 1) * kind.fixed);
  }
  if (kind === 'view') {
    if ((p + 1) * 16 > values.length) throw corrupt(w, 'the views buffer is shorter than its values');
    const view = new DataView(values.buffer, values.byteOffset + p * 16, 16);
    const size = view.getInt32(0, true);
    if (size < 0) throw corrupt(w, `a view has the negative length ${size}`);
    if (size <= 12) return values.subarray(p * 16 + 4, p * 16 + 4 + size);
    const buffer = d.variadicBuffers[view.getInt32(8, true)];
    const offset = view.getInt32(12, true);
    if (buffer === undefined || offset < 0 || offset + size > buffer.length) throw corrupt(w, 'a view points outside its data buffers');
    return buffer.subarray(offset, offset + size);
  }
  const offsets = d.valueOffsets as ArrayLike<number | bigint> | undefined;
  if (offsets === undefined || offsets.length < p + 2) throw corrupt(w, 'the offsets buffer is shorter than its values');
  const a = offsetAt(offsets, p);
  const b = offsetAt(offsets, p + 1);
  if (a < 0 || b < a || b > values.length) throw corrupt(w, `the value spans bytes [${a}, ${b}) of a data buffer of ${values.length}`);
  return values.subarray(a, b);
}
