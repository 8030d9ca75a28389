// Mixtures (sources.mix): proportions exact per window over many seeds, each part's draws whole
// shuffled epochs of that part, the mixture's position in loader.state() so that a resume at any
// point — on one rank, or from 2 ranks onto 3 — delivers what the uninterrupted run would, and
// weights changed at a resume applying from that point on.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DataLoader, type LoaderOptions, LoaderError, type Tensor, sources, tensor } from '../src/index.js';
import { MixSampler, apportion } from '../src/sampler/mix-sampler.js';
import { toU64 } from '../src/sampler/rng.js';
import { Rng } from '../src/sampler/rng.js';
import { range, sorted } from './fixtures.js';

/** Part p holds ids p·1000 + i, so a delivered id names its part and its sample. */
function part(p: number, n: number) {
  return sources.arrays({ id: Int32Array.from({ length: n }, (_, i) => p * 1000 + i) });
}

function mixOf(sizes: readonly number[], weights: readonly number[], options?: Parameters<typeof sources.mix>[1]) {
  return sources.mix(sizes.map((n, p) => ({ dataset: part(p, n), weight: weights[p]! })), options);
}

/** Ids of `epochs` epochs from `from` (a state to resume, or none), stopping after `stopAfter` batches. */
async function run(make: () => ReturnType<typeof mixOf>, options: LoaderOptions, epochs: readonly number[], stopAfter = Infinity) {
  const loader = await DataLoader.create(make(), { mode: 'streaming', ...options });
  const ids: number[] = [];
  let batches = 0;
  outer: for (const e of epochs) {
    for await (const b of loader.epoch(e)) {
      ids.push(...((b.get('id') as Tensor).data as Int32Array));
      if (++batches === stopAfter) break outer;
    }
  }
  const state = loader.state();
  await loader.close();
  return { ids, state };
}

/** Split each part's draws (in order) into chunks of its size: each chunk must be a permutation of the part. */
function assertWholePartEpochs(ids: readonly number[], sizes: readonly number[], where: string) {
  sizes.forEach((n, p) => {
    const mine = ids.filter((id) => Math.floor(id / 1000) === p).map((id) => id % 1000);
    for (let c = 0; c + n <= mine.length; c += n) assert.deepEqual(sorted(mine.slice(c, c + n)), range(n), `${where}: part ${p}, its epoch ${c / n}`);
    const rest = mine.slice(mine.length - (mine.length % n));
    assert.equal(new Set(rest).size, rest.length, `${where}: part ${p}'s unfinished epoch repeats no sample`);
  });
}

