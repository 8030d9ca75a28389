// The TensorFlow.js adapter: a loader's epochs as a `tf.data.Dataset` of `{ xs, ys }` tensors, ready
// for `model.fitDataset`. The rule: every tf tensor the adapter makes is either handed to the
// consumer (who disposes it — fitDataset and evaluateDataset do, after each step) or disposed inside
// the adapter's tidy; and a Stoker batch is released as soon as no tf tensor still reads its memory.
//
// NOTE [tfjs borrowing]
// `tf.tensor(values, shape, dtype)` keeps the typed array it is given when no conversion is needed
// (float32 ← Float32Array, int32 ← Int32Array): the CPU backend stores that very array, so a batch
// that is float32 (transforms.image with normalize) or int32 crosses into tfjs with no copy. Such a
// tf tensor *borrows* the batch's memory, and the batch must outlive it: the adapter holds the batch
// and releases it once the backend's reference count for every borrowed data id is 0 (checked at
// every `next()` and at the end of the epoch). `reshape`, `cast` to the same dtype and `clone` share
// the data id, so a derived tensor keeps the batch held too — by construction, not by luck. The WASM
// backend copies into its heap when the tensor is made: there the batch is released at once.
// Other dtypes are converted (one copy): tfjs has only float32, int32 and bool.
//
// NOTE [fitDataset iterators]
// `fitDataset` calls `dataset.iterator()` once before its loop and never reads that iterator; it also
// abandons an iterator without `return()` when training stops early or `batchesPerEpoch` is reached.
// So an iterator claims a loader epoch only on its first `next()`, and a new iterator that starts
// while an older one is still mid-epoch ends the older one first (its loader epoch is cancelled).

import type { Batch } from '../batch.js';
import { DeviceTensor, type AnyTensor } from '../device/device-tensor.js';
import { LoaderError, invalidOptionError, invalidOptionOf, invalidTensorError, show, unknownFieldError } from '../errors.js';
import type { Tensor } from '../tensor/tensor.js';
import { fromBFloat16Bits, fromFloat16Bits } from '../tensor/half.js';

// NOTE [structural tfjs types]
// Stoker's published types never import '@tensorflow/tfjs' (an optional peer: a dependent without
// it must still type-check with skipLibCheck off). The adapter is typed by what it calls — the
// structural `TfNamespace` and `TfTensorLike` below — and generic over the namespace you pass, so
// with real tfjs the fields `map` receives, the `tf` it is handed and the dataset you get back are
// tfjs's own types, read off `typeof tf` (`TensorOf`, `DatasetOf`). tfjs's `Dataset<T>` cannot be
// re-instantiated with Stoker's element type from outside, so the dataset is typed as what your
// `tf.data.generator` returns (`Dataset<TensorContainer>`): cast an element to read its fields.

/** The part of a tfjs tensor the adapter uses. A real `tf.Tensor` is one. */
export interface TfTensorLike {
  readonly dataId: object;
  readonly dtype: string;
  reshape(shape: number[]): TfTensorLike;
  toInt(): TfTensorLike;
  toFloat(): TfTensorLike;
}

/** What `tf.tidy` and a dataset element may hold: tfjs's `TensorContainer`, over tensors of type `X`. */
export type TfContainer<X = TfTensorLike> = void | X | string | number | boolean | Float32Array | Int32Array | Uint8Array | { [key: string]: TfContainer<X> } | TfContainer<X>[];

/**
 * The parts of the `@tensorflow/tfjs` namespace the adapter calls. Pass the one your model uses
 * (`import * as tf from '@tensorflow/tfjs'`). `tidy`, `oneHot` and `data.generator` take `never`:
 * tfjs's own take its `TensorContainer` and `TensorLike`, which cannot be named without importing
 * tfjs, so any such function is accepted here and the adapter calls it as `TfCalls` says.
 */
export interface TfNamespace {
  tensor(values: Float32Array | Int32Array, shape: number[], dtype: 'float32' | 'int32'): TfTensorLike;
  tidy(fn: never): unknown;
  oneHot(indices: never, depth: number): TfTensorLike;
  backend(): { refCount(dataId: object): number };
  getBackend(): string;
  readonly data: { generator(make: never): object };
}

