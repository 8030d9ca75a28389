// Internal: not exported from the package entry.
// Page-locked ("pinned") host memory made from an ArrayBuffer or SharedArrayBuffer that JS already
// owns (cuMemHostRegister), so reader workers write where the copy engine reads: async copies from
// it run at full bus speed and truly in the background. Pin once at start, never per batch: pinning
// costs milliseconds per GiB. The rule: the buffer must stay alive and attached (never transferred
// or detached) while registered; this handle holds a reference to it so GC cannot free it.
//
// The driver registers whole pages. A buffer's first byte is rarely page-aligned (a large malloc is
// 16 bytes past a page start), so the largest page-aligned range inside the buffer is registered and
// reported as `[start, end)`; bytes outside it still copy correctly, only synchronously-staged.

import type { CudaContext } from './context.js';
import { CU_MEMHOSTREGISTER_DEVICEMAP, CU_MEMHOSTREGISTER_PORTABLE, driver } from './driver.js';
import { countRegistered } from './live-bytes.js';

export const PAGE_BYTES = 4096;

export interface RegisterOptions {
  /** Byte range of the buffer to consider; default the whole buffer. */
  readonly byteOffset?: number;
  readonly byteLength?: number;
  /**
   * Pinned for every CUDA context, not only this one (CU_MEMHOSTREGISTER_PORTABLE). Default false:
   * one device per loader; set it when one staging slab feeds several devices.
   */
  readonly portable?: boolean;
  /**
   * Also map the range into the device's address space (CU_MEMHOSTREGISTER_DEVICEMAP), so that
   * kernels and batched copies read it in place: `devicePtr` is then its device address.
   */
  readonly mapped?: boolean;
}

/** The page-aligned sub-range `[start, end)` (byte offsets in the buffer) inside `[offset, offset + length)` at `base`. */
export function pageAlignedRange(base: bigint, offset: number, length: number): { start: number; end: number } {
  const page = BigInt(PAGE_BYTES);
  const first = base + BigInt(offset);
  const last = first + BigInt(length);
  const alignedFirst = ((first + page - 1n) / page) * page;
  const alignedLast = (last / page) * page;
  if (alignedLast <= alignedFirst) return { start: offset, end: offset };
  return { start: Number(alignedFirst - base), end: Number(alignedLast - base) };
}

export class RegisteredHost {
  readonly context: CudaContext;
  readonly buffer: ArrayBufferLike;
  /** First pinned byte, as an offset into `buffer`. */
  readonly start: number;
  /** One past the last pinned byte. `start === end` when the range holds no whole page (nothing pinned). */
  readonly end: number;
  /** Host address of `buffer[start]`. */
  readonly address: bigint;
  /** Device address of `buffer[start]` when registered with `mapped` (0n otherwise, or when nothing was pinned). */
  readonly devicePtr: bigint;
  #disposed = false;

  constructor(context: CudaContext, buffer: ArrayBufferLike, options: RegisterOptions = {}) {
    const offset = options.byteOffset ?? 0;
    const length = options.byteLength ?? buffer.byteLength - offset;
    if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 || offset + length > buffer.byteLength) {
      throw new RangeError(`register range [${offset}, ${offset + length}) is outside the buffer of ${buffer.byteLength} bytes`);
    }
    const cu = driver();
    const base = cu.hostAddress(new Uint8Array(buffer));
    const { start, end } = pageAlignedRange(base, offset, length);
    this.context = context;
    this.buffer = buffer;
    this.start = start;
    this.end = end;
    this.address = base + BigInt(start);
    let devicePtr = 0n;
    if (end > start) {
      context.setCurrent();
      const flags = (options.portable === true ? CU_MEMHOSTREGISTER_PORTABLE : 0) | (options.mapped === true ? CU_MEMHOSTREGISTER_DEVICEMAP : 0);
      // SAFETY: `this.buffer` keeps the backing store alive until dispose() unregisters it.
      cu.memHostRegister(this.address, end - start, flags);
      countRegistered(end - start);
      if (options.mapped === true) {
        try {
          devicePtr = cu.memHostGetDevicePointer(this.address);
        } catch (error) {
          countRegistered(-(end - start));
          cu.memHostUnregister(this.address);
          throw error;
        }
      }
    }
    this.devicePtr = devicePtr;
    context.track(this);
  }

  /** Pinned bytes. */
  get bytes(): number {
    return this.end - this.start;
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  /** True when `view` lies wholly inside the pinned range (then copies from or to it are truly async). */
  covers(view: ArrayBufferView): boolean {
    return view.buffer === this.buffer && view.byteOffset >= this.start && view.byteOffset + view.byteLength <= this.end;
  }

  /**
   * Unpins (through `via`, a live context of the same device; default the registering one). Idempotent. No copy may still be queued from or to the range (record an event after the
   * last one and wait for it; the context's own dispose synchronizes first).
   */
  dispose(via: CudaContext = this.context): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.context.untrack(this);
    if (this.end > this.start) {
      countRegistered(-(this.end - this.start));
      // `via`: a live context of the same device, when the registering one was closed first.
      via.setCurrent();
      driver().memHostUnregister(this.address);
    }
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
