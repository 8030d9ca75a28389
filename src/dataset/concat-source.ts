// `sources.concat`: one dataset over several (shards of one dataset: Arrow `data-0000k-of-…` files,
// one `.npy` per chunk, …). Sample i lives in the part whose cumulative offset is the last ≤ i.
// The rule: when every part reads whole batches the concat does too (one getBatch per part touched,
// rows stitched back into the caller's order), else it reads sample by sample; it is reopenable by
// reader workers exactly when every part is. Parts that name their label classes (image folders'
// `classes`) must name the same ones in the same order: a label is an index into that list, so
// [apple, banana] + [banana, cherry] would make label 0 mean two things; such a concat is refused.
// A read without a context (outside the loader) is given one, as the other sources read without.

import { describeCause, indexOutOfRange, invalidDatasetError, sampleMismatchError, show } from '../errors.js';
import { type Storage, type TypedArray, allocStorage } from '../tensor/dtype.js';
import { Tensor } from '../tensor/tensor.js';
import { hasColumns } from './arrays-source.js';
import { canLoadLengths, hasClasses, hasLengths, hasParts, hasRaggedFields, hasRaggedMax } from './capabilities.js';
import { type AnyDataset, type BatchColumns, type BatchDataset, type Dataset, type ReadContext, type Sample, closeDataset, hintOf, isBatchDataset, isKeyed } from './dataset.js';
import { type Schema, batchColumns, schemaOfColumns } from './schema.js';
import { type SourceSpec, isReopenable, isSourceSpec, kSourceSpec, openSource, specOf } from './source-spec.js';

/** Options of the worker-side factory `openConcat`. */
export interface ConcatOptions {
  /** The parts, in order: source specs (opened with their factory) or datasets. */
  readonly parts: readonly (SourceSpec | AnyDataset)[];
}

/** What the concat's parts have in common; the read method comes from the subclass. */
abstract class ConcatBase {
  readonly length: number;
  /** The parts, in order. */
  readonly parts: readonly AnyDataset[];
  /** offsets[p] is the global index of part p's first sample; offsets[parts.length] is the length. */
  readonly #offsets: readonly number[];
  /** Specs of the parts opened from one (their datasets need not be reopenable themselves). */
  readonly #specs: readonly (SourceSpec | undefined)[];
  #spec: SourceSpec | undefined;
  /** A part is keyed (NOTE [keyed reads], dataset.ts): reads carry keys, which go on to the parts. */
  readonly keyed: boolean;
  /** Fields whose first dimension varies in some part (the parts' `ragged`, in order of first mention). */
  readonly ragged: readonly string[];
  /** A ragged field's longest row: the max over the parts, where every part that holds it ragged bounds it. */
  readonly raggedMax: { readonly [field: string]: number };
  readonly #lengths = new Map<string, Promise<Uint32Array>>();

