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
  /** Released buffers by dtype, then by length. */
  readonly #free = new Map<DType, Map<number, unknown[]>>();
  /** The same buffers with their dtype, in the order they were released (the oldest first). */
  readonly #released = new Map<StorageOf[DType], DType>();
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

  #keepBytes: number;

  /** Raise the byte budget to `bytes` (never lowers it): a device sizes it to the batches it sees. */
  keepAtLeast(bytes: number): void {
    if (bytes > this.#keepBytes) this.#keepBytes = bytes;
  }

  /**
   * A buffer of exactly `length` elements, or, when `atMost` > `length`, the shortest kept buffer
   * from `length` to `atMost` elements (for memory whose user reads its length as a capacity, such
   * as a batch's files: their total varies from batch to batch, and an exact-length pool would
   * page-lock a new buffer for most of them). A new buffer has exactly `length` elements.
   */
  acquire<D extends DType>(dtype: D, length: number, atMost = length): StorageOf[D] {
    const byLength = this.#free.get(dtype);
    let best = byLength?.get(length)?.length ? length : undefined;
    if (best === undefined && byLength !== undefined && atMost > length) {
      for (const [n, stack] of byLength) if (n > length && n <= atMost && stack.length > 0 && (best === undefined || n < best)) best = n;
    }
    if (best !== undefined) {
      const hit = byLength!.get(best)!.pop() as StorageOf[D];
      this.#released.delete(hit);
      this.#keptBytes -= hit.byteLength;
      return hit;
    }
    return this.#alloc(dtype, length);
  }

  /**
   * Give back a buffer acquired from this pool. The caller guarantees nothing reads it any more.
   * Past the byte budget the buffers released longest ago are let go first: what was released last
   * is what the run uses now (a first batch's generous guess must not hold the budget for good).
   */
  recycle(dtype: DType, data: StorageOf[DType]): void {
    if (data.byteLength > this.#keepBytes) {
      this.#drop?.(data);
      return;
    }
    for (const [old, oldType] of this.#released) {
      if (this.#keptBytes + data.byteLength <= this.#keepBytes) break;
      const stack = this.#free.get(oldType)!.get(old.length)!;
      stack.splice(stack.indexOf(old), 1);
      this.#released.delete(old);
      this.#keptBytes -= old.byteLength;
      this.#drop?.(old);
    }
    let byLength = this.#free.get(dtype);
    if (byLength === undefined) this.#free.set(dtype, (byLength = new Map()));
    let stack = byLength.get(data.length);
    if (stack === undefined) byLength.set(data.length, (stack = []));
    stack.push(data);
    this.#released.set(data, dtype);
    this.#keptBytes += data.byteLength;
  }

  clear(): void {
    if (this.#drop !== undefined) for (const byLength of this.#free.values()) for (const stack of byLength.values()) for (const d of stack) this.#drop(d as StorageOf[DType]);
    this.#free.clear();
    this.#released.clear();
    this.#keptBytes = 0;
  }
}
