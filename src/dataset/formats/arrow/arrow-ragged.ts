// `sources.arrow(path, { ragged })`: Arrow string, large-string, binary, view (Utf8View and
// BinaryView, as Polars writes strings) and (large) list columns as ragged fields of a per-sample
// dataset. `ragged: { text: { tokenizer }, ids: 'values', raw: 'values' }`: a string column
// tokenized (int32 ids), a list<number> column's values (its dtype), a string or binary column's
// bytes (uint8, UTF-8 for strings). The other selected columns are read
// by the ordinary Arrow source (row reads, decoders) one row at a time; the ragged ones from the
// record batch that holds the row, decoded with apache-arrow, the last one kept per reader (rows
// in order, or shuffled within record batches, decode each record batch once). The rule: every
// offset is checked against its buffer before a slice is taken, so a damaged file is a typed error
// naming the file, the column and the row, never a wrong slice.

import { partAt } from '../part-index.js';
import { resolve } from 'node:path';
import { type Data, DataType, Message, type RecordBatch, type Schema } from 'apache-arrow';
import { LoaderError, badFile, emptyDatasetError, indexOutOfRange, invalidDatasetError, invalidOption, notRaggedField, show } from '../../../errors.js';
import { type DType, type Storage, allocStorage } from '../../../tensor/dtype.js';
import { type Tensor, trustedTensor } from '../../../tensor/tensor.js';
import type { Dataset } from '../../dataset.js';
import { type Reopenable, type SourceSpec, kSourceSpec, specOf } from '../../source-spec.js';
import { type ArrowOptions, type ArrowSource, arrowSource, openArrow } from './arrow.js';
import { type ArrowIndex, buildIndex, decodeRecordBatch } from './arrow-index.js';
import { bytesAt } from './arrow-columns.js';
import { PositionedFile } from '../file.js';
import { stampOf } from '../tar/tar-index.js';
import { type CountsLengths, countInFlight, lengthsField, memoLengths, textLengths } from '../text/text-lengths.js';
import { type ResolvedTokenizer, type TokenizerOptions, resolveTokenizer, tokenize } from '../text/tokenizer.js';

/** How a ragged column is read: 'values' (a list's values, or a string's / binary's bytes), or tokenized text. */
export type ArrowRaggedField = 'values' | { readonly tokenizer: TokenizerOptions };

export interface ArrowRaggedOptions extends ArrowOptions {
  /** Columns read as ragged fields, by how. They may be listed in `columns` (to set their place) or not (they come last). */
  readonly ragged: { readonly [column: string]: ArrowRaggedField };
}

/** `view`: a Utf8View / BinaryView column (Polars' strings), whose rows are 16-byte views, not offsets. */
type Plan =
  | { readonly name: string; readonly field: number; readonly how: 'bytes'; readonly large: boolean; readonly view: boolean }
  | { readonly name: string; readonly field: number; readonly how: 'list'; readonly large: boolean; readonly dtype: DType }
  | { readonly name: string; readonly field: number; readonly how: 'tokens'; readonly large: boolean; readonly view: boolean; readonly tokenizer: ResolvedTokenizer };

/** Internal: what reader workers receive. */
export interface ArrowRaggedSpec {
  readonly path: string;
  readonly index: ArrowIndex;
  readonly plans: readonly Plan[];
  /** Field order of a sample. */
  readonly order: readonly string[];
  /** The ordinary source's spec for the other columns, if any. */
  readonly fixed: SourceSpec | undefined;
}

const FLOATS: Record<number, DType> = { 0: 'float16', 1: 'float32', 2: 'float64' };

export class ArrowRaggedSource implements Dataset, Reopenable, CountsLengths {
  readonly length: number;
  readonly path: string;
  readonly ragged: readonly string[];
  readonly raggedMax: { readonly [field: string]: number };
  readonly #spec: ArrowRaggedSpec;
  readonly #schema: Schema;
  readonly #fixed: ArrowSource | undefined;
  readonly #starts: Float64Array;
  #file: PositionedFile | undefined;
  #last: { k: number; batch: RecordBatch } | undefined;
  #decodedBatches = 0;
  readonly #lengths = new Map<string, Promise<Uint32Array>>();

