// Internal: not exported from the package entry.
// The CUDA driver binding: the one file that loads koffi and binds libcuda.so.1. The rule: nothing is
// loaded until `driver()` is first called (CPU and sim users never touch libcuda), and every driver
// call goes through `check`, which turns a non-zero CUresult into a `CudaError` naming the call.
//
// Values across the boundary:
// - Device pointers and driver handles (CUdeviceptr, CUcontext, CUstream, CUevent, CUmodule,
//   CUfunction) are `bigint`, always: a device address may exceed 2^53, and koffi passes a bigint
//   to a `void *` or `uint64_t` parameter as is. 0n is NULL (the legacy stream, for a CUstream).
// - Byte counts (size_t) are `number`, checked to be safe integers (exact up to 8 PiB).
// - Out-parameters are written by the driver straight into the scratch typed arrays below: koffi
//   passes a TypedArray given for a `void *` parameter as its own memory, byteOffset included.
// - Host memory is any ArrayBufferView (TypedArray, DataView, Buffer), on an ArrayBuffer or a
//   SharedArrayBuffer; koffi passes the address of its first byte.

import { createRequire } from 'node:module';
import { CudaError, cudaUnavailable } from './cuda-error.js';

type Koffi = typeof import('koffi');
// koffi functions are untyped at the boundary; each wrapper below states its real signature.
type Native = (...args: unknown[]) => unknown;
type Status = number;

export const CU_STREAM_NON_BLOCKING = 0x1;
export const CU_EVENT_DISABLE_TIMING = 0x2;
/** An event another process can open through its cuIpcGetEventHandle handle (needs DISABLE_TIMING too). */
export const CU_EVENT_INTERPROCESS = 0x4;
/** CU_POINTER_ATTRIBUTE_BUFFER_ID: an id unique to one allocation for the life of the process. */
export const CU_POINTER_ATTRIBUTE_BUFFER_ID = 7;
/** Bytes of a CUipcMemHandle / CUipcEventHandle. */
export const CU_IPC_HANDLE_BYTES = 64;
export const CU_MEMHOSTREGISTER_PORTABLE = 0x1;
/** Map the registered range into the device's address space (readable by kernels). */
export const CU_MEMHOSTREGISTER_DEVICEMAP = 0x2;
export const CUDA_ERROR_NOT_READY = 600;
export const CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
export const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
export const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
const CU_JIT_ERROR_LOG_BUFFER = 5;
const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
const JIT_LOG_BYTES = 16 * 1024;