  constructor(parts: readonly AnyDataset[], specs: readonly (SourceSpec | undefined)[]) {
    this.parts = parts;
    this.#specs = specs;
    const offsets = [0];
    for (const p of parts) offsets.push(offsets[offsets.length - 1]! + p.length);
    this.#offsets = offsets;
    this.length = offsets[parts.length]!;
    this.keyed = parts.some(isKeyed);
    // NOTE [ragged parts]: ragged fields and their lengths pass through in the concat layout, so a
    // concat or mixture of text sources can be padded, packed or token-budgeted: `lengths` when
    // every part declares its own, `loadLengths` when every part declares or computes them.
    const raggedOf = (p: AnyDataset) => (hasRaggedFields(p) ? p.ragged.filter((x) => typeof x === 'string') : []);
    this.ragged = Object.freeze([...new Set(parts.flatMap(raggedOf))]);
    const maxOf = (p: AnyDataset): Readonly<Record<string, unknown>> => (hasRaggedMax(p) ? p.raggedMax : {});
    const max: Record<string, number> = {};
    for (const f of this.ragged) {
      const bounds = parts.filter((p) => raggedOf(p).includes(f)).map((p) => maxOf(p)[f]);
      if (bounds.every((b): b is number => typeof b === 'number' && Number.isSafeInteger(b) && b >= 0)) max[f] = Math.max(...bounds);
    }
    this.raggedMax = Object.freeze(max);
    if (concatLengths(parts, false) !== undefined) {
      // Built on first read (reader workers reopen concats and never read it).
      let table: Uint32Array | ((i: number) => number) | undefined;
      Object.defineProperty(this, 'lengths', { get: () => (table ??= concatLengths(parts, true)), enumerable: false });
    } else if (parts.every((p) => ownLengths(p) !== undefined || canLoadLengths(p))) {
      Object.defineProperty(this, 'loadLengths', { value: (field?: string) => this.#loadLengths(field), enumerable: false });
    }
    if (parts.every((p, i) => specs[i] !== undefined || isReopenable(p))) {
      // Own property only when reopenable: the loader reads `isReopenable` off its presence.
      Object.defineProperty(this, kSourceSpec, { value: () => this.#specOf(), enumerable: false });
    }
  }

  /**
   * The reader-thread count the parts ask for: the largest any part asks for. In-memory arrays ask
   * for none (as the loader's default for them); undefined when no other part asks.
   */
  get readerWorkers(): number | undefined {
    const others = this.parts.filter((p) => !hasColumns(p));
    if (others.length === 0) return 0;
    let best: number | undefined;
    for (const p of others) {
      const asked = hintOf(p, 'readerWorkers', 0);
      if (asked !== undefined) best = Math.max(best ?? 0, asked);
    }
    return best;
  }

  /** The window the parts ask for (`Dataset.prefetch`): the deepest any part asks for; undefined when none asks. */
  get prefetch(): number | undefined {
    let best: number | undefined;
    for (const p of this.parts) {
      const asked = hintOf(p, 'prefetch', 1);
      if (asked !== undefined) best = Math.max(best ?? 0, asked);
    }
    return best;
  }

  /**
   * Each part's parts (HasParts, capabilities.ts) at its offset; a member without parts of its own
   * is one part (a concat is usually one dataset's files: a member is read as a whole).
   */
  partStarts(): Float64Array {
    const out: number[] = [];
    this.parts.forEach((p, k) => {
      const offset = this.#offsets[k]!;
      if (hasParts(p)) for (const s of Array.from(p.partStarts())) out.push(offset + s);
      else out.push(offset);
    });
    return Float64Array.from(out);
  }

  /** Close every part (a part whose close fails is skipped; closing must not fail). */
  async close(): Promise<void> {
    await Promise.all(this.parts.map((p) => closeDataset(p)));
  }

  /** The part holding global sample `index`, and its index there. */
  protected locate(index: number): { part: number; local: number } {
    if (!Number.isInteger(index) || index < 0 || index >= this.length) {
      throw indexOutOfRange('sources.concat', 'index', index, this.length);
    }
    const offsets = this.#offsets;
    let lo = 0;
    let hi = offsets.length - 2;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (offsets[mid]! <= index) lo = mid;
      else hi = mid - 1;
    }
    return { part: lo, local: index - offsets[lo]! };
  }

  /** The parts' lengths of `field`, one after the other (parts counted in turn: each pass uses every core). */
  #loadLengths(field?: string): Promise<Uint32Array> {
    const key = field ?? '\0';
    let p = this.#lengths.get(key);
    if (p === undefined) {
      p = (async () => {
        const out = new Uint32Array(this.length);
        for (let k = 0; k < this.parts.length; k++) {
          const part = this.parts[k]!;
          const own = ownLengths(part);
          // Every part declares or computes its lengths (the constructor offers loadLengths only then).
          const got = own !== undefined ? own : canLoadLengths(part) ? await part.loadLengths(field) : undefined;
          if (!(got instanceof Uint32Array) || got.length !== part.length) {
            throw invalidDatasetError(`sources.concat: part ${k}'s lengths are ${got instanceof Uint32Array ? `${got.length} entries` : show(got)}; want a Uint32Array of ${part.length} (one per sample)`);
          }
          out.set(got, this.#offsets[k]!);
        }
        return out;
      })();
      this.#lengths.set(key, p);
      p.catch(() => this.#lengths.delete(key));
    }
    return p;
  }

  #specOf(): SourceSpec {
    this.#spec ??= { module: import.meta.url, export: 'openConcat', options: { parts: this.parts.map((p, i) => this.#specs[i] ?? specOf(p)!) } };
    return this.#spec;
  }
}

/** A concat whose parts all read whole batches: one `getBatch` per part touched by a batch. */
export class ConcatBatchSource extends ConcatBase implements BatchDataset {
  /** The columns every part must give, from the first part read, and that part's index. */
  #schema: { schema: Schema; part: number } | undefined;
  readonly #checked: boolean[];

  constructor(parts: readonly BatchDataset[], specs: readonly (SourceSpec | undefined)[]) {
    super(parts, specs);
    this.#checked = parts.map(() => false);
  }

  getBatch(indices: readonly number[], given?: ReadContext): BatchColumns | Promise<BatchColumns> {
    const context = given ?? unboundedContext();
    const groups = new Map<number, { local: number[]; pos: number[] }>();
    indices.forEach((id, pos) => {
      const { part, local } = this.locate(id);
      let g = groups.get(part);
      if (g === undefined) groups.set(part, (g = { local: [], pos: [] }));
      g.local.push(local);
      g.pos.push(pos);
    });
    const parts = [...groups.keys()];
    // Each part gets the keys of its own rows (NOTE [keyed reads]).
    const contextOf = (g: { pos: number[] }): ReadContext => (context.keys === undefined ? context : { signal: context.signal, keys: g.pos.map((at) => context.keys![at]!) });
    const results = parts.map((p) => (this.parts[p] as BatchDataset).getBatch(groups.get(p)!.local, contextOf(groups.get(p)!)));
    const stitch = (cols: readonly BatchColumns[]) => this.#stitch(indices.length, parts, parts.map((p) => groups.get(p)!), cols);
    if (results.some((r) => r instanceof Promise)) return Promise.all(results).then(stitch);
    return stitch(results as BatchColumns[]);
  }

  #stitch(rows: number, parts: readonly number[], groups: readonly { local: number[]; pos: number[] }[], results: readonly BatchColumns[]): BatchColumns {
    const columns = parts.map((p, g) => this.#columnsOf(p, results[g]!, groups[g]!.local.length));
    const { schema } = this.#schema!;
    if (parts.length === 1) return results[0]!;
    const outs = schema.fields.map((f) => allocStorage(f.dtype, rows * f.rowSize) as Storage);
    columns.forEach((tensors, g) => {
      const { pos } = groups[g]!;
      tensors.forEach((t, f) => {
        const src = t.data as Storage;
        const dst = outs[f]! as unknown as { set(a: ArrayLike<unknown>, offset: number): void } & Record<number, unknown>;
        const rs = schema.fields[f]!.rowSize;
        if (rs === 1) for (let r = 0; r < pos.length; r++) dst[pos[r]!] = src[r];
        else for (let r = 0; r < pos.length; r++) dst.set(src.subarray(r * rs, (r + 1) * rs) as ArrayLike<unknown>, pos[r]! * rs);
      });
    });
    const tensors = schema.fields.map((f, i) => new Tensor(outs[i]! as TypedArray, [rows, ...f.shape], f.dtype));
    if (schema.keys === undefined) return tensors;
    return Object.fromEntries(schema.keys.map((k, i) => [k, tensors[i]!]));
  }

  /** Part `p`'s columns in the common order, checked against the first part read. */
  #columnsOf(p: number, cols: BatchColumns, rows: number): Tensor[] {
    const where = `sources.concat: part ${p}.getBatch`;
    if (this.#schema === undefined) {
      const { tensors, keys } = batchColumns(cols, rows, undefined, where);
      this.#schema = { schema: schemaOfColumns(tensors, keys), part: p };
      this.#checked[p] = true;
      return tensors;
    }
    const { schema, part } = this.#schema;
    if (!this.#checked[p]) {
      const { tensors, keys } = batchColumns(cols, rows, undefined, where);
      const own = schemaOfColumns(tensors, keys);
      if (!sameColumns(schema, own)) {
        throw sampleMismatchError(
          `sources.concat: part ${p} gives columns ${describeColumns(own)} but part ${part} gives ${describeColumns(schema)}. Every part must give the same column names, dtypes and row shapes`,
        );
      }
      this.#checked[p] = true;
    }
    return batchColumns(cols, rows, schema, where).tensors;
  }
}

/** A concat with at least one per-sample part: `get(i)` routes to the part holding i. */
export class ConcatSampleSource extends ConcatBase implements Dataset {
  get(index: number, given?: ReadContext): Sample | Promise<Sample> {
    const context = given ?? unboundedContext();
    const { part, local } = this.locate(index);
    const ds = this.parts[part]!;
    if (!isBatchDataset(ds)) return ds.get(local, context);
    const cols = ds.getBatch([local], context.key === undefined ? context : { signal: context.signal, keys: [context.key] });
    return cols instanceof Promise ? cols.then((c) => oneRow(c, part)) : oneRow(cols, part);
  }
}

export type ConcatSource = ConcatBatchSource | ConcatSampleSource;

/**
 * One dataset over `parts`, in order (length: the sum of theirs). Per-batch when every part is
 * (`getBatch`), else per-sample. Reopenable by reader workers when every part is; `close()`
 * closes every part. Parts must be opened datasets: for source specs use `await openConcat({ parts })`.
 */
export function concatSource(parts: readonly AnyDataset[]): ConcatSource {
  return makeConcat(parts, []);
}

function makeConcat(parts: readonly AnyDataset[], specs: readonly (SourceSpec | undefined)[]): ConcatSource {
  if (!Array.isArray(parts)) throw invalidDatasetError(`sources.concat(parts): parts must be an array of datasets, got ${show(parts)}`);
  if (parts.length === 0) throw invalidDatasetError('sources.concat(parts): give at least one part');
  parts.forEach((p, i) => {
    if (isSourceSpec(p)) {
      throw invalidDatasetError(`sources.concat: part ${i} is a source spec (${show((p as SourceSpec).export)}), not an opened dataset. Open it first, or pass the list to await openConcat({ parts })`);
    }
    const ds = p as Partial<Dataset & BatchDataset> | null;
    if (ds === null || typeof ds !== 'object' || (typeof ds.get !== 'function' && typeof ds.getBatch !== 'function')) {
      throw invalidDatasetError(`sources.concat: part ${i} is ${show(p)}; a part must be a dataset with get(i) or getBatch(ids)`);
    }
    if (!Number.isSafeInteger(ds.length) || ds.length! < 1) {
      throw invalidDatasetError(`sources.concat: part ${i} has length ${show(ds.length)}; every part needs a positive integer length`);
    }
  });
  checkClasses(parts);
  return parts.every(isBatchDataset) ? new ConcatBatchSource(parts as BatchDataset[], specs) : new ConcatSampleSource(parts, specs);
}

/**
 * Open a concat whose parts may be source specs (each opened with its factory; the concat stays
 * reopenable through those specs): the factory reader workers call with `[kSourceSpec]()`'s
 * options. When a part fails to open or the parts do not fit, the parts opened here are closed.
 */
export async function openConcat(options: ConcatOptions): Promise<ConcatSource> {
  const parts = options?.parts;
  if (!Array.isArray(parts)) throw invalidDatasetError(`openConcat: options.parts must be an array, got ${show(parts)}`);
  const opened: AnyDataset[] = [];
  try {
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i] as SourceSpec | AnyDataset;
      if (!isSourceSpec(p)) {
        opened.push(p);
        continue;
      }
      try {
        opened.push(await openSource(p));
      } catch (cause) {
        throw invalidDatasetError(`sources.concat: opening part ${i} failed: ${describeCause(cause)}`, cause);
      }
    }
    return makeConcat(opened, parts.map((p) => (isSourceSpec(p) ? p : undefined)));
  } catch (error) {
    await Promise.all(opened.filter((_, i) => isSourceSpec(parts[i])).map((ds) => closeDataset(ds)));
    throw error;
  }
}

