// Token-budget batches (batchTokens) with length buckets: no batch over the budget (padding
// counted), every sample exactly once per epoch on one rank and at most once under shards: 'drop',
// the same number of batches on every rank, epoch lengths and numBatches that match what is
// delivered, and resume — at random points, and from 2 ranks onto 3 — equal to the uninterrupted run.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type AnyTensor, DataLoader, DeviceTensor, type LoaderOptions, LoaderError, type Tensor, sources } from '../src/index.js';
import { Rng, toU64 } from '../src/sampler/rng.js';
import { epochPermutation } from '../src/sampler/rng.js';
import { tokenBatches } from '../src/sampler/token-batches.js';
import { range, sorted } from './fixtures.js';

/** Lengths 1…60, skewed short as text is. */
function lengthsOf(n: number, seed: number): Uint32Array {
  const rng = Rng.seed(seed);
  return Uint32Array.from({ length: n }, () => 1 + Math.floor(60 * rng.below(1000) ** 2 / 1e6));
}

function ids(n: number) {
  return sources.arrays({ id: Int32Array.from(range(n)) });
}

async function batchesOf(n: number, options: LoaderOptions, epochs: readonly number[], stopAfter = Infinity) {
  const loader = await DataLoader.create(ids(n), { mode: 'streaming', ...options });
  const out: number[][] = [];
  const lengths: number[] = [];
  outer: for (const e of epochs) {
    lengths.push(loader.epoch(e).length);
    for await (const b of loader.epoch(e)) {
      out.push([...((b.get('id') as Tensor).data as Int32Array)]);
      if (out.length === stopAfter) break outer;
    }
  }
  const state = loader.state();
  await loader.close();
  return { batches: out, lengths, state };
}

function assertWithinBudget(batches: readonly number[][], lengths: Uint32Array, budget: number, maxRows: number) {
  for (const b of batches) {
    const longest = Math.max(...b.map((i) => lengths[i]!));
    assert.ok(b.length * longest <= budget, `a batch of ${b.length} rows up to ${longest} tokens exceeds ${budget}`);
    assert.ok(b.length <= maxRows, `a batch of ${b.length} rows exceeds batchSize ${maxRows}`);
  }
}

