// Without a driver or a GPU, asking for CUDA fails once, clearly, with the fix; `cudaAvailable()`
// answers false without throwing; and errors from the driver carry what callers match on.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LoaderError } from '../../src/errors.js';
import { CudaContext } from '../../src/device/cuda/context.js';
import { CudaError, cudaAvailable, driver, isOutOfMemory, openDriver } from '../../src/device/cuda/driver.js';

const FIX = /install the NVIDIA driver, or use device: 'cpu' \(or 'sim' to rehearse GPU policies\)/;

describe('CUDA unavailable', () => {
  it('a driver library that cannot be loaded is ERR_CUDA_UNAVAILABLE naming the library and the fix', () => {
    assert.throws(() => openDriver('libcuda-stoker-test-missing.so.1'), (e: unknown) => {
      assert.ok(e instanceof LoaderError);
      assert.equal(e.code, 'ERR_CUDA_UNAVAILABLE');
      assert.match(e.message, /CUDA is not available: the NVIDIA driver library libcuda-stoker-test-missing\.so\.1 could not be loaded/);
      assert.match(e.message, FIX);
      return true;
    });
  });

  const gpu = cudaAvailable();
  it('without a GPU, asking for the driver gives ERR_CUDA_UNAVAILABLE with the fix, every time', { skip: gpu ? 'a CUDA GPU is present here' : false }, () => {
    assert.equal(cudaAvailable(), false);
    for (let i = 0; i < 2; i++) {
      assert.throws(() => driver(), { code: 'ERR_CUDA_UNAVAILABLE', message: FIX });
      assert.throws(() => CudaContext.open(0), { code: 'ERR_CUDA_UNAVAILABLE', message: FIX });
    }
  });
});

describe('CudaError', () => {
  it('an out-of-memory result is ERR_DEVICE_OOM, carries the driver name and reads as OOM', () => {
    const e = new CudaError('cuMemAlloc_v2', 2, 'CUDA_ERROR_OUT_OF_MEMORY', 'out of memory');
    assert.equal(e.code, 'ERR_DEVICE_OOM');
    assert.equal(e.result, 2);
    assert.equal(e.driverName, 'CUDA_ERROR_OUT_OF_MEMORY');
    assert.match(e.message, /^cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY \(2\): out of memory\. Fix: /);
    assert.equal(isOutOfMemory(e), true);
    assert.ok(e instanceof LoaderError);
  });

  it('any other result is ERR_CUDA and not OOM', () => {
    const e = new CudaError('cuLaunchKernel', 700, 'CUDA_ERROR_ILLEGAL_ADDRESS', 'an illegal memory access was encountered');
    assert.equal(e.code, 'ERR_CUDA');
    assert.equal(isOutOfMemory(e), false);
    assert.match(e.message, /restart the process/);
  });

  it('isOutOfMemory also recognizes the sim device\'s out-of-memory errors', () => {
    const sim = Object.assign(new LoaderError('ERR_DEVICE_OOM', 'sim: out of device memory'), { driverName: 'CUDA_ERROR_OUT_OF_MEMORY', result: 2 });
    assert.equal(isOutOfMemory(sim), true);
    assert.equal(isOutOfMemory(new Error('CUDA_ERROR_OUT_OF_MEMORY')), false);
    assert.equal(isOutOfMemory(undefined), false);
  });
});
