// Internal: not exported from the package entry.
// Recycles the host memory of released batches. The rule: a buffer enters the pool only when no
// live tensor can read it any more (its batch was released), so a pooled buffer is never aliased.

import { type DType, type StorageOf, allocStorage } from '../tensor/dtype.js';

/** Buffers kept per (dtype, length). Past this, released buffers are left to the garbage collector. */
const KEEP_PER_SHAPE = 8;

export class HostPool {
  readonly #free = new Map<string, unknown[]>();
  readonly #alloc: <D extends DType>(dtype: D, length: number) => StorageOf[D];

  /** `alloc` makes new buffers (default: plain zeroed memory; accelerators pass page-locked memory). */
  constructor(alloc: <D extends DType>(dtype: D, length: number) => StorageOf[D] = allocStorage) {
    this.#alloc = alloc;
  }
  #reused = 0;
  #allocated = 0;

  acquire<D extends DType>(dtype: D, length: number): StorageOf[D] {
    const stack = this.#free.get(key(dtype, length));
    const hit = stack?.pop();
    if (hit !== undefined) {
      this.#reused++;
      return hit as StorageOf[D];
    }
    this.#allocated++;
    return this.#alloc(dtype, length);
  }

  /** Give back a buffer acquired from this pool. The caller guarantees nothing reads it any more. */
  recycle(dtype: DType, data: StorageOf[DType]): void {
    const k = key(dtype, data.length);
    let stack = this.#free.get(k);
    if (stack === undefined) this.#free.set(k, (stack = []));
    if (stack.length < KEEP_PER_SHAPE) stack.push(data);
  }

  get counts(): { reused: number; allocated: number } {
    return { reused: this.#reused, allocated: this.#allocated };
  }

  clear(): void {
    this.#free.clear();
  }
}

function key(dtype: DType, length: number): string {
  return `${dtype}:${length}`;
}
