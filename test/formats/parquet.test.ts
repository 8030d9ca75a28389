// sources.parquet: a committed fixture written by another library (hyparquet-writer;
// test/fixtures/text/make-parquet.mjs) read back exactly — numeric columns as scalars, list<int32>
// as a ragged field, strings tokenized with the BPE fixture — row groups read by position with the
// last one kept; unreadable columns and text without a tokenizer refused with typed errors; a
// larger file written in the test delivered exactly once per epoch through reader workers.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { ParquetSource, openParquet } from '../../src/dataset/formats/text/parquet.js';
import { specOf } from '../../src/dataset/source-spec.js';
import { DataLoader, type Tensor, sources } from '../../src/index.js';
import { HANG_MS, TEST_MS, collect, range, sorted, within } from '../fixtures.js';
import { EXPECTED, TOKENIZER } from './text-targets.js';

const SMALL = fileURLToPath(new URL('../fixtures/text/small.parquet', import.meta.url));
const TEXTS = ['lower newest, low!', 'wider', 'low lower'];
const dir = mkdtempSync(join(tmpdir(), 'stoker-parquet-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('sources.parquet', () => {
  it('reads each row of the fixture exactly: scalars of the column dtype, list<int32> ragged, strings as token ids', async () => {
    const ds = await sources.parquet(SMALL, { columns: ['id', 'label', 'x', 'ids', 'text'], tokenizer: { path: TOKENIZER, addSpecialTokens: false } });
    assert.equal(ds.length, 10);
    assert.equal(ds.numRowGroups, 3);
    const starts = Array.from(ds.partStarts());
    assert.equal(starts.length, 3, "each row group's first row: the block shuffle's blocks");
    assert.equal(starts[0], 0);
    assert.ok(starts.every((s, k) => k === 0 || (s > starts[k - 1]! && s < 10)), String(starts));
    assert.deepEqual(ds.fields.map((f) => [f.name, f.kind, 'dtype' in f ? f.dtype : 'text']), [
      ['id', 'scalar', 'int64'], ['label', 'scalar', 'int32'], ['x', 'scalar', 'float32'], ['ids', 'array', 'int32'], ['text', 'text', 'text'],
    ]);
    for (const i of range(10)) {
      const s = await ds.get(i);
      assert.equal((s.id as Tensor).data[0], BigInt(i));
      assert.equal((s.label as Tensor).dtype, 'int32');
      assert.equal((s.label as Tensor).data[0], i % 3);
      assert.equal((s.x as Tensor).data[0], i / 4);
      assert.equal((s.ids as Tensor).dtype, 'int32');
      assert.deepEqual(Array.from((s.ids as Tensor).data as Int32Array), range(i % 4).map((j) => 10 * i + j));
      assert.deepEqual(Array.from(s.text as Int32Array), EXPECTED[TEXTS[i % 3]!]);
    }
    assert.equal(ds.decodedRowGroups, 3, 'rows in order decode each row group once: the last one is kept');
    ds.close();
  });

  it('reads only the selected columns, in the order given, and a reopened copy (as reader workers make) reads the same', async () => {
    const ds = await sources.parquet(SMALL, { columns: ['ids', 'label'] });
    assert.deepEqual(Object.keys(await ds.get(5)), ['ids', 'label']);
    const again = await openParquet(specOf(ds)!.options as never);
    for (const i of [9, 0, 4, 3]) assert.deepEqual(await again.get(i), await ds.get(i));
    ds.close();
    again.close();
  });

  it('refuses string columns without a tokenizer, binary columns, unknown columns, and a file that is not Parquet', async () => {
    await assert.rejects(sources.parquet(SMALL, { columns: ['text'] }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('tokenizer') && e.message.includes('"text"'));
    await assert.rejects(sources.parquet(SMALL, { columns: ['blob'] }), (e: any) => e.code === 'ERR_INVALID_DATASET' && e.message.includes('"blob"') && e.message.includes('binary'));
    await assert.rejects(sources.parquet(SMALL, { columns: ['nope'] }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('"nope"') && e.message.includes('"label"'));
    await assert.rejects(sources.parquet(SMALL, { colums: ['id'] } as never), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('colums'));
    const junk = join(dir, 'junk.parquet');
    writeFileSync(junk, Buffer.from('PAR1 this is not a parquet file at all PAR1'));
    await assert.rejects(sources.parquet(junk), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes(junk));
  });

  it('delivers every row exactly once per epoch with its content through 2 reader workers', { timeout: TEST_MS }, async () => {
    const n = 150;
    const path = join(dir, 'rows.parquet');
    const r = range(n);
    writeFileSync(path, new Uint8Array(parquetWriteBuffer({
      rowGroupSize: 16,
      columnData: [{ name: 'id', data: r }, { name: 'y', data: r.map((i) => i * 3) }],
      schema: [{ name: 'root', num_children: 2 }, { name: 'id', type: 'INT32', repetition_type: 'REQUIRED' }, { name: 'y', type: 'DOUBLE', repetition_type: 'REQUIRED' }],
    })));
    const ds = await sources.parquet(path);
    assert.ok(ds instanceof ParquetSource);
    const loader = await DataLoader.create(ds, { batchSize: 8, workers: 2, mode: 'streaming', dropLast: false, seed: 5 });
    try {
      assert.equal(loader.stats().workers, 2);
      for (let epoch = 0; epoch < 2; epoch++) {
        const batches = await within(HANG_MS, `epoch ${epoch}`, collect(loader.epoch(epoch)));
        const ids = batches.flatMap((b) => Array.from(b.get('id').data as Int32Array));
        assert.deepEqual(sorted(ids), range(n));
        assert.deepEqual(sorted(batches.flatMap((b) => Array.from(b.sampleIds))), range(n));
        for (const b of batches) {
          assert.deepEqual(Array.from(b.get('y').data as Float64Array), Array.from(b.get('id').data as Int32Array, (i) => i * 3));
          b.release();
        }
      }
    } finally {
      await loader.close();
    }
  });
});
