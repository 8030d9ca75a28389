// Host tensors: a typed array plus a shape and a dtype, row-major (C order), no strides.
// The rule: a tensor never copies on construction; it is a view of the array it is given.
// Tensors that belong to a batch stop answering `data` once the batch is released.

import { batchReleased, invalidTensorError, show } from '../errors.js';
import { type DType, type StorageOf, type TypedArray, elementSize, inferDType, isDType, storageMatches } from './dtype.js';
import type { Lease } from './lease.js';

export class Tensor<D extends DType = DType> {
  readonly dtype: D;
  /** Dimensions, outermost first. A scalar has shape []. */
  readonly shape: readonly number[];
  /** Number of elements (the product of the shape). */
  readonly size: number;
  readonly #data: StorageOf[D];
  readonly #lease: Lease | undefined;

  /**
   * @param data  the elements, row-major; its length must equal the product of `shape`.
   * @param shape defaults to `[data.length]`.
   * @param dtype defaults to the array's natural dtype; required for float16/bfloat16 (Uint16Array).
   */
  constructor(data: TypedArray, shape?: readonly number[], dtype?: D, lease?: Lease, trusted?: typeof kTrusted) {
    if (trusted === kTrusted) {
      // Internal fast path: data, shape and dtype come from a tensor that was already checked.
      this.dtype = dtype!;
      this.shape = shape!;
      this.size = data.length;
      this.#data = data as StorageOf[D];
      this.#lease = lease;
      return;
    }
    const resolved = (dtype ?? inferDType(data)) as D | undefined;
    if (resolved === undefined || !isDType(resolved)) {
      throw invalidTensorError(`tensor data must be a typed array of a supported dtype, got ${show(data)}${dtype !== undefined ? ` with dtype ${show(dtype)}` : ''}`);
    }
    let storage: unknown = data;
    if (data instanceof Uint8ClampedArray) storage = new Uint8Array(data.buffer, data.byteOffset, data.length);
    if (!storageMatches(resolved, storage)) {
      throw invalidTensorError(`dtype ${resolved} is stored in a ${storageName(resolved)}, got a ${(data as object).constructor.name}. Pass matching data or omit the dtype`);
    }
    const dims = shape === undefined ? [data.length] : [...shape];
    let size = 1;
    for (const d of dims) {
      if (!Number.isSafeInteger(d) || d < 0) throw invalidTensorError(`tensor shape must hold non-negative integers, got ${show(dims)}`);
      size *= d;
    }
    if (size !== data.length) {
      throw invalidTensorError(`tensor shape ${show(dims)} holds ${size} elements but the data has ${data.length}. Fix the shape or the data length`);
    }
    this.dtype = resolved;
    this.shape = Object.freeze(dims);
    this.size = size;
    this.#data = storage as StorageOf[D];
    this.#lease = lease;
  }

  /** The elements. Throws ERR_BATCH_RELEASED when the batch that owns this tensor was released. */
  get data(): StorageOf[D] {
    if (this.#lease?.released) throw batchReleased();
    return this.#data;
  }

  get byteLength(): number {
    return this.size * elementSize(this.dtype);
  }

  /** Elements per row (the product of all dimensions but the first); 1 for scalars and vectors. */
  get rowSize(): number {
    let n = 1;
    for (let i = 1; i < this.shape.length; i++) n *= this.shape[i]!;
    return n;
  }

  /** The same memory under another shape with as many elements. */
  reshape(shape: readonly number[]): Tensor<D> {
    return new Tensor(this.data, shape, this.dtype, this.#lease);
  }

  /** A copy that owns its memory and outlives any batch. */
  clone(): Tensor<D> {
    return new Tensor(this.data.slice() as StorageOf[D], this.shape, this.dtype);
  }

  /** Raw bytes of the elements (a view, no copy). */
  bytes(): Uint8Array {
    const d = this.data;
    return new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
  }

  /** Plain nested arrays, for inspection and tests. int64 elements come back as bigint. */
  toArray(): unknown {
    const d = this.data as ArrayLike<number | bigint>;
    const build = (dim: number, offset: number): unknown => {
      if (dim === this.shape.length) return d[offset];
      const n = this.shape[dim]!;
      let stride = 1;
      for (let i = dim + 1; i < this.shape.length; i++) stride *= this.shape[i]!;
      const out: unknown[] = new Array(n);
      for (let i = 0; i < n; i++) out[i] = build(dim + 1, offset + i * stride);
      return out;
    };
    return build(0, 0);
  }

  toString(): string {
    return `Tensor(${this.dtype}, [${this.shape.join(', ')}])`;
  }
}

/** Create a tensor over `data` (no copy). See the Tensor constructor. */
export function tensor<D extends DType>(data: TypedArray, shape?: readonly number[], dtype?: D): Tensor<D> {
  return new Tensor<D>(data, shape, dtype);
}

/** Internal: marks constructor calls whose arguments are known to be consistent. */
const kTrusted: unique symbol = Symbol('stoker.trusted');

/** Internal: the same memory as `t`, bound to `lease`. */
export function leased<D extends DType>(t: Tensor<D>, lease: Lease): Tensor<D> {
  return new Tensor(t.data as TypedArray, t.shape, t.dtype, lease, kTrusted);
}

/** Internal: a tensor over storage of `dtype` whose length is the product of `shape` (not re-checked). */
export function trustedTensor<D extends DType>(dtype: D, data: StorageOf[D], shape: readonly number[]): Tensor<D> {
  return new Tensor(data as TypedArray, Object.freeze(shape), dtype, undefined, kTrusted);
}

function storageName(dtype: DType): string {
  switch (dtype) {
    case 'float16':
    case 'bfloat16':
      return 'Uint16Array (raw 16-bit patterns)';
    case 'int64':
      return 'BigInt64Array';
    default:
      return `${dtype[0]!.toUpperCase()}${dtype.slice(1)}Array`;
  }
}
