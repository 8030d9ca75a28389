// The loader on a real GPU: user kernels launched on batches, a real out-of-memory during the
// resident upload (falls back to streaming) and during streaming (back-off, then the batch fails and
// the loader recovers), and no device memory left behind after close, measured with cuMemGetInfo.
// Skipped without a CUDA driver and device.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { BatchError, DataLoader, DeviceTensor, sources, tensor } from '../../src/index.js';
import { CudaContext } from '../../src/device/cuda/context.js';
import { DeviceMemory } from '../../src/device/cuda/device-memory.js';
import { cudaAvailable } from '../../src/device/cuda/driver.js';
import { SUITE_MS } from '../fixtures.js';

const skip = cudaAvailable() ? false : 'no CUDA driver or device here';
const GiB = 2 ** 30;

function bytesDataset(n: number, rowBytes: number) {
  const data = new Uint8Array(n * rowBytes);
  for (let i = 0; i < n; i++) data.fill(i & 0xff, i * rowBytes, (i + 1) * rowBytes);
  return sources.arrays({ x: tensor(data, [n, rowBytes]), y: Int32Array.from({ length: n }, (_, i) => i) });
}

/** Occupy all but `leaveBytes` of the device's free memory; returns the release. */
function hog(context: CudaContext, leaveBytes: number): () => void {
  const blocks: DeviceMemory[] = [];
  let free = context.memInfo().free;
  while (free > leaveBytes + 64 * 2 ** 20) {
    const size = Math.min(free - leaveBytes, 8 * GiB);
    try {
      blocks.push(new DeviceMemory(context, size));
    } catch {
      break;
    }
    free = context.memInfo().free;
  }
  return () => blocks.forEach((b) => b.dispose());
}

