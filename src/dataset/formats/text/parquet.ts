// `sources.parquet`: a Parquet file as a dataset, one row per sample, read with hyparquet (pure
// JavaScript) through positioned reads of this file: the footer once per open, then for a sample
// the row group that holds it — only the selected columns' chunks, by the offsets the footer gives.
// Each reader keeps the last row group it decoded, so ids in row-group order (sequential, or a
// sampler that shuffles row groups and then rows within them) decode every row group once; fully
// shuffled ids over many row groups decode one row group per sample (write smaller row groups, or
// use a loader cache). Columns: integers and floats become scalars of their dtype, list<number>
// ragged fields, strings token ids through a tokenizer.json (or a typed error pointing at
// `tokenizer`). Pages of every codec DuckDB, Polars and pyarrow write are read (codecs.ts); a
// column stored with one Stoker cannot decompress (LZO) is refused at open, and so is a `tokenizer`
// with no string column to use it. The rule: the file must not change while a loader reads it;
// each open checks its size against the one seen first.

import { partAt } from '../part-index.js';
import { resolve } from 'node:path';
import { type AsyncBuffer, type ColumnMetaData, type FileMetaData, type SchemaTree, parquetMetadataAsync, parquetRead, parquetSchema } from 'hyparquet';
import { LoaderError, badFile, emptyFile, indexOutOfRange, invalidDatasetError, invalidOption, invalidSourcePath, notRaggedField, show, tokenizerUnused, unsupportedCodec } from '../../../errors.js';
import { PARQUET_CODECS, PARQUET_READABLE } from '../codecs.js';
import { type FlippedRows, flippedRows, mayNeedCorrection, unflip } from './parquet-delta.js';
import type { DType } from '../../../tensor/dtype.js';
import type { Tensor } from '../../../tensor/tensor.js';
import type { Dataset } from '../../dataset.js';
import { type Reopenable, type SourceSpec, kSourceSpec } from '../../source-spec.js';
import { PositionedFile } from '../file.js';
import { type FieldKind, textNeedsTokenizer, toField } from './jsonl-fields.js';
import { stampOf } from '../tar/tar-index.js';
import { type CountsLengths, countInFlight, lengthsField, memoLengths, textLengths } from './text-lengths.js';
import { type ResolvedTokenizer, type TokenizerOptions, resolveTokenizer } from './tokenizer.js';

export interface ParquetOptions {
  /** Columns to read, in this order (top-level names). Default: every column. */
  readonly columns?: readonly string[];
  /** Tokenizer for string columns: `{ path: 'tokenizer.json', addSpecialTokens?, maxLength? }`. Without it a string column is refused. */
  readonly tokenizer?: TokenizerOptions;
}

/** Internal: what reader workers receive. */
export interface ParquetSpec {
  readonly path: string;
  readonly fileSize: number;
  readonly kinds: readonly FieldKind[];
  readonly tokenizer: ResolvedTokenizer | undefined;
}

const KNOWN = ['columns', 'tokenizer'];

interface RowGroupRows {
  readonly k: number;
  readonly rows: Promise<unknown[][]>;
}

export class ParquetSource implements Dataset, Reopenable, CountsLengths {
  readonly length: number;
  readonly path: string;
  readonly ragged: readonly string[];
  readonly raggedMax: { readonly [field: string]: number };
  readonly numRowGroups: number;
  readonly #spec: ParquetSpec;
  readonly #metadata: FileMetaData;
  /** Row where each row group starts, and the total at the end. */
  readonly #starts: Float64Array;
  #file: PositionedFile | undefined;
  #last: RowGroupRows | undefined;
  #decodedGroups = 0;
  readonly #lengths = new Map<string, Promise<Uint32Array>>();
  /** Per row group and column (`k/c`), the rows hyparquet misread (NOTE [hyparquet's 32-bit first value]). */
  readonly #flips = new Map<string, FlippedRows[]>();

