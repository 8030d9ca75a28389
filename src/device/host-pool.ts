// Internal: not exported from the package entry.
// Recycles the host memory of released batches. The rule: a buffer enters the pool only when no
// live tensor can read it any more (its batch was released), so a pooled buffer is never aliased.

import { type DType, type StorageOf, allocStorage } from '../tensor/dtype.js';

/** Buffers kept per (dtype, length). Past this, released buffers are left to the garbage collector. */
const KEEP_PER_SHAPE = 8;

export class HostPool {
  readonly #free = new Map<string, unknown[]>();
  readonly #alloc: <D extends DType>(dtype: D, length: number) => StorageOf[D];

  readonly #drop: ((data: StorageOf[DType]) => void) | undefined;

  /**
   * `alloc` makes new buffers (default: plain zeroed memory; accelerators pass page-locked memory);
   * `drop` is told about a buffer the pool lets go of (accelerators unpin it).
   */
  constructor(alloc: <D extends DType>(dtype: D, length: number) => StorageOf[D] = allocStorage, drop?: (data: StorageOf[DType]) => void) {
    this.#alloc = alloc;
    this.#drop = drop;
  }

  acquire<D extends DType>(dtype: D, length: number): StorageOf[D] {
    const stack = this.#free.get(key(dtype, length));
    const hit = stack?.pop();
    if (hit !== undefined) return hit as StorageOf[D];
    return this.#alloc(dtype, length);
  }

  /** Give back a buffer acquired from this pool. The caller guarantees nothing reads it any more. */
  recycle(dtype: DType, data: StorageOf[DType]): void {
    const k = key(dtype, data.length);
    let stack = this.#free.get(k);
    if (stack === undefined) this.#free.set(k, (stack = []));
    if (stack.length < KEEP_PER_SHAPE) stack.push(data);
    else this.#drop?.(data);
  }

  clear(): void {
    if (this.#drop !== undefined) for (const stack of this.#free.values()) for (const d of stack) this.#drop(d as StorageOf[DType]);
    this.#free.clear();
  }
}

function key(dtype: DType, length: number): string {
  return `${dtype}:${length}`;
}
