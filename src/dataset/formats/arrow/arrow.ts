// `sources.arrow`: a dataset over an Arrow IPC file or stream (the `.arrow` cache files of Hugging
// Face `datasets` are streams). On open, the record batches are indexed from their message headers,
// buffer tables included. A batch of sample ids then reads, in each record batch that holds some of
// them, only those rows, at their offsets in the column buffers (arrow-rows.ts): shuffled ids touch
// most record batches in every batch of ids, and decoding each of them whole for a few rows costs
// the file many times over per epoch. Record batches the row path cannot read (view columns,
// compressed bodies — LZ4 frames or ZSTD, as Polars writes them — a layout apache-arrow would
// refuse) are read whole with one positioned read, decompressed (arrow-compression.ts), decoded
// with apache-arrow, and kept in an LRU bounded in bytes. Batches with decoder columns are async.
// The rule: the file must not change while a loader reads it (a reopen that finds another size is
// refused; rows are read at the offsets found at open).
//
// Image columns are decoded in this thread or in child processes (`decode`; image-decoding.ts):
// each source copy sends the rows' bytes to its own lazily started pool, closed by `close()`.

import type { PickKey } from '../../../sampler/pick-key.js';
import { partAt } from '../part-index.js';
import { formatCacheBytes } from '../../../base/budget.js';
import { totalmem } from 'node:os';
import { dirname, resolve } from 'node:path';
import { readFileSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { type Data, Message, type Schema } from 'apache-arrow';
import { badFile, emptyDatasetError, fileAccess, indexOutOfRange, invalidDatasetError, invalidOption, show } from '../../../errors.js';
import { type Storage, allocStorage } from '../../../tensor/dtype.js';
import { type Tensor, trustedTensor } from '../../../tensor/tensor.js';
import type { BatchDataset, ReadContext } from '../../dataset.js';
import { type Reopenable, type SourceSpec, kSourceSpec } from '../../source-spec.js';
import { type ArrowDecoder, type BytesDecoder, type ResolvedDecoder, decodeColumn, resolveDecoder } from './arrow-decoders.js';
import { type ArrowIndex, buildIndex, decodeRecordBatch, vetMessage } from './arrow-index.js';
import { type RowTable, RowReader, SLOTS, buildRowTable, nodesOf, rowGroup } from './arrow-rows.js';
import { type ColumnPlan, type TensorColumn, gather, hasListLevels, listShapeOf, planColumns, rowBytes, withListShape } from './arrow-columns.js';
import { PositionedFile } from '../file.js';
import { loadImageDecoder } from '../../../image/image-decode.js';
import { type ImageDecodeMode, type ImageDecodeShare, ImageDecoding, imageDecodeShare, largestSize, prefetchFor, readerThreadsFor } from '../../../image/processes/image-decoding.js';

export type { ArrowCodesDecoder, ArrowDecoder, ArrowImageDecoder, ArrowModuleDecoder } from './arrow-decoders.js';

export interface ArrowOptions {
  /** Columns to read, in this order (default: all, in schema order). Their names key the batch. */
  readonly columns?: readonly string[];
  /**
   * A decoder per binary or string column (required for those: bytes are not tensors). Data, not
   * functions, so that reader workers receive them: `{ image: { kind: 'image', size: [224, 224] } }`.
   */
  readonly decoders?: { readonly [column: string]: ArrowDecoder };
  /**
   * Most decoded record batches kept per thread, for record batches read whole (`rowReads: false`,
   * or layouts row reads cannot read) (default 1024: the byte budget is the bound that matters).
   * Shuffled ids hit record batches at random, so a batch of 256 ids over a file of 100 record
   * batches needs ~92 of them: with only a few kept, each is read again for nearly every batch
   * (measured: a shuffled epoch 130× slower than with the file's 50 MB cached).
   */
  readonly cacheBatches?: number;
  /**
   * Bytes of decoded record batches kept per thread, for record batches read whole (default: this
   * thread's equal part of one loader-wide share, the smaller of 256 MiB and 1/32 of RAM, split
   * among the reader threads — every reader worker holds its own cache, so more readers never
   * multiply the total; NOTE [The budget law]). A record
   * batch larger than this is read again for each batch of ids that needs it.
   */
  readonly cacheBytes?: number;
  /**
   * Read only the rows asked for, straight from the column buffers (default true). Shuffled ids
   * touch nearly every record batch in every batch of ids, so decoding record batches whole costs
   * the file many times over per epoch once it is larger than the cache (measured, one thread:
   * 50 MB in 100 record batches, a shuffled epoch in batches of 256 ids takes 9.5 s decoding whole
   * record batches with 16 MiB of cache, 0.7 s reading rows). Record batches whose layout row reads
   * cannot read (view columns, compressed bodies, unions before a selected column, a buffer
   * apache-arrow would refuse) are decoded whole. `false` decodes every record batch whole and
   * keeps it in the cache: faster (0.23 s there) only when the file fits `cacheBytes` in every
   * reader thread.
   */
  readonly rowReads?: boolean;
  /**
   * Where `{ kind: 'image' }` columns are decoded. 'processes': in child processes (see
   * `decodeProcesses`), the way to use many cores — sharp decodes within one process contend inside
   * libvips and stop scaling at ~2.5 cores. 'threads': in the thread that reads the dataset.
   * Default 'auto': 'processes' on machines with more than one core when the largest image output
   * is at least 64 × 64, else 'threads'. The same bytes and errors either way.
   */
  readonly decode?: ImageDecodeMode;
  /**
   * With decode 'processes': most child processes per source copy, started on demand. Default:
   * one per core on the main thread; in a reader worker, the cores divided among the workers'
   * copies, rounded, at least 1.
   */
  readonly decodeProcesses?: number;
}

/** Internal: what reader workers receive, the validated options and the index, so that they skip the scan. */
export interface ArrowSpecOptions {
  readonly path: string;
  readonly columns: readonly string[];
  readonly decoders: { readonly [column: string]: ResolvedDecoder };
  readonly cacheBatches: number;
  readonly cacheBytes: number;
  readonly index: ArrowIndex;
  readonly listShapes: { readonly [column: string]: readonly number[] };
  /** Where each selected column's rows are, per record batch; absent: every record batch is decoded whole. */
  readonly rowTable?: RowTable;
  /** Where image columns are decoded (shared by every copy). */
  readonly imageDecode: ImageDecodeShare;
}

/** Counters of one source instance (one thread), for tests and tuning. */
export interface ArrowCacheStats {
  /** Record batches read from the file whole and decoded. */
  readonly reads: number;
  /** Record batch uses served from the cache. */
  readonly hits: number;
  /** Record batches in the cache now, and their bytes. */
  readonly cachedBatches: number;
  readonly cachedBytes: number;
  /** Record batch uses served by row reads, and the distinct rows they read. */
  readonly rowBatches: number;
  readonly rows: number;
  /** Positioned reads the row reads made (neighbouring rows share one), and the bytes they read. */
  readonly rowReads: number;
  readonly rowBytes: number;
}

interface Decoded {
  readonly bytes: number;
  /** The selected columns' data, in plan order. */
  readonly columns: readonly Data[];
}

const DEFAULT_CACHE_BATCHES = 1024;

/** This reader's part of the format caches' share (NOTE [The budget law]). */
export function defaultCacheBytes(): number {
  return formatCacheBytes(totalmem());
}

export class ArrowSource implements BatchDataset, Reopenable {
  readonly length: number;
  /** The file, as an absolute path. */
  readonly path: string;
  readonly format: 'file' | 'stream';
  readonly numRecordBatches: number;
  readonly #spec: ArrowSpecOptions;
  readonly #schema: Schema;
  readonly #plans: readonly ColumnPlan[];
  readonly #schemaBytes: Uint8Array;
  /** Row where each record batch starts, and the total at the end. */
  readonly #starts: Float64Array;
  readonly #cache = new Map<number, Decoded>();
  #cachedBytes = 0;
  #reads = 0;
  #hits = 0;
  #rowBatches = 0;
  #rows = 0;
  readonly #rowReader: RowReader | undefined;
  readonly #shapes = new Map<string, { dtype: string; shape: readonly number[] }>();
  /** This copy's image decoding; absent without image columns. */
  readonly #images: ImageDecoding | undefined;
  /** True when an image column has a `view`: reads take the picks' keys (NOTE [keyed reads], dataset.ts). */
  readonly keyed: boolean;

  /** Use `arrowSource(path, options)` (main thread) or `openArrow` (workers). */
  constructor(spec: ArrowSpecOptions, schema: Schema, schemaBytes: Uint8Array, plans: readonly ColumnPlan[], inWorker = false) {
    this.#spec = spec;
    this.#schema = schema;
    this.#schemaBytes = schemaBytes;
    this.#plans = plans;
    this.path = spec.path;
    this.format = spec.index.format;
    this.numRecordBatches = spec.index.rows.length;
    const starts = new Float64Array(this.numRecordBatches + 1);
    spec.index.rows.forEach((r, k) => (starts[k + 1] = starts[k]! + r));
    this.#starts = starts;
    this.length = starts[this.numRecordBatches]!;
    this.#rowReader = spec.rowTable === undefined ? undefined : new RowReader(spec.path, plans, spec.rowTable);
    const sizes = Object.values(spec.decoders).flatMap((d) => (d.kind === 'image' ? [d.size] : []));
    this.#images = sizes.length > 0 ? new ImageDecoding(spec.imageDecode, largestSize(sizes), inWorker) : undefined;
    this.keyed = Object.values(spec.decoders).some((d) => d.kind === 'image' && d.view !== undefined);
  }

  /** Where this copy decodes image columns ('auto' resolved); undefined without image columns. */
  get decode(): 'threads' | 'processes' | undefined {
    return this.#images?.mode;
  }

  /** Process ids of this copy's decode processes alive now (none in 'threads' mode or before the first image). */
  get decodePids(): number[] {
    return this.#images?.pids ?? [];
  }
  /** Each record batch's first row (the block shuffle's blocks: HasParts, capabilities.ts). */
  partStarts(): Float64Array {
    return this.#starts.subarray(0, this.#starts.length - 1);
  }

  /** Reader threads this source works best with when the loader's `workers` is not set (NOTE [reader threads with decode processes]). */
  get readerWorkers(): number | undefined {
    return readerThreadsFor(this.decode);
  }

  /** Batches in flight this source works best with on the CPU when the loader's `prefetch` is not set (NOTE [a window for decode processes]). */
  get prefetch(): number | undefined {
    return prefetchFor(this.decode);
  }

  /**
   * Stop this copy's decode processes, waiting until they are gone (a later read starts new ones).
   * Reader workers call it on their copies when the loader closes; call it on a source you made
   * once you are done with it.
   */
  close(): Promise<void> {
    return this.#images?.close() ?? Promise.resolve();
  }

  /** The selected columns: name, Arrow type, and for tensor columns the dtype and per-row shape. */
  get columns(): readonly { readonly name: string; readonly type: string; readonly dtype?: string; readonly shape?: readonly number[]; readonly decoder?: string }[] {
    return this.#plans.map((p) =>
      p.kind === 'tensor' ? { name: p.name, type: p.type, dtype: p.dtype, shape: p.rowShape } : { name: p.name, type: p.type, decoder: this.#spec.decoders[p.name]!.kind },
    );
  }

  stats(): ArrowCacheStats {
    return {
      reads: this.#reads, hits: this.#hits, cachedBatches: this.#cache.size, cachedBytes: this.#cachedBytes,
      rowBatches: this.#rowBatches, rows: this.#rows, rowReads: this.#rowReader?.preads ?? 0, rowBytes: this.#rowReader?.preadBytes ?? 0,
    };
  }

  [kSourceSpec](): SourceSpec {
    return { module: import.meta.url, export: 'openArrow', options: this.#spec };
  }

  getBatch(indices: readonly number[], context?: ReadContext): Record<string, Tensor> | Promise<Record<string, Tensor>> {
    const n = indices.length;
    const groups = new Map<number, { local: number[]; pos: number[] }>();
    for (let r = 0; r < n; r++) {
      const i = indices[r]!;
      if (!Number.isInteger(i) || i < 0 || i >= this.length) throw indexOutOfRange(this.path, 'row', i, this.length);
      const k = this.#batchOf(i);
      let g = groups.get(k);
      if (g === undefined) groups.set(k, (g = { local: [], pos: [] }));
      g.local.push(i - this.#starts[k]!);
      g.pos.push(r);
    }
    const outs: (Storage | Uint8Array[])[] = this.#plans.map((p) => (p.kind === 'tensor' ? allocStorage(p.dtype, n * p.rowSize) : new Array<Uint8Array>(n)));
    const files = new Map<number, string>();
    let file: PositionedFile | undefined;
    try {
      for (const k of [...groups.keys()].sort((a, b) => a - b)) {
        context?.signal.throwIfAborted();
        const { local, pos } = groups.get(k)!;
        const rows = this.#rowReader;
        if (rows?.direct(k)) {
          const { offsets, metaLengths } = this.#spec.index;
          const g = rowGroup(k, offsets[k]!, offsets[k]! + metaLengths[k]!, this.#starts[k]!, local, pos);
          file ??= this.#openFile();
          for (const [c, plan] of this.#plans.entries()) {
            if (plan.kind === 'tensor') rows.readTensor(file, g, c, outs[c] as Storage);
            else rows.readBytes(file, g, c, outs[c] as Uint8Array[], (r, f) => files.set(r * this.#plans.length + c, f));
          }
          this.#rowBatches++;
          this.#rows += g.rows.length;
          continue;
        }
        const decoded = this.#decoded(k, () => (file ??= this.#openFile()));
        for (const [c, plan] of this.#plans.entries()) {
          const d = decoded.columns[c]!;
          const w = { path: this.path, offset: this.#spec.index.offsets[k]!, column: plan.name, row: 0 };
          if (plan.kind === 'tensor') {
            const out = outs[c] as Storage;
            for (let j = 0; j < local.length; j++) {
              w.row = local[j]! + this.#starts[k]!;
              gather(plan, d, 0, local[j]!, 1, out, pos[j]! * plan.rowSize, w);
            }
          } else {
            const out = outs[c] as Uint8Array[];
            for (let j = 0; j < local.length; j++) {
              w.row = local[j]! + this.#starts[k]!;
              const b = rowBytes(plan, d, local[j]!, w);
              if (b instanceof Uint8Array) out[pos[j]!] = b;
              else files.set(pos[j]! * this.#plans.length + c, b.file);
            }
          }
        }
      }
    } finally {
      file?.close();
    }
    for (const [key, f] of files) {
      const c = key % this.#plans.length;
      const r = (key - c) / this.#plans.length;
      (outs[c] as Uint8Array[])[r] = this.#readReferenced(f, this.#plans[c]!.name, indices[r]!);
    }
    if (this.#plans.every((p) => p.kind === 'tensor')) {
      const result: Record<string, Tensor> = {};
      this.#plans.forEach((p, c) => (result[p.name] = trustedTensor((p as TensorColumn).dtype, outs[c] as Storage, [n, ...(p as TensorColumn).rowShape])));
      return result;
    }
    return this.#decodeAll(indices, outs, context?.signal, context?.keys);
  }

  async #decodeAll(indices: readonly number[], outs: (Storage | Uint8Array[])[], signal: AbortSignal | undefined, keys: readonly PickKey[] | undefined): Promise<Record<string, Tensor>> {
    const n = indices.length;
    const result: Record<string, Tensor> = {};
    const done = await Promise.all(
      this.#plans.map(async (p, c) => {
        if (p.kind === 'tensor') return trustedTensor(p.dtype, outs[c] as Storage, [n, ...p.rowShape]);
        const t = await decodeColumn(this.#spec.decoders[p.name] as BytesDecoder, p.name, outs[c] as Uint8Array[], indices, (r) => `${this.path} column ${show(p.name)} row ${indices[r]}`, this.#images, signal, keys);
        this.#checkShape(p.name, t, indices[0]!);
        return t;
      }),
    );
    this.#plans.forEach((p, c) => (result[p.name] = done[c]!));
    return result;
  }

  /** Decoded outputs keep one dtype and row shape for the life of the source (the first batch sets it). */
  #checkShape(column: string, t: Tensor, row: number): void {
    const shape = t.shape.slice(1);
    const seen = this.#shapes.get(column);
    if (seen === undefined) {
      this.#shapes.set(column, { dtype: t.dtype, shape });
    } else if (seen.dtype !== t.dtype || seen.shape.length !== shape.length || seen.shape.some((x, i) => x !== shape[i])) {
      throw invalidDatasetError(`${this.path}: the decoder of column ${show(column)} gave ${t.dtype} [${shape.join(', ')}] near row ${row}, but ${seen.dtype} [${seen.shape.join(', ')}] before; every row of a column needs one dtype and shape`);
    }
  }

  #batchOf(i: number): number {
    return partAt(this.#starts, i, this.numRecordBatches - 1);
  }

  #openFile(): PositionedFile {
    const file = new PositionedFile(this.path);
    if (file.size !== this.#spec.index.fileSize) {
      file.close();
      throw badFile(this.path, 0, `the file changed size since it was indexed (${this.#spec.index.fileSize} bytes then, ${file.size} now)`, 'Open the source again after rewriting the file');
    }
    return file;
  }

  /** Record batch `k`'s selected columns, from the cache or the file. */
  #decoded(k: number, open: () => PositionedFile): Decoded {
    const hit = this.#cache.get(k);
    if (hit !== undefined) {
      this.#hits++;
      this.#cache.delete(k);
      this.#cache.set(k, hit);
      return hit;
    }
    const decoded = readBatch(open(), this.#spec.index, k, this.#schemaBytes, this.#schema, this.#plans);
    this.#reads++;
    const { cacheBatches, cacheBytes } = this.#spec;
    if (decoded.bytes <= cacheBytes && cacheBatches > 0) {
      this.#cache.set(k, decoded);
      this.#cachedBytes += decoded.bytes;
      for (const [key, old] of this.#cache) {
        if (this.#cache.size <= cacheBatches && this.#cachedBytes <= cacheBytes) break;
        this.#cache.delete(key);
        this.#cachedBytes -= old.bytes;
      }
    }
    return decoded;
  }

  /** The bytes of an image that a Hugging Face struct row refers to by path (relative to the Arrow file's folder). */
  #readReferenced(file: string, column: string, row: number): Uint8Array {
    const full = resolve(dirname(this.path), file);
    try {
      return readFileSync(full);
    } catch (cause) {
      throw fileAccess(full, `read the file that ${this.path} column ${show(column)} row ${row} refers to (its bytes are null)`, cause);
    }
  }
}

/** Read record batch `k` with one positioned read after the schema message, decode it, pick the columns. */
function readBatch(file: PositionedFile, index: ArrowIndex, k: number, schemaBytes: Uint8Array, schema: Schema, plans: readonly ColumnPlan[]): Decoded {
  const length = index.lengths[k]!;
  const offset = index.offsets[k]!;
  file.checkRange(offset, length, `record batch ${k}`);
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(schemaBytes.length + length);
  } catch (cause) {
    throw invalidDatasetError(`${file.path}: record batch ${k} takes ${length} bytes, more than can be allocated at once. Rewrite the file with smaller record batches (pyarrow: max_chunksize)`, cause);
  }
  bytes.set(schemaBytes, 0);
  for (let done = 0; done < length; done += 2 ** 30) {
    const len = Math.min(2 ** 30, length - done);
    file.read(offset + done, len, `record batch ${k}`, bytes, schemaBytes.length + done);
  }
  const batch = decodeRecordBatch(file.path, bytes, schemaBytes.length, index, k, schema);
  return { bytes: bytes.length, columns: plans.map((p) => batch.data.children[p.field]!) };
}

/** Validated options shared by both factories. */
function resolveOptions(options: ArrowOptions | undefined): { cacheBatches: number; cacheBytes: number; rowReads: boolean; decoders: Record<string, ResolvedDecoder>; imageDecode: ImageDecodeShare } {
  if (options !== undefined && (options === null || typeof options !== 'object')) throw invalidOption('options', 'an object', options);
  const cacheBatches = options?.cacheBatches ?? DEFAULT_CACHE_BATCHES;
  if (!Number.isSafeInteger(cacheBatches) || cacheBatches < 0) throw invalidOption('cacheBatches', 'an integer ≥ 0', cacheBatches);
  const cacheBytes = options?.cacheBytes ?? defaultCacheBytes();
  if (!Number.isSafeInteger(cacheBytes) || cacheBytes < 0) throw invalidOption('cacheBytes', 'an integer number of bytes ≥ 0', cacheBytes);
  const rowReads = options?.rowReads ?? true;
  if (typeof rowReads !== 'boolean') throw invalidOption('rowReads', 'true or false', rowReads);
  const raw = options?.decoders ?? {};
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw invalidOption('decoders', 'a record { column: decoder }', raw);
  const decoders: Record<string, ResolvedDecoder> = {};
  for (const [name, d] of Object.entries(raw)) decoders[name] = resolveDecoder(`decoders.${name}`, d);
  return { cacheBatches, cacheBytes, rowReads, decoders, imageDecode: imageDecodeShare(options) };
}

/**
 * A dataset over the Arrow IPC file or stream at `path` (a per-batch dataset: `getBatch(ids)`
 * gives `{ [column]: Tensor }`, rows first). Reader workers reopen it from its spec.
 *
 * Columns: numbers and booleans (as uint8) give a scalar per row, fixed-size lists of them a tensor
 * of the list sizes, variable-length lists are accepted when every row has row 0's shape,
 * fixed-size binary gives uint8 bytes. Dictionary-encoded columns give their integer codes with
 * decoder `{ kind: 'codes' }` and are refused without it. Binary and string columns (and Hugging
 * Face's image `struct<bytes, path>`) need a decoder.
 * Rows are read straight from the column buffers (see `rowReads`).
 */
export function arrowSource(path: string, options?: ArrowOptions): ArrowSource {
  if (typeof path !== 'string' || path.length === 0) throw invalidOption('path', 'the path of an Arrow IPC file', path);
  const resolved = resolveOptions(options);
  const full = resolve(path);
  const file = new PositionedFile(full);
  try {
    const { index, schema, headers } = buildIndex(file);
    const available = schema.fields.map((f) => f.name);
    const columns = selectColumns(full, options?.columns, available);
    for (const name of Object.keys(resolved.decoders)) {
      if (!available.includes(name)) throw invalidOption(`decoders.${name}`, `a decoder for a column of ${full} (columns: ${available.map((c) => show(c)).join(', ')})`, name);
      if (!columns.includes(name)) throw invalidOption(`decoders.${name}`, 'a decoder for a selected column', name, `Add ${show(name)} to \`columns\`, or drop its decoder`);
    }
    let plans = planColumns(full, schema, columns, resolved.decoders);
    if (index.rows.length === 0 || index.rows.every((r) => r === 0)) {
      throw emptyDatasetError(`${full}: the Arrow ${index.format} holds no rows (a schema and ${index.rows.length} empty record batches). Give a file with data`);
    }
    checkDictionaries(full, schema, plans, index);
    const schemaBytes = index.schemaMessage;
    const listShapes: Record<string, number[]> = {};
    if (plans.some(hasListLevels)) plans = learnListShapes(file, index, schemaBytes, schema, plans, listShapes);
    if (Object.values(resolved.decoders).some((d) => d.kind === 'image')) loadImageDecoder();
    const rowTable = resolved.rowReads ? buildRowTable(schema, plans, headers) : undefined;
    const spec: ArrowSpecOptions = { path: full, columns, decoders: resolved.decoders, cacheBatches: resolved.cacheBatches, cacheBytes: resolved.cacheBytes, index, listShapes, rowTable, imageDecode: resolved.imageDecode };
    return new ArrowSource(spec, schema, schemaBytes, plans);
  } finally {
    file.close();
  }
}

function selectColumns(path: string, columns: readonly string[] | undefined, available: readonly string[]): string[] {
  if (columns === undefined) {
    const dup = available.find((c, i) => available.indexOf(c) !== i);
    if (dup !== undefined) throw invalidDatasetError(`${path}: two columns are named ${show(dup)}; pick columns by name with \`columns\` once the names are unique`);
    return [...available];
  }
  if (!Array.isArray(columns) || columns.length === 0) throw invalidOption('columns', 'a non-empty array of column names', columns);
  const unknown = columns.filter((c) => typeof c !== 'string' || !available.includes(c));
  if (unknown.length > 0) {
    throw invalidOption('columns', `names of columns of ${path}`, unknown.length === 1 ? unknown[0] : unknown, `Its columns are ${available.map((c) => show(c)).join(', ')}`);
  }
  const dup = columns.find((c, i) => columns.indexOf(c) !== i);
  if (dup !== undefined) throw invalidOption('columns', 'distinct column names', columns, `${show(dup)} is listed twice`);
  return [...columns];
}

/** Dictionary-encoded columns give codes; a stream that replaces a dictionary mid-way changes what codes mean. */
function checkDictionaries(path: string, schema: Schema, plans: readonly ColumnPlan[], index: ArrowIndex): void {
  if (index.replacedDictionaries.length === 0) return;
  for (const p of plans) {
    const type = schema.fields[p.field]!.type as { id?: number; dictionary?: unknown };
    if (type.dictionary !== undefined && type.id !== undefined && index.replacedDictionaries.includes(type.id)) {
      throw invalidDatasetError(`${path}: column ${show(p.name)} is dictionary-encoded and the stream replaces its dictionary after the first record batch, so the same code means different values in different rows. Leave it out with \`columns\`, or rewrite it as plain values`);
    }
  }
}

/** Learn the list sizes of variable-length list columns from row 0, and check the first record batch holds no other shape. */
function learnListShapes(file: PositionedFile, index: ArrowIndex, schemaBytes: Uint8Array, schema: Schema, plans: ColumnPlan[], into: Record<string, number[]>): ColumnPlan[] {
  const k = index.rows.findIndex((r) => r > 0);
  const decoded = readBatch(file, index, k, schemaBytes, schema, plans);
  return plans.map((p, c) => {
    if (!hasListLevels(p)) return p;
    const w = { path: file.path, offset: index.offsets[k]!, column: p.name, row: 0 };
    const sizes = listShapeOf(p as TensorColumn, decoded.columns[c]!, 0, w);
    const plan = withListShape(p as TensorColumn, sizes);
    for (let r = 0; r < index.rows[k]!; r++) {
      w.row = r; // the record batches before k are empty
      gather(plan, decoded.columns[c]!, 0, r, 1, undefined, 0, w);
    }
    into[p.name] = sizes;
    return plan;
  });
}

/** Worker-side factory of `sources.arrow` (see ArrowSource[kSourceSpec]): reuses the main thread's index. */
export function openArrow(options: ArrowSpecOptions): ArrowSource {
  const { path, index } = options;
  const file = new PositionedFile(path);
  try {
    if (file.size !== index.fileSize) {
      throw badFile(path, 0, `the file changed size since it was indexed (${index.fileSize} bytes then, ${file.size} now)`, 'Open the source again after rewriting the file');
    }
    const schemaBytes = index.schemaMessage;
    const prefix = schemaBytes.length >= 8 && new DataView(schemaBytes.buffer, schemaBytes.byteOffset).getInt32(0, true) === -1 ? 8 : 4;
    const meta = schemaBytes.subarray(prefix);
    const problem = vetMessage(meta);
    let schema: Schema | undefined;
    try {
      const message = problem === undefined ? Message.decode(meta) : undefined;
      if (message?.isSchema()) schema = message.header() as Schema;
    } catch {
      schema = undefined;
    }
    if (schema === undefined) throw invalidDatasetError(`openArrow: the schema passed for ${path} cannot be decoded${problem ? `: ${problem}` : ''}; open Arrow sources with sources.arrow(path)`);
    const plans = planColumns(path, schema, options.columns, options.decoders, options.listShapes);
    checkRowTable(path, options.rowTable, plans, index);
    return new ArrowSource(options, schema, schemaBytes, plans, !isMainThread);
  } finally {
    file.close();
  }
}

/** A row table passed to a worker must fit the plans and the index it is read with. */
function checkRowTable(path: string, table: RowTable | undefined, plans: readonly ColumnPlan[], index: ArrowIndex): void {
  if (table === undefined) return;
  const count = index.rows.length;
  const fits =
    table.direct instanceof Uint8Array && table.direct.length === count && table.nodes.length === plans.length && table.slots.length === plans.length &&
    plans.every((p, c) => table.nodes[c] === nodesOf(p) && table.slots[c] instanceof Float64Array && table.slots[c]!.length === count * nodesOf(p) * SLOTS);
  if (!fits) throw invalidDatasetError(`openArrow: the row table passed for ${path} does not fit its columns and record batches; open Arrow sources with sources.arrow(path)`);
}
