// Internal: not exported from the package entry.
// A CUDA device's primary context, retained for as long as this handle lives. The rule: everything
// made in a context (memory, streams, events, pinned host memory, modules) is tracked by it and
// disposed with it, after the device has finished its queued work, so `dispose()` on the context
// is the one call that leaves nothing behind.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { invalidOption } from '../../errors.js';
import { cudaUnavailable, kernelMissing } from './cuda-error.js';
import {
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
  driver,
} from './driver.js';
import { CudaModule } from './module.js';

/** Something a context must dispose before it lets go of the device. */
export interface ContextChild {
  dispose(): void;
}

export class CudaContext {
  /** The device ordinal N of `cuda:N`. */
  readonly ordinal: number;
  /** The device's name, e.g. 'NVIDIA H200'. */
  readonly name: string;
  /** Streaming multiprocessors, for sizing kernel grids. */
  readonly multiprocessors: number;
  /** Compute capability, e.g. [9, 0]. */
  readonly computeCapability: readonly [number, number];
  /** The CUcontext. */
  readonly handle: bigint;
  readonly #device: number;
  // Insertion order is creation order; disposal runs in reverse.
  readonly #children = new Set<ContextChild>();
  readonly #modules = new Map<string, CudaModule>();
  #disposed = false;

  private constructor(ordinal: number, device: number, handle: bigint) {
    const cu = driver();
    this.ordinal = ordinal;
    this.#device = device;
    this.handle = handle;
    this.name = cu.deviceName(device);
    this.multiprocessors = cu.deviceAttribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
    this.computeCapability = [
      cu.deviceAttribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
      cu.deviceAttribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
    ];
  }

  /** Retains the primary context of device `ordinal` and makes it current on this thread. */
  static open(ordinal = 0): CudaContext {
    const cu = driver();
    const count = cu.deviceCount();
    if (count === 0) throw cudaUnavailable('the driver sees no CUDA device (check CUDA_VISIBLE_DEVICES and nvidia-smi)');
    if (!Number.isInteger(ordinal) || ordinal < 0 || ordinal >= count) {
      throw invalidOption('device', `cuda:N with N from 0 to ${count - 1} (${count} device${count === 1 ? '' : 's'} visible)`, `cuda:${ordinal}`);
    }
    const device = cu.deviceGet(ordinal);
    const handle = cu.devicePrimaryCtxRetain(device);
    try {
      cu.ctxSetCurrent(handle);
      return new CudaContext(ordinal, device, handle);
    } catch (error) {
      cu.devicePrimaryCtxRelease(device);
      throw error;
    }
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  /** Makes this context current on the calling thread (cheap; handles call it before driver calls that need it). */
  setCurrent(): void {
    this.#assertLive();
    driver().ctxSetCurrent(this.handle);
  }

  /** Device memory as the driver counts it: `used` includes other processes and this one's context. */
  memInfo(): { used: number; total: number; free: number } {
    this.setCurrent();
    const { free, total } = driver().memGetInfo();
    return { used: total - free, total, free };
  }

  /** Blocks the host until every stream of this context is idle. */
  synchronize(): void {
    this.setCurrent();
    driver().ctxSynchronize();
  }

  /**
   * The module compiled from the PTX file at `url`, loaded once per context (the JIT costs ~0.2 s)
   * and unloaded with it.
   */
  module(url: URL): CudaModule {
    this.#assertLive();
    const known = this.#modules.get(url.href);
    if (known !== undefined && !known.disposed) return known;
    let ptx: string;
    try {
      ptx = readFileSync(fileURLToPath(url), 'utf8');
    } catch (error) {
      throw kernelMissing(fileURLToPath(url), error);
    }
    const loaded = CudaModule.load(this, ptx);
    this.#modules.set(url.href, loaded);
    return loaded;
  }

  /** For handle classes: dispose `child` with this context. */
  track(child: ContextChild): void {
    this.#assertLive();
    this.#children.add(child);
  }

  /** For handle classes: `child` was disposed on its own. */
  untrack(child: ContextChild): void {
    this.#children.delete(child);
  }

  /**
   * Waits for the device to finish queued work, disposes everything made in this context (newest
   * first), then releases the primary context. Idempotent. Every child is disposed even when one
   * fails; the first failure is thrown at the end.
   */
  dispose(): void {
    if (this.#disposed) return;
    const cu = driver();
    let first: unknown;
    const attempt = (f: () => void): void => {
      try {
        f();
      } catch (error) {
        first ??= error;
      }
    };
    attempt(() => cu.ctxSetCurrent(this.handle));
    // SAFETY: children are freed only after the device has finished every kernel and copy that
    // may still read or write them.
    attempt(() => cu.ctxSynchronize());
    for (const child of [...this.#children].reverse()) attempt(() => child.dispose());
    this.#children.clear();
    this.#modules.clear();
    this.#disposed = true;
    attempt(() => cu.devicePrimaryCtxRelease(this.#device));
    if (first !== undefined) throw first;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  #assertLive(): void {
    if (this.#disposed) throw new Error(`the CUDA context of cuda:${this.ordinal} was disposed; open a new one with CudaContext.open(${this.ordinal})`);
  }
}
