// A dataset's optional abilities, each a typed interface with one type guard (as Google grain's
// `base.py` protocols): whatever a source can do beyond the `Dataset` / `BatchDataset` contract of
// dataset.ts — reopening in reader workers, hints for the loader's defaults, keyed reads, close(),
// sample lengths for packing and token budgets, ragged fields, label classes, parts, in-memory columns,
// encoded images for the device's decoder, a mixture's order. The rules: the pipeline finds an
// ability only through its guard here (never by a source's class, never by casting the dataset),
// and a guard only says the ability is declared: a value that comes from a user's object (a hint,
// `lengths`, `raggedMax`) is still checked where it is used, as before. This module imports types
// only, so every other module may import it.

import type { Tensor } from '../tensor/tensor.js';
import type { SourceSpec } from './source-spec.js';
import type { Mixture } from './mix-source.js';

/** Property `key` of `ds`, or undefined when `ds` is null or undefined (reads any object, as property access does). */
function member(ds: unknown, key: PropertyKey): unknown {
  return ds === null || ds === undefined ? undefined : (ds as Record<PropertyKey, unknown>)[key];
}

/** Datasets that know how to reopen themselves in a worker carry their spec under this key. */
export const kSourceSpec: unique symbol = Symbol.for('stoker.sourceSpec') as never;

/**
 * Worker-openable: the dataset can say how another thread opens its own copy (a SourceSpec: a
 * module, an export and structured-cloneable options; source-spec.ts). Every built-in source has
 * it. Called on the main thread by `DataLoader.create` (build.ts, through `specOf`) when it starts
 * reader workers, and by `sources.concat` for its parts; each reader worker then opens the spec
 * (reader-worker.ts), as do the lengths workers of the text sources (text-lengths.ts). Materializing
 * the spec may copy data (in-memory columns move to shared memory), so `canReopen` only looks.
 */
export interface Reopenable {
  /** The spec, or undefined when this instance cannot be reopened elsewhere. */
  [kSourceSpec](): SourceSpec | undefined;
}

export function canReopen(ds: unknown): ds is Reopenable {
  return typeof member(ds, kSourceSpec) === 'function';
}

/**
 * Hints for the loader's defaults: the reader-thread count (`readerWorkers`, an integer ≥ 0) and the
 * batches in flight on a device without a memory probe (`prefetch`, an integer ≥ 1) this source
 * works best with; sources that decode in child processes ask for fewer threads and a deeper window
 * (NOTE [a window for decode processes] in image-decoding.ts). Read once, on the main thread, by
 * `DataLoader.create` (build.ts) when the loader's `workers` / `prefetch` options are not set, and by
 * `sources.concat` (whose own hints are its parts' largest). A hint that is not such an integer is
 * ignored, never an error: read them with `hintOf`.
 */
export interface ReaderHints {
  readonly readerWorkers?: number;
  readonly prefetch?: number;
}

export function hasReaderHint<K extends keyof ReaderHints>(ds: unknown, name: K): ds is Required<Pick<ReaderHints, K>> {
  return typeof member(ds, name) === 'number';
}

/**
 * A dataset's optional integer hint (`readerWorkers` ≥ 0, `prefetch` ≥ 1), or undefined when it gives
 * none or one that is not an integer of at least `least` (a hint never fails the loader: it is ignored).
 */
export function hintOf(ds: unknown, name: keyof ReaderHints, least: number): number | undefined {
  if (!hasReaderHint(ds, name)) return undefined;
  const asked = ds[name];
  return Number.isSafeInteger(asked) && asked >= least ? asked : undefined;
}

/**
 * Keyed reads (`keyed: true`, NOTE [keyed reads] in dataset.ts): the dataset's samples depend on
 * the pick's key as well as the index (an image source with a decode-time view), so its reads get
 * `context.key` / `context.keys` and no sample tier, resident store or disk stage holds them. Read
 * on the main thread by `DataLoader.create` (build.ts) and by `sources.concat`; the reader workers
 * get the answer from the pool (reader-pool.ts), and a `SourceReader` reads it in every thread.
 */
export interface KeyedReads {
  readonly keyed: true;
}

/** True when the dataset's reads take the pick's key (NOTE [keyed reads]). */
export function isKeyed(ds: unknown): ds is KeyedReads {
  return member(ds, 'keyed') === true;
}

