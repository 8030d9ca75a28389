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
});
