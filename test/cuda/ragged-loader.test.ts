// Ragged fields through the loader on a real GPU: the device suite of test/fixtures/ragged-checks.ts
// (pad with lengths and mask, pack with cu_seqlens, sequence packing best-fit and concat; streaming
// with the VRAM pool, resident, reader workers) on cuda:0, every batch equal to the cpu's byte for
// byte. Skipped, with the reason, where there is no GPU.

import { cudaAvailable } from '../../src/device/cuda/driver.js';
import { SUITE_MS } from '../fixtures.js';
import { raggedDeviceSuite } from '../fixtures/ragged-checks.js';

raggedDeviceSuite('cuda:0', { skip: cudaAvailable() ? false : 'no CUDA GPU here (libcuda.so.1 missing or no device): these tests run on a GPU machine', timeout: SUITE_MS });