/** How the adapter calls a `TfNamespace`, as tfjs's own signatures allow (tidy returns what its function returns). */
type TfCalls = Omit<TfNamespace, 'tidy' | 'oneHot' | 'data'> & {
  tidy(fn: () => TfContainer): TfContainer;
  oneHot(indices: TfTensorLike, depth: number): TfTensorLike;
  readonly data: { generator(make: () => AsyncIterator<TfContainer>): object };
};

/** The tensor type of a namespace: `tf.Tensor` for real tfjs. */
export type TensorOf<TF extends TfNamespace> = ReturnType<TF['tensor']>;

/** The dataset type of a namespace: what its `tf.data.generator` returns (`tf.data.Dataset<TensorContainer>` for real tfjs). */
export type DatasetOf<TF extends TfNamespace> = ReturnType<TF['data']['generator']>;

/** The element of a dataset made without `map`: inputs and targets, a tensor or a record of tensors by name. */
export type TfElement<X = TfTensorLike> = {
  xs: X | Record<string, X>;
  ys: X | Record<string, X>;
};

/** What the adapter needs of a loader (a `DataLoader` on any device). */
export interface TfLoader {
  epoch(epoch: number): AsyncIterable<Batch<AnyTensor>>;
  readonly numBatches: number;
  readonly names: readonly string[];
}

export interface TfDatasetOptions<TF extends TfNamespace = TfNamespace> {
  /** The tfjs namespace (`import * as tf from '@tensorflow/tfjs'`): tensors must come from the engine the model uses. */
  tf: TF;
  /** Field(s) that become `xs`. A list makes `xs` a record keyed by field name (multi-input models name their inputs alike). Default: the first field. */
  x?: string | readonly string[];
  /** Field(s) that become `ys`. Default: the second field. */
  y?: string | readonly string[];
  /** One-hot encode `ys` (a single integer label field) to `oneHot` classes, float32 — for `categoricalCrossentropy`. */
  oneHot?: number;
  /** Loader epoch of the first iteration; every later iteration runs the next one. Default 0. */
  epoch?: number;
  /**
   * Build the element yourself from every field of the batch (as tf tensors, by name): runs inside
   * `tf.tidy`, so intermediate tensors are freed and the input tensors too unless returned. Replaces `x`, `y`, `oneHot`.
   */
  map?: (fields: Record<string, TensorOf<TF>>, tf: TF) => TfContainer<TensorOf<TF>>;
}

/** A `tf.data.Dataset` over a loader, with what the adapter holds. */
export type StokerTfDataset<TF extends TfNamespace = TfNamespace> = DatasetOf<TF> & {
  /** The loader epoch the next iteration will run. */
  readonly nextEpoch: number;
  /** Stoker batches still held because a live tf tensor reads their memory (0 after a fitDataset epoch). */
  readonly heldBatches: number;
  /** End the epoch being iterated (if any) and release every batch no live tensor reads. The loader stays open. */
  stop(): Promise<void>;
};

interface Held {
  readonly batch: Batch<AnyTensor>;
  readonly dataIds: readonly object[];
  /** The backend that holds those data ids (the user may switch backends later). */
  readonly backend: { refCount(dataId: object): number };
}

/**
 * The loader as a `tf.data.Dataset`: each `iterator()` (each `fitDataset` epoch) runs the next
 * loader epoch; elements are `{ xs, ys }` (or what `map` returns). Tensors are handed over to the
 * consumer, who disposes them (fitDataset and evaluateDataset do); batches are released for you.
 *
 * ```ts
 * const train = toTfDataset(loader, { tf, x: 'image', y: 'label', oneHot: 10 });
 * await model.fitDataset(train, { epochs: 5 });
 * ```
 */