/**
 * Planned reads: a dataset whose reads cost less when it knows them in advance (a remote dataset
 * that downloads its files ahead of the reads and evicts by next use, remote/file-set.ts). At each
 * streaming epoch's start the loader hands the main thread's copy this rank's reads, in order, and
 * the consumer's cursor; the dataset must not hold the loader up (it works in the background) and stops
 * when `signal` aborts (the epoch ended). Reads still arrive through `get` / `getBatch` as always:
 * the plan is a hint, and a dataset that ignores it must give the same samples.
 */
export interface PlannedReads {
  followPlan(plan: ReadPlan): void;
}

export interface ReadPlan {
  /** Sample ids this rank reads this epoch, in read order (a resumed epoch: from the resume point). */
  readonly samples: Uint32Array;
  /** How many of `samples` the consumer has taken (their batches delivered). */
  consumed(): number;
  /** Aborted when the epoch ends. */
  readonly signal: AbortSignal;
}

export function followsPlan(ds: unknown): ds is PlannedReads {
  return typeof member(ds, 'followPlan') === 'function';
}

/**
 * A content identity: a hash of what the dataset's files hold (a remote dataset's manifest name,
 * remote/manifest.ts). A resume state names it, so resuming onto changed data is refused, while the
 * same data at another place (a moved bucket) resumes.
 */
export interface ContentIdentity {
  readonly contentId: string;
}

/** `{ content }` when the dataset declares its content identity, else `{}`. */
export function contentOf(ds: unknown): { content?: string } {
  const id = member(ds, 'contentId');
  return typeof id === 'string' ? { content: id } : {};
}

/**
 * `close()`: release files, handles and child processes. Called once per copy by whoever opened
 * it: by each reader worker on its own copy when the loader closes (reader-worker.ts), by the
 * loader on the main thread for a dataset it opened from a source spec (loader.ts), by the lengths
 * workers on theirs, and by `sources.concat` on its parts. A dataset object the caller passed in is
 * the caller's to close. Use `closeDataset`: a close that throws or rejects is ignored.
 */
export interface Closeable {
  close(): void | Promise<void>;
}

export function canClose(ds: unknown): ds is Closeable {
  return typeof member(ds, 'close') === 'function';
}

/** Call a dataset's optional `close()`; a close that throws or rejects is ignored (closing must not fail). */
export async function closeDataset(ds: unknown): Promise<void> {
  if (!canClose(ds)) return;
  try {
    await ds.close();
  } catch {
    // Nothing to do: the loader is going away either way.
  }
}

/**
 * Declared lengths: each sample's token count, known without reading (Megatron's index), as a
 * table (one entry per sample) or a function of the index. What `batchTokens` budgets with and
 * `pack` packs by when the loader's `lengths` option is not given. Read on the main thread at
 * create (build.ts, sampler/token-batches.ts) and by `sources.concat`, which passes its parts'
 * lengths through in its own layout. Its value is checked where it is used.
 */
export interface DeclaresLengths {
  readonly lengths: Uint32Array | ((index: number) => number);
}

export function hasLengths(ds: unknown): ds is DeclaresLengths {
  return member(ds, 'lengths') !== undefined;
}

/**
 * Lengths computed when asked: `loadLengths(field)` resolves to every sample's length of ragged
 * field `field` (default: the one ragged field), as `get(i)` gives it — tokenized text, whose
 * lengths are only known by tokenizing. Awaited once, on the main thread, at create (build.ts),
 * only when packing, token budgets or an unbounded collate need lengths and the source declares
 * none (`DeclaresLengths` wins); `sources.concat` offers it when every part declares or computes
 * its lengths.
 */
export interface LoadsLengths {
  loadLengths(field?: string): Promise<Uint32Array>;
}

export function canLoadLengths(ds: unknown): ds is LoadsLengths {
  return typeof member(ds, 'loadLengths') === 'function';
}

/**
 * What a text source gives the lengths pool (text-lengths.ts): counts of `field` for records
 * [start, end), written at out[start…end) through `get(i)`'s own conversion. Called in the lengths
 * worker threads, each on the copy it opened from the source's spec (text-lengths-worker.ts).
 * Internal to the built-in text sources (JSONL, Parquet, ragged Arrow).
 */
export interface CountsLengths {
  countLengths(field: string, start: number, end: number, out: Uint32Array): void | Promise<void>;
}

export function canCountLengths(ds: unknown): ds is CountsLengths {
  return typeof member(ds, 'countLengths') === 'function';
}

/**
 * Ragged fields: the names of the fields whose first dimension varies from sample to sample
 * (token ids, list values), which the loader carries as fixed-capacity rows and collates (pad,
 * pack, a function; NOTE [ragged rows] in schema.ts). Read on the main thread at create
 * (pipeline/ragged-batch.ts, build.ts) and by `sources.concat` (the union of its parts').
 */
