// Every knob is validated at create: a bad value throws a LoaderError naming the knob, the value
// and the fix. The reference's build-time errors keep their meaning.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { availableParallelism } from 'node:os';
import { DataLoader, type Dataset, type LoaderOptions, type SampleValue, type Tensor, sources, tensor } from '../src/index.js';
import { cudaAvailable } from '../src/device/cuda/driver.js';
import { resolveOptions } from '../src/options.js';
import { MAX_IN_FLIGHT, ringSlotsFromRam } from '../src/base/budget.js';
import { arraysDataset, range } from './fixtures.js';

const ds = arraysDataset(10);

async function rejectsWith(options: Record<string, unknown>, code: string, pattern: RegExp) {
  await assert.rejects(DataLoader.create(ds, options as unknown as LoaderOptions), (e: Error & { code?: string }) => {
    assert.equal(e.name, 'LoaderError');
    assert.equal(e.code, code, e.message);
    assert.match(e.message, pattern);
    return true;
  });
}

describe('option validation', () => {
  it('requires batchSize, an integer ≥ 1', async () => {
    await rejectsWith({}, 'ERR_INVALID_OPTION', /`batchSize` must be an integer ≥ 1, got undefined. It is required/);
    await rejectsWith({ batchSize: 0 }, 'ERR_INVALID_OPTION', /`batchSize` must be an integer ≥ 1, got 0/);
    await rejectsWith({ batchSize: 2.5 }, 'ERR_INVALID_OPTION', /got 2.5/);
    await rejectsWith({ batchSize: '8' }, 'ERR_INVALID_OPTION', /got "8"/);
  });

  it('refuses unknown options and suggests the knob meant', async () => {
    await rejectsWith({ batchSize: 4, batch_size: 4 }, 'ERR_INVALID_OPTION', /unknown option "batch_size"; did you mean `batchSize`\?/);
    await rejectsWith({ batchSize: 4, numWorkers: 2 }, 'ERR_INVALID_OPTION', /unknown option "numWorkers". Known options: batchSize/);
  });

  it('refuses non-object options', async () => {
    await assert.rejects(DataLoader.create(ds, null as unknown as LoaderOptions), { code: 'ERR_INVALID_OPTION' });
  });

  it('checks each boolean knob', async () => {
    for (const knob of ['dropLast', 'sampleCache', 'vramPool']) {
      await rejectsWith({ batchSize: 4, [knob]: 'yes' }, 'ERR_INVALID_OPTION', new RegExp(`\`${knob}\` must be true or false, got "yes"`));
    }
  });

  it("checks shuffle: true, false, 'block' or a block shuffle's { block, window, within }", async () => {
    await rejectsWith({ batchSize: 4, shuffle: 'yes' }, 'ERR_INVALID_OPTION', /`shuffle` must be true, false, 'block' or \{ block\?: 'parts' \| samples, window\?: blocks, within\?: boolean \}, got "yes"/);
    await rejectsWith({ batchSize: 4, shuffle: null }, 'ERR_INVALID_OPTION', /`shuffle` must be true, false, 'block'/);
    await rejectsWith({ batchSize: 4, shuffle: { windows: 4 } }, 'ERR_INVALID_OPTION', /unknown `shuffle` option "windows"; did you mean `window`\?/);
    await rejectsWith({ batchSize: 4, shuffle: { block: 0 } }, 'ERR_INVALID_OPTION', /`shuffle.block` must be 'parts' \(the dataset's shards, record batches or row groups\) or an integer ≥ 1 \(samples per block\), got 0/);
    await rejectsWith({ batchSize: 4, shuffle: { block: 'shards' } }, 'ERR_INVALID_OPTION', /`shuffle.block` must be 'parts'/);
    await rejectsWith({ batchSize: 4, shuffle: { window: 1.5 } }, 'ERR_INVALID_OPTION', /`shuffle.window` must be an integer ≥ 1 \(blocks whose samples are shuffled together\), got 1.5/);
    await rejectsWith({ batchSize: 4, shuffle: { within: 'no' } }, 'ERR_INVALID_OPTION', /`shuffle.within` must be true or false, got "no"/);
    await rejectsWith({ batchSize: 4, shuffle: { within: false, window: 4 } }, 'ERR_INVALID_OPTION', /`shuffle.window` must be left out with within: false, got 4. Without a shuffle within windows/);
    await rejectsWith({ batchSize: 4, shuffle: 'block', sampler: { length: 10, indices: () => range(10) } }, 'ERR_INVALID_OPTION', /`shuffle` must be true or false with a custom sampler, got "block". A custom sampler orders its own picks/);
    // The dataset decides the rest: parts exist or not, a mixture orders itself.
    await rejectsWith({ batchSize: 4, shuffle: { block: 'parts' } }, 'ERR_INVALID_OPTION', /`shuffle.block` must be a number of samples per block for a dataset without parts, got "parts". Tar shards, Arrow record batches/);
    const badParts = { length: 10, get: (i: number) => ({ y: tensor(Int32Array.of(i), [1]) }), partStarts: () => [0, 6, 4] };
    await assert.rejects(DataLoader.create(badParts, { batchSize: 4, shuffle: 'block' }), { code: 'ERR_INVALID_DATASET', message: /partStarts\(\) gives 4 for part 2 \(after 6, dataset length 10\)/ });
    const mix = sources.mix([{ dataset: arraysDataset(10), weight: 1 }, { dataset: arraysDataset(6), weight: 1 }]);
    await assert.rejects(DataLoader.create(mix, { batchSize: 4, shuffle: 'block' }), { code: 'ERR_INVALID_OPTION', message: /`shuffle` must be true or false for sources.mix, got "a block shuffle"/ });
    // Accepted: defaults (no parts: blocks of 65 536 samples, one block here, a window of 8).
    for (const shuffle of ['block', {}, { block: 3, window: 2 }, { within: false }, { block: 4, within: true }] as const) {
      const loader = await DataLoader.create(ds, { batchSize: 1, dropLast: false, shuffle });
      const got: number[] = [];
      for await (const b of loader.epoch(0)) got.push(...(b.get('y').data as Int32Array));
      assert.deepEqual([...got].sort((a, b) => a - b), range(10), JSON.stringify(shuffle));
      assert.equal(loader.state().order, 'block');
      await loader.close();
    }
  });

  it('checks seed: a non-negative integer or bigint', async () => {
    await rejectsWith({ batchSize: 4, seed: -1 }, 'ERR_INVALID_OPTION', /`seed` must be an integer in \[0, 2\^53\) or a bigint/);
    await rejectsWith({ batchSize: 4, seed: 1.5 }, 'ERR_INVALID_OPTION', /`seed`/);
    await rejectsWith({ batchSize: 4, seed: 2 ** 60 }, 'ERR_INVALID_OPTION', /`seed`/);
    const big = await DataLoader.create(ds, { batchSize: 4, seed: 2n ** 64n - 1n });
    assert.equal(big.numBatches, 2);
  });

  it('checks augment, and refuses augment with a custom sampler', async () => {
    await rejectsWith({ batchSize: 4, augment: 0 }, 'ERR_INVALID_OPTION', /`augment` must be an integer ≥ 1/);
    await rejectsWith({ batchSize: 4, augment: 2, sampler: { length: 10, indices: () => [] } }, 'ERR_AUGMENT_WITH_SAMPLER', /augment\(2\) composes with the built-in samplers only/);
  });

  it('checks the sampler shape', async () => {
    await rejectsWith({ batchSize: 4, sampler: [1, 2] }, 'ERR_INVALID_OPTION', /`sampler` must be an object with `length` and `indices\(epoch\)`/);
    await rejectsWith({ batchSize: 4, sampler: { length: -1, indices: () => [] } }, 'ERR_INVALID_OPTION', /`sampler.length`/);
  });

  it('checks names: strings, unique, one per tensor', async () => {
    await rejectsWith({ batchSize: 4, names: 'x' }, 'ERR_INVALID_OPTION', /`names` must be an array of non-empty strings/);
    await rejectsWith({ batchSize: 4, names: ['a', 'a'] }, 'ERR_INVALID_OPTION', /"a" appears twice/);
    await rejectsWith({ batchSize: 4, names: ['a', 'b', 'c'] }, 'ERR_NAMES_COUNT', /names count \(3\) does not match dataset tensor count \(2\)/);
  });

  it('checks transform, mode, prefetch and errors', async () => {
    await rejectsWith({ batchSize: 4, transform: 3 }, 'ERR_INVALID_OPTION', /`transform` must be a function/);
    await rejectsWith({ batchSize: 4, mode: 'fast' }, 'ERR_INVALID_OPTION', /`mode` must be 'auto', 'resident' or 'streaming', got "fast"/);
    await rejectsWith({ batchSize: 4, prefetch: -1 }, 'ERR_INVALID_OPTION', /`prefetch` must be an integer in \[1, 1024\]/);
    await rejectsWith({ batchSize: 4, errors: 'ignore' }, 'ERR_INVALID_OPTION', /`errors` must be 'throw' or 'skip'/);
    await rejectsWith({ batchSize: 4, pinSource: 'yes' }, 'ERR_INVALID_OPTION', /`pinSource` must be true, false or 'auto', got "yes"/);
  });

  it('clamps vramMaxUsage and ramMaxUsage as the reference does, refusing non-numbers', async () => {
    for (const knob of ['vramMaxUsage', 'ramMaxUsage']) {
      for (const v of [0.1, 0.3, 5, -1]) assert.ok(await DataLoader.create(ds, { batchSize: 4, [knob]: v }));
      await rejectsWith({ batchSize: 4, [knob]: Number.NaN }, 'ERR_INVALID_OPTION', new RegExp(`\`${knob}\` must be a number \\(clamped`));
      await rejectsWith({ batchSize: 4, [knob]: '0.5' }, 'ERR_INVALID_OPTION', new RegExp(knob));
    }
  });

  it('checks activationReserve: a byte count', async () => {
    await rejectsWith({ batchSize: 4, activationReserve: -5 }, 'ERR_INVALID_OPTION', /`activationReserve` must be a byte count ≥ 0/);
  });

  it('checks device, and says how to fix a missing CUDA driver', async () => {
    await rejectsWith({ batchSize: 4, device: 'gpu' }, 'ERR_INVALID_OPTION', /`device` must be 'cpu', 'cuda', 'cuda:N' or 'sim', got "gpu"/);
    await rejectsWith({ batchSize: 4, sim: { totalBytes: 10 } }, 'ERR_INVALID_OPTION', /`sim` must be used with device: 'sim' only/);
    await rejectsWith({ batchSize: 4, device: 'sim', sim: { totalBytes: -1 } }, 'ERR_INVALID_OPTION', /`sim.totalBytes` must be a byte count ≥ 1, got -1/);
    if (!cudaAvailable()) {
      await rejectsWith({ batchSize: 4, device: 'cuda:0' }, 'ERR_CUDA_UNAVAILABLE', /CUDA is not available.*device: 'cpu'/);
    }
  });

  it('checks diskStage, workers, rank and worldSize', async () => {
    await rejectsWith({ batchSize: 4, diskStage: { gigabytes: 'lots' } }, 'ERR_INVALID_OPTION', /`diskStage` must be \{ gigabytes/);
    await rejectsWith({ batchSize: 4, diskStage: { gigabytes: -1 } }, 'ERR_INVALID_OPTION', /`diskStage` must be \{ gigabytes/);
    await rejectsWith({ batchSize: 4, diskStage: { gigabytes: 1, dir: 7 } }, 'ERR_INVALID_OPTION', /`diskStage`/);
    await rejectsWith({ batchSize: 4, diskStage: { gigabytes: 1 } }, 'ERR_NEEDS_SAMPLE_LAYER', /diskStage requires the sample layer.*getBatch/);
    await rejectsWith({ batchSize: 4, workers: -1 }, 'ERR_INVALID_OPTION', /`workers` must be an integer in \[0, \d+\] \(4 × \d+ cores\) or 'auto'/);
    await rejectsWith({ batchSize: 4, workers: 1.5 }, 'ERR_INVALID_OPTION', /`workers`/);
    await rejectsWith({ batchSize: 4, rank: 0, worldSize: 0 }, 'ERR_INVALID_OPTION', /`worldSize` must be an integer ≥ 1/);
    await rejectsWith({ batchSize: 4, rank: 1, worldSize: 1 }, 'ERR_INVALID_OPTION', /`rank` must be an integer in \[0, worldSize = 1\)/);
    await rejectsWith({ batchSize: 4, rank: 1 }, 'ERR_INVALID_OPTION', /`worldSize` must be given together with `rank`/);
    await rejectsWith({ batchSize: 4, worldSize: 2 }, 'ERR_INVALID_OPTION', /`rank` must be given together with `worldSize`/);
    await rejectsWith({ batchSize: 4, localRank: -1 }, 'ERR_INVALID_OPTION', /`localRank` must be an integer ≥ 0/);
    await rejectsWith({ batchSize: 4, shards: 'even' }, 'ERR_INVALID_OPTION', /`shards` must be 'pad' or 'drop'/);
    await rejectsWith({ batchSize: 4, resume: 7 }, 'ERR_INVALID_OPTION', /`resume` must be a state object/);
    await rejectsWith({ batchSize: 4, resume: { epoch: 1 } }, 'ERR_RESUME_MISMATCH', /stoker: 1/);
    assert.ok(await DataLoader.create(ds, { batchSize: 4, workers: 0, rank: 0, worldSize: 1, diskStage: { gigabytes: 0 } }));
  });

  it('accepts every documented knob at its default', async () => {
    const loader = await DataLoader.create(ds, {
      batchSize: 4, device: 'cpu', shuffle: true, seed: 42, dropLast: true, names: ['x', 'y'], augment: 1,
      transform: (rows) => rows, mode: 'auto', prefetch: 2, vramMaxUsage: 0.9, ramMaxUsage: 0.5,
      activationReserve: 0, sampleCache: true, vramPool: true, pinSource: 'auto', errors: 'throw',
    });
    assert.equal(loader.numBatches, 2);
  });
});

// Each row a value that used to be accepted silently (or caught only in the first epoch): every one
// is now refused at create, naming the knob, the value and the fix.
const maxWorkers = 4 * availableParallelism();
const REFUSED: readonly (readonly [string, Record<string, unknown>, RegExp])[] = [
  ['device: null is refused, not read as the default', { device: null }, /`device` must be 'cpu', 'cuda', 'cuda:N' or 'sim', got null/],
  ['seed: null is refused, not read as the default', { seed: null }, /`seed` must be an integer in \[0, 2\^53\) or a bigint in \[0, 2\^64\), got null/],
  ['augment: null is refused, not read as the default', { augment: null }, /`augment` must be an integer ≥ 1.*got null/],
  ['mode: null is refused, not read as the default', { mode: null }, /`mode` must be 'auto', 'resident' or 'streaming', got null/],
  ['pinSource: null is refused, not read as the default', { pinSource: null }, /`pinSource` must be true, false or 'auto', got null/],
  ['shards: null is refused, not read as the default', { shards: null }, /`shards` must be 'pad' or 'drop', got null/],
  ['errors: null is refused, not read as the default', { errors: null }, /`errors` must be 'throw' or 'skip', got null/],
  ['a bigint seed of 2^64 is refused, not masked to seed 0', { seed: 2n ** 64n }, /`seed` must be .*a bigint in \[0, 2\^64\), got 18446744073709551616n/],
  ['a bigint seed above 2^64 is refused', { seed: 2n ** 64n + 42n }, /`seed`.*got 18446744073709551658n/],
  ['a negative bigint seed is refused', { seed: -1n }, /`seed`.*got -1n/],
  ['a number seed of 2^53 is refused, pointing at bigint', { seed: 2 ** 53 }, /`seed`.*got 9007199254740992. Pass seeds of 2\^53 and above as a bigint/],
  ['sim: null is refused', { device: 'sim', sim: null }, /`sim` must be \{ totalBytes\?.*got null/],
  ['sim.totalBytes of a string is refused', { device: 'sim', sim: { totalBytes: '1GB' } }, /`sim.totalBytes` must be a byte count ≥ 1, got "1GB"/],
  ['sim.totalBytes of 0 is refused', { device: 'sim', sim: { totalBytes: 0 } }, /`sim.totalBytes` must be a byte count ≥ 1, got 0/],
  ['sim.usedBytes below 0 is refused', { device: 'sim', sim: { usedBytes: -1 } }, /`sim.usedBytes` must be a byte count ≥ 0, got -1/],
  ['sim.usedBytes above sim.totalBytes is refused', { device: 'sim', sim: { totalBytes: 100, usedBytes: 101 } }, /`sim.usedBytes` must be at most sim.totalBytes \(100\), got 101. Raise totalBytes/],
  ['sim.usedBytes above the default 16 GiB is refused', { device: 'sim', sim: { usedBytes: 2 ** 35 } }, /`sim.usedBytes` must be at most sim.totalBytes \(17179869184\)/],
  ['a misspelled sim option is refused with the name meant', { device: 'sim', sim: { totalbytes: 100 } }, /unknown `sim` option "totalbytes"; did you mean `totalBytes`\?/],
  ['an unknown sim option is refused with the known ones', { device: 'sim', sim: { cores: 8 } }, /unknown `sim` option "cores". Known `sim` options: totalBytes, usedBytes, failAllocation, rowDma, failMapHost/],
  ['sim.failAllocation that is not a function is refused', { device: 'sim', sim: { failAllocation: true } }, /`sim.failAllocation` must be a function/],
  ['sim.rowDma that is not a boolean is refused', { device: 'sim', sim: { rowDma: 'off' } }, /`sim.rowDma` must be true or false, got "off"/],
  ['sim.failMapHost that is not a boolean is refused', { device: 'sim', sim: { failMapHost: 1 } }, /`sim.failMapHost` must be true or false, got 1/],
  ['a misspelled diskStage key is refused with the name meant', { diskStage: { gigabyte: 1 } }, /unknown `diskStage` option "gigabyte"; did you mean `gigabytes`\?/],
  ['an unknown diskStage key is refused with the known ones', { diskStage: { gigabytes: 1, path: '/tmp' } }, /unknown `diskStage` option "path". Known `diskStage` options: gigabytes, dir/],
  ["diskStage with mode: 'resident' is refused: resident mode never reads it", { mode: 'resident', diskStage: { gigabytes: 1 } }, /`diskStage` must be left out with mode: 'resident'.*drop `diskStage`, or pass mode: 'streaming'/],
  ['a sampler with no picks is refused', { sampler: { length: 0, indices: () => [] } }, /`sampler.length` must be an integer ≥ 1, got 0. A sampler with no picks/],
  ['prefetch: 0 is refused, pointing at prefetch: 1', { prefetch: 0 }, /`prefetch` must be an integer in \[1, 1024\] \(batches in flight\), got 0. prefetch: 1 is the smallest window/],
  ['prefetch above the 1024 staging slots a reader pool addresses is refused', { prefetch: 1025 }, /`prefetch` must be an integer in \[1, 1024\].*got 1025. Omit `prefetch` for adaptive sizing/],
  [`workers above 4 × cores (${maxWorkers}) are refused`, { workers: maxWorkers + 1 }, new RegExp(`\`workers\` must be an integer in \\[0, ${maxWorkers}\\] .*got ${maxWorkers + 1}. More readers than that only cost memory`)],
  ['a misspelled option (batchsize) is refused with the name meant', { batchsize: 4 }, /unknown option "batchsize"; did you mean `batchSize`\?/],
  ['a misspelled option (prefech) is refused with the name meant', { prefech: 4 }, /unknown option "prefech"; did you mean `prefetch`\?/],
  ['a misspelled option (drop_last) is refused with the name meant', { drop_last: true }, /unknown option "drop_last"; did you mean `dropLast`\?/],
  ['a misspelled option (wokrers) is refused with the name meant', { wokrers: 2 }, /unknown option "wokrers"; did you mean `workers`\?/],
];

describe('every option is checked at create', () => {
  for (const [name, extra, pattern] of REFUSED) {
    it(name, async () => {
      await rejectsWith({ batchSize: 4, ...extra }, 'ERR_INVALID_OPTION', pattern);
    });
  }

  // Each row a value at the edge of its range that stays accepted.
  const ACCEPTED: readonly (readonly [string, Record<string, unknown>])[] = [
    ['the largest u64 seed, 2^64 − 1 as a bigint, is accepted', { seed: 2n ** 64n - 1n }],
    ['the largest safe-integer seed is accepted', { seed: Number.MAX_SAFE_INTEGER }],
    ['prefetch: 1 is accepted', { prefetch: 1 }],
    ['prefetch: 1024 is accepted', { prefetch: 1024 }],
    [`workers: ${maxWorkers} (4 × cores) is accepted`, { workers: maxWorkers }],
    ["diskStage of 0 GB (off) with mode: 'resident' is accepted", { mode: 'resident', diskStage: { gigabytes: 0 } }],
    ['sim.usedBytes equal to sim.totalBytes is accepted', { device: 'sim', sim: { totalBytes: 100, usedBytes: 100, rowDma: false, failMapHost: false } }],
  ];
  for (const [name, extra] of ACCEPTED) {
    it(name, () => {
      // Checked without building a loader: the accepted workers count would start that many threads.
      assert.ok(resolveOptions({ batchSize: 4, ...extra }));
    });
  }

  it('the staging ring never outgrows the 1024 slots a reader pool addresses, so no depth fails mid-epoch', () => {
    // 4-byte batches, 60 GiB free, a million batches: RAM alone would allow billions of slots.
    assert.equal(MAX_IN_FLIGHT, 1024);
    assert.equal(ringSlotsFromRam(4, 1, 0.5, 60 * 2 ** 30, 1e6), MAX_IN_FLIGHT);
  });

  it('a 2^64 seed no longer gives the order of seed 0: the two are told apart at create', async () => {
    const zero = resolveOptions({ batchSize: 4, seed: 0 }).seed;
    assert.deepEqual(zero, { hi: 0, lo: 0 });
    assert.throws(() => resolveOptions({ batchSize: 4, seed: 2n ** 64n }), { code: 'ERR_INVALID_OPTION' });
  });
});

describe("shards: 'pad' with more ranks than picks", () => {
  // The law (src/distributed/shard.ts): each of W ranks takes m = ⌈n/W⌉ picks of the order, wrapped
  // around, so m·W picks are delivered; pick i of the order comes ⌊m·W/n⌋ times, plus once more when
  // i < m·W mod n. For n ≥ W that is once or twice; for n < W (m = 1) it is ⌊W/n⌋ or ⌈W/n⌉ times.
  for (const [n, world] of [[3, 8], [1, 4], [2, 5], [4, 4], [5, 3]] as const) {
    it(`${n} picks over ${world} ranks: pick i comes ⌊m·W/n⌋ times, once more for the first m·W mod n picks`, async () => {
      const seen = new Array<number>(n).fill(0);
      for (let rank = 0; rank < world; rank++) {
        const loader = await DataLoader.create(sources.arrays({ label: Int32Array.from(range(n)) }), {
          batchSize: 1, shuffle: false, mode: 'streaming', shards: 'pad', rank, worldSize: world,
        });
        for await (const b of loader.epoch(0)) for (const id of (b.get('label') as Tensor).data as Int32Array) seen[id]!++;
        await loader.close();
      }
      const delivered = Math.ceil(n / world) * world;
      const expected = range(n).map((i) => Math.floor(delivered / n) + (i < delivered % n ? 1 : 0));
      assert.deepEqual(seen, expected);
      if (n < world) assert.equal(Math.max(...seen), Math.ceil(world / n), 'with n < W a pick can come ⌈W/n⌉ times');
    });
  }
});

describe('dataset validation', () => {
  it('refuses an empty dataset', async () => {
    await assert.rejects(DataLoader.create({ length: 0, get: () => [] }, { batchSize: 4 }), { code: 'ERR_EMPTY_DATASET', message: /DataLoader: empty dataset/ });
  });

  it('refuses something that is not a dataset, pointing at sources.arrays', async () => {
    await assert.rejects(DataLoader.create(new Float32Array(4) as never, { batchSize: 4 }), { code: 'ERR_INVALID_DATASET', message: /sources.arrays/ });
    await assert.rejects(DataLoader.create({ length: -1, get: () => [] }, { batchSize: 4 }), { code: 'ERR_INVALID_DATASET', message: /dataset.length must be an integer ≥ 0, got -1/ });
  });

  it('refuses a dataset whose sample 0 has no tensors', async () => {
    await assert.rejects(DataLoader.create({ length: 3, get: () => [] }, { batchSize: 1 }), { code: 'ERR_EMPTY_SAMPLE' });
    await assert.rejects(DataLoader.create({ length: 3, getBatch: () => [] }, { batchSize: 1 }), { code: 'ERR_EMPTY_SAMPLE' });
  });

  it('refuses a field that is not a tensor, typed array, number or bigint', async () => {
    await assert.rejects(DataLoader.create({ length: 3, get: () => ({ label: 'cat' }) } as never, { batchSize: 1 }), {
      code: 'ERR_INVALID_DATASET', message: /field "label" is "cat"; a field must be a Tensor, a typed array, a number or a bigint/,
    });
  });

  it('refuses a per-batch dataset whose columns have the wrong row count', async () => {
    const bad = { length: 4, getBatch: (ids: readonly number[]) => [new Int32Array(ids.length + 1)] };
    await assert.rejects(DataLoader.create(bad, { batchSize: 2 }), { code: 'ERR_SAMPLE_MISMATCH', message: /first dimension must be the 1 requested rows/ });
  });

  it('wraps a probe that throws, keeping the cause', async () => {
    const cause = new Error('disk on fire');
    await assert.rejects(DataLoader.create({ length: 3, get: () => { throw cause; } }, { batchSize: 1 }), (e: Error) => {
      assert.match(e.message, /reading sample 0 .* failed: disk on fire/);
      assert.equal(e.cause, cause);
      return true;
    });
  });

  it('reads per-batch datasets whose columns are views of the source (it copies, never aliases)', async () => {
    const store = new Int32Array(8).map((_, i) => i);
    const viewDs = { length: 8, getBatch: (ids: readonly number[]) => [ids.length === 2 && ids[1] === ids[0]! + 1 ? store.subarray(ids[0]!, ids[0]! + 2) : Int32Array.from(ids, (i) => store[i]!)] };
    const loader = await DataLoader.create(viewDs, { batchSize: 2, shuffle: false, mode: 'streaming', transform: (rows) => {
      (rows[0]!.data as Int32Array).fill(-1);
      return rows;
    } });
    for await (const b of loader.epoch(0)) assert.deepEqual(Array.from(b.at(0).data as Int32Array), [-1, -1]);
    assert.deepEqual(Array.from(store), [0, 1, 2, 3, 4, 5, 6, 7], 'the source was never written');
  });
});

// Each row a `sources.*` call with a misspelt option: refused at the call, naming the source, the key
// and the key meant — before any file is touched (the paths below do not exist).
describe("every source checks its options' names", () => {
  const missing = '/tmp/opt/no-such-file';
  const part = () => sources.arrays({ y: new Int32Array(4) });
  const SOURCES: readonly (readonly [string, () => unknown, RegExp])[] = [
    ['sources.npy', () => sources.npy(`${missing}.npy`, { laod: 'memory' } as never), /unknown `sources.npy` option "laod"; did you mean `load`\?/],
    ['sources.safetensors', () => sources.safetensors(`${missing}.safetensors`, { tensor: ['a'] } as never), /unknown `sources.safetensors` option "tensor"; did you mean `tensors`\?/],
    ['sources.arrow', () => sources.arrow(`${missing}.arrow`, { column: ['a'] } as never), /unknown `sources.arrow` option "column"; did you mean `columns`\?/],
    ['sources.arrow over shards', () => sources.arrow([`${missing}-0.arrow`, `${missing}-1.arrow`], { rowRead: false } as never), /unknown `sources.arrow` option "rowRead"; did you mean `rowReads`\?/],
    ['sources.arrow with ragged columns', () => sources.arrow(`${missing}.arrow`, { ragged: { t: 'values' }, cacheByte: 1 } as never), /unknown `sources.arrow` option "cacheByte"; did you mean `cacheBytes`\?/],
    ['sources.mix', () => sources.mix([{ dataset: part(), weight: 1 }], { windw: 4 } as never), /unknown `sources.mix` option "windw"; did you mean `window`\?/],
    ['sources.imageFolder', () => sources.imageFolder(missing, { size: 8, chanels: 3 } as never), /unknown `sources.imageFolder` option "chanels"; did you mean `channels`\?/],
    ['sources.imageFolderAsync', () => sources.imageFolderAsync(missing, { size: 8, chanels: 3 } as never), /unknown `sources.imageFolderAsync` option "chanels"; did you mean `channels`\?/],
    ['sources.tarShards', () => sources.tarShards(`${missing}.tar`, { feilds: ['jpg'] } as never), /unknown `sources.tarShards` option "feilds"; did you mean `fields`\?/],
    ['sources.tarShards image', () => sources.tarShards(`${missing}.tar`, { image: { size: [8, 8], chanels: 1 } } as never), /unknown `sources.tarShards image` option "chanels"; did you mean `channels`\?/],
    ['sources.tarShards decoders', () => sources.tarShards(`${missing}.tar`, { decoders: { png: { image: { size: [8, 8], layuot: 'hwc' } } } } as never), /unknown `sources.tarShards decoders.png.image` option "layuot"; did you mean `layout`\?/],
    ['sources.arrow decoders', () => sources.arrow(`${missing}.arrow`, { decoders: { img: { kind: 'image', size: [8, 8], chanels: 1 } } } as never), /unknown `sources.arrow decoders.img` option "chanels"; did you mean `channels`\?/],
    ['sources.tokens', () => sources.tokens(`${missing}.bin`, { contextLenght: 8 } as never), /unknown `sources.tokens` option "contextLenght"; did you mean `contextLength`\?/],
    ['sources.jsonl', () => sources.jsonl(`${missing}.jsonl`, { feilds: ['a'] } as never), /unknown `sources.jsonl` option "feilds"; did you mean `fields`\?/],
    ['sources.parquet', () => sources.parquet(`${missing}.parquet`, { column: ['a'] } as never), /unknown `sources.parquet` option "column"; did you mean `columns`\?/],
  ];
  for (const [name, call, pattern] of SOURCES) {
    it(`${name} refuses a misspelt option, naming the key meant`, async () => {
      await assert.rejects(async () => call(), (e: Error & { code?: string }) => {
        assert.equal(e.code, 'ERR_INVALID_OPTION', e.message);
        assert.match(e.message, pattern);
        return true;
      });
    });
  }

  it('an unrelated key is answered with the known keys', () => {
    assert.throws(() => sources.npy(`${missing}.npy`, { cores: 8 } as never), {
      code: 'ERR_INVALID_OPTION', message: /unknown `sources.npy` option "cores". Known `sources.npy` options: load, inMemoryBytes/,
    });
  });

  it('options that are not an object are refused', () => {
    assert.throws(() => sources.npy(`${missing}.npy`, 7 as never), { code: 'ERR_INVALID_OPTION', message: /`sources.npy\(…, options\)` must be an object of options, got 7/ });
  });
});

// A ragged field of each dtype, documents of 1…4 elements, and the pad values its storage cannot
// hold: each used to be cast silently (1.5 → 1 in int32, 2^40 → 0, -1 → 255 in uint8); an int64
// field padded with anything but 0 failed its first batch.
describe('collate pad.value is checked against the field dtype at create', () => {
  const doc = (make: (n: number) => SampleValue): Dataset => Object.assign({ length: 4, get: (i: number) => ({ tokens: make(i + 1) }) }, { ragged: ['tokens'], raggedMax: { tokens: 4 } });
  const DOCS: Record<string, Dataset> = {
    int8: doc((n) => new Int8Array(n)),
    uint8: doc((n) => new Uint8Array(n)),
    int16: doc((n) => new Int16Array(n)),
    uint16: doc((n) => new Uint16Array(n)),
    int32: doc((n) => new Int32Array(n)),
    uint32: doc((n) => new Uint32Array(n)),
    float16: doc((n) => tensor(new Uint16Array(n), [n], 'float16')),
    bfloat16: doc((n) => tensor(new Uint16Array(n), [n], 'bfloat16')),
    float32: doc((n) => new Float32Array(n)),
    float64: doc((n) => new Float64Array(n)),
    int64: doc((n) => new BigInt64Array(n)),
  };
  const padWith = (dtype: string, value: unknown) => DataLoader.create(DOCS[dtype]!, { batchSize: 2, collate: { tokens: { pad: { value } } } } as LoaderOptions);

  const REFUSED: readonly (readonly [string, unknown, RegExp])[] = [
    ['int32', 1.5, /`collate.tokens.pad.value` must be an integer in \[-2147483648, 2147483647\] \(the range of the int32 field `tokens`\), got 1.5/],
    ['int32', 2 ** 40, /`collate.tokens.pad.value` must be an integer in \[-2147483648, 2147483647\].*got 1099511627776/],
    ['uint8', -1, /`collate.tokens.pad.value` must be an integer in \[0, 255\] \(the range of the uint8 field `tokens`\), got -1/],
    ['uint8', 256, /\[0, 255\].*got 256/],
    ['int8', 128, /\[-128, 127\].*got 128/],
    ['int16', -32769, /\[-32768, 32767\].*got -32769/],
    ['uint16', 0.5, /\[0, 65535\].*got 0.5/],
    ['uint32', 2 ** 32, /\[0, 4294967295\].*got 4294967296/],
    ['float32', 1e39, /`collate.tokens.pad.value` must be a finite number within float32's range \(±3.4028234663852886e\+38\), got 1e\+39/],
    ['float64', Number.POSITIVE_INFINITY, /`collate.tokens.pad.value` must be a finite number, got Infinity/],
    ['float16', 1.5, /`collate.tokens.pad.value` must be an integer in \[0, 65535\]: a float16 field is padded with the raw 16-bit pattern given \(1.0 is 15360\), got 1.5/],
    ['bfloat16', -1, /a bfloat16 field is padded with the raw 16-bit pattern given \(1.0 is 16256\), got -1/],
    ['int64', 2 ** 60, /`collate.tokens.pad.value` must be an integer in \[-9007199254740991, 9007199254740991\] \(the integers a number holds exactly, for the int64 field `tokens`\), got 1152921504606847000/],
  ];
  for (const [dtype, value, pattern] of REFUSED) {
    it(`pad.value ${String(value)} on a ${dtype} field is refused`, async () => {
      await assert.rejects(padWith(dtype, value), (e: Error & { code?: string }) => {
        assert.equal(e.code, 'ERR_INVALID_OPTION', e.message);
        assert.match(e.message, pattern);
        return true;
      });
    });
  }

  const ACCEPTED: readonly (readonly [string, number, number])[] = [
    ['int32', -1, -1], ['uint8', 255, 255], ['int8', -128, -128], ['uint32', 2 ** 32 - 1, 2 ** 32 - 1],
    ['float32', -0.5, -0.5], ['float64', 1e300, 1e300], ['float16', 15360, 15360], ['int64', -1, -1],
  ];
  for (const [dtype, value, stored] of ACCEPTED) {
    it(`pad.value ${value} on a ${dtype} field is accepted and pads with it`, async () => {
      const loader = await padWith(dtype, value);
      for await (const b of loader.epoch(0)) {
        const t = b.get('tokens') as Tensor;
        const lengths = (b.get('tokens_lengths') as Tensor).data as Int32Array;
        const width = t.shape[1]!;
        lengths.forEach((len, r) => {
          for (let k = len; k < width; k++) assert.equal(Number((t.data as Float64Array)[r * width + k]), stored);
        });
      }
      await loader.close();
    });
  }

  it('pad: null is refused, not read as the default', async () => {
    await assert.rejects(DataLoader.create(DOCS.int32!, { batchSize: 2, collate: { tokens: { pad: null } } } as unknown as LoaderOptions), {
      code: 'ERR_INVALID_OPTION', message: /`collate.tokens.pad` must be an object of options, got null/,
    });
  });
});

// Budgets larger than what they budget: each used to be accepted, the reserve leaving no depth and
// the stage promising bytes its drive does not have.
describe('budgets are checked against what there is at create', () => {
  it('activationReserve above the device memory is refused, naming the memory', async () => {
    await rejectsWith({ batchSize: 4, device: 'sim', activationReserve: 1e15 }, 'ERR_INVALID_OPTION', /`activationReserve` must be a byte count ≤ the memory of sim \(17179869184 bytes, 17179869184 free\), got 1000000000000000/);
    await rejectsWith({ batchSize: 4, device: 'sim', sim: { totalBytes: 4096, usedBytes: 1024 }, activationReserve: 4097 }, 'ERR_INVALID_OPTION', /≤ the memory of sim \(4096 bytes, 3072 free\), got 4097/);
  });

  it('activationReserve up to the device memory is accepted', async () => {
    const loader = await DataLoader.create(ds, { batchSize: 4, device: 'sim', sim: { totalBytes: 2 ** 20 }, activationReserve: 2 ** 20 });
    assert.throws(() => loader.setActivationReserve(2 ** 20 + 1), { code: 'ERR_INVALID_OPTION', message: /`setActivationReserve\(bytes\)` must be a byte count ≤ the memory of sim \(1048576 bytes/ });
    loader.setActivationReserve(2 ** 19);
    await loader.close();
  });

  it('diskStage.gigabytes above the free space of its drive is refused, naming the free space', async () => {
    const perSample = { length: 8, get: (i: number) => ({ y: Int32Array.of(i) }) };
    await assert.rejects(DataLoader.create(perSample, { batchSize: 4, mode: 'streaming', diskStage: { gigabytes: 1e12, dir: '/tmp/opt/stage' } }), (e: Error & { code?: string }) => {
      assert.equal(e.code, 'ERR_INVALID_OPTION', e.message);
      assert.match(e.message, /`diskStage.gigabytes` must be at most the free space under "\/tmp\/opt\/stage" \(\d+(\.\d+)? GiB\), got 1000000000000. Lower it, or point diskStage.dir at a drive with more room/);
      return true;
    });
    const small = await DataLoader.create(perSample, { batchSize: 4, mode: 'streaming', diskStage: { gigabytes: 0.001, dir: '/tmp/opt/stage' } });
    await small.close();
  });
});