  constructor(spec: ArrowRaggedSpec, schema: Schema, fixed: ArrowSource | undefined) {
    this.#spec = spec;
    this.#schema = schema;
    this.#fixed = fixed;
    this.path = spec.path;
    const rows = spec.index.rows;
    const starts = new Float64Array(rows.length + 1);
    rows.forEach((r, k) => (starts[k + 1] = starts[k]! + r));
    this.#starts = starts;
    this.length = starts[rows.length]!;
    this.ragged = Object.freeze(spec.plans.map((p) => p.name));
    this.raggedMax = Object.freeze(Object.fromEntries(spec.plans.flatMap((p) => (p.how === 'tokens' && p.tokenizer.maxLength !== undefined ? [[p.name, p.tokenizer.maxLength]] : []))));
  }

  /** Each record batch's first row (the block shuffle's blocks: HasParts, capabilities.ts). */
  partStarts(): Float64Array {
    return this.#starts.subarray(0, this.#starts.length - 1);
  }

  /** Record batches this copy decoded for its ragged columns (for tests: the last one is reused). */
  get decodedBatches(): number {
    return this.#decodedBatches;
  }

  async get(i: number): Promise<Record<string, Tensor | Int32Array | Uint8Array>> {
    if (!Number.isInteger(i) || i < 0 || i >= this.length) throw indexOutOfRange(this.path, 'row', i, this.length);
    const got: Record<string, Tensor | Int32Array | Uint8Array> = {};
    if (this.#fixed !== undefined) {
      const cols = await this.#fixed.getBatch([i]);
      for (const [name, t] of Object.entries(cols)) got[name] = trustedTensor(t.dtype, t.data as Storage, t.shape.slice(1));
    }
    const k = this.#batchOf(i);
    const batch = this.#batch(k);
    const r = i - this.#starts[k]!;
    for (const p of this.#spec.plans) got[p.name] = await this.#value(p, batch.data.children[p.field]!, r, i);
    const out: Record<string, Tensor | Int32Array | Uint8Array> = {};
    for (const name of this.#spec.order) out[name] = got[name]!;
    return out;
  }

  /**
   * Every row's length of ragged column `field` (default: the one ragged column), as `get(i)` gives
   * it: a tokenized string column's token count (counted by a pool of worker threads and cached on
   * disk, see text-lengths.ts); a list's values or a string's / binary's bytes straight from the
   * column's offsets, here (no values are copied).
   */
  async loadLengths(field?: string): Promise<Uint32Array> {
    return memoLengths(this.#lengths, lengthsField(this.path, this.ragged, field), (name) => this.#computeLengths(name));
  }

  async #computeLengths(name: string): Promise<Uint32Array> {
    const plan = this.#spec.plans.find((p) => p.name === name)!;
    if (plan.how === 'tokens') {
      const stamp = stampOf(this.path);
      if (stamp.size !== this.#spec.index.fileSize) throw badFile(this.path, 0, `the file changed size since it was indexed (${this.#spec.index.fileSize} bytes then, ${stamp.size} now)`, 'Open the source again after rewriting the file');
      return textLengths({ path: this.path, stamp, field: name, tokenizer: plan.tokenizer, count: this.length, spec: this[kSourceSpec]() }, () => stampOf(this.path));
    }
    const out = new Uint32Array(this.length);
    await this.countLengths(name, 0, this.length, out);
    return out;
  }

  /** Lengths of `field` for rows [start, end) into out[start…end), record batch by record batch, with get(i)'s checks. */
  async countLengths(field: string, start: number, end: number, out: Uint32Array): Promise<void> {
    const p = this.#spec.plans.find((x) => x.name === field);
    if (p === undefined) throw notRaggedField(this.path, 'column', field);
    await countInFlight(start, end, out, async (i) => {
      const k = this.#batchOf(i);
      const d = this.#batch(k).data.children[p.field]!;
      const r = i - this.#starts[k]!;
      if (p.how === 'tokens') return ((await this.#value(p, d, r, i)) as Int32Array).length;
      if (p.how === 'bytes' && p.view) return this.#viewBytes(p, d, r, i).length;
      const [begin, stop] = this.#range(p, d, r, i);
      return stop - begin;
    });
  }

  #bad(p: Plan, row: number, what: string): LoaderError {
    return badFile(this.path, this.#spec.index.offsets[this.#batchOf(row)]!, `column ${show(p.name)} row ${row}: ${what}`);
  }

  /** Row r's [begin, end) in its column's values (list values, or bytes), checked: not null, inside the buffer, no null value. */
  #range(p: Plan, d: Data, r: number, row: number): [number, number] {
    const at = d.offset + r;
    if (d.nullCount > 0 && d.nullBitmap !== undefined && d.nullBitmap.length > 0 && ((d.nullBitmap[at >> 3]! >> (at & 7)) & 1) === 0) throw this.#bad(p, row, 'is null; a ragged field needs a value in every row');
    const offs = d.valueOffsets as Int32Array | BigInt64Array | undefined;
    if (offs === undefined || offs.length < at + 2) throw this.#bad(p, row, 'its offsets buffer is too short');
    const begin = Number(offs[at]!);
    const end = Number(offs[at + 1]!);
    if (p.how === 'list') {
      const child = d.children[0]!;
      const values = child.values as Storage;
      if (!(begin >= 0 && begin <= end && child.offset + end <= values.length)) throw this.#bad(p, row, `offsets [${begin}, ${end}) lie outside its ${values.length} values`);
      if (child.nullCount > 0) for (let j = begin; j < end; j++) if (!child.getValid(j)) throw this.#bad(p, row, `holds a null at value ${j - begin}`);
    } else {
      const bytes = d.values as Uint8Array;
      if (!(begin >= 0 && begin <= end && end <= bytes.length)) throw this.#bad(p, row, `offsets [${begin}, ${end}) lie outside its ${bytes.length} bytes`);
    }
    return [begin, end];
  }

  /** Row r's bytes in a view column, checked as the ordinary source checks them (arrow-columns' bytesAt). */
  #viewBytes(p: Plan, d: Data, r: number, row: number): Uint8Array {
    const b = bytesAt('view', d, r, { path: this.path, offset: this.#spec.index.offsets[this.#batchOf(row)]!, column: p.name, row });
    if (b === null) throw this.#bad(p, row, 'is null; a ragged field needs a value in every row');
    return b;
  }

  /** Row r's value: a tensor or bytes at once, token ids later (tokenizing runs off the thread). */
  #value(p: Plan, d: Data, r: number, row: number): Tensor | Uint8Array | Promise<Int32Array> {
    if (p.how === 'list') {
      const [begin, end] = this.#range(p, d, r, row);
      const child = d.children[0]!;
      const values = child.values as Storage;
      const out = allocStorage(p.dtype, end - begin);
      out.set(values.subarray(child.offset + begin, child.offset + end) as never);
      return trustedTensor(p.dtype, out, [end - begin]);
    }
    let slice: Uint8Array;
    if (p.view) {
      slice = this.#viewBytes(p, d, r, row).slice();
    } else {
      const [begin, end] = this.#range(p, d, r, row);
      slice = (d.values as Uint8Array).slice(begin, end);
    }
    if (p.how === 'bytes') return slice;
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(slice);
    } catch {
      throw this.#bad(p, row, 'is not valid UTF-8');
    }
    return tokenize(p.tokenizer, text);
  }

  #batch(k: number): RecordBatch {
    if (this.#last?.k === k) return this.#last.batch;
    const { index } = this.#spec;
    if (this.#file === undefined) {
      const f = new PositionedFile(this.path);
      if (f.size !== index.fileSize) {
        f.close();
        throw badFile(this.path, 0, `the file changed size since it was indexed (${index.fileSize} bytes then, ${f.size} now)`, 'Open the source again after rewriting the file');
      }
      this.#file = f;
    }
    const schemaBytes = index.schemaMessage;
    const bytes = new Uint8Array(schemaBytes.length + index.lengths[k]!);
    bytes.set(schemaBytes, 0);
    this.#file.read(index.offsets[k]!, index.lengths[k]!, `record batch ${k}`, bytes, schemaBytes.length);
    const batch = decodeRecordBatch(this.path, bytes, schemaBytes.length, index, k, this.#schema);
    this.#decodedBatches++;
    this.#last = { k, batch };
    return batch;
  }

  #batchOf(i: number): number {
    return partAt(this.#starts, i, this.#starts.length - 2);
  }

  [kSourceSpec](): SourceSpec {
    return { module: import.meta.url, export: 'openArrowRagged', options: this.#spec };
  }

  async close(): Promise<void> {
    this.#file?.close();
    this.#file = undefined;
    this.#last = undefined;
    await this.#fixed?.close();
  }
}

/** Open `path` with `ragged` columns: plan them from the schema, and the other columns with the ordinary source. */
export function arrowRaggedSource(path: string, options: ArrowRaggedOptions): ArrowRaggedSource {
  const { ragged, ...rest } = options;
  if (ragged === null || typeof ragged !== 'object' || Array.isArray(ragged) || Object.keys(ragged).length === 0) {
    throw invalidOption('ragged', "a record { column: 'values' | { tokenizer } } with at least one column", ragged);
  }
  const full = resolve(path);
  const file = new PositionedFile(full);
  let index: ArrowIndex;
  let schema: Schema;
  try {
    ({ index, schema } = buildIndex(file));
  } finally {
    file.close();
  }
  const names = schema.fields.map((f) => f.name);
  const plans: Plan[] = Object.entries(ragged).map(([name, how]) => planRagged(full, schema, names, name, how));
  const raggedNames = plans.map((p) => p.name);
  const listed = rest.columns ?? names;
  const order = [...listed, ...raggedNames.filter((n) => !listed.includes(n))];
  const fixedColumns = listed.filter((n) => !raggedNames.includes(n));
  const fixed = fixedColumns.length > 0 ? arrowSource(full, { ...rest, columns: fixedColumns }) : undefined;
  if (index.rows.every((r) => r === 0)) throw emptyDatasetError(`${full}: the Arrow ${index.format} holds no rows`);
  return new ArrowRaggedSource({ path: full, index, plans, order, fixed: fixed === undefined ? undefined : specOf(fixed) }, schema, fixed);
}

function planRagged(path: string, schema: Schema, names: readonly string[], name: string, how: ArrowRaggedField): Plan {
  const field = names.indexOf(name);
  if (field < 0) throw invalidOption(`ragged.${name}`, `a column of ${path}`, name, `Its columns are ${names.map(show).join(', ')}`);
  const type = schema.fields[field]!.type;
  const view = DataType.isUtf8View(type) || DataType.isBinaryView(type);
  const text = DataType.isUtf8(type) || DataType.isLargeUtf8(type) || DataType.isUtf8View(type);
  const bytes = text || view || DataType.isBinary(type) || DataType.isLargeBinary(type);
  const large = DataType.isLargeUtf8(type) || DataType.isLargeBinary(type) || DataType.isLargeList(type);
  if (how === 'values') {
    if (bytes) return { name, field, how: 'bytes', large, view };
    if (DataType.isList(type) || DataType.isLargeList(type)) {
      const child = type.children[0]!.type;
      const dtype = DataType.isInt(child) ? intDtype(child.bitWidth, child.isSigned) : DataType.isFloat(child) ? FLOATS[child.precision] : undefined;
      if (dtype === undefined) throw invalidOption(`ragged.${name}`, 'a list of integers or floats (int8…int64, uint8…uint32, float16/32/64)', String(type));
      return { name, field, how: 'list', large, dtype };
    }
    throw invalidOption(`ragged.${name}`, "a string, binary or list column for 'values'", String(type));
  }
  if (how === null || typeof how !== 'object' || !('tokenizer' in how)) throw invalidOption(`ragged.${name}`, "'values' or { tokenizer: { path: 'tokenizer.json' } }", how);
  if (!text) throw invalidOption(`ragged.${name}`, 'a string column to tokenize', String(type), "Use 'values' for lists and binary columns");
  return { name, field, how: 'tokens', large, view, tokenizer: resolveTokenizer(how.tokenizer, `ragged.${name}.tokenizer`) };
}

function intDtype(bits: number, signed: boolean): DType | undefined {
  if (bits === 64) return signed ? 'int64' : undefined;
  return (`${signed ? '' : 'u'}int${bits}` as DType);
}

/** Worker-side factory. */
export function openArrowRagged(spec: ArrowRaggedSpec): ArrowRaggedSource {
  const meta = spec.index.schemaMessage;
  const prefix = meta.length >= 8 && new DataView(meta.buffer, meta.byteOffset).getInt32(0, true) === -1 ? 8 : 4;
  let schema: Schema | undefined;
  try {
    const m = Message.decode(meta.subarray(prefix));
    if (m.isSchema()) schema = m.header() as Schema;
  } catch {
    schema = undefined;
  }
  if (schema === undefined) throw invalidDatasetError(`openArrowRagged: the schema passed for ${spec.path} cannot be decoded; open Arrow sources with sources.arrow(path)`);
  const fixed = spec.fixed === undefined ? undefined : openArrow(spec.fixed.options as never);
  return new ArrowRaggedSource(spec, schema, fixed);
}