/** Refuse parts whose `classes` (label index → class name) differ: their labels would not mean the same. */
function checkClasses(parts: readonly AnyDataset[]): void {
  const classesOf = (p: AnyDataset): readonly string[] | undefined => (hasClasses(p) ? p.classes : undefined);
  const first = parts.findIndex((p) => classesOf(p) !== undefined);
  if (first < 0) return;
  const want = classesOf(parts[first]!)!;
  parts.forEach((p, i) => {
    const got = classesOf(p);
    if (got !== undefined && got.length === want.length && got.every((c, k) => c === want[k])) return;
    const gave = got === undefined ? 'names no classes' : `has classes ${show(got.slice(0, 20))}`;
    const clash = got?.findIndex((c, k) => c !== want[k]) ?? -1;
    const why = got !== undefined && clash >= 0 && clash < want.length ? `: label ${clash} would mean ${show(want[clash])} in part ${first} and ${show(got[clash])} in part ${i}` : '';
    throw sampleMismatchError(
      `sources.concat: part ${i} ${gave} but part ${first} has ${show(want.slice(0, 20))}${why}. Every part's labels must index the same class list: give each part the same class folders, or make one image folder of all of them`,
    );
  });
}

/** A part's declared `lengths` as a table (a function is called once per sample); undefined when it declares none. */
function ownLengths(p: AnyDataset): Uint32Array | undefined {
  const l: unknown = hasLengths(p) ? p.lengths : undefined;
  if (l instanceof Uint32Array) return l;
  if (typeof l !== 'function') return undefined;
  const out = new Uint32Array(p.length);
  for (let i = 0; i < p.length; i++) out[i] = (l as (i: number) => number)(i);
  return out;
}