describe('the loader on CUDA', { skip, timeout: SUITE_MS }, () => {
  it('launches a user kernel on each batch, after its data and before its reuse', async () => {
    const loader = await DataLoader.create(bytesDataset(64, 256), { batchSize: 8, device: 'cuda', mode: 'streaming' });
    const kernel = loader.kernel(readFileSync(new URL('../fixtures/add-one.ptx', import.meta.url), 'utf8'), 'add_one');
    for await (const b of loader.epoch(0)) {
      const x = b.get('x') as DeviceTensor;
      kernel.launch({ grid: Math.ceil(x.byteLength / 256), block: 256, args: [x, { u32: x.byteLength }] });
      const host = (await x.toHost()).data as Uint8Array;
      b.sampleIds.forEach((id, r) => assert.equal(host[r * 256], ((id & 0xff) + 1) & 0xff));
    }
    await loader.close();
  });

  it('a transform writing into its rows never writes back into the VRAM pool (+1 applies once per epoch)', async () => {
    const ptx = readFileSync(new URL('../fixtures/add-one.ptx', import.meta.url), 'utf8');
    let kernel: ReturnType<DataLoader<DeviceTensor>['kernel']> | undefined;
    const loader = await DataLoader.create(bytesDataset(256, 1024), {
      batchSize: 16, device: 'cuda', mode: 'streaming',
      transform: (rows) => {
        const x = rows[0] as DeviceTensor;
        kernel!.launch({ grid: Math.ceil(x.byteLength / 256), block: 256, args: [x, { u32: x.byteLength }] });
        return rows;
      },
    });
    kernel = loader.kernel(ptx, 'add_one');
    for (let e = 0; e < 4; e++) {
      for await (const b of loader.epoch(e)) {
        const host = (await (b.get('x') as DeviceTensor).toHost()).data as Uint8Array;
        b.sampleIds.forEach((id, r) => assert.equal(host[r * 1024 + 5], ((id & 0xff) + 1) & 0xff, `epoch ${e}`));
      }
    }
    // Epoch 1 mixes pooled rows in; once the pool holds all 256 samples the loader turns resident,
    // whose gathers also hand the transform fresh rows.
    assert.ok(loader.stats().epochs[1]!.rowsServedOnDevice > 0, 'epoch 1 came (in part) from the pool');
    assert.equal(loader.isResident, true, 'the complete pool turned the loader resident');
    await loader.close();
  });

  it('gathers resident columns of any row size in one launch, content exact', async () => {
    const n = 300;
    const a = new Uint8Array(n * 3).map((_, i) => (i * 7) & 0xff); // 3-byte rows: byte path
    const b = new Float32Array(n * 3).map((_, i) => i * 0.5); // 12-byte rows: 4-byte path
    const c = new Uint8Array(n * 150_528); // 150 528-byte rows: 16-byte path
    for (let i = 0; i < n; i++) c.fill(i & 0xff, i * 150_528, (i + 1) * 150_528);
    const d = BigInt64Array.from({ length: n }, (_, i) => BigInt(i) * 1_000_000_007n);
    const ds = sources.arrays({ a: tensor(a, [n, 3]), b: tensor(b, [n, 3]), c: tensor(c, [n, 150_528]), d });
    const loader = await DataLoader.create(ds, { batchSize: 37, device: 'cuda', mode: 'resident', dropLast: false });
    assert.equal(loader.isResident, true);
    for await (const batch of loader.epoch(2)) {
      const [ha, hb, hc, hd] = await Promise.all(['a', 'b', 'c', 'd'].map((k) => (batch.get(k) as DeviceTensor).toHost()));
      batch.sampleIds.forEach((id, r) => {
        assert.deepEqual(Array.from((ha!.data as Uint8Array).subarray(3 * r, 3 * r + 3)), Array.from(a.subarray(3 * id, 3 * id + 3)));
        assert.deepEqual(Array.from((hb!.data as Float32Array).subarray(3 * r, 3 * r + 3)), Array.from(b.subarray(3 * id, 3 * id + 3)));
        assert.equal((hc!.data as Uint8Array)[r * 150_528 + 150_527], id & 0xff);
        assert.equal((hd!.data as BigInt64Array)[r], d[id]);
      });
    }
    await loader.close();
  });

  it('falls back to streaming when the resident upload hits a real out-of-memory', async () => {
    const context = CudaContext.open(0);
    const release = hog(context, 256 * 2 ** 20);
    try {
      const loader = await DataLoader.create(bytesDataset(1024, 512 * 1024), { batchSize: 16, device: 'cuda', mode: 'resident', shuffle: false });
      assert.equal(loader.isResident, false);
      let rows = 0;
      for await (const b of loader.epoch(0)) {
        const x = (await (b.get('x') as DeviceTensor).toHost()).data as Uint8Array;
        b.sampleIds.forEach((id, r) => assert.equal(x[r * 512 * 1024 + 7], id & 0xff));
        rows += b.rows;
      }
      assert.equal(rows, 1024);
      await loader.close();
    } finally {
      release();
      context.dispose();
    }
  });

  it('backs off a real out-of-memory while streaming, fails the batch after 10 retries, and recovers', async () => {
    const loader = await DataLoader.create(bytesDataset(64, 4 * 2 ** 20), { batchSize: 8, device: 'cuda', mode: 'streaming', prefetch: 1 });
    const context = CudaContext.open(0);
    const release = hog(context, 8 * 2 ** 20);
    let error: unknown;
    try {
      for await (const _ of loader.epoch(0));
    } catch (e) {
      error = e;
    } finally {
      release();
    }
    assert.ok(error instanceof BatchError, `expected a BatchError, got ${error}`);
    assert.equal((error.cause as { driverName?: string }).driverName, 'CUDA_ERROR_OUT_OF_MEMORY');
    assert.equal(loader.stats().epochs[0]!.oomRetries, 10);
    let rows = 0;
    for await (const b of loader.epoch(1)) rows += b.rows;
    assert.equal(rows, 64);
    await loader.close();
    context.dispose();
  });

  it('leaves no device memory behind after close (cuMemGetInfo back to its baseline)', async () => {
    const context = CudaContext.open(0);
    const before = context.memInfo().used;
    for (const mode of ['resident', 'streaming'] as const) {
      const loader = await DataLoader.create(bytesDataset(2048, 3072), { batchSize: 256, device: 'cuda', mode });
      for (let e = 0; e < 2; e++) for await (const _ of loader.epoch(e));
      assert.ok(context.memInfo().used > before);
      await loader.close();
      assert.deepEqual(loader.stats().memory, { device: 0, pinned: 0 });
    }
    const after = context.memInfo().used;
    assert.ok(Math.abs(after - before) <= 64 * 2 ** 20, `device memory in use moved from ${before} to ${after}`);
    context.dispose();
  });
});
