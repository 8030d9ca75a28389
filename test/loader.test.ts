// The loader's behaviour on the CPU, in both modes: reference §10.1's batching, order, coverage,
// names, metadata and augmentation tests, carried over.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DataLoader, type LoaderOptions, PickKey, Tensor, sources, tensor } from '../src/index.js';
import { MODES, arraysDataset, batchDataset, collect, epochIds, range, scriptedDataset, sorted, ys } from './fixtures.js';

for (const mode of MODES) {
  describe(`DataLoader on cpu, ${mode} mode`, () => {
    const make = (ds: Parameters<typeof DataLoader.create>[0], opts: Omit<LoaderOptions, 'mode' | 'device'>) => DataLoader.create(ds, { ...opts, mode });

    it('cuts 20 samples into 4 batches of 5 with shapes [5, 4] and [5]', async () => {
      const loader = await make(arraysDataset(20), { batchSize: 5 });
      assert.equal(loader.isResident, mode === 'resident');
      const batches = await collect(loader.epoch(0));
      assert.equal(batches.length, 4);
      for (const b of batches) {
        assert.deepEqual(b.get('x').shape, [5, 4]);
        assert.deepEqual(b.get('y').shape, [5]);
        assert.equal(b.rows, 5);
      }
      await loader.close();
    });

    it('drops the short last batch by default (22 / 5 → 4 batches)', async () => {
      const loader = await make(arraysDataset(22), { batchSize: 5 });
      assert.equal(loader.numBatches, 4);
      assert.equal((await collect(loader.epoch(0))).length, 4);
    });

    it('keeps the short last batch with dropLast: false (22 / 5 → 5 batches, the last of 2 rows)', async () => {
      const loader = await make(arraysDataset(22), { batchSize: 5, dropLast: false });
      const batches = await collect(loader.epoch(0));
      assert.deepEqual(batches.map((b) => b.rows), [5, 5, 5, 5, 2]);
      assert.equal(loader.epoch(0).length, 5);
    });

    it('counts batches by the drop-last arithmetic', async () => {
      const cases: [number, number, boolean, number][] = [
        [100, 10, true, 10], [105, 10, true, 10], [105, 10, false, 11], [23, 5, true, 4], [23, 5, false, 5],
        [5, 100, false, 1], [5, 100, true, 0], [3, 10, false, 1], [3, 10, true, 0], [1, 1, true, 1],
      ];
      for (const [n, bs, dropLast, expected] of cases) {
        const loader = await make(arraysDataset(n), { batchSize: bs, dropLast });
        assert.equal(loader.numBatches, expected, `${n}/${bs} dropLast=${dropLast}`);
        const batches = await collect(loader.epoch(0));
        assert.equal(batches.length, expected, `${n}/${bs} dropLast=${dropLast} delivered`);
        assert.equal(batches.reduce((s, b) => s + b.rows, 0), dropLast ? expected * bs : n);
      }
    });

    it('delivers 0 … n−1 in order every epoch with shuffle: false', async () => {
      const loader = await make(arraysDataset(12), { batchSize: 4, shuffle: false });
      const batches = await collect(loader.epoch(0));
      assert.deepEqual(batches.map(ys), [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]);
      assert.deepEqual(await epochIds(loader.epoch(1)), range(12));
    });

    it('shuffles each epoch differently', async () => {
      const loader = await make(arraysDataset(50), { batchSize: 5 });
      const e0 = await epochIds(loader.epoch(0));
      const e1 = await epochIds(loader.epoch(1));
      assert.notDeepEqual(e0, e1);
      assert.deepEqual(sorted(e0), range(50));
    });

    it('reproduces the order for the same seed and epoch across loaders, and not for another seed', async () => {
      const a = await make(arraysDataset(50), { batchSize: 5, seed: 99 });
      const b = await make(arraysDataset(50), { batchSize: 5, seed: 99 });
      const c = await make(arraysDataset(50), { batchSize: 5, seed: 100 });
      const order = await epochIds(a.epoch(3));
      assert.deepEqual(await epochIds(b.epoch(3)), order);
      assert.notDeepEqual(await epochIds(c.epoch(3)), order);
    });

    it('delivers the same order in both modes', async () => {
      const other = mode === 'resident' ? 'streaming' : 'resident';
      const a = await make(arraysDataset(40), { batchSize: 6, seed: 7, dropLast: false });
      const b = await DataLoader.create(arraysDataset(40), { batchSize: 6, seed: 7, dropLast: false, mode: other });
      assert.deepEqual(await epochIds(a.epoch(2)), await epochIds(b.epoch(2)));
    });

    it('visits every sample exactly once per epoch', async () => {
      const loader = await make(arraysDataset(25), { batchSize: 7, dropLast: false });
      for (let e = 0; e < 3; e++) assert.deepEqual(sorted(await epochIds(loader.epoch(e))), range(25));
    });

    it('delivers each row with the content of its sample id', async () => {
      const loader = await make(arraysDataset(30), { batchSize: 8, dropLast: false });
      for await (const b of loader.epoch(1)) {
        const x = b.get('x').data as Float32Array;
        b.sampleIds.forEach((id, r) => assert.deepEqual(Array.from(x.subarray(r * 4, r * 4 + 4)), [id, id + 0.5, id + 0.25, -id]));
        assert.deepEqual(ys(b), Array.from(b.sampleIds));
        assert.deepEqual(Array.from(b.picks), Array.from(b.sampleIds));
      }
    });

    it('batches a per-batch dataset (30 / 10 → 3 batches) with one call per batch', async () => {
      const ds = batchDataset(30);
      const loader = await make(ds, { batchSize: 10 });
      const calls = ds.calls;
      const ids = await epochIds(loader.epoch(0));
      assert.deepEqual(sorted(ids), range(30));
      if (mode === 'streaming') assert.equal(ds.calls - calls, 3);
    });

    it('stacks a per-sample dataset field by field, records keep their names', async () => {
      const ds = scriptedDataset(9);
      const loader = await make(ds, { batchSize: 3, shuffle: false });
      assert.deepEqual(loader.names, ['x', 'y']);
      const [first] = await collect(loader.epoch(0));
      assert.deepEqual(first!.get('x').toArray(), [[0, 0.5], [1, 1.5], [2, 2.5]]);
      assert.deepEqual(first!.get('x').shape, [3, 2]);
    });

    it('reads sample 0 once to learn the shape, then once per pick', async () => {
      const ds = scriptedDataset(12);
      const loader = await make(ds, { batchSize: 4, sampleCache: false });
      assert.equal(ds.gets, mode === 'resident' ? 1 + 12 : 1);
      await epochIds(loader.epoch(0));
      await epochIds(loader.epoch(1));
      assert.equal(ds.gets, 1 + 12 * (mode === 'resident' ? 1 : 2));
    });

    it('keeps shapes of a multi-target sample with four fields', async () => {
      const n = 10;
      const ds = {
        length: n,
        get: (i: number) => [tensor(new Float32Array(6).fill(i), [2, 3]), Int32Array.of(i), i * 2, BigInt(i)],
      };
      const loader = await make(ds, { batchSize: 5 });
      assert.deepEqual(loader.names, ['0', '1', '2', '3']);
      const [b] = await collect(loader.epoch(0));
      assert.deepEqual(b!.at(0).shape, [5, 2, 3]);
      assert.deepEqual(b!.at(1).shape, [5, 1]);
      assert.deepEqual(b!.at(2).shape, [5]);
      assert.equal(b!.at(2).dtype, 'float64');
      assert.equal(b!.at(3).dtype, 'int64');
      const ids = b!.sampleIds;
      assert.deepEqual(Array.from(b!.at(3).data as BigInt64Array), Array.from(ids, (i) => BigInt(i)));
      assert.deepEqual(Array.from(b!.at(2).data as Float64Array), Array.from(ids, (i) => i * 2));
    });

    it('names fields by `names`, and gives positions and names the same tensor', async () => {
      const loader = await make(arraysDataset(10), { batchSize: 5, names: ['input', 'target'] });
      assert.deepEqual(loader.names, ['input', 'target']);
      const [b] = await collect(loader.epoch(0));
      assert.equal(b!.has('input'), true);
      assert.equal(b!.has('x'), false);
      assert.deepEqual(b!.names, ['input', 'target']);
      assert.equal(b!.get('input').data, b!.at(0).data);
      assert.equal(b!.get('target').data, b!.at(1).data);
      assert.throws(() => b!.get('x'), { code: 'ERR_UNKNOWN_FIELD', message: /unknown field "x". Available: \[input, target\]/ });
      assert.throws(() => b!.at(2), { code: 'ERR_UNKNOWN_FIELD' });
    });

    it('names positional fields "0", "1", … when none are given', async () => {
      const loader = await make({ length: 4, get: (i: number) => [Int32Array.of(i), Float32Array.of(i)] }, { batchSize: 2 });
      assert.deepEqual(loader.names, ['0', '1']);
    });

    it('reports its metadata: 50 samples, batch 8 → 6 batches', async () => {
      const loader = await make(arraysDataset(50), { batchSize: 8 });
      assert.equal(loader.length, 50);
      assert.equal(loader.batchSize, 8);
      assert.equal(loader.numBatches, 6);
      assert.equal(loader.device, 'cpu');
      assert.equal(loader.epoch(0).length, 6);
    });

    it('handles a dataset of one sample with batch size 1', async () => {
      const loader = await make(arraysDataset(1), { batchSize: 1 });
      const batches = await collect(loader.epoch(0));
      assert.equal(batches.length, 1);
      assert.deepEqual(ys(batches[0]!), [0]);
    });

    it('schedules k views of every sample with augment(k): n=8, k=2, bs 4 → 4 batches, each sample twice', async () => {
      const loader = await make(arraysDataset(8), { batchSize: 4, augment: 2 });
      assert.equal(loader.length, 16);
      assert.equal(loader.numBatches, 4);
      const batches = await collect(loader.epoch(0));
      assert.equal(batches.length, 4);
      const ids = batches.flatMap(ys);
      assert.deepEqual(sorted(ids), range(8).flatMap((i) => [i, i]));
      const picks = batches.flatMap((b) => Array.from(b.picks));
      assert.deepEqual(sorted(picks), range(16));
      for (const b of batches) b.picks.forEach((p, r) => assert.equal(b.sampleIds[r], Math.floor(p / 2)));
    });

    it('keys the transform by pick, and two loaders give identical streams', async () => {
      const transform = (rows: readonly Tensor[], keys: readonly PickKey[]) => {
        const x = rows[0]!.data as Float32Array;
        keys.forEach((k, r) => {
          const offset = k.repeat * 1000 + k.rng().below(100);
          for (let c = 0; c < 4; c++) x[r * 4 + c]! += offset;
        });
        return rows;
      };
      const run = async () => {
        const loader = await make(arraysDataset(10), { batchSize: 5, augment: 3, transform, seed: 5 });
        const out: number[][] = [];
        for await (const b of loader.epoch(1)) {
          const x = b.get('x').data as Float32Array;
          b.picks.forEach((p, r) => {
            const key = PickKey.fromPick(p, 3, 1, 5);
            const offset = key.repeat * 1000 + key.rng().below(100);
            assert.equal(x[r * 4], b.sampleIds[r]! + offset, 'row carries its own key\'s offset');
          });
          out.push(Array.from(x));
        }
        return out;
      };
      assert.deepEqual(await run(), await run());
    });

    it('never writes a transform back into the tiers: +1000 in place applies once per epoch', async () => {
      const loader = await make(arraysDataset(12), { batchSize: 4, transform: (rows) => {
        const x = rows[0]!.data as Float32Array;
        for (let i = 0; i < x.length; i += 4) x[i]! += 1000;
        return rows;
      } });
      for (let e = 0; e < 3; e++) {
        for await (const b of loader.epoch(e)) {
          const x = b.get('x').data as Float32Array;
          b.sampleIds.forEach((id, r) => assert.equal(x[r * 4], id + 1000));
          b.release();
        }
      }
    });

    it('lets a transform change dtype and trailing shape, keeping the row count', async () => {
      const loader = await make(arraysDataset(6), { batchSize: 3, transform: (rows) => [
        tensor(Float64Array.from(rows[0]!.data as Float32Array).subarray(0, rows[0]!.shape[0]! * 2), [rows[0]!.shape[0]!, 2]),
        rows[1]!,
      ] });
      const [b] = await collect(loader.epoch(0));
      assert.equal(b!.get('x').dtype, 'float64');
      assert.deepEqual(b!.get('x').shape, [3, 2]);
    });

    it('fails the batch of a transform that changes the row count or the field count', async () => {
      // A BatchError (the batch fails under `errors`), whose cause says what was wrong.
      const cause = (code: string, message: RegExp) => (e: { code?: string; cause?: { code?: string; message: string } }) =>
        e.code === 'ERR_BATCH_FAILED' && e.cause?.code === code && message.test(e.cause.message);
      const loader = await make(arraysDataset(6), { batchSize: 3, transform: (rows) => [rows[0]!.reshape([1, rows[0]!.size]), rows[1]!] });
      await assert.rejects(collect(loader.epoch(0)), cause('ERR_TRANSFORM_OUTPUT', /keep the row count/));
      const fewer = await make(arraysDataset(6), { batchSize: 3, transform: (rows) => [rows[0]!] });
      await assert.rejects(collect(fewer.epoch(0)), cause('ERR_TRANSFORM_OUTPUT', /returned 1 tensors but the batch has 2 fields/));
    });

    it('accepts an async transform', async () => {
      const loader = await make(arraysDataset(6), { batchSize: 3, transform: async (rows) => rows });
      assert.equal((await collect(loader.epoch(0))).length, 2);
    });

    it('delivers a full next epoch after the previous one was abandoned mid-way', async () => {
      const loader = await make(scriptedDataset(20, { async: true }), { batchSize: 2 });
      let seen = 0;
      for await (const b of loader.epoch(0)) {
        b.release();
        if (++seen === 2) break;
      }
      assert.deepEqual(sorted(await epochIds(loader.epoch(1))), range(20));
    });

    it('creating an epoch and never iterating it holds nothing', async () => {
      const loader = await make(arraysDataset(10), { batchSize: 5 });
      loader.epoch(0);
      loader.epoch(1);
      assert.equal((await collect(loader.epoch(2))).length, 2);
    });

    it('refuses a second live iterator, and allows one after the first ends', async () => {
      const loader = await make(arraysDataset(10), { batchSize: 2 });
      const first = loader.epoch(0)[Symbol.asyncIterator]();
      await first.next();
      const second = loader.epoch(1)[Symbol.asyncIterator]();
      await assert.rejects(second.next(), { code: 'ERR_EPOCH_ACTIVE' });
      await first.return!();
      assert.equal((await collect(loader.epoch(1))).length, 5);
    });

    it('takes a custom sampler: its picks, in its order', async () => {
      const sampler = { length: 6, indices: (e: number) => [5, 4, 3, 2, 1, 0].map((i) => (i + e) % 10) };
      const loader = await make(arraysDataset(10), { batchSize: 3, sampler });
      assert.equal(loader.length, 6);
      assert.deepEqual(await epochIds(loader.epoch(0)), [5, 4, 3, 2, 1, 0]);
      assert.deepEqual(await epochIds(loader.epoch(1)), [6, 5, 4, 3, 2, 1]);
    });

    it('rejects a custom sampler that returns the wrong count or an out-of-range pick', async () => {
      const short = await make(arraysDataset(10), { batchSize: 2, sampler: { length: 4, indices: () => [1, 2, 3] } });
      await assert.rejects(collect(short.epoch(0)), { code: 'ERR_SAMPLER_OUTPUT', message: /returned 3 picks but sampler.length is 4/ });
      const wide = await make(arraysDataset(10), { batchSize: 2, sampler: { length: 2, indices: () => [1, 10] } });
      await assert.rejects(collect(wide.epoch(0)), { code: 'ERR_SAMPLER_OUTPUT', message: /\[1\] is 10, outside the dataset's range \[0, 10\)/ });
      const frac = await make(arraysDataset(10), { batchSize: 2, sampler: { length: 1, indices: () => [0.5] } });
      await assert.rejects(collect(frac.epoch(0)), { code: 'ERR_SAMPLER_OUTPUT' });
      // The loader survives a bad epoch.
      await assert.rejects(collect(short.epoch(1)), { code: 'ERR_SAMPLER_OUTPUT' });
    });

    it('records per-epoch figures in stats()', async () => {
      const loader = await make(arraysDataset(20), { batchSize: 5 });
      await epochIds(loader.epoch(0));
      const it0 = loader.epoch(1)[Symbol.asyncIterator]();
      await it0.next();
      await it0.return!();
      const { epochs, mode: m, device } = loader.stats();
      assert.equal(m, mode);
      assert.equal(device, 'cpu');
      assert.equal(epochs.length, 2);
      assert.equal(epochs[0]!.batches, 4);
      assert.equal(epochs[0]!.rowsDelivered, 20);
      assert.equal(epochs[0]!.complete, true);
      assert.equal(epochs[0]!.rowsFetched, mode === 'streaming' ? 20 : 0);
      assert.ok(epochs[0]!.waitMs > 0);
      assert.equal(epochs[1]!.batches, 1);
      assert.equal(epochs[1]!.complete, false);
    });

    it('keeps a Tensor-returning record dataset and its dtypes', async () => {
      const ds = { length: 4, get: (i: number) => ({ half: tensor(Uint16Array.of(i), [1], 'float16'), big: BigInt64Array.of(BigInt(i)) }) };
      const loader = await make(ds, { batchSize: 2, shuffle: false });
      const [b] = await collect(loader.epoch(0));
      assert.equal(b!.get('half').dtype, 'float16');
      assert.equal(b!.get('big').dtype, 'int64');
    });
  });
}

describe('DataLoader mode choice on cpu', () => {
  it('is resident by default for in-memory arrays, with prefetch depth 0 and no-op setters', async () => {
    const loader = await DataLoader.create(arraysDataset(10), { batchSize: 5 });
    assert.equal(loader.isResident, true);
    assert.equal(loader.prefetchDepth, 0);
    loader.setPrefetchDepth(8);
    assert.equal(loader.prefetchDepth, 0);
    assert.equal(loader.autoResize(), 0);
    loader.setActivationReserve(1 << 20);
    assert.equal(loader.prefetchDepth, 0);
  });

  it('streams a dataset that reads samples on demand, however small, reading only the probe sample at create', async () => {
    // 'auto' is resident only for samples already held in memory: a get(i) source may decode files,
    // so create() must not read it whole (a bad sample would fail create, and the first batch would wait).
    for (const length of [1_000_000, 12]) {
      let gets = 0;
      const ds = { length, get: (i: number) => (gets++, { x: new Float32Array(length > 12 ? 65536 : 1).fill(i) }) };
      const loader = await DataLoader.create(ds, { batchSize: 4, mode: 'auto' });
      assert.equal(loader.isResident, false, `${length} samples`);
      assert.equal(gets, 1, 'create read only the probe sample');
      await loader.close();
    }
  });

  it('holds in-memory columns resident however they were made', async () => {
    const loader = await DataLoader.create(sources.arrays({ x: Float32Array.from({ length: 12 }, (_, i) => i) }), { batchSize: 4 });
    assert.equal(loader.isResident, true);
    await loader.close();
  });
});

describe('streaming depth on cpu', () => {
  it('starts at depth ≥ 2 and reflects setPrefetchDepth at once', async () => {
    const loader = await DataLoader.create(arraysDataset(40), { batchSize: 4, mode: 'streaming' });
    assert.ok(loader.prefetchDepth >= 2);
    await epochIds(loader.epoch(0));
    assert.equal(loader.prefetchDepth, 2, 'the CPU sizes a double buffer');
    loader.setPrefetchDepth(5);
    assert.equal(loader.prefetchDepth, 5);
    loader.setPrefetchDepth(0);
    assert.equal(loader.prefetchDepth, 1, 'a depth of 0 means a window of one batch');
  });

  it('autoResize() gives 2 on the CPU and pins it', async () => {
    const loader = await DataLoader.create(arraysDataset(40), { batchSize: 4, mode: 'streaming', prefetch: 7 });
    assert.equal(loader.prefetchDepth, 7);
    assert.equal(loader.autoResize(), 2);
    assert.equal(loader.prefetchDepth, 2);
  });

  it('keeps delivering every batch when the depth changes between and during epochs', async () => {
    const loader = await DataLoader.create(scriptedDataset(20, { async: true }), { batchSize: 4, mode: 'streaming', prefetch: 2 });
    assert.equal((await collect(loader.epoch(0))).length, 5);
    loader.setPrefetchDepth(4);
    const ids: number[] = [];
    let k = 0;
    for await (const b of loader.epoch(1)) {
      ids.push(...ys(b));
      loader.setPrefetchDepth(++k % 3 + 1);
    }
    assert.deepEqual(sorted(ids), range(20));
  });

  it('delivers all batches across epochs after an early drop with prefetch 2', async () => {
    const loader = await DataLoader.create(scriptedDataset(10, { async: true }), { batchSize: 1, mode: 'streaming', prefetch: 2 });
    for await (const _ of loader.epoch(0)) break;
    assert.equal((await collect(loader.epoch(1))).length, 10);
    assert.equal((await collect(loader.epoch(2))).length, 10);
  });
});

describe('the transform purity probe (development mode)', () => {
  it('catches a transform that draws randomness outside key.rng()', async () => {
    const loader = await DataLoader.create(arraysDataset(8), {
      batchSize: 4,
      transform: (rows) => {
        (rows[0]!.data as Float32Array)[0] = Math.random();
        return rows;
      },
    });
    await assert.rejects(collect(loader.epoch(0)), { code: 'ERR_IMPURE_TRANSFORM', message: /pure function of \(rows, keys\).*key\.rng\(\)/ });
  });

  it('accepts a keyed transform, including NaN outputs', async () => {
    const loader = await DataLoader.create(arraysDataset(8), {
      batchSize: 4,
      transform: (rows, keys) => {
        const x = rows[0]!.data as Float32Array;
        keys.forEach((k, r) => (x[r * 4] = k.rng().f32()));
        x[1] = Number.NaN;
        return rows;
      },
    });
    assert.equal((await collect(loader.epoch(0))).length, 2);
  });
});