/** Lengths in the concat layout when every part declares its own: a table when all are tables, else a function (`build` false: only whether there are any). */
function concatLengths(parts: readonly AnyDataset[], build: boolean): Uint32Array | ((i: number) => number) | undefined {
  const own = parts.map((p) => (hasLengths(p) ? p.lengths : undefined));
  if (!own.every((l) => l instanceof Uint32Array || typeof l === 'function')) return undefined;
  if (!build) return own[0];
  const offsets = [0];
  for (const p of parts) offsets.push(offsets[offsets.length - 1]! + p.length);
  if (own.every((l, k) => l instanceof Uint32Array && l.length === parts[k]!.length)) {
    const out = new Uint32Array(offsets[parts.length]!);
    own.forEach((l, k) => out.set(l as Uint32Array, offsets[k]!));
    return out;
  }
  return (i: number) => {
    let p = 0;
    while (offsets[p + 1]! <= i) p++;
    const l = own[p]!;
    return typeof l === 'function' ? l(i - offsets[p]!) : l[i - offsets[p]!]!;
  };
}

/**
 * The context of a read made outside an epoch without one (`concat.getBatch(ids)` at a prompt), as
 * the other sources take it: never aborted, no keys. The parts are given it, since a part may rely
 * on the contract's context.
 */
