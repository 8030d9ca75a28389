// The same behaviours on every device: 'cpu', 'sim' (a simulated GPU, always), and 'cuda' when a
// GPU is present. Device batches are read back with toHost(); device policies (auto-release, the
// budget law, out-of-memory back-off, resident fallback, no leaks) are pinned on sim and cuda.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type AnyTensor, type Batch, BatchError, DataLoader, DeviceTensor, type LoaderOptions, Tensor, sources, tensor } from '../src/index.js';
import { cudaAvailable } from '../src/device/cuda/driver.js';
import { HANG_MS, SUITE_MS, arraysDataset, range, scriptedDataset, sorted, within } from './fixtures.js';

const DEVICES = ['cpu', 'sim', ...(cudaAvailable() ? ['cuda'] : [])];

async function host(t: AnyTensor): Promise<Tensor> {
  return t instanceof DeviceTensor ? t.toHost() : t;
}

async function ids(b: Batch<AnyTensor>): Promise<number[]> {
  return Array.from((await host(b.get('y'))).data as Int32Array);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function create(device: string, ds: Parameters<typeof DataLoader.create>[0], opts: Omit<LoaderOptions<any>, 'device'>) {
  return DataLoader.create(ds, { ...opts, device });
}

for (const device of DEVICES) {
  for (const mode of ['resident', 'streaming'] as const) {
    describe(`on ${device}, ${mode} mode`, { timeout: SUITE_MS }, () => {
      it('delivers every sample exactly once per epoch with its own content', async () => {
        const loader = await create(device, arraysDataset(37), { batchSize: 8, mode, dropLast: false });
        assert.equal(loader.device, device === 'cuda' ? 'cuda:0' : device);
        for (let e = 0; e < 2; e++) {
          const seen: number[] = [];
          for await (const b of loader.epoch(e)) {
            const x = (await host(b.get('x'))).data as Float32Array;
            const y = await ids(b);
            assert.deepEqual(y, Array.from(b.sampleIds));
            y.forEach((id, r) => assert.deepEqual(Array.from(x.subarray(4 * r, 4 * r + 4)), [id, id + 0.5, id + 0.25, -id]));
            seen.push(...y);
          }
          assert.deepEqual(sorted(seen), range(37));
        }
        await loader.close();
      });

      it('gives the same order as the CPU for the same seed', async () => {
        const a = await create(device, arraysDataset(30), { batchSize: 7, mode, seed: 11 });
        const b = await create('cpu', arraysDataset(30), { batchSize: 7, mode, seed: 11 });
        const order = async (l: DataLoader<AnyTensor>) => {
          const out: number[] = [];
          for await (const batch of l.epoch(4)) out.push(...(await ids(batch)));
          return out;
        };
        assert.deepEqual(await order(a), await order(b));
        await a.close();
        await b.close();
      });

      it('reads per-sample datasets, through reader workers too', async () => {
        for (const workers of mode === 'streaming' ? [0, 2] : [0]) {
          const ds = workers > 0 ? sources.module(new URL('./fixtures/scripted-source.ts', import.meta.url), 'openScripted', { n: 21 }) : scriptedDataset(21);
          const loader = await create(device, ds, { batchSize: 4, mode, workers, dropLast: false });
          const seen: number[] = [];
          for await (const b of loader.epoch(0)) seen.push(...(await ids(b)));
          assert.deepEqual(sorted(seen), range(21));
          await loader.close();
          assert.deepEqual(loader.stats().memory, { device: 0, pinned: 0 }, 'nothing held after close');
        }
      });
    });
  }
}


/** 16 384 rows of 16 KiB (256 MiB), byte 5 of each row its id's low byte, and their ids as `y`. */
function bigRows() {
  const n = 16_384;
  const rowBytes = 16_384;
  const data = new Uint8Array(n * rowBytes);
  for (let i = 0; i < n; i++) data[i * rowBytes + 5] = i & 0xff;
  return { n, rowBytes, ds: sources.arrays({ x: tensor(data, [n, rowBytes]), y: Int32Array.from(range(n)) }) };
}

for (const device of DEVICES.filter((d) => d !== 'cpu')) {
  describe(`device policies on ${device}`, { timeout: SUITE_MS }, () => {
    it('hands out device tensors with pointer, byte length, shape, strides, device and ready event', async () => {
      const loader = await create(device, arraysDataset(8), { batchSize: 4, mode: 'streaming' });
      for await (const b of loader.epoch(0)) {
        const x = b.get('x') as DeviceTensor;
        assert.ok(x instanceof DeviceTensor);
        assert.equal(typeof x.ptr, 'bigint');
        assert.equal(x.byteLength, 4 * 4 * 4);
        assert.deepEqual(x.shape, [4, 4]);
        assert.deepEqual(x.strides, [4, 1]);
        assert.equal(x.dtype, 'float32');
        assert.ok(x.readyEvent !== undefined);
        break;
      }
      await loader.close();
    });

    it('releases the previous batch when the next is asked for, unless retained', async () => {
      const loader = await create(device, arraysDataset(16), { batchSize: 4, mode: 'streaming', shuffle: false });
      const it0 = loader.epoch(0)[Symbol.asyncIterator]();
      const first = (await it0.next()).value!;
      const kept = (await it0.next()).value!.retain();
      assert.equal(first.released, true, 'the first batch was released by the second request');
      assert.throws(() => first.get('x'), { code: 'ERR_BATCH_RELEASED' });
      await it0.next();
      assert.equal(kept.released, false);
      assert.deepEqual(await ids(kept), [4, 5, 6, 7]);
      kept.release();
      assert.equal(kept.released, true);
      await it0.return!();
      await loader.close();
    });

    it('sizes streaming depth from device memory and resizes honestly after the second batch', async () => {
      // pinSource: false: a mapped source's edge rows would take device memory of their own.
      const loader = await create(device, arraysDataset(64), { batchSize: 4, mode: 'streaming', pinSource: false, ...(device === 'sim' ? { sim: { totalBytes: 2 ** 20, usedBytes: 2 ** 19 } } : {}) });
      const it0 = loader.epoch(0)[Symbol.asyncIterator]();
      await it0.next();
      assert.ok(loader.prefetchDepth >= 2);
      if (device === 'sim') {
        // batch = 4 × 20 bytes; cap 0.9 × 1 MiB − 0.5 MiB used → thousands of batches.
        assert.equal(loader.prefetchDepth, Math.floor((Math.floor(0.9 * 2 ** 20) - 2 ** 19) / 80));
      }
      await it0.return!();
      await loader.close();
    });

    it('falls back to streaming when the resident upload runs out of device memory, keeping a custom sampler', async () => {
      if (device !== 'sim') return;
      const sampler = { length: 6, indices: () => [5, 4, 3, 2, 1, 0] };
      const warnings: string[] = [];
      const onWarning = (w: Error) => warnings.push(w.message);
      process.on('warning', onWarning);
      const loader = await create(device, arraysDataset(10), { batchSize: 3, sampler, sim: { failAllocation: (ordinal) => ordinal === 0 } });
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
      process.off('warning', onWarning);
      assert.equal(loader.isResident, false);
      assert.ok(warnings.some((w) => /did not fit on sim.*streaming instead/.test(w)));
      const seen: number[] = [];
      for await (const b of loader.epoch(0)) seen.push(...(await ids(b)));
      assert.deepEqual(seen, [5, 4, 3, 2, 1, 0]);
      await loader.close();
    });

    it('chooses streaming when the dataset does not fit (0.90 × total − used)', async () => {
      if (device !== 'sim') return;
      const loader = await create(device, arraysDataset(1000), { batchSize: 10, sim: { totalBytes: 20_000 } });
      assert.equal(loader.isResident, false);
      await loader.close();
    });

    it('retries a transient out-of-memory with back-off and delivers the whole epoch', async () => {
      if (device !== 'sim') return;
      const loader = await create(device, arraysDataset(24), { batchSize: 4, mode: 'streaming', sim: { failAllocation: (ordinal) => ordinal === 2 || ordinal === 3 } });
      const seen: number[] = [];
      for await (const b of loader.epoch(0)) seen.push(...(await ids(b)));
      assert.deepEqual(sorted(seen), range(24));
      assert.equal(loader.stats().epochs[0]!.oomRetries, 2);
      await loader.close();
    });

    it('fails the batch after 10 retries of a persistent out-of-memory, and the loader survives', async () => {
      if (device !== 'sim') return;
      let failing = false;
      const loader = await create(device, arraysDataset(8), { batchSize: 4, mode: 'streaming', shuffle: false, prefetch: 1, sim: { failAllocation: () => failing } });
      failing = true;
      const error = await within(HANG_MS, 'persistent OOM', (async () => {
        try {
          for await (const _ of loader.epoch(0));
        } catch (e) {
          return e;
        }
      })());
      assert.ok(error instanceof BatchError);
      assert.equal((error.cause as { driverName?: string }).driverName, 'CUDA_ERROR_OUT_OF_MEMORY');
      assert.equal(loader.stats().epochs[0]!.oomRetries, 10);
      failing = false;
      const seen: number[] = [];
      for await (const b of loader.epoch(1)) seen.push(...(await ids(b)));
      assert.deepEqual(seen, range(8));
      await loader.close();
    });

    for (const pinSource of ['auto', false] as const) it(`stitches pooled and fresh rows in exact caller order across epochs (VRAM pool), saving H2D bytes (pinSource: ${pinSource})`, async () => {
      const rowBytes = 2 ** 20;
      const n = 192;
      const data = new Uint8Array(n * rowBytes);
      for (let i = 0; i < n; i++) data.fill(i, i * rowBytes, (i + 1) * rowBytes);
      const ds = sources.arrays({ x: tensor(data, [n, rowBytes]), y: Int32Array.from(range(n)), z: BigInt64Array.from(range(n), (i) => BigInt(-i)) });
      // sim: 800 MiB leaves the pool about 130 MiB after the 512 MiB margin and 16 batches of flow
      // reserve: two slabs of 63 rows, so later batches mix pooled and fresh rows.
      const loader = await create(device, ds, { batchSize: 8, mode: 'streaming', pinSource, ...(device === 'sim' ? { sim: { totalBytes: 800 * 2 ** 20 } } : {}) });
      let mixed = 0;
      for (let e = 0; e < 3; e++) {
        for await (const b of loader.epoch(e)) {
          const x = (await host(b.get('x'))).data as Uint8Array;
          const z = (await host(b.get('z'))).data as BigInt64Array;
          const y = await ids(b);
          assert.deepEqual(y, Array.from(b.sampleIds));
          y.forEach((id, r) => {
            assert.equal(x[r * rowBytes], id);
            assert.equal(x[(r + 1) * rowBytes - 1], id);
            assert.equal(z[r], BigInt(-id), 'int64 survives the pool');
          });
        }
        const s = loader.stats().epochs[e]!;
        if (s.rowsServedOnDevice > 0 && s.rowsServedOnDevice < n) mixed++;
        // A pool that came to hold every sample turns the loader resident (a GPU with room to spare):
        // then nothing crosses and nothing is stitched.
        if (!loader.isResident) assert.equal(s.h2dBytes + s.h2dBytesSaved, n * (rowBytes + 4 + 8), `epoch ${e}: every byte either crossed or was served on the device`);
        else assert.equal(s.h2dBytes, 0);
      }
      const last = loader.stats().epochs[2]!;
      assert.ok(loader.stats().epochs.some((s) => s.rowsServedOnDevice > 0), 'the pool served rows');
      if (device === 'sim') {
        assert.ok(last.pooledRows > 0 && last.pooledRows < n, `the pool holds part of the dataset (${last.pooledRows} rows)`);
        assert.ok(mixed > 0, 'some epochs mixed pooled and fresh rows');
      }
      await loader.close();
      assert.deepEqual(loader.stats().memory, { device: 0, pinned: 0 });
    });

    for (const pinSource of ['auto', false] as const) it(`evicts the newest pool slab under out-of-memory at depth 1, re-reads planned rows, and keeps content right (pinSource: ${pinSource})`, async () => {
      if (device !== 'sim') return;
      const rowBytes = 2 ** 20;
      const n = 192;
      const data = new Uint8Array(n * rowBytes);
      for (let i = 0; i < n; i++) data.fill(i, i * rowBytes, (i + 1) * rowBytes);
      let armed = false;
      const loader = await create(device, sources.arrays({ x: tensor(data, [n, rowBytes]), y: Int32Array.from(range(n)) }), {
        batchSize: 8, mode: 'streaming', prefetch: 1, pinSource,
        // The contiguous copy that would promote the complete pool to resident is refused, so the
        // pool keeps serving (and can be evicted from) in epoch 2.
        sim: { totalBytes: 4 * 2 ** 30, failAllocation: (_ordinal, bytes) => { if (bytes >= n * rowBytes) return true; if (!armed) return false; armed = false; return true; } },
      });
      for (let e = 0; e < 2; e++) for await (const _ of loader.epoch(e));
      const before = loader.stats().epochs[1]!;
      assert.equal(before.pooledRows, n);
      const kept: Batch<AnyTensor>[] = [];
      let k = 0;
      for await (const b of loader.epoch(2)) {
        kept.push(b.retain());
        if (++k === 3) armed = true;
      }
      for (const b of kept) {
        const x = (await host(b.get('x'))).data as Uint8Array;
        (await ids(b)).forEach((id, r) => assert.equal(x[r * rowBytes + 123], id));
        b.release();
      }
      const after = loader.stats().epochs[2]!;
      assert.ok(after.oomRetries >= 1);
      // Slabs hold floor(64 MiB / (1 MiB + 4 B)) = 63 rows: 63, 63, 63 and a newest slab of 3.
      assert.equal(after.pooledRows, n - (n % 63), 'the newest slab was given back');
      await loader.close();
      assert.deepEqual(loader.stats().memory, { device: 0, pinned: 0 });
    });

    it('turns resident once the VRAM pool holds every sample: same batches, gathered like resident mode', async () => {
      const n = 96;
      const data = new Float32Array(n * 33);
      for (let i = 0; i < n; i++) data.fill(i + 0.25, i * 33, (i + 1) * 33);
      const ds = () => sources.arrays({ x: tensor(data, [n, 33]), y: Int32Array.from(range(n)) });
      const pooled = await create(device, ds(), { batchSize: 8, mode: 'streaming', seed: 5, dropLast: false });
      const resident = await create(device, ds(), { batchSize: 8, mode: 'resident', seed: 5, dropLast: false });
      let turned = -1;
      for (let e = 0; e < 4; e++) {
        const a: number[][] = [];
        for await (const b of pooled.epoch(e)) {
          const x = (await host(b.get('x'))).data as Float32Array;
          const y = await ids(b);
          y.forEach((id, r) => assert.equal(x[r * 33 + 32], id + 0.25));
          a.push(y);
        }
        const b: number[][] = [];
        for await (const batch of resident.epoch(e)) b.push(await ids(batch));
        assert.deepEqual(a, b, `epoch ${e}: the same batches as a resident loader`);
        if (turned < 0 && pooled.isResident) turned = e;
      }
      assert.ok(turned >= 1 && turned <= 2, `turned resident at epoch ${turned}, once epoch 0 (and the batches before the pool's install) were captured`);
      const s = pooled.stats();
      assert.equal(s.mode, 'resident');
      assert.equal(s.epochs[3]!.h2dBytes, 0, 'no bytes cross after the promotion');
      await pooled.close();
      await resident.close();
      assert.deepEqual(pooled.stats().memory, { device: 0, pinned: 0 });
    });

    it('keeps the VRAM pool off with vramPool: false (every byte crosses the bus)', async () => {
      const loader = await create(device, arraysDataset(64), { batchSize: 8, mode: 'streaming', vramPool: false });
      for (let e = 0; e < 3; e++) for await (const _ of loader.epoch(e));
      const s = loader.stats().epochs[2]!;
      assert.equal(s.rowsServedOnDevice, 0);
      assert.equal(s.pooledRows, 0);
      assert.equal(s.h2dBytes, 64 * 20);
      await loader.close();
    });

    it('streams an in-memory source straight from page-locked host memory (pinSource), edge rows and shared buffers included', async () => {
      // Rows of 70 001 bytes (over ROW_DMA_MIN_BYTES: the copy engines) and small rows (the row-copy
      // kernel); two columns are views of one buffer at odd offsets, so the mapping covers both and
      // rows straddling its partial first and last pages come from the device copy of the edges.
      // x (17.5 MB) is mapped; w and y are small enough to be held on the device whole.
      const n = 250;
      const big = 70_001;
      const shared = new ArrayBuffer(n * big + n * 12 + 40);
      const x = new Uint8Array(shared, 8, n * big);
      for (let i = 0; i < n; i++) x.fill(i + 1, i * big, (i + 1) * big);
      const w = new Float32Array(shared, 8 + n * big + 4 - ((8 + n * big) % 4), n * 3);
      for (let i = 0; i < n; i++) w.set([i, -i, i + 0.5], 3 * i);
      const ds = sources.arrays({ x: tensor(x, [n, big]), w: tensor(w, [n, 3]), y: Int32Array.from(range(n)) });
      const variants = device === 'sim' ? [{ pinSource: 'auto' as const, rowDma: true }, { pinSource: 'auto' as const, rowDma: false }, { pinSource: false, rowDma: true }] : [{ pinSource: 'auto' as const, rowDma: true }, { pinSource: false, rowDma: true }];
      for (const v of variants) {
        const loader = await create(device, ds, { batchSize: 8, mode: 'streaming', dropLast: false, vramPool: false, workers: v.pinSource === false ? 2 : undefined, pinSource: v.pinSource, ...(device === 'sim' ? { sim: { rowDma: v.rowDma } } : {}) });
        const mapped = loader.stats().memory.pinned >= n * big - 2 * 4096;
        assert.equal(mapped, v.pinSource !== false, `${JSON.stringify(v)}: the columns are page-locked only when mapped`);
        if (v.pinSource !== false) assert.equal(loader.stats().workers, 0, 'no reader threads for a mapped source');
        for (let e = 0; e < 2; e++) {
          const seen: number[] = [];
          for await (const b of loader.epoch(e)) {
            const xs = (await host(b.get('x'))).data as Uint8Array;
            const ws = (await host(b.get('w'))).data as Float32Array;
            const y = await ids(b);
            assert.deepEqual(y, Array.from(b.sampleIds));
            y.forEach((id, r) => {
              assert.equal(xs[r * big], id + 1, `${JSON.stringify(v)}: first byte of row ${id}`);
              assert.equal(xs[r * big + 35_000], id + 1);
              assert.equal(xs[(r + 1) * big - 1], id + 1, `${JSON.stringify(v)}: last byte of row ${id}`);
              assert.deepEqual(Array.from(ws.subarray(3 * r, 3 * r + 3)), [id, -id, id + 0.5]);
            });
            seen.push(...y);
          }
          assert.deepEqual(sorted(seen), range(n));
          const s = loader.stats().epochs[e]!;
          assert.equal(s.h2dBytes, n * (big + 12 + 4), 'every byte crossed the bus once');
          if (v.pinSource !== false) assert.equal(s.rowsFromSource, n);
        }
        await loader.close();
        assert.deepEqual(loader.stats().memory, { device: 0, pinned: 0 }, 'mapping and edge copies released on close');
      }
    });

    it('reads mapped columns whose rows are less aligned than their size (16-byte rows at an 8-byte offset)', async () => {
      // 4 112-byte rows (257 × 16) at an 8-byte offset, 20 MB: mapped (not held on the device whole).
      const n = 5000;
      const per = 514;
      const odd = new ArrayBuffer(8 + n * per * 8 + 8 + n * 4);
      const v = new Float64Array(odd, 8, n * per);
      for (let i = 0; i < n; i++) {
        v[i * per] = i;
        v[i * per + 1] = -i - 0.5;
        v[(i + 1) * per - 1] = i + 0.25;
      }
      const y = new Int32Array(odd, 16 + n * per * 8, n).map((_, i) => i);
      for (const vramPool of [false, true]) {
        const loader = await create(device, sources.arrays({ v: tensor(v, [n, per]), y }), { batchSize: 256, mode: 'streaming', vramPool, dropLast: false, ...(device === 'sim' ? { sim: { totalBytes: 2 ** 30 } } : {}) });
        for (let e = 0; e < 3; e++) {
          const seen: number[] = [];
          for await (const b of loader.epoch(e)) {
            const vs = (await host(b.get('v'))).data as Float64Array;
            const ys = await ids(b);
            assert.deepEqual(ys, Array.from(b.sampleIds));
            ys.forEach((id, r) => assert.deepEqual([vs[r * per], vs[r * per + 1], vs[(r + 1) * per - 1]], [id, -id - 0.5, id + 0.25], `epoch ${e}, row ${r} (sample ${id})`));
            seen.push(...ys);
          }
          assert.deepEqual(sorted(seen), range(n));
        }
        await loader.close();
      }
    });

    it('keeps the VRAM pool dormant for small rows read in place unless it can hold every sample', async () => {
      if (device !== 'sim') return;
      // On sim with 750 MiB the device leaves the pool about 180 MiB of these 256 MiB: a partial pool.
      const { n, rowBytes, ds } = bigRows();
      const served = async (pinSource: boolean | 'auto', totalBytes: number) => {
        const loader = await create(device, ds, { batchSize: 64, mode: 'streaming', prefetch: 4, pinSource, sim: { totalBytes } });
        for (let e = 0; e < 3; e++) {
          for await (const b of loader.epoch(e)) {
            const x = (await host(b.get('x'))).data as Uint8Array;
            (await ids(b)).forEach((id, r) => assert.equal(x[r * rowBytes + 5], id & 0xff));
          }
        }
        const last = loader.stats().epochs[2]!;
        const out = { rows: loader.stats().epochs.reduce((a, s) => a + s.rowsServedOnDevice, 0), pooled: last.pooledRows, resident: loader.isResident };
        await loader.close();
        return out;
      };
      const staged = await served(false, 750 * 2 ** 20);
      assert.ok(staged.rows > 0 && staged.pooled > 0 && staged.pooled < n, `staged: a partial pool serves rows (${JSON.stringify(staged)})`);
      const inPlace = await served('auto', 750 * 2 ** 20);
      assert.deepEqual(inPlace, { rows: 0, pooled: 0, resident: false }, 'in place: a partial pool would cost more than it saves');
      const roomy = await served('auto', 2 * 2 ** 30);
      assert.ok(roomy.resident, `in place with room for every sample: the pool fills and the loader turns resident (${JSON.stringify(roomy)})`);
    });

    it('times a full partial pool both ways, then stitches only if that paid, every row right (staged rows)', async (t) => {
      if (device !== 'sim') return;
      // As above: a pool of about 180 MiB of the 256 MiB (staged: the path of file sources).
      const { n, rowBytes, ds } = bigRows();
      const loader = await create(device, ds, { batchSize: 64, mode: 'streaming', prefetch: 4, pinSource: false, sim: { totalBytes: 750 * 2 ** 20 } });
      for (let e = 0; e < 6; e++) {
        const seen: number[] = [];
        for await (const b of loader.epoch(e)) {
          const x = (await host(b.get('x'))).data as Uint8Array;
          const got = await ids(b);
          got.forEach((id, r) => assert.equal(x[r * rowBytes + 5], id & 0xff, `epoch ${e}, row ${r}`));
          seen.push(...got);
        }
        assert.deepEqual(sorted(seen), range(n), `epoch ${e}: every sample once`);
      }
      const epochs = loader.stats().epochs;
      await loader.close();
      const phases = epochs.map((s) => s.vramPool);
      t.diagnostic(`phases: ${phases.join(', ')}`);
      const k = phases.indexOf('trial-stitch');
      assert.ok(k > 0 && phases.slice(0, k).every((p) => p === 'none' || p === 'filling'), `phases ${phases}`);
      assert.equal(phases[k + 1], 'trial-bypass', `phases ${phases}`);
      const chosen = phases.slice(k + 2);
      assert.ok(chosen.length > 0 && chosen.every((p) => p === chosen[0]) && (chosen[0] === 'stitching' || chosen[0] === 'dormant'), `phases ${phases}`);
      assert.ok(epochs[k]!.rowsServedOnDevice > 0, 'the stitch trial serves pooled rows');
      assert.equal(epochs[k + 1]!.rowsServedOnDevice, 0, 'the bypass trial reads every row across the bus');
      for (const s of epochs.slice(k + 2)) {
        if (s.vramPool === 'dormant') assert.equal(s.rowsServedOnDevice, 0);
        else assert.ok(s.rowsServedOnDevice > 0);
      }
    });

    it('lets two loaders share a mapped source and close in either order', async () => {
      const n = 64;
      const w = 32_768;
      const data = new Float64Array(n * w);
      for (let i = 0; i < n; i++) data.fill(i, i * w, (i + 1) * w);
      const ds = sources.arrays({ x: tensor(data, [n, w]), y: Int32Array.from(range(n)) });
      const a = await create(device, ds, { batchSize: 16, mode: 'streaming', vramPool: false });
      const b = await create(device, ds, { batchSize: 16, mode: 'streaming', vramPool: false });
      const check = async (l: DataLoader<AnyTensor>, e: number) => {
        for await (const batch of l.epoch(e)) {
          const x = (await host(batch.get('x'))).data as Float64Array;
          (await ids(batch)).forEach((id, r) => assert.equal(x[r * w + w - 1], id));
        }
      };
      await check(a, 0);
      await check(b, 0);
      await a.close();
      await check(b, 1);
      await b.close();
      assert.deepEqual(b.stats().memory, { device: 0, pinned: 0 });
    });

    it("falls back to staging with a warning when the source cannot be page-locked ('auto'), and fails with pinSource: true", async () => {
      if (device !== 'sim') return;
      const n = 40;
      const w = 131_072;
      const ds = sources.arrays({ x: tensor(new Float32Array(n * w).map((_, k) => Math.floor(k / w)), [n, w]), y: Int32Array.from(range(n)) });
      const warnings: string[] = [];
      const onWarning = (w: Error) => warnings.push(w.message);
      process.on('warning', onWarning);
      try {
        const loader = await create(device, ds, { batchSize: 8, mode: 'streaming', sim: { failMapHost: true } });
        const seen: number[] = [];
        for await (const b of loader.epoch(0)) {
          const x = (await host(b.get('x'))).data as Float32Array;
          (await ids(b)).forEach((id, r) => assert.equal(x[r * w + 7], id));
          seen.push(...(await ids(b)));
        }
        assert.deepEqual(sorted(seen), range(n));
        await loader.close();
        await new Promise((resolve) => setImmediate(resolve));
        assert.ok(warnings.some((m) => /page-locking the in-memory source .* failed.*staging instead/.test(m)), warnings.join('; '));
      } finally {
        process.off('warning', onWarning);
      }
      await assert.rejects(create(device, ds, { batchSize: 8, mode: 'streaming', pinSource: true, sim: { failMapHost: true } }), (e: Error & { code?: string }) => {
        assert.equal(e.code, 'ERR_PIN_SOURCE');
        assert.match(e.message, /pinSource: 'auto' or false/);
        return true;
      });
    });

    it('keeps each resident batch its own rows across back-to-back epochs (the next epoch\'s ids wait for the last gathers)', async () => {
      // Large rows and few batches per epoch: the device lags the host, so an epoch's id upload
      // races the previous epoch's queued gathers unless it waits for them.
      const n = 512;
      const rowBytes = 150_528;
      const data = new Uint8Array(n * rowBytes);
      for (let i = 0; i < n; i++) {
        data[i * rowBytes] = i & 0xff;
        data[i * rowBytes + 1] = i >> 8;
        data[(i + 1) * rowBytes - 1] = (i * 7) & 0xff;
      }
      const loader = await create(device, sources.arrays({ x: tensor(data, [n, rowBytes]) }), { batchSize: 128, mode: 'resident' });
      const kept: Batch<AnyTensor>[] = [];
      for (let e = 0; e < 24; e++) {
        let last: Batch<AnyTensor> | undefined;
        for await (const b of loader.epoch(e)) {
          last?.release();
          last = b.retain();
        }
        kept.push(last!);
      }
      for (const b of kept) {
        const x = (await host(b.get('x'))).data as Uint8Array;
        Array.from(b.sampleIds).forEach((id, r) => {
          assert.equal(x[r * rowBytes]! | (x[r * rowBytes + 1]! << 8), id, `epoch ${b.epoch}, row ${r}: holds sample ${id}`);
          assert.equal(x[(r + 1) * rowBytes - 1], (id * 7) & 0xff);
        });
        b.release();
      }
      await loader.close();
    });

    it('frees every device and page-locked byte on close, and refuses reads of surviving batches', async () => {
      const loader = await create(device, arraysDataset(40), { batchSize: 8, mode: 'streaming' });
      let kept: Batch<AnyTensor> | undefined;
      for await (const b of loader.epoch(0)) kept ??= b.retain();
      assert.ok(loader.stats().memory.device > 0);
      await loader.close();
      assert.deepEqual(loader.stats().memory, { device: 0, pinned: 0 });
      assert.throws(() => (kept!.get('x') as DeviceTensor).ptr, { code: 'ERR_LOADER_CLOSED' });
    });
  });
}
