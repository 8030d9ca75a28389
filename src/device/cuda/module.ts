// Internal: not exported from the package entry.
// PTX modules and their kernels. The rule: a kernel's arguments must match its C parameter list in
// number, order and width (the driver reads each argument's size from the kernel image, so a `u32`
// given where the kernel takes a 64-bit value reads 4 bytes of garbage); pointers are `{ ptr }`.

import type { CudaContext } from './context.js';
import { driver } from './driver.js';
import type { CudaStream } from './stream.js';

/** One kernel argument; each becomes its own 8-byte slot in the parameter block. */
export type KernelArg = { ptr: bigint } | { u64: bigint } | { u32: number } | { i32: number } | { f32: number };

export type Dim3 = readonly [number, number, number];

const U64_MAX = (1n << 64n) - 1n;

export class CudaModule {
  readonly context: CudaContext;
  /** The CUmodule. */
  readonly handle: bigint;
  readonly #functions = new Map<string, CudaFunction>();
  #disposed = false;

  private constructor(context: CudaContext, handle: bigint) {
    this.context = context;
    this.handle = handle;
  }

  /** JIT-compiles PTX text (or loads a cubin) into `context`. Prefer `context.module(url)`, which caches. */
  static load(context: CudaContext, image: string | Uint8Array): CudaModule {
    // The driver reads PTX as a NUL-terminated string.
    const bytes = typeof image === 'string' ? new TextEncoder().encode(image.endsWith('\0') ? image : `${image}\0`) : image;
    context.setCurrent();
    const module = new CudaModule(context, driver().moduleLoadData(bytes));
    context.track(module);
    return module;
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  /** The `extern "C"` kernel `name`; throws CUDA_ERROR_NOT_FOUND when the module has none. */
  getFunction(name: string): CudaFunction {
    if (this.#disposed) throw new Error('this CUDA module was unloaded');
    let f = this.#functions.get(name);
    if (f === undefined) {
      f = new CudaFunction(this, name, driver().moduleGetFunction(this.handle, name));
      this.#functions.set(name, f);
    }
    return f;
  }

  /** Unloads the module; its functions stop working. Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.context.untrack(this);
    this.#functions.clear();
    this.context.setCurrent();
    driver().moduleUnload(this.handle);
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

// The parameter block and the `void **` array that points into it, reused by every launch: the
// driver copies the arguments out during cuLaunchKernel, and JS is single-threaded per isolate.
// Explicit ArrayBuffers, so the memory never moves and its address stays valid.
let slots = new DataView(new ArrayBuffer(16 * 8));
let pointers = new BigUint64Array(new ArrayBuffer(16 * 8));
let slotsAddress = -1n;

export class CudaFunction {
  readonly module: CudaModule;
  readonly name: string;
  /** The CUfunction. */
  readonly handle: bigint;

  constructor(module: CudaModule, name: string, handle: bigint) {
    this.module = module;
    this.name = name;
    this.handle = handle;
  }

  /** Enqueues the kernel on `stream` over `grid` blocks of `block` threads. */
  launch(grid: Dim3, block: Dim3, stream: CudaStream, args: readonly KernelArg[], sharedBytes = 0): void {
    if (this.module.disposed) throw new Error(`kernel ${this.name}: its module was unloaded`);
    for (let k = 0; k < 3; k++) {
      if (!validDim(grid[k]) || !validDim(block[k])) throw new RangeError(`kernel ${this.name}: grid and block sizes must be integers ≥ 1, got grid ${grid} block ${block}`);
    }
    const cu = driver();
    if (args.length > pointers.length) {
      slots = new DataView(new ArrayBuffer(args.length * 8));
      pointers = new BigUint64Array(new ArrayBuffer(args.length * 8));
      slotsAddress = -1n;
    }
    if (slotsAddress < 0n) {
      // The slot addresses never change: computed once, not per launch.
      slotsAddress = cu.hostAddress(slots);
      for (let i = 0; i < pointers.length; i++) pointers[i] = slotsAddress + BigInt(i * 8);
    }
    for (let i = 0; i < args.length; i++) pack(slots, i * 8, args[i]!, this.name, i);
    // SAFETY: `pointers` and `slots` are read by the driver during this call only.
    cu.launchKernel(this.handle, grid, block, sharedBytes, stream.handle, pointers);
  }
}

function validDim(d: number | undefined): boolean {
  return d !== undefined && Number.isInteger(d) && d >= 1 && d <= 0x7fffffff;
}

function pack(view: DataView, at: number, arg: KernelArg, kernel: string, index: number): void {
  // No closure here: a launch is on every batch's path, and a per-call closure costs more than the packing.
  if ('ptr' in arg || 'u64' in arg) {
    const v = 'ptr' in arg ? arg.ptr : arg.u64;
    if (typeof v !== 'bigint' || v < 0n || v > U64_MAX) badArg(kernel, index, 'a pointer or u64 must be a bigint in [0, 2^64)', v);
    view.setBigUint64(at, v, true);
  } else if ('u32' in arg) {
    if (!Number.isInteger(arg.u32) || arg.u32 < 0 || arg.u32 > 0xffffffff) badArg(kernel, index, 'a u32 must be an integer in [0, 2^32)', arg.u32);
    view.setUint32(at, arg.u32, true);
  } else if ('i32' in arg) {
    if (!Number.isInteger(arg.i32) || arg.i32 < -0x80000000 || arg.i32 > 0x7fffffff) badArg(kernel, index, 'an i32 must be an integer in [-2^31, 2^31)', arg.i32);
    view.setInt32(at, arg.i32, true);
  } else if ('f32' in arg) {
    if (typeof arg.f32 !== 'number') badArg(kernel, index, 'an f32 must be a number', arg.f32);
    view.setFloat32(at, arg.f32, true);
  } else {
    badArg(kernel, index, 'expected one of { ptr }, { u64 }, { u32 }, { i32 }, { f32 }', JSON.stringify(arg));
  }
}

function badArg(kernel: string, index: number, what: string, value: unknown): never {
  throw new RangeError(`kernel ${kernel} argument ${index}: ${what}, got ${typeof value === 'bigint' ? `${value}n` : String(value)}`);
}
