// What a dataset must be. Two shapes: per-sample (`get(i)`) and per-batch (`getBatch(ids)`).
// The one rule: content is a pure function of the index. Caches freeze the first read, so any
// randomness belongs in the loader's `transform`, keyed by its PickKey.

import type { PickKey } from '../sampler/pick-key.js';
import type { TypedArray } from '../tensor/dtype.js';
import type { Tensor } from '../tensor/tensor.js';

/**
 * One field of a sample: a tensor, a typed array (shape `[length]`), a number (a float64 scalar)
 * or a bigint (an int64 scalar).
 */
export type SampleValue = Tensor | TypedArray | number | bigint;

/** A sample: a fixed list of fields, or a record of named fields (its keys give default names). */
export type Sample = readonly SampleValue[] | { readonly [name: string]: SampleValue };

/** One field of a batch: a tensor or typed array whose first dimension is the batch's row count. */
export type BatchValue = Tensor | TypedArray;

/** Columns of a batch, positional or named, each with one row per requested index. */
export type BatchColumns = readonly BatchValue[] | { readonly [name: string]: BatchValue };

/** Passed to every read so that async sources can stop early when the epoch is abandoned. */
export interface ReadContext {
  /** Aborted when the consumer leaves the epoch or the loader closes. */
  readonly signal: AbortSignal;
  /**
   * Keyed datasets only (`keyed: true`): the pick this `get(i)` reads for, whose key gives its
   * decode-time view. Absent for reads outside an epoch (the shape probe): read a plain view then.
   */
  readonly key?: PickKey;
  /** Keyed datasets only: the picks of `getBatch(indices)`, one per index. */
  readonly keys?: readonly PickKey[];
  /**
   * Where the loader will put this sample (`get` only; absent elsewhere): the bytes of its row for a
   * fixed-size field, by the sample's key (undefined for ragged or unknown fields). A dataset may
   * write a field's values there and return a tensor viewing exactly those bytes (the right dtype and
   * length): the loader then skips its copy. Optional: a dataset that ignores it loses nothing.
   */
  readonly rows?: SampleRows;
}

/** See `ReadContext.rows`. */
export interface SampleRows {
  of(field: string): Uint8Array | undefined;
}

/**
 * NOTE [keyed reads] A dataset whose samples depend on the pick's key as well as the index (an
 * image source with a decode-time `view`: a random crop per epoch) says `keyed: true`. The loader
 * then passes every read its PickKey (`context.key` / `context.keys`), and such reads never go
 * through the sample tiers (RAM cache, disk stage, VRAM pool) nor a resident store: each epoch's
 * view differs, so a frozen first read would be wrong. `keyed` must not change after the loader
 * is built. Purity then means: the same (index, key) gives the same content.
 */

/**
 * NOTE [which thread reads] A dataset is read where the loader reads: on the main thread, and, when
 * it is worker-openable (a source spec from `sources.module`, or a dataset with the `Reopenable`
 * capability — every built-in source), in reader worker threads, each of which opens its own copy
 * from the spec (reader/reader-worker.ts) and calls that copy's `get` / `getBatch`. The main
 * thread always opens or holds one copy: it reads sample 0 for the shape probe, and every read when
 * there are no reader workers (`workers: 0`, a plain object, in-memory columns) or in resident mode.
 * Copies share nothing but what the spec carries, so each must give the same content. (The built-in
 * text sources' lengths workers open copies too: `CountsLengths` in capabilities.ts.)
 */