  constructor(spec: ParquetSpec, metadata: FileMetaData) {
    this.#spec = spec;
    this.#metadata = metadata;
    this.path = spec.path;
    const groups = metadata.row_groups;
    this.numRowGroups = groups.length;
    const starts = new Float64Array(groups.length + 1);
    groups.forEach((g, k) => (starts[k + 1] = starts[k]! + Number(g.num_rows)));
    this.#starts = starts;
    this.length = starts[groups.length]!;
    this.ragged = Object.freeze(spec.kinds.filter((k) => k.kind !== 'scalar').map((k) => k.name));
    const max = spec.tokenizer?.maxLength;
    this.raggedMax = Object.freeze(max === undefined ? {} : Object.fromEntries(spec.kinds.filter((k) => k.kind === 'text').map((k) => [k.name, max])));
  }

  get fields(): readonly FieldKind[] {
    return this.#spec.kinds;
  }

  /** Each row group's first row (the block shuffle's blocks: HasParts, capabilities.ts). */
  partStarts(): Float64Array {
    return this.#starts.subarray(0, this.#starts.length - 1);
  }

  /** Row groups this copy has decoded (for tests: the last one is reused). */
  get decodedRowGroups(): number {
    return this.#decodedGroups;
  }

  async get(i: number): Promise<Record<string, Tensor | Int32Array>> {
    if (!Number.isInteger(i) || i < 0 || i >= this.length) throw indexOutOfRange(this.path, 'row', i, this.length);
    const k = this.#groupOf(i);
    if (this.#last?.k !== k) this.#last = { k, rows: this.#readGroup(k) };
    const last = this.#last;
    let rows: unknown[][];
    try {
      rows = await last.rows;
    } catch (cause) {
      if (this.#last === last) this.#last = undefined;
      if (cause instanceof LoaderError) throw cause;
      throw badFile(this.path, Number(this.#metadata.row_groups[k]!.columns[0]?.meta_data?.data_page_offset ?? 0), `row group ${k} cannot be decoded: ${(cause as Error).message}`, 'The file is damaged, or uses an encoding hyparquet does not read');
    }
    const row = rows[i - this.#starts[k]!]!;
    const at = { path: this.path, offset: 0, record: i };
    const out: Record<string, Tensor | Int32Array> = {};
    for (const [c, kind] of this.#spec.kinds.entries()) out[kind.name] = await toField(kind, row[c], at, this.#spec.tokenizer);
    return out;
  }

  /**
   * Every row's length of ragged column `field` (default: the one ragged column), as `get(i)` gives
   * it: a string column's token count (counted by a pool of worker threads and cached on disk, see
   * text-lengths.ts), a list column's element count (decoded here, that column only).
   */
  async loadLengths(field?: string): Promise<Uint32Array> {
    return memoLengths(this.#lengths, lengthsField(this.path, this.ragged, field), (name) => this.#computeLengths(name));
  }

  async #computeLengths(name: string): Promise<Uint32Array> {
    const kind = this.#spec.kinds.find((k) => k.name === name)!;
    if (kind.kind === 'text') {
      const stamp = stampOf(this.path);
      if (stamp.size !== this.#spec.fileSize) throw badFile(this.path, 0, `the file changed size since it was opened (${this.#spec.fileSize} bytes then, ${stamp.size} now)`, 'Open the source again after rewriting the file');
      return textLengths({ path: this.path, stamp, field: name, tokenizer: this.#spec.tokenizer!, count: this.length, spec: this[kSourceSpec]() }, () => stampOf(this.path));
    }
    const out = new Uint32Array(this.length);
    await this.countLengths(name, 0, this.length, out);
    return out;
  }

  /** Lengths of `field` for rows [start, end) into out[start…end): that column only, row group by row group, through get(i)'s conversion. */
  async countLengths(field: string, start: number, end: number, out: Uint32Array): Promise<void> {
    const kind = this.#spec.kinds.find((k) => k.name === field);
    if (kind === undefined || kind.kind === 'scalar') throw notRaggedField(this.path, 'column', field);
    for (let k = start < end ? this.#groupOf(start) : this.numRowGroups; k < this.numRowGroups && this.#starts[k]! < end; k++) {
      const from = Math.max(start, this.#starts[k]!);
      const to = Math.min(end, this.#starts[k + 1]!);
      let rows: unknown[][];
      try {
        rows = await this.#readRows([field], from, to);
      } catch (cause) {
        if (cause instanceof LoaderError) throw cause;
        throw badFile(this.path, Number(this.#metadata.row_groups[k]!.columns[0]?.meta_data?.data_page_offset ?? 0), `row group ${k} cannot be decoded: ${(cause as Error).message}`, 'The file is damaged, or uses an encoding hyparquet does not read');
      }
      if (rows.length !== to - from) throw badFile(this.path, 0, `row group ${k} gave ${rows.length} rows of column ${show(field)} for rows ${from}–${to - 1}`);
      await countInFlight(from, to, out, async (i) => {
        const v = await toField(kind, rows[i - from]![0], { path: this.path, offset: 0, record: i }, this.#spec.tokenizer);
        return v instanceof Int32Array ? v.length : v.shape[0]!;
      });
    }
  }

  async #readGroup(k: number): Promise<unknown[][]> {
    this.#decodedGroups++;
    const rows = await this.#readRows(this.#spec.kinds.map((c) => c.name), this.#starts[k]!, this.#starts[k + 1]!);
    this.#correct(k, rows);
    return rows;
  }

  /**
   * Put back bit 31 of the uint32 values hyparquet misread in row group `k` (NOTE [hyparquet's
   * 32-bit first value]). Only values: `countLengths` reads lengths, which the misread leaves alone.
   */
  #correct(k: number, rows: unknown[][]): void {
    this.#spec.kinds.forEach((kind, c) => {
      if (kind.kind === 'text' || kind.dtype !== 'uint32') return;
      const chunk = this.#metadata.row_groups[k]!.columns.find((ch) => ch.meta_data?.path_in_schema[0] === kind.name)?.meta_data;
      if (!mayNeedCorrection(chunk)) return;
      const key = `${k}/${c}`;
      let flips = this.#flips.get(key);
      if (flips === undefined) this.#flips.set(key, (flips = this.#findFlips(k, chunk!)));
      for (const { start, end } of flips) for (let r = start; r < end && r < rows.length; r++) rows[r]![c] = unflip(rows[r]![c]);
    });
  }

  #findFlips(k: number, chunk: ColumnMetaData): FlippedRows[] {
    const start = Number(chunk.dictionary_page_offset || chunk.data_page_offset);
    const length = Math.min(Number(chunk.total_compressed_size), this.#spec.fileSize - start);
    this.#file ??= PositionedFile.openSized(this.path, this.#spec.fileSize);
    const bytes = this.#file.read(start, length, `row group ${k} column ${show(chunk.path_in_schema.join('.'))}`);
    try {
      return flippedRows(bytes, chunk, this.#metadata.schema, PARQUET_CODECS, this.#starts[k + 1]! - this.#starts[k]!);
    } catch (cause) {
      throw badFile(this.path, start, `row group ${k} column ${show(chunk.path_in_schema.join('.'))}: ${(cause as Error).message}`);
    }
  }

  #readRows(columns: string[], rowStart: number, rowEnd: number): Promise<unknown[][]> {
    this.#file ??= PositionedFile.openSized(this.path, this.#spec.fileSize);
    const file = asyncBuffer(this.#file);
    return new Promise((resolvePromise, reject) => {
      parquetRead({
        file,
        metadata: this.#metadata,
        columns,
        rowStart,
        rowEnd,
        compressors: PARQUET_CODECS,
        onComplete: (rows: unknown[][]) => resolvePromise(rows),
      }).catch(reject);
    });
  }

  #groupOf(i: number): number {
    return partAt(this.#starts, i, this.numRowGroups - 1);
  }

  [kSourceSpec](): SourceSpec {
    return { module: import.meta.url, export: 'openParquet', options: this.#spec };
  }

  close(): void {
    this.#file?.close();
    this.#file = undefined;
    this.#last = undefined;
  }
}

/** hyparquet's file interface over positioned reads (each slice a fresh ArrayBuffer it may keep). */
function asyncBuffer(file: PositionedFile): AsyncBuffer {
  return {
    byteLength: file.size,
    slice: (start, end = file.size) => file.read(start, end - start, 'parquet data').buffer as ArrayBuffer,
  };
}


async function readMetadata(path: string, file: PositionedFile): Promise<FileMetaData> {
  if (file.size < 12) throw badFile(path, 0, `the file holds ${file.size} bytes, too few for a Parquet file (magic, footer length, magic)`);
  try {
    return await parquetMetadataAsync(asyncBuffer(file));
  } catch (cause) {
    if (cause instanceof LoaderError) throw cause;
    throw badFile(path, Math.max(0, file.size - 8), `not a readable Parquet footer: ${(cause as Error).message}`, 'Is this a Parquet file?');
  }
}

const INTS: Record<string, DType> = { INT_8: 'int8', INT_16: 'int16', INT_32: 'int32', UINT_8: 'uint8', UINT_16: 'uint16', UINT_32: 'uint32' };

/** A leaf column's dtype, 'text', or why it cannot be read. */
function leafKind(t: SchemaTree): DType | 'text' | string {
  const e = t.element;
  const logical = e.logical_type?.type;
  switch (e.type) {
    case 'BOOLEAN':
      return 'uint8';
    case 'INT32':
      if (e.converted_type === undefined) return logical === 'INTEGER' ? (intLogical(e.logical_type) ?? 'int32') : 'int32';
      return INTS[e.converted_type] ?? `an INT32 column annotated ${e.converted_type}`;
    case 'INT64':
      if (e.converted_type === undefined && (logical === undefined || (logical === 'INTEGER' && (e.logical_type as { isSigned?: boolean }).isSigned !== false))) return 'int64';
      if (e.converted_type === 'INT_64') return 'int64';
      return `an INT64 column annotated ${e.converted_type ?? logical}`;
    case 'FLOAT':
      return 'float32';
    case 'DOUBLE':
      return 'float64';
    case 'BYTE_ARRAY':
      if (e.converted_type === 'UTF8' || logical === 'STRING') return 'text';
      return `a binary column${e.converted_type !== undefined ? ` (${e.converted_type})` : ''}`;
    default:
      return `a ${e.type ?? 'group'} column`;
  }
}

function intLogical(l: unknown): DType | undefined {
  const { bitWidth, isSigned } = (l ?? {}) as { bitWidth?: number; isSigned?: boolean };
  const name = `${isSigned === false ? 'UINT' : 'INT'}_${bitWidth}`;
  return INTS[name];
}

/** The field kind of top-level column `t`, or an error naming it and what Stoker reads. */
function columnKind(path: string, t: SchemaTree, tokenizer: ResolvedTokenizer | undefined): FieldKind {
  const name = t.element.name;
  const refuse = (what: string) =>
    invalidDatasetError(`${path}: column ${show(name)} is ${what}; Stoker reads numbers, lists of numbers and strings (with a tokenizer). Leave it out with columns: [...]`);
  let leaf = t;
  let list = false;
  if (t.children.length > 0) {
    // The standard 3-level list (optional group LIST { repeated group list { element } }), or the
    // legacy 2-level one (group LIST { repeated element }).
    const isList = t.element.converted_type === 'LIST' || t.element.logical_type?.type === 'LIST';
    const rep = t.children[0];
    if (!isList || t.children.length !== 1 || rep?.element.repetition_type !== 'REPEATED') throw refuse('a group (struct or map) column');
    leaf = rep.children.length === 0 ? rep : rep.children.length === 1 && rep.children[0]!.children.length === 0 ? rep.children[0]! : (undefined as never);
    if (leaf === undefined) throw refuse('a list of groups');
    list = true;
  } else if (t.element.repetition_type === 'REPEATED') {
    list = true;
  }
  const k = leafKind(leaf);
  if (k === 'text') {
    if (list) throw refuse('a list of strings');
    if (tokenizer === undefined) throw textNeedsTokenizer(path, name, 'columns');
    return { kind: 'text', name };
  }
  if (k.includes(' ')) throw refuse(k);
  return list ? { kind: 'array', name, dtype: k as DType, rest: [] } : { kind: 'scalar', name, dtype: k as DType };
}

/** A column's kind in words, for messages: its dtype, list<dtype>, string, or why it is not read. */
function columnSummary(t: SchemaTree, tokenizer: ResolvedTokenizer): string {
  try {
    const k = columnKind('', t, tokenizer);
    return k.kind === 'text' ? 'string' : k.kind === 'array' ? `list<${k.dtype}>` : k.dtype;
  } catch {
    return 'not readable';
  }
}

/** The codec of a chunk of column `name` that Stoker cannot decompress, if any. */
function unreadableCodec(metadata: FileMetaData, name: string): string | undefined {
  for (const g of metadata.row_groups) {
    for (const ch of g.columns) {
      const m = ch.meta_data;
      if (m !== undefined && m.path_in_schema[0] === name && !PARQUET_READABLE.includes(m.codec)) return String(m.codec ?? 'an unknown codec');
    }
  }
  return undefined;
}

/** Refuse at open a selected column stored with a codec Stoker cannot decompress. */
function checkCodecs(path: string, metadata: FileMetaData, names: readonly string[]): void {
  for (const name of names) {
    const codec = unreadableCodec(metadata, name);
    if (codec !== undefined) {
      throw unsupportedCodec(path, name, codec, PARQUET_READABLE, "Rewrite the file with one of those (pyarrow: pq.write_table(table, path, compression='zstd'); DuckDB: COPY … (FORMAT parquet, COMPRESSION zstd)), or leave the column out with `columns`");
    }
  }
}

/** Open a Parquet file: read its footer, check the selected columns, and learn their kinds from the schema. */
export async function parquetSource(path: string, options: ParquetOptions = {}): Promise<ParquetSource> {
  if (typeof path !== 'string' || path.length === 0) throw invalidSourcePath('sources.parquet', path);
  if (options === null || typeof options !== 'object') throw invalidOption('sources.parquet options', 'an object', options);
  for (const k of Object.keys(options)) if (!KNOWN.includes(k)) throw invalidOption(`sources.parquet ${k}`, `one of ${KNOWN.join(', ')}`, k, 'Remove it');
  const { columns } = options;
  if (columns !== undefined && (!Array.isArray(columns) || columns.length === 0 || !columns.every((c) => typeof c === 'string') || new Set(columns).size !== columns.length)) {
    throw invalidOption('columns', 'a non-empty list of distinct column names', columns);
  }
  const tokenizer = options.tokenizer === undefined ? undefined : resolveTokenizer(options.tokenizer);
  const abs = resolve(path);
  const file = new PositionedFile(abs);
  let metadata: FileMetaData;
  try {
    metadata = await readMetadata(path, file);
  } finally {
    file.close();
  }
  const schema = parquetSchema(metadata);
  const byName = new Map(schema.children.map((c) => [c.element.name, c]));
  const names = columns ?? [...byName.keys()];
  const missing = names.filter((n) => !byName.has(n));
  if (missing.length > 0) throw invalidOption('columns', `names of columns in ${path}`, columns, `Not found: ${missing.map(show).join(', ')}. The file holds ${[...byName.keys()].map(show).join(', ')}`);
  const kinds = names.map((n) => columnKind(abs, byName.get(n)!, tokenizer));
  if (tokenizer !== undefined && !kinds.some((k) => k.kind === 'text')) {
    throw tokenizerUnused('tokenizer', abs, schema.children.map((c) => `${show(c.element.name)} (${columnSummary(c, tokenizer)})`).join(', '));
  }
  checkCodecs(abs, metadata, names);
  const ds = new ParquetSource({ path: abs, fileSize: file.size, kinds, tokenizer }, metadata);
  if (ds.length === 0) throw emptyFile(path, 'rows');
  return ds;
}

/** For `stoker inspect`: the top-level columns a loader can read without options, and the string columns that need a tokenizer. */
export async function parquetColumns(path: string): Promise<{ readable: string[]; text: string[] }> {
  const file = new PositionedFile(resolve(path));
  let metadata: FileMetaData;
  try {
    metadata = await readMetadata(path, file);
  } finally {
    file.close();
  }
  const readable: string[] = [];
  const text: string[] = [];
  for (const c of parquetSchema(metadata).children) {
    if (unreadableCodec(metadata, c.element.name) !== undefined) continue;
    try {
      columnKind(path, c, undefined);
      readable.push(c.element.name);
    } catch (error) {
      if ((error as LoaderError).code === 'ERR_INVALID_OPTION') text.push(c.element.name);
    }
  }
  return { readable, text };
}

/** Worker-side factory: reads the footer again (one small read), checks the size. */
export async function openParquet(spec: ParquetSpec): Promise<ParquetSource> {
  const file = PositionedFile.openSized(spec.path, spec.fileSize);
  try {
    return new ParquetSource(spec, await readMetadata(spec.path, file));
  } finally {
    file.close();
  }
}