function unboundedContext(): ReadContext {
  return { signal: new AbortController().signal };
}

/** The one row of a per-batch part's `getBatch([i])`, as a sample (fields without the batch dimension). */
function oneRow(cols: BatchColumns, part: number): Sample {
  const { tensors, keys } = batchColumns(cols, 1, undefined, `sources.concat: part ${part}.getBatch`);
  const fields = tensors.map((t) => new Tensor(t.data as TypedArray, t.shape.slice(1), t.dtype));
  if (keys === undefined) return fields;
  return Object.fromEntries(keys.map((k, i) => [k, fields[i]!]));
}

function sameColumns(a: Schema, b: Schema): boolean {
  if ((a.keys === undefined) !== (b.keys === undefined) || a.fields.length !== b.fields.length) return false;
  return a.fields.every((f, i) => {
    const j = a.keys === undefined ? i : b.keys!.indexOf(a.keys[i]!);
    const g = b.fields[j];
    return g !== undefined && g.dtype === f.dtype && g.shape.length === f.shape.length && g.shape.every((d, k) => d === f.shape[k]);
  });
}

function describeColumns(s: Schema): string {
  const fields = s.fields.map((f, i) => `${s.keys === undefined ? '' : `${s.keys[i]}: `}${f.dtype} [${f.shape.join(', ')}]`);
  return s.keys === undefined ? `[${fields.join(', ')}]` : `{ ${fields.join(', ')} }`;
}
