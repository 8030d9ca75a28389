// Internal: not exported from the package entry.
// The nvJPEG binding: finds and loads libnvjpeg through koffi, the way CUDA tools find it, and binds
// the calls the GPU JPEG decoder needs. The rule: nothing is loaded until `nvjpeg()` is first
// called (CPU users never touch it); a missing library is one `ERR_CUDA_UNAVAILABLE` that names
// every place tried, remembered, not retried; every call returns its nvjpegStatus_t, and `check`
// turns a failure the caller cannot route around into a `LoaderError` naming the call.
//
// Where the library is looked for, in order: the env switch `nvjpeg` (base/env.ts: a path to the .so), then
// $CUDA_HOME/lib64, $CUDA_PATH/lib64 and /usr/local/cuda/lib64, each for libnvjpeg.so.13, .so.12
// and .so, then those three names through the dynamic loader (ldconfig, LD_LIBRARY_PATH).
// Handles and pointers are `bigint`, as in driver.ts.

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { LoaderError, cudaFailure, nvjpegUnavailable } from '../../errors.js';
import { readSwitch, switchName } from '../../base/env.js';

type Koffi = typeof import('koffi');
type Native = (...args: unknown[]) => unknown;

export const NVJPEG_BACKEND_GPU_HYBRID = 2;
export const NVJPEG_BACKEND_HARDWARE = 3;
export const NVJPEG_OUTPUT_RGB = 3;
export const NVJPEG_OUTPUT_RGBI = 5;
export const NVJPEG_CSS_UNKNOWN = -1;
export const NVJPEG_STATUS_ARCH_MISMATCH = 7;

const STATUS_NAMES = [
  'NVJPEG_STATUS_SUCCESS', 'NVJPEG_STATUS_NOT_INITIALIZED', 'NVJPEG_STATUS_INVALID_PARAMETER', 'NVJPEG_STATUS_BAD_JPEG',
  'NVJPEG_STATUS_JPEG_NOT_SUPPORTED', 'NVJPEG_STATUS_ALLOCATOR_FAILURE', 'NVJPEG_STATUS_EXECUTION_FAILED', 'NVJPEG_STATUS_ARCH_MISMATCH',
  'NVJPEG_STATUS_INTERNAL_ERROR', 'NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED', 'NVJPEG_STATUS_INCOMPLETE_BITSTREAM',
];

export function statusName(status: number): string {
  return STATUS_NAMES[status] ?? `NVJPEG_STATUS_${status}`;
}

/** The bound library. Every call returns its nvjpegStatus_t (0 = success); out-parameters are typed arrays. */
export interface NvJpeg {
  readonly path: string;
  createEx(backend: number, flags: number, handle: BigUint64Array): number;
  destroy(handle: bigint): number;
  /** Undefined when the library predates it (before CUDA 11.9). */
  readonly hardwareDecoderInfo: ((handle: bigint, engines: Uint32Array, cores: Uint32Array) => number) | undefined;
  stateCreate(handle: bigint, state: BigUint64Array): number;
  stateDestroy(state: bigint): number;
  /** nComponents, subsampling: Int32Array(1) each; widths, heights: Int32Array(4) (NVJPEG_MAX_COMPONENT). */
  getImageInfo(handle: bigint, data: Uint8Array, components: Int32Array, subsampling: Int32Array, widths: Int32Array, heights: Int32Array): number;
  /** getImageInfo of the `length` bytes at host address `data` (a decode worker reads files by address). */
  getImageInfoAt(handle: bigint, data: bigint, length: number, components: Int32Array, subsampling: Int32Array, widths: Int32Array, heights: Int32Array): number;
  streamCreate(handle: bigint, stream: BigUint64Array): number;
  streamDestroy(stream: bigint): number;
  streamParseHeader(handle: bigint, data: Uint8Array, stream: bigint): number;
  streamParseHeaderAt(handle: bigint, data: bigint, length: number, stream: bigint): number;
  /** `supported[0]` is 0 when the (parsed) image can go to the batched decoder of this handle. */
  decodeBatchedSupported(handle: bigint, stream: bigint, supported: Int32Array): number;
  decodeBatchedInitialize(handle: bigint, state: bigint, batch: number, maxCpuThreads: number, format: number): number;
  /** data: N addresses; lengths: N sizes; images: N nvjpegImage_t (4 channel pointers then 4 pitches, u64 each). */
  decodeBatched(handle: bigint, state: bigint, data: BigUint64Array, lengths: BigUint64Array, images: BigUint64Array, stream: bigint): number;
  /** Address of a host view's first byte. */
  address(view: ArrayBufferView): bigint;
}

let cached: NvJpeg | undefined;
let failure: unknown;

/** The process-wide nvJPEG binding, loaded on first use; throws ERR_CUDA_UNAVAILABLE (remembered) when absent. */
export function nvjpeg(): NvJpeg {
  if (cached !== undefined) return cached;
  if (failure !== undefined) throw failure;
  try {
    cached = openNvJpeg(nvjpegCandidates(process.env));
    return cached;
  } catch (error) {
    failure = error;
    throw error;
  }
}

/** True when libnvjpeg loads. Never throws. */
export function nvjpegAvailable(): boolean {
  try {
    nvjpeg();
    return true;
  } catch {
    return false;
  }
}

const NAMES = ['libnvjpeg.so.13', 'libnvjpeg.so.12', 'libnvjpeg.so'];