/**
 * A per-sample dataset.
 *
 * # Contract
 * - `length`: read once at create, on the main thread; fixed for the life of the loader, an integer
 *   in [1, 2^32 − 2].
 * - `get(i, context)`: called with integers `0 ≤ i < length`, on the main thread or in a reader
 *   worker (NOTE [which thread reads]), possibly several at once in one thread when it returns
 *   promises. It returns (or resolves to) a `Sample` with the same fields, dtypes and shapes for
 *   every `i` (a ragged field's first dimension excepted: `RaggedFields` in capabilities.ts). It is
 *   a pure function of `i` (of `i` and `context.key` when keyed): two calls give equal content, in
 *   any thread. It may throw or reject: that batch fails with a BatchError and the loader survives.
 *   It must not keep or mutate arrays it returned earlier (the loader may read them later), must not
 *   write into `context.rows` outside the row it was given, and should stop early when
 *   `context.signal` aborts.
 * - `close()` (optional, `Closeable`): called once per copy by whoever opened it (a reader worker
 *   for its copy, the loader for one it opened from a spec), when the loader closes; a dataset
 *   object the caller passed in is the caller's to close. A close that throws or rejects is ignored.
 * - Optional abilities (worker hints, keyed reads, lengths, ragged fields, …) are declared, one
 *   interface and type guard each, in capabilities.ts.
 */
export interface Dataset {
  readonly length: number;
  /**
   * Optional: the reader-thread count this source works best with, used when the loader's
   * `workers` is not set (sources that decode in child processes ask for fewer threads).
   */
  readonly readerWorkers?: number;
  /**
   * Optional: the batches in flight this source works best with on a device without a memory probe
   * (the CPU), used when the loader's `prefetch` is not set. The staging ring's RAM bound still
   * applies (sources that decode in child processes ask for a deeper window: NOTE [a window for
   * decode processes] in image-decoding.ts).
   */
  readonly prefetch?: number;
  /** Optional: reads depend on `context.key` too (NOTE [keyed reads]). */
  readonly keyed?: boolean;
  /** Sample `index`: on the main thread or in a reader worker (see the contract above). */
  get(index: number, context: ReadContext): Sample | Promise<Sample>;
  /** Optional: release files and handles. Called on each copy by whoever opened it (reader workers, the loader), when the loader closes. */
  close?(): void | Promise<void>;
}

/**
 * A per-batch dataset: one call per batch, for sources that read many rows at once faster than one
 * by one (a column store, a database query).
 *
 * # Contract
 * - `length` and `close()` as `Dataset`'s.
 * - `getBatch(indices, context)`: called on the main thread or in a reader worker (NOTE [which
 *   thread reads]), possibly several at once when it returns promises, with indices in
 *   `[0, length)` in the batch's order (not sorted; with `augment` an index may appear more than
 *   once). Every returned field has first dimension `indices.length`, row `r` holding index
 *   `indices[r]`; the field count, dtypes and trailing shapes are the same in every call. Pure, as `get`: row `r` depends only on
 *   `indices[r]` (and `context.keys[r]` when keyed). It may throw or reject (that batch fails).
 * - Returned arrays may be views of the source's own memory: the loader copies what it keeps and
 *   never writes into them.
 * - Per-batch reads never go through the per-sample tiers (RAM cache, disk stage).
 */
export interface BatchDataset {
  readonly length: number;
  /** Optional: as `Dataset.readerWorkers`. */
  readonly readerWorkers?: number;
  /** Optional: as `Dataset.prefetch`. */
  readonly prefetch?: number;
  /** Optional: reads depend on `context.key` too (NOTE [keyed reads]). */
  readonly keyed?: boolean;
  /** Rows of `indices`, in that order: on the main thread or in a reader worker (see the contract above). */
  getBatch(indices: readonly number[], context: ReadContext): BatchColumns | Promise<BatchColumns>;
  /** Optional: release files and handles. Called on each copy by whoever opened it (reader workers, the loader), when the loader closes. */
  close?(): void | Promise<void>;
}

export type AnyDataset = Dataset | BatchDataset;

export function isBatchDataset(ds: AnyDataset): ds is BatchDataset {
  return typeof (ds as BatchDataset).getBatch === 'function';
}

// The optional abilities' readers live with their guards (capabilities.ts); re-exported for the modules that import them from here.
export { closeDataset, hintOf, isKeyed } from './capabilities.js';
