// Every knob is validated at create: a bad value throws a LoaderError naming the knob, the value
// and the fix. The reference's build-time errors keep their meaning.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DataLoader, type LoaderOptions } from '../src/index.js';
import { cudaAvailable } from '../src/device/cuda/driver.js';
import { arraysDataset } from './fixtures.js';

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
    for (const knob of ['shuffle', 'dropLast', 'sampleCache', 'vramPool']) {
      await rejectsWith({ batchSize: 4, [knob]: 'yes' }, 'ERR_INVALID_OPTION', new RegExp(`\`${knob}\` must be true or false, got "yes"`));
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
    await rejectsWith({ batchSize: 4, prefetch: -1 }, 'ERR_INVALID_OPTION', /`prefetch` must be an integer ≥ 0/);
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
    await rejectsWith({ batchSize: 4, device: 'sim', sim: { totalBytes: -1 } }, 'ERR_INVALID_OPTION', /`sim` must be \{ totalBytes/);
    if (!cudaAvailable()) {
      await rejectsWith({ batchSize: 4, device: 'cuda:0' }, 'ERR_CUDA_UNAVAILABLE', /CUDA is not available.*device: 'cpu'/);
    }
  });

  it('checks diskStage, workers, rank and worldSize', async () => {
    await rejectsWith({ batchSize: 4, diskStage: { gigabytes: 'lots' } }, 'ERR_INVALID_OPTION', /`diskStage` must be \{ gigabytes/);
    await rejectsWith({ batchSize: 4, diskStage: { gigabytes: -1 } }, 'ERR_INVALID_OPTION', /`diskStage` must be \{ gigabytes/);
    await rejectsWith({ batchSize: 4, diskStage: { gigabytes: 1, dir: 7 } }, 'ERR_INVALID_OPTION', /`diskStage`/);
    await rejectsWith({ batchSize: 4, diskStage: { gigabytes: 1 } }, 'ERR_NEEDS_SAMPLE_LAYER', /diskStage requires the sample layer.*getBatch/);
    await rejectsWith({ batchSize: 4, workers: -1 }, 'ERR_INVALID_OPTION', /`workers` must be an integer ≥ 0 or 'auto'/);
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
