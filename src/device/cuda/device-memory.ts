// Internal: not exported from the package entry.
// A block of device memory (cuMemAlloc: 256-byte aligned). The rule: nothing may free or reuse it
// while a kernel or copy that touches it is still queued — dispose it only after an event recorded
// after its last use has fired (the context's own dispose synchronizes first).

import type { CudaContext } from './context.js';
import { driver } from './driver.js';
import { countDevice } from './live-bytes.js';
import type { CudaStream } from './stream.js';

export class DeviceMemory {
  readonly context: CudaContext;
  /** The CUdeviceptr. */
  readonly ptr: bigint;
  readonly bytes: number;
  #disposed = false;

  /** Allocates `bytes` (≥ 1); throws a CudaError with code 'ERR_DEVICE_OOM' when the device is full. */
  constructor(context: CudaContext, bytes: number) {
    if (!Number.isSafeInteger(bytes) || bytes < 1) throw new RangeError(`device allocation size must be an integer ≥ 1, got ${bytes}`);
    context.setCurrent();
    this.context = context;
    this.ptr = driver().memAlloc(bytes);
    this.bytes = bytes;
    countDevice(bytes);
    context.track(this);
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * Enqueues host → device: `src` lands at byte `offset`. From page-locked memory (a RegisteredHost)
   * the copy is truly asynchronous; from pageable memory the driver stages it before returning.
   */
  copyFromHostAsync(src: ArrayBufferView, stream: CudaStream, offset = 0): void {
    this.#range(offset, src.byteLength);
    if (src.byteLength === 0) return;
    // SAFETY: `src` stays alive and unmodified until an event recorded on `stream` after this copy
    // has fired; the caller (the transfer stage) holds the staging slot until then.
    driver().memcpyHtoDAsync(this.ptr + BigInt(offset), src, src.byteLength, stream.handle);
  }

  /** Enqueues device → host: `dst.byteLength` bytes from byte `offset`. */
  copyToHostAsync(dst: ArrayBufferView, stream: CudaStream, offset = 0): void {
    this.#range(offset, dst.byteLength);
    if (dst.byteLength === 0) return;
    // SAFETY: `dst` stays alive and unread until an event recorded on `stream` after this copy has
    // fired. Into pageable memory the driver completes the copy before returning.
    driver().memcpyDtoHAsync(dst, this.ptr + BigInt(offset), dst.byteLength, stream.handle);
  }

  /** Enqueues a device → device copy of `bytes` bytes from `src` to byte `offset` of this block. */
  copyFromDeviceAsync(src: bigint, bytes: number, stream: CudaStream, offset = 0): void {
    this.#range(offset, bytes);
    if (bytes === 0) return;
    driver().memcpyDtoDAsync(this.ptr + BigInt(offset), src, bytes, stream.handle);
  }

  /** Enqueues: set `bytes` bytes from byte `offset` to `value` (0–255). */
  fillAsync(value: number, stream: CudaStream, offset = 0, bytes = this.bytes - offset): void {
    this.#range(offset, bytes);
    if (!Number.isInteger(value) || value < 0 || value > 255) throw new RangeError(`fill value must be a byte (0–255), got ${value}`);
    if (bytes === 0) return;
    driver().memsetD8Async(this.ptr + BigInt(offset), value, bytes, stream.handle);
  }

  /**
   * Copies `dst.byteLength` bytes from byte `offset` into `dst`, after every stream of the context
   * is idle: a debugging and test helper (it stalls the device), never a data path.
   */
  copyToHost(dst: ArrayBufferView, offset = 0): void {
    this.#range(offset, dst.byteLength);
    // Streams are non-blocking, so a plain synchronous copy would not wait for their kernels.
    this.context.synchronize();
    if (dst.byteLength === 0) return;
    driver().memcpyDtoH(dst, this.ptr + BigInt(offset), dst.byteLength);
  }

  /** Copies `src` to byte `offset` and waits until it has landed: a test helper, like copyToHost. */
  copyFromHost(src: ArrayBufferView, offset = 0): void {
    this.#range(offset, src.byteLength);
    this.context.synchronize();
    if (src.byteLength === 0) return;
    driver().memcpyHtoD(this.ptr + BigInt(offset), src, src.byteLength);
    // From pageable memory the call returns once the data is staged, not landed.
    this.context.synchronize();
  }

  /** Frees the memory. Idempotent. See the rule at the top of this file. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.context.untrack(this);
    countDevice(-this.bytes);
    this.context.setCurrent();
    driver().memFree(this.ptr);
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  #range(offset: number, bytes: number): void {
    if (this.#disposed) throw new Error('this device memory was disposed');
    if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(bytes) || offset < 0 || bytes < 0 || offset + bytes > this.bytes) {
      throw new RangeError(`bytes [${offset}, ${offset + bytes}) are outside this device block of ${this.bytes} bytes`);
    }
  }
}
