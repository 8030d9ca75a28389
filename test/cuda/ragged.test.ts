// Ragged collates on a real GPU (kernels/ragged.cu through CudaBackend.pieces): the shared device
// suite (test/fixtures/pieces-device.ts) — pad, pack and sequence-packing windows, int32 and uint16
// tokens, B = 256 rows of capacity 2048, float64 and uint8 rows at byte offsets, an empty table —
// each equal to the host's applyPieces byte for byte, with poisoned outputs fully written, and no
// device memory left behind. Skipped, with the reason, where there is no GPU.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CudaBackend } from '../../src/device/cuda/cuda-backend.js';
import { cudaAvailable } from '../../src/device/cuda/driver.js';
import { SUITE_MS } from '../fixtures.js';
import { piecesSuite } from '../fixtures/pieces-device.js';

const skip = cudaAvailable() ? false : 'no CUDA GPU here (libcuda.so.1 missing or no device): these tests run on a GPU machine';

describe('Backend.pieces on CUDA (kernels/ragged.cu)', { skip, timeout: SUITE_MS }, () => {
  let backend: CudaBackend;
  before(() => {
    backend = CudaBackend.open(0);
  });
  after(() => backend?.close());

  piecesSuite(() => backend);

  it('leaves no device bytes behind', () => {
    assert.equal(backend.live().device, 0);
  });
});
