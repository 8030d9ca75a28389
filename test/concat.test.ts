// sources.concat: shards read as one dataset. Per-batch parts give the same batches as one source
// over all rows (one getBatch per part touched, caller order kept); per-sample and mixed parts route
// get(i); reader workers reopen the parts and deliver each sample exactly once; Arrow shards through
// sources.arrow([a, b]); mismatched parts and bad parts fail with typed errors; close() closes parts.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Field, FixedSizeList, Float32, Int32, Table, tableToIPC, vectorFromArray } from 'apache-arrow';
import sharp from 'sharp';
import { openConcat } from '../src/dataset/concat-source.js';
import { kSourceSpec } from '../src/dataset/source-spec.js';
import { type Batch, type BatchDataset, type Dataset, DataLoader, type Tensor, sources, tensor } from '../src/index.js';
import { HANG_MS, MODES, SUITE_MS, collect, range, sorted, within, ys } from './fixtures.js';

const FIXTURE = new URL('./fixtures/scripted-source.ts', import.meta.url);
const ctx = { signal: new AbortController().signal };

/** Rows start…start+n−1 of x = [i, i + 0.5] (float32 [n, 2]) and y = i (int32). */
function xy(start: number, n: number) {
  const ids = range(n).map((i) => start + i);
  return { x: tensor(Float32Array.from(ids.flatMap((i) => [i, i + 0.5])), [n, 2]), y: Int32Array.from(ids) };
}

function rows(batch: Batch): number[][] {
  const x = batch.get('x').data as Float32Array;
  return ys(batch).map((y, r) => [y, x[2 * r]!, x[2 * r + 1]!]);
}

async function batches(ds: Parameters<typeof DataLoader.create>[0], mode: (typeof MODES)[number], extra: { workers?: number } = {}) {
  const loader = await DataLoader.create(ds, { batchSize: 4, shuffle: true, seed: 11, dropLast: false, mode, ...extra });
  const out: { ids: number[]; rows: number[][] }[][] = [];
  for (let e = 0; e < 2; e++) {
    const got = await within(HANG_MS, `epoch ${e}`, collect(loader.epoch(e)));
    out.push(got.map((b) => ({ ids: [...b.sampleIds], rows: rows(b) })));
    for (const b of got) b.release();
  }
  const workers = loader.stats().workers;
  await loader.close();
  return { out, workers };
}

/** Per-sample dataset over rows start…start+n−1 (y a scalar, as the arrays' y rows), counting closes. */
function perSample(start: number, n: number): Dataset & { closed: number } {
  const ds = {
    length: n,
    closed: 0,
    get: (i: number) => ({ x: Float32Array.of(start + i, start + i + 0.5), y: tensor(Int32Array.of(start + i), []) }),
    close() {
      ds.closed++;
    },
  };
  return ds;
}

