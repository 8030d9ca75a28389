// Internal: not exported from the package entry.
// Recycles the host memory of released batches. The rule: a buffer enters the pool only when no
// live tensor can read it any more (its batch was released), so a pooled buffer is never aliased.

import { type DType, type StorageOf, allocStorage } from '../tensor/dtype.js';

/**
 * Bytes of released buffers kept for reuse; past this, released buffers are let go (unpinned, left to
 * the garbage collector). Not a count per shape: a deep read-ahead keeps hundreds of small address
 * tables in flight, and making each anew costs a page-locking round trip on a GPU (≈ 100 µs).
 */
export const KEEP_BYTES = 256 * 2 ** 20;

export class HostPool {
  readonly #free = new Map<string, unknown[]>();
  readonly #alloc: <D extends DType>(dtype: D, length: number) => StorageOf[D];

  readonly #drop: ((data: StorageOf[DType]) => void) | undefined;
  #keptBytes = 0;

  /**
   * `alloc` makes new buffers (default: plain zeroed memory; accelerators pass page-locked memory);
   * `drop` is told about a buffer the pool lets go of (accelerators unpin it).
   */
  constructor(alloc: <D extends DType>(dtype: D, length: number) => StorageOf[D] = allocStorage, drop?: (data: StorageOf[DType]) => void, keepBytes = KEEP_BYTES) {
    this.#alloc = alloc;
    this.#drop = drop;
    this.#keepBytes = keepBytes;
  }

  readonly #keepBytes: number;

  acquire<D extends DType>(dtype: D, length: number): StorageOf[D] {
    const stack = this.#free.get(key(dtype, length));
    const hit = stack?.pop() as StorageOf[D] | undefined;
    if (hit !== undefined) {
      this.#keptBytes -= hit.byteLength;
      return hit;
    }
    return this.#alloc(dtype, length);
  }

  /** Give back a buffer acquired from this pool. The caller guarantees nothing reads it any more. */
  recycle(dtype: DType, data: StorageOf[DType]): void {
    const k = key(dtype, data.length);
    let stack = this.#free.get(k);
    if (stack === undefined) this.#free.set(k, (stack = []));
    if (this.#keptBytes + data.byteLength <= this.#keepBytes) {
      stack.push(data);
      this.#keptBytes += data.byteLength;
    } else this.#drop?.(data);
  }

  clear(): void {
    if (this.#drop !== undefined) for (const stack of this.#free.values()) for (const d of stack) this.#drop(d as StorageOf[DType]);
    this.#free.clear();
    this.#keptBytes = 0;
  }
}

function key(dtype: DType, length: number): string {
  return `${dtype}:${length}`;
}
