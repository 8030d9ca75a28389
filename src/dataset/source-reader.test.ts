// The source stage alone: in-memory columns are read by capability (the columns view), whatever
// carries it; resident reads record failed samples instead of failing; a sample that changes shape
// fails its read with a message naming it.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allocStorage } from '../tensor/dtype.js';
import { Tensor } from '../tensor/tensor.js';
import { kColumns } from './arrays-source.js';
import type { Dataset } from './dataset.js';
import { SourceReader } from './source-reader.js';

const signal = new AbortController().signal;

describe('SourceReader', () => {
  it('reads any dataset carrying the columns view by gathers, never through its getBatch', async () => {
    const values = Float32Array.from({ length: 12 }, (_, i) => i);
    const ds = {
      length: 4,
      [kColumns]: { tensors: [new Tensor(values, [4, 3], 'float32')], keys: ['x'] },
      getBatch(): never {
        throw new Error('getBatch must not be called for in-memory columns');
      },
    };
    const schema = await SourceReader.probe(ds, { signal });
    assert.deepEqual(schema.keys, ['x']);
    assert.deepEqual(schema.fields[0]!.shape, [3]);
    const staged = await new SourceReader(ds, schema).read([3, 0], { signal }, allocStorage);
    assert.deepEqual(Array.from(staged.tensors[0]!.data as Float32Array), [9, 10, 11, 0, 1, 2]);
    const all = await new SourceReader(ds, schema).readAll({ signal }, allocStorage);
    assert.equal(all.owned, false, 'resident mode holds the columns themselves, no copy');
    assert.equal(all.tensors[0], ds[kColumns].tensors[0]);
  });

  it('readAll records the samples whose read fails, with their causes, and leaves their rows zero', async () => {
    const ds: Dataset = {
      length: 5,
      get: (i) => {
        if (i === 2 || i === 4) throw new Error(`bad sample ${i}`);
        return [Int32Array.of(i + 1)];
      },
    };
    const schema = await SourceReader.probe(ds, { signal });
    const all = await new SourceReader(ds, schema).readAll({ signal }, allocStorage);
    assert.deepEqual([...all.failed.keys()].sort(), [2, 4]);
    assert.match(String(all.failed.get(4)), /bad sample 4/);
    assert.deepEqual(Array.from(all.tensors[0]!.data as Int32Array), [1, 2, 0, 4, 0]);
  });

  it('fails a read whose sample changed shape, naming the sample and both shapes', async () => {
    const ds: Dataset = { length: 3, get: (i) => [new Float32Array(i === 1 ? 3 : 2)] };
    const schema = await SourceReader.probe(ds, { signal });
    await assert.rejects(
      async () => new SourceReader(ds, schema).read([0, 1], { signal }, allocStorage),
      (e: Error & { code?: string }) => e.code === 'ERR_SAMPLE_MISMATCH' && /get\(1\)/.test(e.message) && /\[3\]/.test(e.message) && /\[2\]/.test(e.message),
    );
  });

  it("offers each sample its row's bytes (ReadContext.rows): a dataset that decodes into them is delivered as written", async () => {
    const seen: (number | undefined)[] = [];
    const ds: Dataset = {
      length: 4,
      get: async (i, context) => {
        const row = context?.rows?.of('x');
        seen.push(context?.rows?.of('y')?.byteLength, context?.rows?.of('nope')?.byteLength);
        await new Promise((r) => setTimeout(r, 5 * (4 - i)));
        if (row === undefined) return { x: Float32Array.of(i, i + 0.5, i + 1), y: Int32Array.of(i) };
        const x = new Float32Array(row.buffer, row.byteOffset, 3);
        x.set([i, i + 0.5, i + 1]);
        return { x, y: Int32Array.of(i) };
      },
    };
    const schema = await SourceReader.probe(ds, { signal });
    seen.length = 0;
    const staged = await new SourceReader(ds, schema).read([2, 0, 3], { signal }, allocStorage);
    assert.deepEqual(Array.from(staged.tensors[0]!.data as Float32Array), [2, 2.5, 3, 0, 0.5, 1, 3, 3.5, 4]);
    assert.deepEqual(Array.from(staged.tensors[1]!.data as Int32Array), [2, 0, 3]);
    assert.deepEqual(seen, [4, undefined, 4, undefined, 4, undefined], 'y is 4 bytes a row; an unknown key has none');
  });

  it('answers a failed read only after every other read of its rows settled (they may still be writing there)', async () => {
    let slowDone = false;
    const ds: Dataset = {
      length: 3,
      get: async (i) => {
        if (i === 1) throw new Error('bad sample 1');
        if (i === 2) {
          await new Promise((r) => setTimeout(r, 60));
          slowDone = true;
        }
        return [Int32Array.of(i)];
      },
    };
    const schema = await SourceReader.probe(ds, { signal });
    await assert.rejects(async () => new SourceReader(ds, schema).read([2, 1], { signal }, allocStorage), /bad sample 1/);
    assert.equal(slowDone, true, 'the read of sample 2 had settled');
  });
});