describe('sources.concat', { timeout: SUITE_MS }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'stoker-concat-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const mode of MODES) {
    it(`per-batch parts (5, 1 and 7 rows) give the same shuffled batches as one source of 13 rows (${mode})`, async () => {
      const concat = sources.concat([sources.arrays(xy(0, 5)), sources.arrays(xy(5, 1)), sources.arrays(xy(6, 7))]);
      assert.equal(concat.length, 13);
      assert.equal(typeof (concat as BatchDataset).getBatch, 'function');
      const want = await batches(sources.arrays(xy(0, 13)), mode);
      const got = await batches(concat, mode);
      assert.deepEqual(got.out, want.out);
      assert.equal(got.workers, 0, 'in-memory parts read on the main thread');
      for (const epoch of got.out) assert.deepEqual(sorted(epoch.flatMap((b) => b.ids)), range(13));
    });
  }

  it('calls each part once per batch with its local ids in caller order, and stitches rows back', () => {
    const calls: [number, number[]][] = [];
    const spy = (p: number, start: number, n: number): BatchDataset => {
      const inner = sources.arrays([xy(start, n).x, xy(start, n).y]);
      return { length: n, getBatch: (ids, c) => (calls.push([p, [...ids]]), inner.getBatch(ids, c)) };
    };
    const concat = sources.concat([spy(0, 0, 5), spy(1, 5, 1), spy(2, 6, 7)]) as BatchDataset;
    const cols = concat.getBatch([12, 0, 5, 7, 4, 6, 1], ctx) as Tensor[];
    assert.deepEqual(calls, [[2, [6, 1, 0]], [0, [0, 4, 1]], [1, [0]]]);
    assert.ok(Array.isArray(cols), 'positional columns stay positional');
    assert.deepEqual(cols[0]!.shape, [7, 2]);
    assert.deepEqual(Array.from(cols[1]!.data as Int32Array), [12, 0, 5, 7, 4, 6, 1]);
    assert.deepEqual(Array.from(cols[0]!.data as Float32Array), [12, 0, 5, 7, 4, 6, 1].flatMap((i) => [i, i + 0.5]));
    assert.throws(() => concat.getBatch([13], ctx), { code: 'ERR_INVALID_DATASET', message: /index 13 is out of range \[0, 13\)/ });
  });

  it('reads without a read context, as the other sources do: each part is given one', () => {
    const strict = (start: number, n: number): BatchDataset => {
      const inner = sources.arrays(xy(start, n));
      return { length: n, getBatch: (ids, c) => (c.signal.throwIfAborted(), inner.getBatch(ids, c)) };
    };
    // Called as a user would at a prompt, with no context (the types ask for one).
    const batched = sources.concat([strict(0, 3), sources.arrays(xy(3, 4))]) as unknown as { getBatch(ids: readonly number[]): Record<string, Tensor> };
    assert.deepEqual(Array.from(batched.getBatch([5, 0, 2]).y!.data as Int32Array), [5, 0, 2]);
    const single = sources.concat([perSample(0, 2), strict(2, 3)]) as unknown as { get(i: number): { y: Tensor } };
    assert.deepEqual([0, 3].map((i) => (single.get(i).y.data as Int32Array)[0]), [0, 3]);
  });

  it('per-sample parts route get(i) to the part holding i', async () => {
    const parts = [perSample(0, 3), perSample(3, 4), perSample(7, 2)];
    const concat = sources.concat(parts) as Dataset;
    assert.equal(typeof (concat as Partial<BatchDataset>).getBatch, 'undefined');
    assert.deepEqual(range(9).map((i) => ((concat.get(i, ctx) as { y: Tensor }).y.data as Int32Array)[0]), range(9));
    for (const mode of MODES) {
      const { out } = await batches(concat, mode);
      for (const epoch of out) {
        assert.deepEqual(sorted(epoch.flatMap((b) => b.ids)), range(9));
        for (const b of epoch) assert.deepEqual(b.rows, b.ids.map((i) => [i, i, i + 0.5]));
      }
    }
  });

  for (const mode of MODES) {
    it(`mixed per-batch and per-sample parts read sample by sample with the right content (${mode})`, async () => {
      const concat = sources.concat([sources.arrays(xy(0, 4)), perSample(4, 3), sources.arrays(xy(7, 6))]);
      assert.equal(typeof (concat as Dataset).get, 'function');
      assert.equal(typeof (concat as Partial<BatchDataset>).getBatch, 'undefined');
      const { out } = await batches(concat, mode);
      for (const epoch of out) {
        assert.deepEqual(sorted(epoch.flatMap((b) => b.ids)), range(13));
        for (const b of epoch) assert.deepEqual(b.rows, b.ids.map((i) => [i, i, i + 0.5]));
      }
    });
  }

  it('reader workers reopen every part and deliver each sample exactly once per epoch', async () => {
    const closes = new Int32Array(new SharedArrayBuffer(8));
    // The scripted module gives x = [i, i + 0.5], y = [i] for i < 6: the arrays part continues from 6.
    const concat = await openConcat({
      parts: [sources.module(FIXTURE, 'openScripted', { n: 6, closes }), sources.arrays({ x: xy(6, 9).x, y: tensor(xy(6, 9).y, [9, 1]) })],
    });
    assert.equal(typeof concat[kSourceSpec as never], 'function');
    const loader = await DataLoader.create(concat, { batchSize: 4, shuffle: true, seed: 5, dropLast: false, mode: 'streaming', workers: 2 });
    assert.equal(loader.stats().workers, 2);
    for (let e = 0; e < 2; e++) {
      const got = await within(HANG_MS, `epoch ${e}`, collect(loader.epoch(e)));
      const ids = got.flatMap((b) => [...b.sampleIds]);
      assert.deepEqual(sorted(ids), range(15));
      for (const b of got) {
        assert.deepEqual(rows(b), [...b.sampleIds].map((i) => [i, i, i + 0.5]));
        b.release();
      }
    }
    await loader.close();
    assert.equal(closes[0], 2, 'each worker closed its copy of the parts');
    await concat.close();
    assert.equal(closes[1], 1, 'the main thread copy closed with the concat');
  });

  it('is not reopenable when a part is not: the loader reads on the main thread', async () => {
    const concat = sources.concat([sources.arrays(xy(0, 3)), { length: 2, getBatch: (ids: readonly number[]) => ({ x: tensor(Float32Array.from(ids.flatMap((i) => [3 + i, 3.5 + i])), [ids.length, 2]), y: Int32Array.from(ids, (i) => 3 + i) }) }]);
    assert.equal(typeof (concat as never as Record<symbol, unknown>)[kSourceSpec], 'undefined');
    await assert.rejects(DataLoader.create(concat, { batchSize: 2, mode: 'streaming', workers: 2 }), { code: 'ERR_INVALID_OPTION' });
    const { out, workers } = await batches(concat, 'streaming');
    assert.equal(workers, 0);
    for (const b of out[0]!) assert.deepEqual(b.rows, b.ids.map((i) => [i, i, i + 0.5]));
  });

  it('asks for the largest reader-thread count any part asks for', () => {
    const scripted = (readerWorkers?: number) => ({ length: 1, readerWorkers, get: () => [Int32Array.of(0)] });
    assert.equal(sources.concat([scripted(2), scripted(), scripted(5)]).readerWorkers, 5);
    assert.equal(sources.concat([scripted(), scripted()]).readerWorkers, undefined);
    assert.equal(sources.concat([sources.arrays([new Int32Array(2)])]).readerWorkers, 0);
  });

  it('asks for the deepest window any part asks for (Dataset.prefetch)', () => {
    const scripted = (prefetch?: number) => ({ length: 1, prefetch, get: () => [Int32Array.of(0)] });
    assert.equal(sources.concat([scripted(2), scripted(), scripted(8)]).prefetch, 8);
    assert.equal(sources.concat([scripted(), scripted()]).prefetch, undefined);
  });

  it('sources.arrow([a, b]) reads two Arrow shards as one dataset, also through reader workers', async () => {
    const shard = (start: number, n: number, name: string) => {
      const ids = range(n).map((i) => start + i);
      const table = new Table({
        x: vectorFromArray(ids.map((i) => [i, i + 0.5]), new FixedSizeList(2, new Field('item', new Float32()))),
        y: vectorFromArray(ids, new Int32()),
      });
      const path = join(dir, name);
      writeFileSync(path, tableToIPC(table, 'file'));
      return path;
    };
    const paths = [shard(0, 6, 'data-00000-of-00002.arrow'), shard(6, 5, 'data-00001-of-00002.arrow')];
    const want = await batches(sources.arrays(xy(0, 11)), 'streaming');
    const arrow = sources.arrow(paths);
    assert.equal(arrow.length, 11);
    assert.deepEqual((await batches(arrow, 'streaming', { workers: 0 })).out, want.out);
    const pooled = await batches(sources.arrow(paths), 'streaming', { workers: 2 });
    assert.equal(pooled.workers, 2);
    assert.deepEqual(pooled.out, want.out);
    assert.throws(() => sources.arrow([paths[0]!, join(dir, 'missing.arrow')]), { code: 'ERR_FILE_ACCESS', message: /missing\.arrow/ });
  });

  it('fails with ERR_SAMPLE_MISMATCH naming both parts when their columns differ', async () => {
    const wide = sources.concat([sources.arrays(xy(0, 3)), sources.arrays({ x: tensor(new Float32Array(6), [2, 3]), y: new Int32Array(2) })]) as BatchDataset;
    assert.throws(() => wide.getBatch([0, 4], ctx), { code: 'ERR_SAMPLE_MISMATCH', message: /part 1 gives columns \{ x: float32 \[3\], y: int32 \[\] \} but part 0 gives \{ x: float32 \[2\], y: int32 \[\] \}/ });
    const renamed = sources.concat([sources.arrays(xy(0, 3)), sources.arrays({ x: xy(3, 2).x, label: xy(3, 2).y })]) as BatchDataset;
    assert.throws(() => renamed.getBatch([0, 4], ctx), { code: 'ERR_SAMPLE_MISMATCH', message: /part 1 .*label.* but part 0 .*y: int32/ });
    const positional = sources.concat([sources.arrays(xy(0, 3)), sources.arrays([xy(3, 2).x, xy(3, 2).y])]);
    const loader = await DataLoader.create(positional, { batchSize: 5, shuffle: false, mode: 'streaming' });
    await assert.rejects(collect(loader.epoch(0)), (e: Error) => /part 1 gives columns \[float32 \[2\], int32 \[\]\] but part 0/.test(`${e.message} ${(e.cause as Error)?.message}`));
    await loader.close();
  });

  it('refuses image folders whose class lists differ, since label 0 would mean two classes', async () => {
    const root = mkdtempSync(join(tmpdir(), 'stoker-concat-classes-'));
    try {
      const png = await sharp({ create: { width: 2, height: 2, channels: 3, background: '#000' } }).png().toBuffer();
      const folder = (name: string, classes: readonly string[]) => {
        for (const c of classes) {
          mkdirSync(join(root, name, c), { recursive: true });
          writeFileSync(join(root, name, c, '0.png'), png);
        }
        return sources.imageFolder(join(root, name), { size: 2, decode: 'threads' });
      };
      const a = folder('a', ['apple', 'banana']);
      const b = folder('b', ['banana', 'cherry']);
      const c = folder('c', ['apple', 'banana']);
      assert.throws(() => sources.concat([a, b]), { code: 'ERR_SAMPLE_MISMATCH', message: /part 1 has classes \["banana","cherry"\] but part 0 has \["apple","banana"\]: label 0 would mean "apple" in part 0 and "banana" in part 1.*same class folders/ });
      assert.equal(sources.concat([a, c]).length, 4, 'the same class list concatenates');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('refuses an empty list, a part that is not a dataset and an unopened spec, naming the index', () => {
    assert.throws(() => sources.concat([]), { code: 'ERR_INVALID_DATASET', message: /at least one part/ });
    assert.throws(() => sources.concat([sources.arrays(xy(0, 2)), { length: 3 } as never]), { code: 'ERR_INVALID_DATASET', message: /part 1 is .*get\(i\) or getBatch\(ids\)/ });
    assert.throws(() => sources.concat([sources.arrays(xy(0, 2)), { length: 0, get: () => [] }]), { code: 'ERR_INVALID_DATASET', message: /part 1 has length 0/ });
    assert.throws(() => sources.concat([sources.module(FIXTURE, 'openScripted', { n: 2 }) as never]), { code: 'ERR_INVALID_DATASET', message: /part 0 is a source spec.*openConcat/ });
  });

  it('close() closes every part, even when one part fails to close', async () => {
    const a = perSample(0, 2);
    const b = { length: 1, get: () => ({ x: new Float32Array(2), y: tensor(Int32Array.of(0), []) }), close: () => Promise.reject(new Error('boom')) };
    const c = perSample(3, 2);
    const concat = sources.concat([a, b, c]);
    await concat.close();
    assert.deepEqual([a.closed, c.closed], [1, 1]);
  });
});
