// Element types Stoker moves. The rule: float16 and bfloat16 travel as raw 16-bit patterns in a
// Uint16Array (JavaScript has no 16-bit float array on Node 20), int64 as a BigInt64Array.
// Stoker never converts between dtypes unless a transform asks it to.

export const DTYPES = [
  'uint8', 'int8', 'int16', 'uint16', 'int32', 'uint32',
  'float16', 'bfloat16', 'float32', 'float64', 'int64',
] as const;

export type DType = (typeof DTYPES)[number];

/** The typed array that stores each dtype. */
export interface StorageOf {
  uint8: Uint8Array;
  int8: Int8Array;
  int16: Int16Array;
  uint16: Uint16Array;
  int32: Int32Array;
  uint32: Uint32Array;
  float16: Uint16Array;
  bfloat16: Uint16Array;
  float32: Float32Array;
  float64: Float64Array;
  int64: BigInt64Array;
}

export type Storage = StorageOf[DType];

/** Any typed array a user may hand over (Uint8ClampedArray is read as uint8). */
export type TypedArray = Storage | Uint8ClampedArray;

type StorageCtor = { new (length: number): Storage; new (buffer: ArrayBufferLike, byteOffset: number, length: number): Storage; readonly BYTES_PER_ELEMENT: number };

const CTORS: Record<DType, StorageCtor> = {
  uint8: Uint8Array as unknown as StorageCtor,
  int8: Int8Array as unknown as StorageCtor,
  int16: Int16Array as unknown as StorageCtor,
  uint16: Uint16Array as unknown as StorageCtor,
  int32: Int32Array as unknown as StorageCtor,
  uint32: Uint32Array as unknown as StorageCtor,
  float16: Uint16Array as unknown as StorageCtor,
  bfloat16: Uint16Array as unknown as StorageCtor,
  float32: Float32Array as unknown as StorageCtor,
  float64: Float64Array as unknown as StorageCtor,
  int64: BigInt64Array as unknown as StorageCtor,
};

export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && (DTYPES as readonly string[]).includes(value);
}

export function elementSize(dtype: DType): number {
  return CTORS[dtype].BYTES_PER_ELEMENT;
}

/** A zero-filled storage array of `length` elements. */
export function allocStorage<D extends DType>(dtype: D, length: number): StorageOf[D] {
  return new CTORS[dtype](length) as StorageOf[D];
}

/** A storage array of `dtype` over existing memory (no copy). */
export function storageView<D extends DType>(dtype: D, buffer: ArrayBufferLike, byteOffset: number, length: number): StorageOf[D] {
  return new CTORS[dtype](buffer, byteOffset, length) as StorageOf[D];
}

/** True when `data` is the storage class of `dtype` (Uint16Array serves uint16, float16 and bfloat16). */
export function storageMatches(dtype: DType, data: unknown): boolean {
  return data instanceof CTORS[dtype] && data.constructor === CTORS[dtype];
}

/**
 * The dtype a typed array stands for when the caller names none. Uint16Array is read as uint16;
 * half-precision data must be tagged 'float16' or 'bfloat16' explicitly.
 */
export function inferDType(data: unknown): DType | undefined {
  if (data instanceof Uint8Array || data instanceof Uint8ClampedArray) return 'uint8';
  if (data instanceof Int8Array) return 'int8';
  if (data instanceof Int16Array) return 'int16';
  if (data instanceof Uint16Array) return 'uint16';
  if (data instanceof Int32Array) return 'int32';
  if (data instanceof Uint32Array) return 'uint32';
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof Float64Array) return 'float64';
  if (data instanceof BigInt64Array) return 'int64';
  return undefined;
}