/** The places tried, in order (paths that do not exist are left out, bare names go to the loader). */
export function nvjpegCandidates(env: NodeJS.ProcessEnv): string[] {
  const out: string[] = [];
  const asked = readSwitch('nvjpeg', env);
  if (asked !== undefined) out.push(asked);
  for (const root of [env.CUDA_HOME, env.CUDA_PATH, '/usr/local/cuda']) {
    if (!root) continue;
    for (const name of NAMES) {
      const p = join(root, 'lib64', name);
      if (!out.includes(p) && existsSync(p)) out.push(p);
    }
  }
  out.push(...NAMES);
  return out;
}

/** Binds the first candidate that loads. Exported so tests can name libraries that do not exist. */
export function openNvJpeg(candidates: readonly string[]): NvJpeg {
  let koffi: Koffi;
  try {
    koffi = createRequire(import.meta.url)('koffi') as Koffi;
  } catch (error) {
    throw nvjpegMissing(`the FFI package koffi could not be loaded (${String((error as Error)?.message ?? error)})`, error);
  }
  const tried: string[] = [];
  for (const path of candidates) {
    let lib: ReturnType<Koffi['load']>;
    try {
      lib = koffi.load(path);
    } catch (error) {
      tried.push(`${path} (${String((error as Error)?.message ?? error).split('\n')[0]})`);
      continue;
    }
    try {
      return bind(koffi, lib, path);
    } catch (error) {
      tried.push(`${path} (loaded, but lacks an entry point: ${String((error as Error)?.message ?? error)})`);
    }
  }
  throw nvjpegMissing(`libnvjpeg could not be loaded; tried ${tried.join('; ')}`);
}

function nvjpegMissing(why: string, cause?: unknown): LoaderError {
  return nvjpegUnavailable(why, switchName('nvjpeg'), cause);
}

function bind(koffi: Koffi, lib: ReturnType<Koffi['load']>, path: string): NvJpeg {
  const fn = (decl: string): Native => lib.func(decl) as Native;
  const createEx = fn('int nvjpegCreateEx(int backend, void *devAllocator, void *pinnedAllocator, unsigned int flags, void *handle)');
  const destroy = fn('int nvjpegDestroy(void *handle)');
  let hwInfo: Native | undefined;
  try {
    hwInfo = fn('int nvjpegGetHardwareDecoderInfo(void *handle, void *engines, void *cores)');
  } catch {
    hwInfo = undefined;
  }
  const stateCreate = fn('int nvjpegJpegStateCreate(void *handle, void *state)');
  const stateDestroy = fn('int nvjpegJpegStateDestroy(void *state)');
  const getImageInfo = fn('int nvjpegGetImageInfo(void *handle, const void *data, size_t length, void *components, void *subsampling, void *widths, void *heights)');
  const streamCreate = fn('int nvjpegJpegStreamCreate(void *handle, void *stream)');
  const streamDestroy = fn('int nvjpegJpegStreamDestroy(void *stream)');
  const parseHeader = fn('int nvjpegJpegStreamParseHeader(void *handle, const void *data, size_t length, void *stream)');
  const batchedSupported = fn('int nvjpegDecodeBatchedSupported(void *handle, void *stream, void *supported)');
  const batchedInit = fn('int nvjpegDecodeBatchedInitialize(void *handle, void *state, int batch, int maxCpuThreads, int format)');
  const batched = fn('int nvjpegDecodeBatched(void *handle, void *state, void *data, void *lengths, void *images, void *stream)');
  const s = (v: unknown) => v as number;
  // SAFETY (all calls): koffi passes a typed array's own memory for `void *`; every out-parameter
  // is written during the call. nvjpegDecodeBatched reads `data`, `lengths` and `images` during the
  // call; the bitstreams they point at are the caller's to keep until the stream passed the batch.
  return {
    path,
    createEx: (backend, flags, handle) => s(createEx(backend, null, null, flags, handle)),
    destroy: (handle) => s(destroy(handle)),
    hardwareDecoderInfo: hwInfo === undefined ? undefined : (handle, engines, cores) => s(hwInfo!(handle, engines, cores)),
    stateCreate: (handle, state) => s(stateCreate(handle, state)),
    stateDestroy: (state) => s(stateDestroy(state)),
    getImageInfo: (handle, data, c, ss, w, h) => s(getImageInfo(handle, data, data.byteLength, c, ss, w, h)),
    // SAFETY: the caller keeps the `length` bytes at `data` alive for the call (koffi 3 pointers are bigint).
    getImageInfoAt: (handle, data, length, c, ss, w, h) => s(getImageInfo(handle, data, length, c, ss, w, h)),
    streamCreate: (handle, stream) => s(streamCreate(handle, stream)),
    streamDestroy: (stream) => s(streamDestroy(stream)),
    streamParseHeader: (handle, data, stream) => s(parseHeader(handle, data, data.byteLength, stream)),
    streamParseHeaderAt: (handle, data, length, stream) => s(parseHeader(handle, data, length, stream)),
    decodeBatchedSupported: (handle, stream, supported) => s(batchedSupported(handle, stream, supported)),
    decodeBatchedInitialize: (handle, state, batch, threads, format) => s(batchedInit(handle, state, batch, threads, format)),
    decodeBatched: (handle, state, data, lengths, images, stream) => s(batched(handle, state, data, lengths, images, stream)),
    address: (view) => koffi.address(view) as bigint,
  };
}

/** A failed nvJPEG call the decoder cannot route around (handle or state creation): names the call and status. */
export function nvjpegFailed(call: string, status: number, fix?: string): LoaderError {
  return cudaFailure(`${call} failed: ${statusName(status)} (${status})${fix ? `. Fix: ${fix}` : ''}`);
}
