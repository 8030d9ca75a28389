// Internal: not exported from the package entry.
// The errors of the CUDA binding. The rule: every failing driver call becomes a `CudaError` that
// carries the driver's own result and error name, so callers match on `driverName` or `code`, never
// on message text; a missing driver is `ERR_CUDA_UNAVAILABLE`, raised once, with the fix.

import { LoaderError } from '../../errors.js';

/** `CUDA_ERROR_OUT_OF_MEMORY`. */
export const CUDA_ERROR_OUT_OF_MEMORY = 2;

// Errors after which the context is unusable until the process exits: the GPU faulted in a kernel.
const STICKY = new Set([
  700, // CUDA_ERROR_ILLEGAL_ADDRESS
  702, // CUDA_ERROR_LAUNCH_TIMEOUT
  714, // CUDA_ERROR_HARDWARE_STACK_ERROR
  715, // CUDA_ERROR_ILLEGAL_INSTRUCTION
  716, // CUDA_ERROR_MISALIGNED_ADDRESS
  717, // CUDA_ERROR_INVALID_ADDRESS_SPACE
  718, // CUDA_ERROR_INVALID_PC
  719, // CUDA_ERROR_LAUNCH_FAILED
]);

/** What to do about a result, where there is something better to say than the driver's text. */
function remedy(result: number): string | undefined {
  if (result === CUDA_ERROR_OUT_OF_MEMORY) {
    return 'the device is full: free device memory (other processes count too, see nvidia-smi), or lower batchSize, prefetch or vramMaxUsage';
  }
  if (STICKY.has(result)) {
    return 'the GPU faulted and this process cannot use the CUDA context any more: restart the process (an out-of-range row id given to a gather kernel is one cause)';
  }
  if (result === 218 || result === 222) {
    // CUDA_ERROR_INVALID_PTX, CUDA_ERROR_UNSUPPORTED_PTX_VERSION
    return 'the driver cannot compile this PTX: update the NVIDIA driver (the shipped kernels are built with CUDA 13 and need driver r580 or newer), or rebuild them with an older nvcc: npm run kernels';
  }
  if (result === 712) {
    // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
    return 'this host memory is already page-locked: pin each buffer once, at start';
  }
  return undefined;
}

/**
 * A CUDA driver call failed. `code` is 'ERR_DEVICE_OOM' for CUDA_ERROR_OUT_OF_MEMORY (the code the
 * `sim` device uses too, so one OOM policy serves both) and 'ERR_CUDA' otherwise.
 */
export class CudaError extends LoaderError {
  /** The `CUresult`, e.g. 2. */
  readonly result: number;
  /** The driver's name for it, e.g. 'CUDA_ERROR_OUT_OF_MEMORY' (from `cuGetErrorName`). */
  readonly driverName: string;
  /** The driver entry point that failed, e.g. 'cuMemAlloc_v2'. */
  readonly call: string;

  constructor(call: string, result: number, driverName: string, description: string | undefined, detail?: string) {
    const fix = remedy(result);
    super(
      result === CUDA_ERROR_OUT_OF_MEMORY ? 'ERR_DEVICE_OOM' : 'ERR_CUDA',
      `${call} failed: ${driverName} (${result})` +
        (description !== undefined ? `: ${description}` : '') +
        (detail !== undefined ? `. ${detail}` : '') +
        (fix !== undefined ? `. Fix: ${fix}` : ''),
    );
    this.name = 'CudaError';
    this.result = result;
    this.driverName = driverName;
    this.call = call;
  }
}

/** True for a device out-of-memory error, from CUDA or from the `sim` device (one recognizer for both). */
export { isDeviceOutOfMemory as isOutOfMemory } from '../backend.js';

/** No usable CUDA driver or device in this process; a compiled kernel file missing from kernels/. */
export { cudaUnavailable, kernelMissing } from '../../errors.js';