describe('token-budget batches', () => {
  it('cut any order into batches within the budget, each pick exactly once (property, small sizes)', () => {
    const rng = Rng.seed(3);
    for (let trial = 0; trial < 200; trial++) {
      const n = 1 + rng.below(80);
      const lengths = Uint32Array.from({ length: n }, () => rng.below(20));
      const batchTokens = 20 + rng.below(60);
      const maxRows = 1 + rng.below(12);
      const order = epochPermutation(trial, 0, n);
      const list = tokenBatches(order, trial % 4, { batchTokens, maxRows, window: 1 + rng.below(40), seed: toU64(trial), shuffle: trial % 2 === 0, augment: 1, lengths });
      assert.deepEqual(sorted([...list.picks]), range(n), `trial ${trial}: every pick once`);
      const batches = range(list.bounds.length - 1).map((b) => [...list.picks.subarray(list.bounds[b]!, list.bounds[b + 1]!)]);
      assert.ok(batches.every((b) => b.length > 0), 'no empty batch');
      assertWithinBudget(batches, lengths, batchTokens, maxRows);
    }
  });

  it('group like lengths: padding inside a bucketed epoch is far below that of batches cut in order', () => {
    const n = 2000;
    const lengths = lengthsOf(n, 1);
    const order = epochPermutation(5, 0, n);
    const waste = (batches: number[][]) => {
      let padded = 0;
      let real = 0;
      for (const b of batches) {
        const rows = b.map((i) => lengths[i]!);
        padded += rows.length * Math.max(...rows);
        real += rows.reduce((a, c) => a + c, 0);
      }
      return 1 - real / padded;
    };
    const list = tokenBatches(order, 0, { batchTokens: 512, maxRows: 64, window: 1000, seed: toU64(5), shuffle: true, augment: 1, lengths });
    const bucketed = range(list.bounds.length - 1).map((b) => [...list.picks.subarray(list.bounds[b]!, list.bounds[b + 1]!)]);
    // The same budget cut greedily in the order's own sequence, without sorting.
    const inOrder: number[][] = [[]];
    for (const i of order) {
      const cur = inOrder[inOrder.length - 1]!;
      const longest = Math.max(lengths[i]!, ...cur.map((j) => lengths[j]!));
      if (cur.length > 0 && ((cur.length + 1) * longest > 512 || cur.length === 64)) inOrder.push([i]);
      else cur.push(i);
    }
    assert.ok(waste(bucketed) < waste(inOrder) / 2, `bucketed waste ${waste(bucketed)} vs in order ${waste(inOrder)}`);
    assert.ok(bucketed.length < inOrder.length, 'fewer batches for the same tokens');
  });

  it('through the loader: within the budget, every sample exactly once per epoch, epoch lengths as delivered', async () => {
    const n = 300;
    const lengths = lengthsOf(n, 2);
    const opts = { batchSize: 32, batchTokens: 256, bucketWindow: 100, lengths, seed: 4 };
    const run = await batchesOf(n, opts, [0, 1]);
    assertWithinBudget(run.batches, lengths, 256, 32);
    const e0 = run.batches.slice(0, run.lengths[0]);
    const e1 = run.batches.slice(run.lengths[0]);
    assert.equal(e1.length, run.lengths[1]);
    assert.deepEqual(sorted(e0.flat()), range(n));
    assert.deepEqual(sorted(e1.flat()), range(n));
    assert.notDeepEqual(e0, e1, 'each epoch cuts its own order');
    const loader = await DataLoader.create(ids(n), opts);
    assert.equal(loader.numBatches, run.lengths[0]);
    await loader.close();
  });

  it("a dataset's own `lengths` are used, and missing lengths or a sample over the budget are refused by name", async () => {
    const lengths = Uint32Array.from([3, 9, 4, 1]);
    const ds = { length: 4, lengths, get: (i: number) => ({ id: new Int32Array([i]) }) };
    const loader = await DataLoader.create(ds, { batchSize: 4, batchTokens: 9 });
    const got: number[][] = [];
    for await (const b of loader.epoch(0)) got.push([...((b.get('id') as Tensor).data as Int32Array)]);
    await loader.close();
    assert.deepEqual(sorted(got.flat()), [0, 1, 2, 3]);
    assertWithinBudget(got, lengths, 9, 4);
    await assert.rejects(DataLoader.create(ids(4), { batchSize: 4, batchTokens: 9 }), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_OPTION' && /`lengths`/.test(e.message));
    await assert.rejects(DataLoader.create(ds, { batchSize: 4, batchTokens: 8 }), (e: unknown) => e instanceof LoaderError && /`batchTokens`/.test(e.message) && /sample 1 has 9 tokens/.test(e.message));
    await assert.rejects(DataLoader.create(ds, { batchSize: 4, bucketWindow: 8 }), (e: unknown) => e instanceof LoaderError && /only with batchTokens/.test(e.message));
  });

  it("a mixture takes its parts' own `lengths`, in the concat layout", async () => {
    const part = (base: number, lengths: Uint32Array) => ({ length: lengths.length, lengths, get: (i: number) => ({ id: new Int32Array([base + i]) }) });
    const a = Uint32Array.from([5, 1, 2]);
    const b = Uint32Array.from([8, 8, 3, 4, 7]);
    const mix = sources.mix([{ dataset: part(0, a), weight: 1 }, { dataset: part(100, b), weight: 1 }]);
    const loader = await DataLoader.create(mix, { batchSize: 4, batchTokens: 8, seed: 2 });
    const tokens = (id: number) => (id < 100 ? a[id]! : b[id - 100]!);
    let batches = 0;
    for await (const batch of loader.epoch(0)) {
      const got = [...((batch.get('id') as Tensor).data as Int32Array)];
      assert.ok(got.length * Math.max(...got.map(tokens)) <= 8, `batch ${got} over 8 tokens`);
      batches++;
    }
    assert.equal(batches, loader.epoch(0).length);
    await loader.close();
  });

  for (const world of [2, 3]) {
    it(`'drop' over ${world} ranks: equal batch counts, within the budget, no sample twice, only the last few batches left out`, async () => {
      const n = 257;
      const lengths = lengthsOf(n, 6);
      const opts = { batchSize: 16, batchTokens: 200, lengths, seed: 9, shards: 'drop' as const };
      const solo = await batchesOf(n, opts, [0]);
      const ranks = await Promise.all(range(world).map((rank) => batchesOf(n, { ...opts, rank, worldSize: world }, [0])));
      const counts = ranks.map((r) => r.batches.length);
      assert.equal(new Set(counts).size, 1, `batch counts ${counts}`);
      assert.deepEqual(ranks.map((r) => r.lengths[0]), counts, 'epoch(e).length is what each rank gets');
      const all = ranks.flatMap((r) => r.batches.flat());
      assert.equal(new Set(all).size, all.length, 'no sample twice');
      // Global step s is batches [s·W, (s+1)·W) of the solo list; the last B mod W batches are left out.
      const kept = solo.batches.slice(0, counts[0]! * world);
      assert.deepEqual(sorted(all), sorted(kept.flat()));
      ranks.forEach((r) => assertWithinBudget(r.batches, lengths, 200, 16));
    });
  }

  it("'pad' over 3 ranks: equal batch counts and every sample at least once", async () => {
    const n = 200;
    const lengths = lengthsOf(n, 8);
    const opts = { batchSize: 16, batchTokens: 180, lengths, seed: 2, shards: 'pad' as const };
    const ranks = await Promise.all(range(3).map((rank) => batchesOf(n, { ...opts, rank, worldSize: 3 }, [0])));
    assert.equal(new Set(ranks.map((r) => r.batches.length)).size, 1);
    assert.deepEqual(sorted([...new Set(ranks.flatMap((r) => r.batches.flat()))]), range(n));
  });
});

describe('token-budget batches on every device and mode', () => {
  it('cpu and sim, resident and streaming (and a mixture on each) deliver the same batches', async () => {
    const n = 150;
    const lengths = lengthsOf(n, 31);
    const host = async (t: AnyTensor): Promise<Tensor> => (t instanceof DeviceTensor ? t.toHost() : t);
    const runs: number[][][] = [];
    for (const device of ['cpu', 'sim'] as const) {
      for (const mode of ['resident', 'streaming'] as const) {
        for (const mixed of [false, true]) {
          const ds = mixed ? sources.mix([{ dataset: ids(50), weight: 1 }, { dataset: sources.arrays({ id: Int32Array.from(range(100), (i) => 50 + i) }), weight: 2 }]) : ids(n);
          const loader = await DataLoader.create(ds, { batchSize: 16, batchTokens: 200, lengths, seed: 6, device, mode, pinSource: false });
          const got: number[][] = [];
          for await (const b of loader.epoch(1)) {
            got.push([...((await host(b.get('id'))).data as Int32Array)]);
            b.release();
          }
          await loader.close();
          assertWithinBudget(got, lengths, 200, 16);
          if (!mixed) assert.deepEqual(sorted(got.flat()), range(n), `${device} ${mode}: each sample once`);
          runs.push(got);
        }
      }
    }
    for (let i = 2; i < runs.length; i++) assert.deepEqual(runs[i], runs[i % 2], `run ${i} equals run ${i % 2}`);
  });
});

describe('token-budget resume', () => {
  const n = 240;
  const lengths = lengthsOf(n, 12);
  const opts = { batchSize: 24, batchTokens: 300, bucketWindow: 80, lengths, seed: 17, dropLast: false };

  it('a resume at random points, across epochs, delivers exactly the uninterrupted run', async () => {
    const whole = await batchesOf(n, opts, [0, 1, 2]);
    const rng = Rng.seed(4);
    for (let trial = 0; trial < 6; trial++) {
      const stop = 1 + rng.below(whole.batches.length - 1);
      const first = await batchesOf(n, opts, [0, 1, 2], stop);
      const { epoch } = first.state;
      const rest = await batchesOf(n, { ...opts, resume: first.state }, range(3 - epoch).map((k) => epoch + k));
      assert.deepEqual([...first.batches, ...rest.batches], whole.batches, `stopped after ${stop} batches`);
    }
  });

  it('2 ranks resumed onto 3 deliver exactly the rest of the epoch’s batches, with equal counts', async () => {
    const drop = { ...opts, shards: 'drop' as const };
    const solo = (await batchesOf(n, drop, [0])).batches;
    const steps = 2;
    const before = await Promise.all([0, 1].map((rank) => batchesOf(n, { ...drop, rank, worldSize: 2 }, [0], steps)));
    const state = before[0]!.state;
    assert.equal(state.position, solo.slice(0, steps * 2).flat().length, 'the position counts the picks of the consumed global steps');
    const after = await Promise.all([0, 1, 2].map((rank) => batchesOf(n, { ...drop, rank, worldSize: 3, resume: state }, [0])));
    assert.equal(new Set(after.map((r) => r.batches.length)).size, 1);
    const m = after[0]!.batches.length;
    assert.equal(m, Math.floor((solo.length - steps * 2) / 3));
    const delivered = [...before, ...after].flatMap((r) => r.batches.flat());
    assert.deepEqual(sorted(delivered), sorted(solo.slice(0, steps * 2 + 3 * m).flat()));
  });

  it('a mid-epoch resume with another batchTokens is refused, naming the knob; at an epoch start it is allowed', async () => {
    const first = await batchesOf(n, opts, [0], 3);
    await assert.rejects(
      DataLoader.create(ids(n), { ...opts, batchTokens: 301, resume: first.state }),
      (e: unknown) => e instanceof LoaderError && e.code === 'ERR_RESUME_MISMATCH' && /batchTokens/.test(e.message),
    );
    const done = await batchesOf(n, opts, [0]);
    const loader = await DataLoader.create(ids(n), { ...opts, batchTokens: 400, resume: done.state });
    assert.equal(loader.state().epoch, 1);
    await loader.close();
  });

  it('a mixture cut by token budget keeps each part’s samples once per part epoch and resumes exactly', async () => {
    const part = (p: number, k: number) => {
      const ds = sources.arrays({ id: Int32Array.from({ length: k }, (_, i) => p * 1000 + i) });
      return ds;
    };
    const mixLengths = Uint32Array.from(range(90), (i) => 1 + (i * 7) % 40);
    const make = () => sources.mix([{ dataset: part(0, 30), weight: 1 }, { dataset: part(1, 60), weight: 1 }]);
    const mOpts = { batchSize: 8, batchTokens: 160, lengths: mixLengths, seed: 3, mode: 'streaming' as const };
    const run = async (options: LoaderOptions, stopAfter = Infinity) => {
      const loader = await DataLoader.create(make(), options);
      const got: number[][] = [];
      for await (const b of loader.epoch(options.resume?.epoch ?? 0)) {
        got.push([...((b.get('id') as Tensor).data as Int32Array)]);
        if (got.length === stopAfter) break;
      }
      const state = loader.state();
      await loader.close();
      return { got, state };
    };
    const whole = await run(mOpts);
    const tokenOf = (id: number) => mixLengths[Math.floor(id / 1000) * 30 + (id % 1000)]!;
    for (const b of whole.got) assert.ok(b.length * Math.max(...b.map(tokenOf)) <= 160);
    // 45 draws of each part: the 30-sample part's first epoch whole and half of its second; the 60-sample part's 45 all distinct.
    const seen = new Map<number, number>();
    for (const id of whole.got.flat()) seen.set(id, (seen.get(id) ?? 0) + 1);
    const small = range(30).map((i) => seen.get(i) ?? 0);
    assert.ok(small.every((c) => c === 1 || c === 2) && small.filter((c) => c === 2).length === 15, `part 0 counts ${small}`);
    assert.equal(range(60).filter((i) => seen.has(1000 + i)).length, 45);
    assert.ok(range(60).every((i) => (seen.get(1000 + i) ?? 0) <= 1));
    const first = await run(mOpts, 4);
    const rest = await run({ ...mOpts, resume: first.state });
    assert.deepEqual([...first.got, ...rest.got], whole.got);
  });
});
