// sources.parquet on files written by DuckDB and Polars (test/fixtures/reference/make.mjs, which
// checked that each writer reads back the rules of reference-rules.mjs): every value read equal to
// its rule — uint32 columns DuckDB delta-encodes from 2³¹ up (which hyparquet alone reads 2³¹ off),
// INT32/INT64 extremes in the same encoding, every codec DuckDB writes in data pages v1 and v2,
// Polars' ZSTD and LZ4, and the legacy LZ4 codec of parquet-mr and older parquet-cpp — and through
// reader workers. A codec Stoker cannot decompress, and a tokenizer with no string column to use
// it, are refused at open with the file, the column and the fix.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { openParquet } from '../../src/dataset/formats/text/parquet.js';
import { specOf } from '../../src/dataset/source-spec.js';
import { DataLoader, type Tensor, sources } from '../../src/index.js';
import { HANG_MS, TEST_MS, collect, range, sorted, tempDir, within } from '../fixtures.js';
import { CODECS, EDGE_ROWS, LEGACY_LZ4, TABLE_ROWS, UINT32_ROWS, e32, e64, tableRow, u32 } from '../fixtures/reference/reference-rules.mjs';
import { TOKENIZER } from './text-targets.js';

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/reference/parquet/${name}`, import.meta.url));
const SMALL = fileURLToPath(new URL('../fixtures/text/small.parquet', import.meta.url));
const CODEC_FILES = CODECS.flatMap((c) => [`codec-${c}-v1.parquet`, `codec-${c}-v2.parquet`]);

type Sample = Record<string, Tensor | Int32Array>;
const one = (s: Sample, name: string) => (s[name] as Tensor).data[0];
const list = (s: Sample, name: string) => Array.from((s[name] as Tensor).data as ArrayLike<number>);

/** Every row of a file of the TABLE rule, read by `get`, against the rule. */
async function checkTable(path: string): Promise<void> {
  const ds = await sources.parquet(path);
  assert.equal(ds.length, TABLE_ROWS, path);
  for (const i of range(TABLE_ROWS)) {
    const s = await ds.get(i);
    const r = tableRow(i);
    assert.deepEqual({ id: one(s, 'id'), label: one(s, 'label'), x: one(s, 'x'), ids: list(s, 'ids') }, { ...r, id: BigInt(r.id) }, `${path} row ${i}`);
  }
  ds.close();
}

describe('sources.parquet reads what DuckDB and Polars write', () => {
  it('reads uint32 columns DuckDB delta-encodes from 2³¹ up exactly: every value, scalar and in lists, in the source and a reopened copy', async () => {
    const ds = await sources.parquet(fixture('uint32-delta.parquet'));
    assert.equal(ds.length, UINT32_ROWS);
    assert.equal(ds.numRowGroups, 5);
    assert.deepEqual(ds.fields.map((f) => [f.name, f.kind, 'dtype' in f ? f.dtype : '']), [['u', 'scalar', 'uint32'], ['ul', 'array', 'uint32']]);
    const wrong: number[] = [];
    for (const i of range(UINT32_ROWS)) {
      const s = await ds.get(i);
      if (one(s, 'u') !== u32(i) || list(s, 'ul').join() !== [u32(i), (u32(i) ^ 1) >>> 0].join()) wrong.push(i);
    }
    assert.deepEqual(wrong.length, 0, `${wrong.length} rows read wrong, from row ${wrong[0]}`);
    // A copy as a reader worker opens it, rows across row groups in a shuffled order.
    const again = await openParquet(specOf(ds)!.options as never);
    for (const i of range(200).map((j) => (j * 2063) % UINT32_ROWS)) assert.equal(one(await again.get(i), 'u'), u32(i), `row ${i}`);
    ds.close();
    again.close();
  });

  it('reads INT32 and INT64 extremes that DuckDB delta-encodes with deltas across their whole range, and refuses UINT64 at open', async () => {
    await assert.rejects(sources.parquet(fixture('int-edges-delta.parquet')), (e: any) => e.code === 'ERR_INVALID_DATASET' && e.message.includes('"u64"') && e.message.includes('UINT_64'));
    const ds = await sources.parquet(fixture('int-edges-delta.parquet'), { columns: ['e32', 'e64'] });
    assert.equal(ds.length, EDGE_ROWS);
    for (const i of range(EDGE_ROWS)) {
      const s = await ds.get(i);
      assert.equal(one(s, 'e32'), e32(i), `e32 row ${i}`);
      assert.equal(one(s, 'e64'), e64(i), `e64 row ${i}`);
    }
    ds.close();
  });

  for (const name of CODEC_FILES) {
    it(`reads every value of ${name} (DuckDB)`, () => checkTable(fixture(name)));
  }

  it("reads every value of Polars' ZSTD (its default) and LZ4_RAW files", async () => {
    await checkTable(fixture('polars-zstd.parquet'));
    await checkTable(fixture('polars-lz4.parquet'));
  });

  it('reads the legacy LZ4 codec as parquet-mr (Hadoop framing) and older parquet-cpp (a bare block) wrote it, equal to its LZ4_RAW twin', async () => {
    for (const name of ['hadoop_lz4_compressed.parquet', 'non_hadoop_lz4_compressed.parquet', 'lz4_raw_compressed.parquet']) {
      const ds = await sources.parquet(fixture(name), { columns: ['c0', 'v11'] });
      const rows = [];
      for (const i of range(ds.length)) {
        const s = await ds.get(i);
        rows.push({ c0: one(s, 'c0'), v11: one(s, 'v11') });
      }
      assert.deepEqual(rows, LEGACY_LZ4, name);
      ds.close();
    }
  });

  it('decompresses in reader workers: every codec file through 2 workers, each row once with its values', { timeout: TEST_MS }, async () => {
    const parts = await Promise.all([...CODEC_FILES, 'polars-zstd.parquet', 'polars-lz4.parquet'].map((n) => sources.parquet(fixture(n), { columns: ['id', 'label', 'x'] })));
    const ds = sources.concat(parts);
    const loader = await DataLoader.create(ds, { batchSize: 256, workers: 2, mode: 'streaming', dropLast: false, seed: 3 });
    try {
      assert.equal(loader.stats().workers, 2);
      const batches = await within(HANG_MS, 'an epoch', collect(loader.epoch(0)));
      const seen: number[] = [];
      for (const b of batches) {
        const id = b.get('id').data as BigInt64Array;
        const label = b.get('label').data as Int32Array;
        const x = b.get('x').data as Float32Array;
        b.sampleIds.forEach((sample, r) => {
          const row = tableRow(sample % TABLE_ROWS);
          assert.deepEqual([id[r], label[r], x[r]], [BigInt(row.id), row.label, row.x], `sample ${sample}`);
          seen.push(sample);
        });
        b.release();
      }
      assert.deepEqual(sorted(seen), range(ds.length));
    } finally {
      await loader.close();
    }
  });

  it('refuses at open a column stored with a codec Stoker cannot decompress (LZO), naming the file, the column, the codec and the fix', async (t) => {
    const path = join(tempDir(t, 'stoker-lzo-'), 'lzo.parquet');
    // hyparquet-writer stores the bytes as they are under any codec name: only the footer matters here.
    writeFileSync(path, new Uint8Array(parquetWriteBuffer({
      columnData: [{ name: 'a', data: [1, 2, 3], codec: 'LZO' }, { name: 'b', data: [4, 5, 6] }],
      schema: [{ name: 'root', num_children: 2 }, { name: 'a', type: 'INT32', repetition_type: 'REQUIRED' }, { name: 'b', type: 'INT32', repetition_type: 'REQUIRED' }],
      compressors: { LZO: (bytes: Uint8Array) => bytes },
    })));
    await assert.rejects(sources.parquet(path), (e: any) =>
      e.code === 'ERR_INVALID_DATASET' && e.message.includes(path) && e.message.includes('"a"') && e.message.includes('LZO') && e.message.includes('ZSTD') && e.message.includes('columns'));
    const ds = await sources.parquet(path, { columns: ['b'] });
    assert.deepEqual(await Promise.all(range(3).map(async (i) => one(await ds.get(i), 'b'))), [4, 5, 6], 'the other columns stay readable');
    ds.close();
  });

  it('refuses a tokenizer when no selected column is a string column, naming the option and the columns', async () => {
    const tokenizer = { path: TOKENIZER };
    await assert.rejects(sources.parquet(fixture('codec-zstd-v1.parquet'), { tokenizer }), (e: any) =>
      e.code === 'ERR_INVALID_OPTION' && e.message.includes('`tokenizer`') && e.message.includes('"id" (int64)') && e.message.includes('"ids" (list<int32>)'));
    await assert.rejects(sources.parquet(SMALL, { columns: ['id', 'x'], tokenizer }), (e: any) =>
      e.code === 'ERR_INVALID_OPTION' && e.message.includes('"text" (string)') && e.message.includes('columns'));
    const ds = await sources.parquet(SMALL, { columns: ['id', 'text'], tokenizer });
    assert.deepEqual(ds.ragged, ['text']);
    ds.close();
  });
});
