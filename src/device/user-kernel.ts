// A user's own CUDA kernel, launched on a batch: load PTX once, then launch it on the stream batches
// are ordered on, so it runs after the batch's data arrived and before the batch's memory is reused.
// The rule: pass DeviceTensors of live batches (their addresses are read at launch); the kernel must
// not touch a tensor after its batch is released.

import { invalidOptionError, show, unsupportedOptionError } from '../errors.js';
import type { AnyTensor } from './device-tensor.js';
import { DeviceTensor } from './device-tensor.js';

/** A kernel argument: a device tensor (its address), or a scalar of the kernel's parameter type. */
export type KernelArgument = DeviceTensor | { u32: number } | { i32: number } | { u64: bigint } | { f32: number } | { ptr: bigint };

export interface LaunchOptions {
  readonly grid: number | readonly [number, number, number];
  readonly block: number | readonly [number, number, number];
  readonly args: readonly KernelArgument[];
  /** Dynamic shared memory in bytes. Default 0. */
  readonly sharedBytes?: number;
}

export interface UserKernel {
  /** Enqueue the kernel on the loader's consumer stream; returns at once. */
  launch(options: LaunchOptions): void;
}

/** Internal: what the CUDA backend provides to run user PTX. */
export interface KernelHost {
  loadKernel(ptx: string | Uint8Array, name: string): (grid: [number, number, number], block: [number, number, number], args: ({ ptr: bigint } | { u32: number } | { i32: number } | { u64: bigint } | { f32: number })[], sharedBytes: number) => void;
}

export function makeUserKernel(host: KernelHost | undefined, device: string, ptx: string | Uint8Array, name: string): UserKernel {
  if (host === undefined) {
    throw unsupportedOptionError(`loader.kernel(): ${device} cannot run PTX; user kernels need device: 'cuda'`);
  }
  if (typeof name !== 'string' || name.length === 0) throw invalidOptionError(`loader.kernel(ptx, name): name must be the kernel's extern "C" name, got ${show(name)}`);
  const launch = host.loadKernel(ptx, name);
  const dim3 = (d: number | readonly [number, number, number], what: string): [number, number, number] => {
    const v = typeof d === 'number' ? [d, 1, 1] : [...d];
    if (v.length !== 3 || !v.every((x) => Number.isInteger(x) && x >= 1)) throw invalidOptionError(`kernel ${what} must be a positive integer or [x, y, z], got ${show(d)}`);
    return v as [number, number, number];
  };
  return {
    launch(options: LaunchOptions): void {
      const args = options.args.map((a: KernelArgument | AnyTensor) => (a instanceof DeviceTensor ? { ptr: a.ptr } : a)) as Parameters<ReturnType<KernelHost['loadKernel']>>[2];
      launch(dim3(options.grid, 'grid'), dim3(options.block, 'block'), args, options.sharedBytes ?? 0);
    },
  };
}
