// Internal: not exported from the package entry.
// Test-only fault injection for the CUDA backend: the `sim` device takes `sim: { failAllocation }`,
// and this gives a real GPU the same hook, so the fault sweeps that prove "no row wrong, no byte
// left" after a transient out-of-memory run on the H200 as they run in CI. The rule: a backend takes
// the predicate installed when it is opened and keeps it for its life (loaders opened later are not
// affected by a change); nothing but tests installs one.

import { CUDA_ERROR_OUT_OF_MEMORY, CudaError } from './cuda-error.js';

/** `(ordinal, bytes) => true` makes the backend's `ordinal`-th allocation fail as a full device would. */
export type AllocationFault = (ordinal: number, bytes: number) => boolean;

let installed: AllocationFault | undefined;

/** Install (or, with undefined, remove) the predicate that CUDA backends opened from now on consult. */
export function injectCudaAllocationFaults(fault: AllocationFault | undefined): void {
  installed = fault;
}

/** The predicate a backend being opened takes. */
export function cudaAllocationFault(): AllocationFault | undefined {
  return installed;
}

/** The error a real cuMemAlloc gives on a full device: same class, code and driver name. */
export function injectedOutOfMemory(bytes: number): CudaError {
  return new CudaError('cuMemAlloc_v2', CUDA_ERROR_OUT_OF_MEMORY, 'CUDA_ERROR_OUT_OF_MEMORY', 'out of memory', `injected by a test while allocating ${bytes} bytes`);
}
