// The Python client over CUDA IPC on a real GPU: batches viewed in place in the loader's device
// memory (no copy), every row's content checked on the GPU in Python, exactly-once, resume, errors,
// a killed loader, and no device memory left after both sides are done (cudaMemGetInfo in Python).
// Skipped without a CUDA device or without a python (STOKER_PYTHON, default python3) whose torch sees it.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cudaAvailable } from '../../src/device/cuda/driver.js';
import { TEST_MS } from '../fixtures.js';
import { scenario, torchMissing } from '../fixtures/python-client.js';

const PYTHON = process.env.STOKER_PYTHON ?? 'python3';
const skip = cudaAvailable() ? torchMissing(PYTHON, true) : 'no CUDA driver or device here';
const cuda = { device: 'cuda', n: 50_000, batch: 256 };

// Both routes: the client gathers from the loader's columns in IPC memory, or takes leased batches.
for (const gather of [true, false]) {
describe(`the Python client over CUDA IPC, ${gather ? 'the client gathers its batches' : 'leased batches'}`, { skip, timeout: TEST_MS }, () => {
  it('delivers every sample exactly once per epoch, every row as the source made it, and leaves no device memory behind', async () => {
    const { out, stderr } = await scenario('exactly_once', { ...cuda, epochs: 2, gather }, PYTHON);
    assert.equal(out.gathers, gather);
    const epochs = out.epochs as number[][];
    assert.equal(epochs.length, 2);
    for (const ids of epochs) {
      assert.equal(ids.length, 195 * 256);
      assert.equal(new Set(ids).size, ids.length, 'no sample twice');
      assert.ok(ids.every((i) => i >= 0 && i < 50_000));
    }
    assert.equal(out.rowsOk, true, stderr);
    assert.equal(out.exit, 0);
    assert.ok((out.deviceBytesLeft as number) < 64 * 2 ** 20, `device bytes left: ${String(out.deviceBytesLeft)}`);
  });

  it('without ids=True (the lean frame): every row, recovered from its content on the GPU, exactly once, a short last batch too; state_dict() after close', async () => {
    const { out, stderr } = await scenario('lean', { device: 'cuda', n: 2500, batch: 256, epochs: 2, dropLast: false, gather }, PYTHON);
    const epochs = out.epochs as number[][];
    assert.equal(epochs.length, 2);
    for (const ids of epochs) assert.deepEqual([...ids].sort((a, b) => a - b), Array.from({ length: 2500 }, (_, i) => i));
    assert.equal(out.rowsOk, true, stderr);
    assert.equal((out.idsError as { code: string }).code, 'ERR_INVALID_OPTION');
    assert.deepEqual((out.stateAfterClose as { position: number }).position, 3 * 256);
    assert.equal(out.exit, 0);
  });

  it('a state_dict saved mid-epoch resumes at exactly the next batch', async () => {
    const { out } = await scenario('resume', { device: 'cuda', n: 6400, batch: 256, stopAfter: 7, gather }, PYTHON);
    assert.deepEqual(out.resumed, out.full);
  });

  it('dtypes={"label": torch.int64}: int64 labels of the source\u2019s values on the device, every sample once', async () => {
    const { out } = await scenario('dtypes', { device: 'cuda', n: 6400, batch: 256, gather }, PYTHON);
    assert.equal(out.gathers, gather);
    assert.deepEqual(out.dtypes, ['torch.uint8 torch.int64']);
    assert.equal(out.rowsOk, true);
    assert.deepEqual([...(out.ids as number[])].sort((a, b) => a - b), Array.from({ length: 6400 }, (_, i) => i));
  });

  it('a BatchError crosses with epoch, batch and ids; a killed loader raises LoaderDied; close() exits 0', async () => {
    const e = await scenario('batch_error', { device: 'cuda', n: 640, batch: 64, gather }, PYTHON);
    assert.equal((e.out.error as { batch: number }).batch, 1);
    const d = await scenario('loader_dies', { device: 'cuda', n: 6400, batch: 256, gather, wait: gather }, PYTHON);
    assert.equal(d.out.raised, 'LoaderDied');
    const c = await scenario('close', { device: 'cuda', n: 6400, batch: 256, gather }, PYTHON);
    assert.equal(c.out.exit, 0);
  });
});
}
