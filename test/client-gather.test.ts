// The loader's side of `stoker serve`'s client gather (src/pipeline/client-gather.ts): a resident
// loader hands out its columns and per-epoch plans, and the state after k batches a client took is
// the state after k batches of the loader's own loop — so resume means the same on both routes.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DataLoader, type LoaderState, sources, tensor } from '../src/index.js';
import { kClientGather } from '../src/pipeline/client-gather.js';
import { arraysDataset, scriptedDataset, ys } from './fixtures.js';

/** The rows of each batch of a plan, as sample ids. */
function planBatches(plan: { batches: number; samples: Uint32Array; start(b: number): number; end(b: number): number }): number[][] {
  return Array.from({ length: plan.batches }, (_, b) => [...plan.samples.subarray(plan.start(b), plan.end(b))]);
}

async function loopBatches(loader: DataLoader, epoch: number, take = Infinity): Promise<{ ids: number[][]; state: LoaderState }> {
  const ids: number[][] = [];
  for await (const b of loader.epoch(epoch)) {
    ids.push(ys(b));
    b.release();
    if (ids.length >= take) break;
  }
  return { ids, state: loader.state() };
}

describe('client gather: the loader hands out its resident columns and plans', () => {
  it('exports every column as it is (dtype, row shape, rows, bytes) in the order of the names', async () => {
    const loader = await DataLoader.create(arraysDataset(30), { batchSize: 8, mode: 'resident' });
    const g = loader[kClientGather]()!;
    assert.ok(g !== undefined);
    assert.deepEqual(g.columns.map((c) => [c.name, c.dtype, c.shape, c.rows, c.bytes]), [['x', 'float32', [4], 30, 30 * 16], ['y', 'int32', [], 30, 30 * 4]]);
    const x = new Float32Array(g.columns[0]!.data!.buffer, g.columns[0]!.data!.byteOffset, 30 * 4);
    assert.deepEqual([...x.subarray(7 * 4, 8 * 4)], [7, 7.5, 7.25, -7]);
    await loader.close();
  });

  it('plans the same batches as the loader\'s own loop, and the state after k batches taken is the loop\'s', async () => {
    const opts = { batchSize: 8, mode: 'resident' as const, seed: 3, dropLast: false };
    const a = await DataLoader.create(arraysDataset(30), opts);
    const b = await DataLoader.create(arraysDataset(30), opts);
    for (const epoch of [0, 1]) {
      const plan = a[kClientGather]()!.epoch(epoch);
      const loop = await loopBatches(b, epoch);
      assert.deepEqual(planBatches(plan.plan), loop.ids);
      assert.deepEqual(plan.at(plan.plan.batches), loop.state, 'all taken: the next epoch, position 0');
    }
    const plan = a[kClientGather]()!.epoch(2);
    const part = await loopBatches(b, 2, 2);
    assert.deepEqual(plan.at(2), part.state);
    assert.deepEqual(a.state(), part.state, 'at(k) is also loader.state()');
    assert.throws(() => plan.at(99), /taken/);
    await a.close();
    await b.close();
  });

  it('track() gives what at(k) would for every k, without taking anything: a position in the epoch\'s base state, or the next epoch\'s start', async () => {
    for (const [opts, n] of [[{ batchSize: 8, mode: 'resident' as const, seed: 3, dropLast: false }, 30], [{ batchSize: 8, mode: 'resident' as const, seed: 3, dropLast: true }, 30], [{ batchSize: 8, mode: 'resident' as const, shuffle: false }, 32]] as const) {
      const a = await DataLoader.create(arraysDataset(n), opts);
      const e = a[kClientGather]()!.epoch(0);
      const before = a.state();
      const { base, next, positions } = e.track();
      assert.deepEqual(a.state(), before, 'track() takes nothing');
      assert.equal(positions.length, e.plan.batches);
      for (let k = 1; k <= e.plan.batches; k++) {
        const p = positions[k - 1]!;
        assert.deepEqual(p < 0 ? next : { ...base, position: p }, e.at(k), `after ${k} batches`);
      }
      assert.equal(positions[e.plan.batches - 1], -1);
      await a.close();
    }
  });

  it('resumes mid-epoch: the plan of a resumed loader is the rest of the epoch, then whole epochs', async () => {
    const opts = { batchSize: 8, mode: 'resident' as const, seed: 5 };
    const full = await DataLoader.create(arraysDataset(40), opts);
    const e0 = planBatches(full[kClientGather]()!.epoch(0).plan);
    const mid = full[kClientGather]()!.epoch(1);
    const e1 = planBatches(mid.plan);
    const state = mid.at(2);
    const resumed = await DataLoader.create(arraysDataset(40), { ...opts, resume: state });
    assert.throws(() => resumed[kClientGather]()!.epoch(0), /resumes epoch 1/);
    assert.deepEqual(planBatches(resumed[kClientGather]()!.epoch(1).plan), e1.slice(2));
    assert.equal(e0.length, 5);
    await full.close();
    await resumed.close();
  });

  it('shards by rank: two ranks\' plans are disjoint and cover the epoch', async () => {
    const plans = await Promise.all([0, 1].map(async (rank) => {
      const l = await DataLoader.create(arraysDataset(32), { batchSize: 4, mode: 'resident', rank, worldSize: 2, seed: 9 });
      const ids = planBatches(l[kClientGather]()!.epoch(0).plan).flat();
      await l.close();
      return ids;
    }));
    assert.equal(plans[0]!.length, 16);
    assert.deepEqual([...plans[0]!, ...plans[1]!].sort((x, y) => x - y), Array.from({ length: 32 }, (_, i) => i));
  });

  it('declines what a gather cannot reproduce: a transform, a streaming loader, samples whose read failed', async () => {
    const t = await DataLoader.create(arraysDataset(16), { batchSize: 4, mode: 'resident', transform: (rows) => rows });
    assert.equal(t[kClientGather](), undefined);
    await t.close();
    const s = await DataLoader.create(arraysDataset(16), { batchSize: 4, mode: 'streaming' });
    assert.equal(s[kClientGather](), undefined);
    await s.close();
    const f = await DataLoader.create(scriptedDataset(16, { throwAt: [3] }), { batchSize: 4, mode: 'resident', errors: 'skip' });
    assert.equal(f[kClientGather](), undefined);
    await f.close();
    const ok = await DataLoader.create(sources.arrays({ v: tensor(new Uint8Array(12), [4, 3]) }), { batchSize: 2, mode: 'resident' });
    assert.ok(ok[kClientGather]() !== undefined);
    await ok.close();
  });
});
