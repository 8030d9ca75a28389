// Internal: not exported from the package entry.
// A CUDA stream: an ordered queue of device work. Created non-blocking, so it never waits on the
// legacy default stream (PyTorch's and other libraries' implicit work), only on events it is told to
// wait for. The rule: work enqueued here is done only when an event recorded after it has fired.

import type { CudaContext } from './context.js';
import { CU_STREAM_NON_BLOCKING, driver } from './driver.js';
import type { CudaEvent } from './event.js';

export class CudaStream {
  readonly context: CudaContext;
  /** The CUstream. */
  readonly handle: bigint;
  #disposed = false;

  constructor(context: CudaContext) {
    context.setCurrent();
    this.context = context;
    this.handle = driver().streamCreate(CU_STREAM_NON_BLOCKING);
    context.track(this);
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  /** Blocks the host until all work enqueued so far is done. */
  synchronize(): void {
    this.#assertLive();
    driver().streamSynchronize(this.handle);
  }

  /** True when all work enqueued so far is done. */
  query(): boolean {
    this.#assertLive();
    return driver().streamQuery(this.handle);
  }

  /** Work enqueued here after this call starts only once `event` has fired; the host does not wait. */
  waitEvent(event: CudaEvent): void {
    this.#assertLive();
    driver().streamWaitEvent(this.handle, event.handle);
  }

  /** Idempotent. Work already enqueued still completes (the driver destroys the stream after it). */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.context.untrack(this);
    driver().streamDestroy(this.handle);
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  #assertLive(): void {
    if (this.#disposed) throw new Error('this CUDA stream was disposed');
  }
}