/** The bound driver. Methods are named after the C calls without the `cu` prefix and `_v2` suffix. */
export interface Driver {
  /** cuDriverGetVersion, e.g. 13000 for CUDA 13.0. */
  readonly version: number;
  deviceCount(): number;
  deviceGet(ordinal: number): number;
  deviceName(device: number): string;
  deviceAttribute(attribute: number, device: number): number;
  devicePrimaryCtxRetain(device: number): bigint;
  devicePrimaryCtxRelease(device: number): void;
  ctxSetCurrent(context: bigint): void;
  ctxSynchronize(): void;
  memGetInfo(): { free: number; total: number };
  memAlloc(bytes: number): bigint;
  memFree(ptr: bigint): void;
  memcpyHtoD(dst: bigint, src: ArrayBufferView, bytes: number): void;
  memcpyDtoH(dst: ArrayBufferView, src: bigint, bytes: number): void;
  memcpyHtoDAsync(dst: bigint, src: ArrayBufferView, bytes: number, stream: bigint): void;
  memcpyDtoHAsync(dst: ArrayBufferView, src: bigint, bytes: number, stream: bigint): void;
  memcpyDtoDAsync(dst: bigint, src: bigint, bytes: number, stream: bigint): void;
  memsetD8Async(dst: bigint, value: number, bytes: number, stream: bigint): void;
  /** Page-locks `bytes` bytes at host address `ptr`. */
  memHostRegister(ptr: bigint, bytes: number, flags: number): void;
  /** The device address of registered (DEVICEMAP) host memory at `ptr`. */
  memHostGetDevicePointer(ptr: bigint): bigint;
  /**
   * cuMemcpyBatchAsync: `count` copies, dsts[i] ← srcs[i] of sizes[i] bytes, on the copy engines, in
   * stream order as a whole. Undefined when the driver has no such entry point (before CUDA 12.8).
   * The arrays are read during the call.
   */
  readonly memcpyBatchAsync: ((dsts: BigUint64Array, srcs: BigUint64Array, sizes: BigUint64Array, count: number, stream: bigint) => void) | undefined;
  memHostUnregister(ptr: bigint): void;
  streamCreate(flags: number): bigint;
  streamDestroy(stream: bigint): void;
  streamSynchronize(stream: bigint): void;
  /** True when all work in the stream is done. */
  streamQuery(stream: bigint): boolean;
  streamWaitEvent(stream: bigint, event: bigint): void;
  eventCreate(flags: number): bigint;
  eventDestroy(event: bigint): void;
  eventRecord(event: bigint, stream: bigint): void;
  /** True when the event's work is done (CUDA_ERROR_NOT_READY → false). */
  eventQuery(event: bigint): boolean;
  eventSynchronize(event: bigint): void;
  /** cuEventSynchronize on one of koffi's worker threads: the main thread keeps running. */
  eventSynchronizeAsync(event: bigint): Promise<void>;
  /** cuMemGetAddressRange: the allocation holding `ptr` (its base address and size). */
  memGetAddressRange(ptr: bigint): { base: bigint; bytes: number };
  /** cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_BUFFER_ID): never reused within the process, unlike an address. */
  pointerBufferId(ptr: bigint): bigint;
  /** cuIpcGetMemHandle of an allocation's base address: 64 bytes another process opens once. */
  ipcGetMemHandle(base: bigint): Uint8Array;
  /** cuIpcGetEventHandle of an event created with CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING. */
  ipcGetEventHandle(event: bigint): Uint8Array;
  /** cuIpcOpenEventHandle: another process's interprocess event, as a CUevent of this one (destroy it with eventDestroy). */
  ipcOpenEventHandle(handle: Uint8Array): bigint;
  /** Loads PTX text or a cubin; a JIT failure's log is in the error message. */
  moduleLoadData(image: Uint8Array): bigint;
  moduleUnload(module: bigint): void;
  moduleGetFunction(module: bigint, name: string): bigint;
  /** `params` holds one host address per kernel parameter (the `void **kernelParams` array). */
  launchKernel(fn: bigint, grid: readonly [number, number, number], block: readonly [number, number, number], sharedBytes: number, stream: bigint, params: BigUint64Array): void;
  /** Address of the first byte of a host view, for registration and kernel parameter arrays. */
  hostAddress(view: ArrayBufferView): bigint;
}

export const LIBCUDA = 'libcuda.so.1';

let cached: Driver | undefined;
let failure: unknown;

/**
 * The process-wide driver, loaded and initialized (cuInit) on first use. Throws 'ERR_CUDA_UNAVAILABLE'
 * when there is no driver library or no device; the failure is remembered, not retried.
 */
export function driver(): Driver {
  if (cached !== undefined) return cached;
  if (failure !== undefined) throw failure;
  try {
    cached = openDriver(LIBCUDA);
    return cached;
  } catch (error) {
    failure = error;
    throw error;
  }
}

/** True when the driver loads and sees at least one device. Never throws. */
export function cudaAvailable(): boolean {
  try {
    return driver().deviceCount() > 0;
  } catch {
    return false;
  }
}