export interface RaggedFields {
  readonly ragged: readonly string[];
}

export function hasRaggedFields(ds: unknown): ds is RaggedFields {
  return Array.isArray(member(ds, 'ragged'));
}

/**
 * Ragged bounds: a ragged field's longest row (a tokenizer's `maxLength`, the longest document of an
 * index), by field name: the capacity of its rows when the collate gives none. Read on the main
 * thread at create (pipeline/ragged-batch.ts, build.ts) and by `sources.concat`.
 */
export interface RaggedBounds {
  readonly raggedMax: { readonly [field: string]: number };
}

export function hasRaggedMax(ds: unknown): ds is RaggedBounds {
  const m = member(ds, 'raggedMax');
  return m !== null && typeof m === 'object';
}

/**
 * Label classes: label index → class name (image folders' sorted class folders). `sources.concat`
 * reads it on the main thread when it is made, and refuses parts whose lists differ (a label would
 * mean two things).
 */
export interface LabelClasses {
  readonly classes: readonly string[];
}

export function hasClasses(ds: unknown): ds is LabelClasses {
  const c = member(ds, 'classes');
  return Array.isArray(c) && c.every((x) => typeof x === 'string');
}

/**
 * Parts: the dataset is stored in parts read as wholes (tar shards, Arrow record batches, Parquet
 * row groups, a concat's members), and `partStarts()` gives each part's first sample id, ascending
 * from 0 (one entry per part, no total at the end). The block shuffle's blocks default to them
 * (`shuffle: 'block'`, sampler/block-sampler.ts). Read once, on the main thread, by
 * `DataLoader.create` (build.ts) and by `sources.concat`; its value is checked where it is used.
 */
export interface HasParts {
  partStarts(): ArrayLike<number>;
}

export function hasParts(ds: unknown): ds is HasParts {
  return typeof member(ds, 'partStarts') === 'function';
}

/** Internal: lets the loader read the columns directly (resident mode, gathers into its own memory). */
export const kColumns: unique symbol = Symbol('stoker.columns');

/**
 * In-memory columns: a dataset that holds all its samples in memory as columns (sources.arrays,
 * and NPY or safetensors data loaded into memory), batch dimension = dataset rows. The loader then
 * reads the columns directly: the shape probe and resident mode on the main thread (no copy), the
 * gathers of `SourceReader` in whichever thread reads (main thread or reader worker), and an
 * accelerator may map them (`pinSource`). Internal: the key is not registered, so only built-in
 * sources carry it.
 */
export interface ColumnsSource {
  readonly length: number;
  readonly [kColumns]: { readonly tensors: readonly Tensor[]; readonly keys: readonly string[] | undefined };
}

/**
 * True when a dataset already holds all its samples in memory as columns: a capability — the
 * `kColumns` view — whatever carries it.
 */
export function hasColumns(ds: unknown): ds is ColumnsSource {
  return ds !== null && typeof ds === 'object' && (ds as { [kColumns]?: unknown })[kColumns] !== undefined;
}

export const kEncodedImages: unique symbol = Symbol.for('stoker.encodedImages');

/**
 * Encoded images (encoded-images.ts): an image source can hand over sample i's encoded file and
 * its other fields, so that the device decodes its batches (NOTE [decode: 'gpu'] in build.ts). The
 * loader asks on the main thread at create (build.ts); the decode route then calls the returned
 * object's `path` / `fields` on the main thread while the device decodes. Internal: image folders.
 */
export interface WithEncodedImages<E = unknown> {
  /** E: formats/images/encoded-images.ts's EncodedImages (declared there, with the image types it names). */
  [kEncodedImages](): E;
}

export function hasEncodedImages<E = unknown>(ds: unknown): ds is WithEncodedImages<E> {
  return typeof member(ds, kEncodedImages) === 'function';
}

export const kMixture: unique symbol = Symbol.for('stoker.mixture') as never;

/**
 * A mixture (`sources.mix`): the weights and options from which the loader builds the dataset's
 * order instead of its sampler (NOTE [Mixture order], sampler/mix-sampler.ts). Read on the main
 * thread at create (build.ts). Internal: set by `sources.mix` only.
 */
export interface WithMixture {
  readonly [kMixture]: Mixture;
}

export function isMixture(ds: unknown): ds is WithMixture {
  return member(ds, kMixture) !== undefined;
}
