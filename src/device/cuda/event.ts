// Internal: not exported from the package entry.
// A CUDA event: a point in a stream's work that the host can poll or wait for and another stream can
// wait on. Created with timing disabled (the cheapest kind; Stoker orders work, it does not time it).
// The rule: an event answers for the last `record()` only; query it before reusing what it guards.

import type { CudaContext } from './context.js';
import { CU_EVENT_DISABLE_TIMING, driver } from './driver.js';
import type { CudaStream } from './stream.js';

export class CudaEvent {
  readonly context: CudaContext;
  /** The CUevent. */
  readonly handle: bigint;
  #disposed = false;
  #destroyed = false;
  // Host waits in flight on koffi's worker threads; the event outlives them.
  #waiters = 0;

  constructor(context: CudaContext) {
    context.setCurrent();
    this.context = context;
    this.handle = driver().eventCreate(CU_EVENT_DISABLE_TIMING);
    context.track(this);
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  /** Marks the current end of `stream`'s work. */
  record(stream: CudaStream): void {
    this.#assertLive();
    driver().eventRecord(this.handle, stream.handle);
  }

  /** True when the recorded work is done (and for an event never recorded). Never blocks. */
  query(): boolean {
    this.#assertLive();
    return driver().eventQuery(this.handle);
  }

  /** Blocks the host until the recorded work is done. */
  synchronize(): void {
    this.#assertLive();
    driver().eventSynchronize(this.handle);
  }

  /**
   * Resolves when the recorded work is done, without blocking the main thread: the wait runs on one
   * of koffi's worker threads. Disposing the event meanwhile is safe (its destroy waits for this).
   */
  async synchronizeAsync(): Promise<void> {
    this.#assertLive();
    this.#waiters++;
    try {
      await driver().eventSynchronizeAsync(this.handle);
    } finally {
      this.#waiters--;
      // Once the context is released the event goes with the context; destroying it then would fail.
      if (this.#disposed && this.#waiters === 0 && !this.context.disposed) this.#destroy();
    }
  }

  /** Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.context.untrack(this);
    // SAFETY: a worker thread may be inside cuEventSynchronize on this event; destroy after it returns.
    if (this.#waiters === 0) this.#destroy();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  #destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    driver().eventDestroy(this.handle);
  }

  #assertLive(): void {
    if (this.#disposed) throw new Error('this CUDA event was disposed');
  }
}