/** Binds and initializes `library`. Exported so tests can name a library that does not exist. */
export function openDriver(library: string): Driver {
  let koffi: Koffi;
  try {
    koffi = createRequire(import.meta.url)('koffi') as Koffi;
  } catch (error) {
    throw cudaUnavailable(`the FFI package koffi could not be loaded on this platform (${describe(error)})`, error);
  }
  let lib: ReturnType<Koffi['load']>;
  try {
    lib = koffi.load(library);
  } catch (error) {
    throw cudaUnavailable(`the NVIDIA driver library ${library} could not be loaded (${describe(error)})`, error);
  }
  let api: Driver;
  try {
    api = bind(koffi, lib);
  } catch (error) {
    if (error instanceof CudaError) {
      // cuInit or cuDriverGetVersion failed: CUDA_ERROR_NO_DEVICE, a driver/library mismatch, …
      throw cudaUnavailable(`${library} loaded but ${error.call} failed with ${error.driverName}`, error);
    }
    throw cudaUnavailable(`${library} lacks an entry point Stoker needs; the driver is too old (${describe(error)})`, error);
  }
  return api;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function safeBytes(bytes: number, what: string): number {
  if (!Number.isSafeInteger(bytes) || bytes < 0) throw new RangeError(`${what} must be a byte count (a safe integer ≥ 0), got ${bytes}`);
  return bytes;
}

function bind(koffi: Koffi, lib: ReturnType<Koffi['load']>): Driver {
  const fn = (decl: string): Native => lib.func(decl) as Native;
  const getErrorName = fn('int cuGetErrorName(int error, void *pStr)');
  const getErrorString = fn('int cuGetErrorString(int error, void *pStr)');

  // Out-parameter scratch. Safe to share: a synchronous FFI call runs no JS until it returns, and
  // every wrapper reads its result before the next call. Explicit ArrayBuffers, so never on the JS heap.
  const out64 = new BigUint64Array(new ArrayBuffer(16));
  const out32 = new Int32Array(new ArrayBuffer(8));
  const nameBuffer = new Uint8Array(new ArrayBuffer(256));

  // SAFETY: cuGetErrorName/String write a pointer to a static string owned by the driver.
  const errorText = (f: Native, result: number): string | undefined => {
    const status = f(result, out64) as Status;
    if (status !== 0 || out64[0] === 0n) return undefined;
    return koffi.decode.string(out64[0]!);
  };

  /** The one checker: every call's CUresult passes through here. */
  const check = (call: string, result: Status, detail?: () => string | undefined): void => {
    if (result === 0) return;
    const name = errorText(getErrorName, result) ?? `CUDA_ERROR_${result}`;
    throw new CudaError(call, result, name, errorText(getErrorString, result), detail?.());
  };

  /** Binds `decl`; the wrapper returns nothing and throws on any non-zero result. */
  const checked = (decl: string): ((...args: unknown[]) => void) => {
    const call = /\s(\w+)\(/.exec(decl)![1]!;
    const f = fn(decl);
    return (...args) => check(call, f(...args) as Status);
  };
  /** Binds `decl` for a call where `tolerated` is an answer, not a failure; returns the result. */
  const queried = (decl: string, tolerated: number): ((...args: unknown[]) => Status) => {
    const call = /\s(\w+)\(/.exec(decl)![1]!;
    const f = fn(decl);
    return (...args) => {
      const result = f(...args) as Status;
      if (result !== tolerated) check(call, result);
      return result;
    };
  };

  const cuInit = checked('int cuInit(unsigned int flags)');
  const cuDriverGetVersion = checked('int cuDriverGetVersion(void *version)');
  const cuDeviceGetCount = checked('int cuDeviceGetCount(void *count)');
  const cuDeviceGet = checked('int cuDeviceGet(void *device, int ordinal)');
  const cuDeviceGetName = checked('int cuDeviceGetName(void *name, int len, int device)');
  const cuDeviceGetAttribute = checked('int cuDeviceGetAttribute(void *value, int attribute, int device)');
  const cuDevicePrimaryCtxRetain = checked('int cuDevicePrimaryCtxRetain(void *pctx, int device)');
  const cuDevicePrimaryCtxRelease = checked('int cuDevicePrimaryCtxRelease_v2(int device)');
  const cuCtxSetCurrent = checked('int cuCtxSetCurrent(void *ctx)');
  const cuCtxSynchronize = checked('int cuCtxSynchronize()');
  const cuMemGetInfo = checked('int cuMemGetInfo_v2(void *free, void *total)');
  const cuMemAlloc = checked('int cuMemAlloc_v2(void *dptr, size_t bytes)');
  const cuMemFree = checked('int cuMemFree_v2(uint64_t dptr)');
  const cuMemcpyHtoD = checked('int cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t bytes)');
  const cuMemcpyDtoH = checked('int cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t bytes)');
  const cuMemcpyHtoDAsync = checked('int cuMemcpyHtoDAsync_v2(uint64_t dst, const void *src, size_t bytes, void *stream)');
  const cuMemcpyDtoHAsync = checked('int cuMemcpyDtoHAsync_v2(void *dst, uint64_t src, size_t bytes, void *stream)');
  const cuMemcpyDtoDAsync = checked('int cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t bytes, void *stream)');
  // No _v2 of the async memset exists (cuda.h maps cuMemsetD8Async to itself or to _ptsz).
  const cuMemsetD8Async = checked('int cuMemsetD8Async(uint64_t dst, uint8_t value, size_t bytes, void *stream)');
  const cuMemHostRegister = checked('int cuMemHostRegister_v2(void *ptr, size_t bytes, unsigned int flags)');
  const cuMemHostUnregister = checked('int cuMemHostUnregister(void *ptr)');
  const cuMemHostGetDevicePointer = checked('int cuMemHostGetDevicePointer_v2(void *pdptr, void *ptr, unsigned int flags)');
  // CUDA ≥ 12.8 only: bound when present, else the device assembles batches with kernels.
  let cuMemcpyBatchAsync: ((...args: unknown[]) => void) | undefined;
  try {
    cuMemcpyBatchAsync = checked('int cuMemcpyBatchAsync_v2(void *dsts, void *srcs, void *sizes, size_t count, void *attrs, void *attrsIdxs, size_t numAttrs, void *stream)');
  } catch {
    cuMemcpyBatchAsync = undefined;
  }
  // One attribute for every copy of a batch: sources read in stream order (CU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
  // no location hints, no flags (CUmemcpyAttributes: int order, 2 × {int type, int id}, unsigned flags).
  const batchAttrs = new Int32Array(new ArrayBuffer(24));
  batchAttrs[0] = 1;
  const batchAttrIndex = new BigUint64Array(new ArrayBuffer(8));
  const cuStreamCreate = checked('int cuStreamCreate(void *pstream, unsigned int flags)');
  const cuStreamDestroy = checked('int cuStreamDestroy_v2(void *stream)');
  const cuStreamSynchronize = checked('int cuStreamSynchronize(void *stream)');
  const cuStreamQuery = queried('int cuStreamQuery(void *stream)', CUDA_ERROR_NOT_READY);
  const cuStreamWaitEvent = checked('int cuStreamWaitEvent(void *stream, void *event, unsigned int flags)');
  const cuEventCreate = checked('int cuEventCreate(void *pevent, unsigned int flags)');
  const cuEventDestroy = checked('int cuEventDestroy_v2(void *event)');
  const cuEventRecord = checked('int cuEventRecord(void *event, void *stream)');
  const cuEventQuery = queried('int cuEventQuery(void *event)', CUDA_ERROR_NOT_READY);
  const cuEventSynchronize = checked('int cuEventSynchronize(void *event)');
  const cuEventSynchronizeRaw = fn('int cuEventSynchronize(void *event)') as Native & { async: (...args: unknown[]) => void };
  const cuMemGetAddressRange = checked('int cuMemGetAddressRange_v2(void *pbase, void *psize, uint64_t dptr)');
  const cuPointerGetAttribute = checked('int cuPointerGetAttribute(void *data, int attribute, uint64_t ptr)');
  const cuIpcGetMemHandle = checked('int cuIpcGetMemHandle(void *handle, uint64_t dptr)');
  const cuIpcGetEventHandle = checked('int cuIpcGetEventHandle(void *handle, void *event)');
  // The handle is a 64-byte struct passed by value.
  const ipcHandle = koffi.struct({ reserved: koffi.array('uint8_t', CU_IPC_HANDLE_BYTES) });
  const cuIpcOpenEventHandleRaw = lib.func('cuIpcOpenEventHandle', 'int', ['void *', ipcHandle]) as Native;
  const cuModuleLoadDataEx = fn('int cuModuleLoadDataEx(void *module, const void *image, unsigned int count, void *options, void *values)');
  const cuModuleUnload = checked('int cuModuleUnload(void *module)');
  const cuModuleGetFunction = checked('int cuModuleGetFunction(void *pfn, void *module, const char *name)');
  const cuLaunchKernel = checked(
    'int cuLaunchKernel(void *f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, void *stream, void *params, void *extra)',
  );

  cuInit(0);
  cuDriverGetVersion(out32);
  const version = out32[0]!;

  const u64 = (value: bigint | number): number => {
    // size_t results: exact as long as they are below 2^53 (8 PiB), which memory sizes are.
    const n = Number(value);
    if (!Number.isSafeInteger(n)) throw new RangeError(`driver returned a size beyond 2^53: ${value}`);
    return n;
  };

  return {
    version,
    deviceCount() {
      cuDeviceGetCount(out32);
      return out32[0]!;
    },
    deviceGet(ordinal) {
      cuDeviceGet(out32, ordinal);
      return out32[0]!;
    },
    deviceName(device) {
      nameBuffer.fill(0);
      cuDeviceGetName(nameBuffer, nameBuffer.length - 1, device);
      const end = nameBuffer.indexOf(0);
      return new TextDecoder().decode(nameBuffer.subarray(0, end < 0 ? nameBuffer.length : end));
    },
    deviceAttribute(attribute, device) {
      cuDeviceGetAttribute(out32, attribute, device);
      return out32[0]!;
    },
    devicePrimaryCtxRetain(device) {
      cuDevicePrimaryCtxRetain(out64, device);
      return out64[0]!;
    },
    devicePrimaryCtxRelease: (device) => cuDevicePrimaryCtxRelease(device),
    ctxSetCurrent: (context) => cuCtxSetCurrent(context),
    ctxSynchronize: () => cuCtxSynchronize(),
    memGetInfo() {
      cuMemGetInfo(out64.subarray(0, 1), out64.subarray(1, 2));
      return { free: u64(out64[0]!), total: u64(out64[1]!) };
    },
    memAlloc(bytes) {
      cuMemAlloc(out64, safeBytes(bytes, 'cuMemAlloc size'));
      return out64[0]!;
    },
    memFree: (ptr) => cuMemFree(ptr),
    // SAFETY (all copies): koffi passes the view's own memory, not a copy. The synchronous copies
    // are done when they return. The async ones read or write the view after they return: the
    // caller keeps the view alive and untouched until an event recorded after the copy has fired.
    memcpyHtoD: (dst, src, bytes) => cuMemcpyHtoD(dst, src, safeBytes(bytes, 'copy size')),
    memcpyDtoH: (dst, src, bytes) => cuMemcpyDtoH(dst, src, safeBytes(bytes, 'copy size')),
    memcpyHtoDAsync: (dst, src, bytes, stream) => cuMemcpyHtoDAsync(dst, src, safeBytes(bytes, 'copy size'), stream),
    memcpyDtoHAsync: (dst, src, bytes, stream) => cuMemcpyDtoHAsync(dst, src, safeBytes(bytes, 'copy size'), stream),
    memcpyDtoDAsync: (dst, src, bytes, stream) => cuMemcpyDtoDAsync(dst, src, safeBytes(bytes, 'copy size'), stream),
    memsetD8Async: (dst, value, bytes, stream) => cuMemsetD8Async(dst, value, safeBytes(bytes, 'fill size'), stream),
    // SAFETY: the caller keeps the memory at `ptr` allocated until it is unregistered.
    memHostRegister: (ptr, bytes, flags) => cuMemHostRegister(ptr, safeBytes(bytes, 'register size'), flags),
    memHostUnregister: (ptr) => cuMemHostUnregister(ptr),
    memHostGetDevicePointer(ptr) {
      cuMemHostGetDevicePointer(out64, ptr, 0);
      return out64[0]!;
    },
    // SAFETY: the driver reads the three arrays during the call; the copies' sources and
    // destinations are the caller's to keep alive until an event recorded after them has fired.
    memcpyBatchAsync: cuMemcpyBatchAsync === undefined ? undefined : (dsts, srcs, sizes, count, stream) => cuMemcpyBatchAsync!(dsts, srcs, sizes, count, batchAttrs, batchAttrIndex, 1, stream),
    streamCreate(flags) {
      cuStreamCreate(out64, flags);
      return out64[0]!;
    },
    streamDestroy: (stream) => cuStreamDestroy(stream),
    streamSynchronize: (stream) => cuStreamSynchronize(stream),
    streamQuery: (stream) => cuStreamQuery(stream) === 0,
    streamWaitEvent: (stream, event) => cuStreamWaitEvent(stream, event, 0),
    eventCreate(flags) {
      cuEventCreate(out64, flags);
      return out64[0]!;
    },
    eventDestroy: (event) => cuEventDestroy(event),
    eventRecord: (event, stream) => cuEventRecord(event, stream),
    eventQuery: (event) => cuEventQuery(event) === 0,
    eventSynchronize: (event) => cuEventSynchronize(event),
    eventSynchronizeAsync(event) {
      // SAFETY: the event must not be destroyed before this settles (CudaEvent defers its destroy).
      return new Promise<void>((resolve, reject) => {
        cuEventSynchronizeRaw.async(event, (error: unknown, result: Status) => {
          if (error) return reject(error);
          try {
            check('cuEventSynchronize', result);
            resolve();
          } catch (e) {
            reject(e);
          }
        });
      });
    },
    memGetAddressRange(ptr) {
      cuMemGetAddressRange(out64.subarray(0, 1), out64.subarray(1, 2), ptr);
      return { base: out64[0]!, bytes: u64(out64[1]!) };
    },
    pointerBufferId(ptr) {
      cuPointerGetAttribute(out64, CU_POINTER_ATTRIBUTE_BUFFER_ID, ptr);
      return out64[0]!;
    },
    ipcGetMemHandle(base) {
      const handle = new Uint8Array(new ArrayBuffer(CU_IPC_HANDLE_BYTES));
      cuIpcGetMemHandle(handle, base);
      return handle;
    },
    ipcGetEventHandle(event) {
      const handle = new Uint8Array(new ArrayBuffer(CU_IPC_HANDLE_BYTES));
      cuIpcGetEventHandle(handle, event);
      return handle;
    },
    ipcOpenEventHandle(handle) {
      if (handle.byteLength !== CU_IPC_HANDLE_BYTES) throw new RangeError(`an IPC event handle has ${CU_IPC_HANDLE_BYTES} bytes, got ${handle.byteLength}`);
      check('cuIpcOpenEventHandle', cuIpcOpenEventHandleRaw(out64, { reserved: Array.from(handle) }) as Status);
      return out64[0]!;
    },
    moduleLoadData(image) {
      const log = new Uint8Array(new ArrayBuffer(JIT_LOG_BYTES));
      const options = new Int32Array([CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]);
      // SAFETY: `log` and `image` live until the call returns; the JIT reads the image during the
      // call only. optionValues holds the log's address and, by value, its size.
      const values = new BigUint64Array([koffi.address(log), BigInt(log.length)]);
      const result = cuModuleLoadDataEx(out64, image, options.length, options, values) as Status;
      check('cuModuleLoadDataEx', result, () => {
        const end = log.indexOf(0);
        const text = new TextDecoder().decode(log.subarray(0, end < 0 ? log.length : end)).trim();
        return text.length > 0 ? `JIT log: ${text}` : undefined;
      });
      return out64[0]!;
    },
    moduleUnload: (module) => cuModuleUnload(module),
    moduleGetFunction(module, name) {
      cuModuleGetFunction(out64, module, name);
      return out64[0]!;
    },
    launchKernel(f, grid, block, sharedBytes, stream, params) {
      // SAFETY: the driver copies every parameter out of the addresses in `params` before it returns.
      cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], sharedBytes, stream, params, null);
    },
    hostAddress: (view) => koffi.address(view),
  };
}

export { CudaError, isOutOfMemory } from './cuda-error.js';
export { cudaLiveBytes } from './live-bytes.js';
