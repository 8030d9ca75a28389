// Internal: not exported from the package entry.
// Scratch device memory a decoder reuses call after call, made safe by stream order: the GPU JPEG
// decoder (cuda/nvjpeg.ts) and the CPU rows behind it (sim/sim-jpeg.ts) share it. The rules: one
// stream at a time — a call on a new stream first makes it wait for the old one; a buffer that is
// too small is freed only once the work queued before it is done, and replaced by one 25% larger.

import type { Backend, DeviceBuffer, StreamName } from '../backend.js';

export class StreamScratch {
  readonly #backend: Backend;
  #stream: StreamName | undefined;

  constructor(backend: Backend) {
    this.#backend = backend;
  }

  /** The stream the next work is queued on: a new one first waits for the old one, so scratch reuse stays ordered. */
  use(stream: StreamName): void {
    if (this.#stream !== undefined && this.#stream !== stream) {
      const e = this.#backend.record(this.#stream);
      this.#backend.wait(stream, e);
      this.#backend.recycle(e);
    }
    this.#stream = stream;
  }

  /** `buffer` when it holds `bytes`, else a new one (the old one freed once the work queued on `stream` is done). */
  grow(buffer: DeviceBuffer | undefined, bytes: number, stream: StreamName): DeviceBuffer {
    if (buffer !== undefined && buffer.bytes >= bytes) return buffer;
    if (buffer !== undefined) {
      // Queued work may still read or write it.
      const e = this.#backend.record(stream);
      this.#backend.synchronize(e);
      this.#backend.recycle(e);
      this.#backend.free(buffer);
    }
    return this.#backend.alloc(Math.ceil(bytes * 1.25));
  }

  /** Block until the work queued on the last stream used is done (nothing before the first use, or on a closed backend). */
  drain(): void {
    if (this.#stream === undefined || this.#backend.closed) return;
    const e = this.#backend.record(this.#stream);
    this.#backend.synchronize(e);
    this.#backend.recycle(e);
  }
}