export function toTfDataset<TF extends TfNamespace>(loader: TfLoader, options: TfDatasetOptions<TF>): StokerTfDataset<TF> {
  // Typed structurally inside (NOTE [structural tfjs types]); the caller sees its own tfjs types.
  const tf = options.tf as TfNamespace as TfCalls;
  if (tf === null || typeof tf !== 'object' || typeof tf.tensor !== 'function' || typeof tf.data?.generator !== 'function') {
    throw invalidOptionError(`toTfDataset: \`tf\` must be the @tensorflow/tfjs namespace, got ${show(tf)}. Pass { tf } with tf from \`import * as tf from '@tensorflow/tfjs'\``);
  }
  const names = loader.names;
  const fieldList = (knob: 'x' | 'y', value: string | readonly string[] | undefined, fallback: number): readonly string[] => {
    const list = value === undefined ? (names[fallback] === undefined ? [] : [names[fallback]!]) : typeof value === 'string' ? [value] : value;
    if (list.length === 0) throw invalidOptionError(`toTfDataset: \`${knob}\` names no field and the batches have no field ${fallback}. Pass ${knob}: 'fieldName' (fields: [${names.join(', ')}])`);
    for (const name of list) {
      if (!names.includes(name)) throw unknownFieldError(`toTfDataset: \`${knob}\` names the field ${show(name)}, which the batches do not have. Available: [${names.join(', ')}]`);
    }
    return list;
  };
  const map = options.map as ((fields: Record<string, TfTensorLike>, tf: TfCalls) => TfContainer) | undefined;
  if (map !== undefined && typeof map !== 'function') throw invalidOptionOf('toTfDataset', 'map', 'a function', map);
  const xs = map === undefined ? fieldList('x', options.x, 0) : [];
  const ys = map === undefined ? fieldList('y', options.y, 1) : [];
  const oneHot = options.oneHot;
  if (oneHot !== undefined) {
    if (!Number.isSafeInteger(oneHot) || oneHot < 2) throw invalidOptionOf('toTfDataset', 'oneHot', 'a class count ≥ 2', oneHot);
    if (ys.length !== 1) throw invalidOptionError(`toTfDataset: \`oneHot\` encodes one label field, but \`y\` names ${ys.length}. Name one field in y, or build ys in \`map\``);
  }
  const firstEpoch = options.epoch ?? 0;
  if (!Number.isSafeInteger(firstEpoch) || firstEpoch < 0) throw invalidOptionOf('toTfDataset', 'epoch', 'an integer ≥ 0', firstEpoch);
  const needed = map === undefined ? [...new Set([...xs, ...ys])] : names;

  let nextEpoch = firstEpoch;
  let active: Iteration | undefined;
  const held: Held[] = [];

  /** Release every held batch whose borrowed data ids no tf tensor holds any more. */
  const sweep = (): void => {
    for (let i = held.length - 1; i >= 0; i--) {
      const h = held[i]!;
      if (h.dataIds.every((id) => h.backend.refCount(id) === 0)) {
        h.batch.release();
        held.splice(i, 1);
      }
    }
  };

  const element = (fields: Record<string, TfTensorLike>): TfContainer => {
    if (map !== undefined) return map(fields, tf);
    const pick = (list: readonly string[], asRecord: boolean) => (asRecord ? Object.fromEntries(list.map((n) => [n, fields[n]!])) : fields[list[0]!]!);
    let y = pick(ys, Array.isArray(options.y));
    if (oneHot !== undefined) {
      let labels = fields[ys[0]!]!;
      if (labels.dtype !== 'int32') labels = labels.toInt();
      // Cast after, not through oneHot's dtype argument: the WASM backend (4.22) writes int32 bits
      // into a float32 output when asked for float32 ones.
      y = tf.oneHot(labels.reshape([-1]), oneHot).toFloat();
    }
    return { xs: pick(xs, Array.isArray(options.x)), ys: y } satisfies TfElement;
  };

  /** One batch → one element; the batch is held while tf tensors borrow its memory. */
  const convert = async (batch: Batch<AnyTensor>): Promise<TfContainer> => {
    const host: { name: string; tensor: Tensor; fromBatch: boolean }[] = [];
    for (const name of needed) {
      const t = batch.get(name);
      host.push(t instanceof DeviceTensor ? { name, tensor: await t.toHost(), fromBatch: false } : { name, tensor: t as Tensor, fromBatch: true });
    }
    const eagerCopy = tf.getBackend() === 'wasm';
    const borrowed: object[] = [];
    const out = tf.tidy(() => {
      const fields: Record<string, TfTensorLike> = {};
      for (const { name, tensor, fromBatch } of host) {
        const { values, dtype, shared } = tfValues(tensor, name);
        const t = tf.tensor(values, [...tensor.shape], dtype);
        if (shared && fromBatch && !eagerCopy) borrowed.push(t.dataId);
        fields[name] = t;
      }
      return element(fields);
    });
    if (borrowed.length === 0) batch.release();
    else held.push({ batch, dataIds: borrowed, backend: tf.backend() as unknown as Held['backend'] });
    return out;
  };

  class Iteration implements AsyncIterator<TfContainer> {
    #it: AsyncIterator<Batch<AnyTensor>> | undefined;
    #done = false;
    #queue: Promise<unknown> = Promise.resolve();

    /** Served one at a time in call order: tf.data's prefetch() calls next() again before a call settles. */
    next(): Promise<IteratorResult<TfContainer>> {
      const step = this.#queue.then(() => this.#step());
      this.#queue = step.then(noop, noop);
      return step;
    }

    async #step(): Promise<IteratorResult<TfContainer>> {
      if (this.#done) return { done: true, value: undefined };
      if (this.#it === undefined) {
        if (active !== undefined && active !== this) await active.end();
        active = this;
        this.#it = loader.epoch(nextEpoch++)[Symbol.asyncIterator]();
      }
      sweep();
      let r: IteratorResult<Batch<AnyTensor>>;
      try {
        r = await this.#it.next();
      } catch (error) {
        await this.end();
        throw error;
      }
      if (r.done === true) {
        await this.end();
        return { done: true, value: undefined };
      }
      try {
        return { done: false, value: await convert(r.value) };
      } catch (error) {
        r.value.release();
        await this.end();
        throw error;
      }
    }

    /** Stop this iteration: cancel its loader epoch if it is still running, release what no tensor reads. */
    async end(): Promise<void> {
      if (this.#done) return;
      this.#done = true;
      if (active === this) active = undefined;
      const it = this.#it;
      this.#it = undefined;
      await it?.return?.();
      sweep();
    }
  }

  // A fresh Iteration per `iterator()`: a generator function would start running only on the first
  // `next()` too, but could not be ended from outside when fitDataset abandons it.
  const dataset = tf.data.generator(() => new Iteration()) as StokerTfDataset<TF>;
  // fitDataset reads `size` for its steps per epoch (progress callbacks); the element count is the batch count.
  (dataset as object as { size: number }).size = loader.numBatches;
  Object.defineProperties(dataset, {
    nextEpoch: { get: () => nextEpoch, enumerable: true },
    heldBatches: { get: () => held.length, enumerable: true },
    stop: {
      value: async (): Promise<void> => {
        await active?.end();
        sweep();
      },
    },
  });
  return dataset;
}

function noop(): void {}

type TfValues = { values: Float32Array | Int32Array; dtype: 'float32' | 'int32'; shared: boolean };

/** A Stoker tensor's elements as tfjs takes them: the same array when tfjs can keep it, else one converted copy. */
export function tfValues(tensor: Tensor, field: string): TfValues {
  const data = tensor.data;
  switch (tensor.dtype) {
    case 'float32':
      return { values: data as Float32Array, dtype: 'float32', shared: true };
    case 'int32':
      return { values: data as Int32Array, dtype: 'int32', shared: true };
    case 'uint8':
    case 'int8':
    case 'int16':
    case 'uint16':
      return { values: Int32Array.from(data as Uint8Array), dtype: 'int32', shared: false };
    case 'float64':
      return { values: Float32Array.from(data as Float64Array), dtype: 'float32', shared: false };
    case 'float16':
      return { values: decodeHalf(data as Uint16Array, fromFloat16Bits), dtype: 'float32', shared: false };
    case 'bfloat16':
      return { values: decodeHalf(data as Uint16Array, fromBFloat16Bits), dtype: 'float32', shared: false };
    case 'uint32': {
      const src = data as Uint32Array;
      const out = new Int32Array(src.length);
      for (let i = 0; i < src.length; i++) {
        const v = src[i]!;
        if (v > 0x7fffffff) throw outOfInt32(field, 'uint32', v, i);
        out[i] = v;
      }
      return { values: out, dtype: 'int32', shared: false };
    }
    case 'int64': {
      const src = data as BigInt64Array;
      const out = new Int32Array(src.length);
      for (let i = 0; i < src.length; i++) {
        const v = src[i]!;
        if (v > 0x7fffffffn || v < -0x80000000n) throw outOfInt32(field, 'int64', v, i);
        out[i] = Number(v);
      }
      return { values: out, dtype: 'int32', shared: false };
    }
  }
}

function outOfInt32(field: string, dtype: string, value: number | bigint, index: number): LoaderError {
  return invalidTensorError(
    `toTfDataset: field ${show(field)} (${dtype}) holds ${show(value)} at element ${index}, outside tfjs's int32 range. Map it in a Stoker transform first (e.g. to float32)`,
  );
}

function decodeHalf(src: Uint16Array, decode: (bits: number) => number): Float32Array {
  const out = new Float32Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = decode(src[i]!);
  return out;
}
