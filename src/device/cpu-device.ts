// Internal: not exported from the package entry.
// The CPU device: batches live in host memory from a recycling pool. "Upload" adopts staged memory
// that is already fresh and copies memory that may alias the dataset, so a batch never aliases
// retained data and a transform may write into its rows freely.

import type { StagedBatch } from '../dataset/source-reader.js';
import type { DType, Storage, StorageOf } from '../tensor/dtype.js';
import { gatherRows } from '../tensor/gather.js';
import { type Tensor, trustedTensor } from '../tensor/tensor.js';
import type { Device, DeviceBatch, MemInfo, ResidentStore } from './device.js';
import { HostPool } from './host-pool.js';

/**
 * NOTE [released batches reused] A batch copied out of its staging slot goes into memory from the
 * pool; a released batch's memory is what the next one takes. A pool that keeps less than a batch
 * (32 MiB against 19 MB for 64 bf16 images of 224², 154 MB for 256 in float32) keeps nothing useful,
 * and every batch is then fresh memory: page faults and the kernel's zeroing on the first write, and
 * the garbage collector's work of letting it go — measured on the 2-core development machine (bench
 * decode-scaling row e, 64 images of 224² bf16 a batch) at ~0.3 ms of the main thread's CPU an image,
 * the copy itself ~0.05. So the pool keeps up to KEPT_BATCHES of the largest batch uploaded (the
 * batch in use, the one just released and one in flight), at most KEPT_MAX_BYTES.
 */
export const KEPT_BATCHES = 3;
export const KEPT_MAX_BYTES = 2 * 2 ** 30;

export class CpuDevice implements Device {
  readonly name = 'cpu';
  readonly probesMemory = false;
  readonly autoRelease = false;
  readonly h2dBytes = 0;
  // Plain memory (nothing to pin): keep a little for reuse, let the garbage collector have the rest.
  // "A little" grows to KEPT_BATCHES of the largest batch uploaded (NOTE [released batches reused]).
  readonly #pool = new HostPool(undefined, undefined, 32 * 2 ** 20);
  readonly allocate = <D extends DType>(dtype: D, length: number): StorageOf[D] => this.#pool.acquire(dtype, length);

  memInfo(): MemInfo | undefined {
    return undefined;
  }

  pinStaging(_memory: SharedArrayBuffer): number {
    return 0;
  }

  live(): { device: number; pinned: number } {
    return { device: 0, pinned: 0 };
  }

  upload(staged: StagedBatch): DeviceBatch {
    if (staged.owned) return this.#adopt(staged.tensors as readonly Tensor[]);
    // NOTE [lent slots] (reader-pool.ts): the staging slot itself becomes the batch's memory until it is released.
    if (staged.done !== undefined && staged.lend?.() === true) {
      const done = staged.done;
      return { tensors: staged.tensors as readonly Tensor[], free: done };
    }
    let bytes = 0;
    for (const t of staged.tensors as readonly Tensor[]) bytes += t.byteLength;
    this.#pool.keepAtLeast(Math.min(KEPT_BATCHES * bytes, KEPT_MAX_BYTES));
    const copies = (staged.tensors as readonly Tensor[]).map((t) => {
      const data = this.#pool.acquire(t.dtype, t.size);
      (data as unknown as { set(a: Storage): void }).set(t.data);
      return trustedTensor(t.dtype, data, t.shape);
    });
    staged.done?.();
    return this.#adopt(copies);
  }

  resident(columns: readonly Tensor[]): ResidentStore {
    const pool = this.#pool;
    const adopt = (ts: Tensor[]) => this.#adopt(ts);
    return {
      bytes: columns.reduce((s, c) => s + c.byteLength, 0),
      prepare() {},
      gather(ids: Uint32Array, start: number, end: number): DeviceBatch {
        const n = end - start;
        return adopt(
          columns.map((c) => {
            const out = pool.acquire(c.dtype, n * c.rowSize);
            gatherRows(c.data, c.rowSize, ids, start, end, out);
            return trustedTensor(c.dtype, out, [n, ...c.shape.slice(1)]);
          }),
        );
      },
      columns: () =>
        columns.map((c) => ({
          dtype: c.dtype, shape: c.shape.slice(1), rows: c.shape[0]!, bytes: c.byteLength,
          data: new Uint8Array(c.data.buffer, c.data.byteOffset, c.data.byteLength),
        })),
      dispose() {},
    };
  }

  synchronize(): void {}

  /** Step 9 of NOTE [Loader shutdown] (loader.ts). */
  close(): void {
    this.#pool.clear();
  }

  #adopt(tensors: readonly Tensor[]): DeviceBatch {
    const pool = this.#pool;
    const parts = tensors.map((t) => [t.dtype, t.data] as const);
    return {
      tensors,
      free() {
        for (const [dtype, data] of parts) pool.recycle(dtype, data);
      },
    };
  }
}