describe('mixture order', () => {
  it('apportions a window by largest remainder, ties to the lower part', () => {
    assert.deepEqual(apportion(8, [1, 3]), [2, 6]);
    assert.deepEqual(apportion(10, [1, 1, 1]), [4, 3, 3]);
    assert.deepEqual(apportion(7, [0.5, 0.25, 0.25]), [3, 2, 2]);
    assert.deepEqual(apportion(7, [0.6, 0.2, 0.2]), [4, 2, 1]);
    assert.deepEqual(apportion(5, [0, 1]), [0, 5]);
  });

  it('every window holds exactly its apportionment of the parts, over many seeds, sizes, weights and windows', () => {
    const rng = Rng.seed(7);
    for (let trial = 0; trial < 60; trial++) {
      const parts = 1 + rng.below(4);
      const sizes = Array.from({ length: parts }, () => 1 + rng.below(40));
      const weights = Array.from({ length: parts }, () => rng.below(5) + (rng.below(3) === 0 ? 0.5 : 0));
      if (!weights.some((w) => w > 0)) weights[0] = 1;
      const window = 1 + rng.below(16);
      const length = 1 + rng.below(120);
      const s = MixSampler.fresh({ sizes, length, seed: toU64(trial), shuffle: trial % 3 !== 0 }, weights, window);
      for (const epoch of [0, 1, 5]) {
        const owner = s.partsOf(epoch);
        for (let start = 0; start < length; start += window) {
          const size = Math.min(window, length - start);
          const got = sizes.map((_, p) => owner.subarray(start, start + size).filter((q) => q === p).length);
          assert.deepEqual(got, apportion(size, weights), `trial ${trial} epoch ${epoch} window at ${start}`);
        }
        const ids = s.indices(epoch);
        assert.equal(ids.length, length);
        // A pick belongs to the part the window gave its slot.
        let off = 0;
        const offsets = sizes.map((n) => ((off += n), off - n));
        ids.forEach((id, j) => assert.ok(id >= offsets[owner[j]!]! && id < offsets[owner[j]!]! + sizes[owner[j]!]!, `trial ${trial}: pick ${j}`));
      }
    }
  });

  it('each part draws its own epochs whole: a small part repeats, a large one is not repeated before it is finished', async () => {
    const sizes = [5, 40, 13];
    const { ids } = await run(() => mixOf(sizes, [2, 1, 1]), { batchSize: 4, seed: 11, dropLast: false }, range(6));
    assert.equal(ids.length, 6 * 58);
    assertWholePartEpochs(ids, sizes, 'six epochs');
  });

  it('the order is a pure function of the seed and the epoch, and a different seed gives another', async () => {
    const a = await run(() => mixOf([7, 30], [1, 1]), { batchSize: 6, seed: 3 }, [4]);
    const b = await run(() => mixOf([7, 30], [1, 1]), { batchSize: 6, seed: 3 }, [4]);
    const c = await run(() => mixOf([7, 30], [1, 1], { seed: 4 }), { batchSize: 6, seed: 3 }, [4]);
    assert.deepEqual(a.ids, b.ids);
    assert.notDeepEqual(a.ids, c.ids);
  });

  it('with window = batchSize every full batch holds the exact shares', async () => {
    const { ids } = await run(() => mixOf([9, 100, 31], [1, 5, 2]), { batchSize: 8, seed: 2 }, [0, 1]);
    for (let b = 0; b + 8 <= ids.length; b += 8) {
      const got = [0, 1, 2].map((p) => ids.slice(b, b + 8).filter((id) => Math.floor(id / 1000) === p).length);
      assert.deepEqual(got, apportion(8, [1, 5, 2]), `batch ${b / 8}`);
    }
  });

  it('`length` sets the picks of a mixture epoch', async () => {
    const loader = await DataLoader.create(mixOf([10, 10], [1, 1], { length: 64 }), { batchSize: 8 });
    assert.equal(loader.length, 64);
    assert.equal(loader.numBatches, 8);
    await loader.close();
  });

  it('refuses bad weights, options and a custom sampler, naming the knob', async () => {
    assert.throws(() => mixOf([3, 3], [1, -1]), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_OPTION' && /weight/.test(e.message));
    assert.throws(() => mixOf([3, 3], [0, 0]), (e: unknown) => e instanceof LoaderError && /\[0\]\.weight` must be a finite number > 0/.test(e.message));
    assert.throws(() => mixOf([3], [1], { window: 0 }), (e: unknown) => e instanceof LoaderError && /window/.test(e.message));
    await assert.rejects(
      DataLoader.create(mixOf([3, 3], [1, 1]), { batchSize: 2, sampler: { length: 6, indices: () => range(6) } }),
      (e: unknown) => e instanceof LoaderError && /sampler/.test(e.message),
    );
  });
});

describe('mixture resume', () => {
  const sizes = [6, 50, 17];
  const weights = [3, 2, 1];
  const make = () => mixOf(sizes, weights);

  it('a resume at random points, across epochs, delivers exactly the uninterrupted run', async () => {
    const opts = { batchSize: 5, seed: 21 };
    const whole = await run(make, opts, [0, 1, 2]);
    const rng = Rng.seed(99);
    for (let trial = 0; trial < 6; trial++) {
      const stop = 1 + rng.below(whole.ids.length / 5 - 1);
      const first = await run(make, opts, [0, 1, 2], stop);
      const { epoch } = first.state;
      const rest = await run(make, { ...opts, resume: first.state }, range(3 - epoch).map((k) => epoch + k));
      assert.deepEqual([...first.ids, ...rest.ids], whole.ids, `stopped after ${stop} batches`);
      assert.equal(first.state.mix?.parts.length, 3);
    }
  });

  it('2 ranks resumed onto 3 deliver exactly the rest of the global order', async () => {
    const opts = { batchSize: 4, seed: 8, shards: 'drop' as const, dropLast: false };
    const solo = (await run(make, opts, [0])).ids;
    const steps = 3;
    const before = await Promise.all([0, 1].map((rank) => run(make, { ...opts, rank, worldSize: 2 }, [0], steps)));
    const state = before[0]!.state;
    assert.equal(state.position, steps * 4 * 2);
    const after = await Promise.all([0, 1, 2].map((rank) => run(make, { ...opts, rank, worldSize: 3, resume: state }, [0])));
    const delivered = [...before.flatMap((r) => r.ids), ...after.flatMap((r) => r.ids)];
    const m = Math.floor((solo.length - state.position) / 3);
    assert.deepEqual(sorted(delivered), sorted(solo.slice(0, state.position + 3 * m)));
  });

  it('weights changed at a resume apply from the resume point; the picks before it and each part’s epochs stay whole', async () => {
    const opts = { batchSize: 6, seed: 5, dropLast: false };
    const first = await run(make, opts, [0, 1], 4);
    const other = () => mixOf(sizes, [1, 1, 4]);
    const rest = await run(other, { ...opts, resume: first.state }, [0, 1, 2]);
    const whole = await run(make, opts, [0]);
    assert.deepEqual(first.ids, whole.ids.slice(0, 24), 'the same start');
    // Epoch 0 has 73 picks: windows of 6 from the resume point 24 up to 72, then epoch 1's from 0.
    const rest0 = rest.ids.slice(0, 73 - 24);
    const rest1 = rest.ids.slice(73 - 24, 73 - 24 + 73);
    for (const [ids, upTo, what] of [[rest0, 48, 'epoch 0 after the resume'], [rest1, 72, 'epoch 1']] as const) {
      for (let b = 0; b < upTo; b += 6) {
        const got = [0, 1, 2].map((p) => ids.slice(b, b + 6).filter((id) => Math.floor(id / 1000) === p).length);
        assert.deepEqual(got, apportion(6, [1, 1, 4]), `${what}: batch ${b / 6}`);
      }
    }
    assertWholePartEpochs([...first.ids, ...rest.ids], sizes, 'across the change');
    // The state after the change records both segments of that epoch, then one in the next.
    const mid = await run(other, { ...opts, resume: first.state }, [0], 1);
    assert.deepEqual(mid.state.mix?.segments.map((s) => [s.from, s.weights]), [[0, weights], [24, [1, 1, 4]]]);
    const again = await run(other, { ...opts, resume: mid.state }, [0, 1, 2]);
    assert.deepEqual([...mid.ids, ...again.ids], rest.ids, 'a second resume without a change continues the changed run exactly');
  });

  it('reader workers deliver the same mixture as the main thread', async () => {
    const opts = { batchSize: 5, seed: 4 };
    const main = await run(make, { ...opts, workers: 0 }, [0, 1]);
    const workers = await run(make, { ...opts, workers: 1 }, [0, 1]);
    assert.deepEqual(workers.ids, main.ids);
  });
});

describe('mixture resume refusals', () => {
  it('refuses a state whose parts or mixture seed differ, naming what changed', async () => {
    const first = await run(() => mixOf([6, 20], [1, 1]), { batchSize: 4, seed: 1 }, [0], 2);
    await assert.rejects(
      DataLoader.create(mixOf([7, 19], [1, 1]), { batchSize: 4, seed: 1, resume: first.state }),
      (e: unknown) => e instanceof LoaderError && e.code === 'ERR_RESUME_MISMATCH' && /same parts/.test(e.message),
    );
    await assert.rejects(
      DataLoader.create(mixOf([6, 20], [1, 1], { seed: 9 }), { batchSize: 4, seed: 1, resume: first.state }),
      (e: unknown) => e instanceof LoaderError && e.code === 'ERR_RESUME_MISMATCH' && /mixture seed/.test(e.message),
    );
    const plain = await run(() => sources.concat([part(0, 6), part(1, 20)]) as ReturnType<typeof mixOf>, { batchSize: 4, seed: 1 }, [0], 2);
    await assert.rejects(
      DataLoader.create(mixOf([6, 20], [1, 1]), { batchSize: 4, seed: 1, resume: plain.state }),
      (e: unknown) => e instanceof LoaderError && e.code === 'ERR_RESUME_MISMATCH' && /order/.test(e.message),
    );
  });
});

describe('a mixture is checked at create', () => {
  const refused = (pattern: RegExp) => (e: unknown) => {
    assert.ok(e instanceof LoaderError, String(e));
    assert.equal(e.code, 'ERR_INVALID_OPTION', e.message);
    assert.match(e.message, pattern);
    return true;
  };

  it('a weight of 0 is refused, pointing at dropping the part', () => {
    assert.throws(() => mixOf([3, 3], [1, 0]), refused(/`sources.mix\(parts\)\[1\].weight` must be a finite number > 0, got 0. A part of weight 0 is never drawn: drop it from the parts/));
  });

  it('negative, NaN, infinite and missing weights are refused, naming the part', () => {
    for (const w of [-1, Number.NaN, Number.POSITIVE_INFINITY, undefined, '1']) {
      assert.throws(() => sources.mix([{ dataset: part(0, 3), weight: 1 }, { dataset: part(1, 3), weight: w as number }]), refused(/`sources.mix\(parts\)\[1\].weight` must be a finite number > 0/));
    }
  });

  it('a misspelt key of a part is refused with the key meant', () => {
    assert.throws(() => sources.mix([{ dataset: part(0, 3), weight: 1 }, { dataset: part(1, 3), weight: 1, wieght: 2 } as never]), refused(/unknown `sources.mix parts\[1\]` option "wieght"; did you mean `weight`\?/));
  });

  // Parts whose samples differ used to fail the first batch that drew from the odd part.
  const SCHEMAS: readonly (readonly [string, Parameters<typeof sources.arrays>[0], RegExp])[] = [
    ['another dtype', { id: new Float32Array(4) }, /part 1's field `id` is float32 \[\] but part 0's is int32 \[\]/],
    ['another shape', { id: tensor(new Int32Array(8), [4, 2]) }, /part 1's field `id` is int32 \[2\] but part 0's is int32 \[\]/],
    ['another field name', { label: new Int32Array(4) }, /part 1 has fields \{ label \} but part 0 has \{ id \}: every part must give the same fields/],
    ['a field more', { id: new Int32Array(4), extra: new Int32Array(4) }, /part 1 has fields \{ id, extra \} but part 0 has \{ id \}/],
  ];
  for (const [name, columns, pattern] of SCHEMAS) {
    it(`parts whose samples differ (${name}) are refused at create, naming the part and the field`, async () => {
      const mix = sources.mix([{ dataset: part(0, 6), weight: 1 }, { dataset: sources.arrays(columns), weight: 1 }]);
      await assert.rejects(DataLoader.create(mix, { batchSize: 4, mode: 'streaming' }), (e: unknown) => {
        assert.ok(e instanceof LoaderError, String(e));
        assert.equal(e.code, 'ERR_SAMPLE_MISMATCH', e.message);
        assert.match(e.message, /^sources.mix: /);
        assert.match(e.message, pattern);
        return true;
      });
    });
  }

  it('parts with the same fields but ragged rows of other lengths are accepted', async () => {
    const doc = (base: number) => ({
      length: 4, ragged: ['tokens'], raggedMax: { tokens: 8 },
      get: (i: number) => ({ tokens: Int32Array.from({ length: 1 + ((i + base) % 8) }, (_, k) => k) }),
    });
    const mix = sources.mix([{ dataset: doc(0), weight: 1 }, { dataset: doc(5), weight: 1 }]);
    const loader = await DataLoader.create(mix, { batchSize: 4, collate: { tokens: 'pad' } });
    assert.equal(loader.numBatches, 2);
    await loader.close();
  });

  it('a field made ragged by the collate option alone may differ in its first dimension too', async () => {
    const doc = (base: number) => ({ length: 4, get: (i: number) => ({ tokens: Int32Array.from({ length: 1 + ((i + base) % 8) }, (_, k) => k), label: i }) });
    const mix = sources.mix([{ dataset: doc(0), weight: 1 }, { dataset: doc(5), weight: 1 }]);
    const loader = await DataLoader.create(mix, { batchSize: 4, collate: { tokens: { pad: { maxLength: 8 } } } });
    assert.equal(loader.numBatches, 2);
    await loader.close();
  });
});
