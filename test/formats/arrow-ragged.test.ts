// sources.arrow with `ragged`: string, large-string, binary and (large) list columns as ragged fields
// — strings tokenized with the BPE fixture or as UTF-8 bytes, lists as their values — beside the
// ordinary columns, over several record batches (the last one kept per reader), reopened as reader
// workers do; bad choices refused with typed errors naming the knob.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Binary, Field, Float32, Int32, LargeList, LargeUtf8, List, Table, Utf8, tableToIPC, vectorFromArray } from 'apache-arrow';
import { ArrowRaggedSource, openArrowRagged } from '../../src/dataset/formats/arrow/arrow-ragged.js';
import { openSource, specOf } from '../../src/dataset/source-spec.js';
import { type Tensor, sources } from '../../src/index.js';
import { range } from '../fixtures.js';
import { EXPECTED, TOKENIZER } from './text-targets.js';

const dir = mkdtempSync(join(tmpdir(), 'stoker-arrow-ragged-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const TEXTS = Object.keys(EXPECTED);

/** Rows [start, start + n): id, text (utf8), big (large utf8), ids list<int32> of length id % 4, xs large_list<float32>, raw binary. */
function rows(start: number, n: number): Table {
  const ids = range(n).map((i) => start + i);
  return new Table({
    id: vectorFromArray(ids, new Int32()),
    text: vectorFromArray(ids.map((i) => TEXTS[i % TEXTS.length]!), new Utf8()),
    big: vectorFromArray(ids.map((i) => `é${i}`), new LargeUtf8()),
    ids: vectorFromArray(ids.map((i) => range(i % 4).map((j) => i * 10 + j)), new List(new Field('item', new Int32()))),
    xs: vectorFromArray(ids.map((i) => range(i % 3).map((j) => j / 2)), new LargeList(new Field('item', new Float32()))),
    raw: vectorFromArray(ids.map((i) => new Uint8Array([i, 255 - i])), new Binary()),
  });
}

function file(format: 'file' | 'stream'): string {
  const path = join(dir, `t-${format}.arrow`);
  writeFileSync(path, tableToIPC(rows(0, 5).concat(rows(5, 4), rows(9, 3)), format));
  return path;
}

describe('sources.arrow with ragged columns', () => {
  for (const format of ['file', 'stream'] as const) {
    it(`reads strings as token ids or UTF-8 bytes and lists as their values, beside ordinary columns (${format})`, async () => {
      const ds = sources.arrow(file(format), {
        columns: ['text', 'id'],
        ragged: { text: { tokenizer: { path: TOKENIZER, addSpecialTokens: false } }, big: 'values', ids: 'values', xs: 'values', raw: 'values' },
      }) as ArrowRaggedSource;
      assert.ok(ds instanceof ArrowRaggedSource);
      assert.equal(ds.length, 12);
      assert.deepEqual(ds.ragged, ['text', 'big', 'ids', 'xs', 'raw']);
      for (const i of range(12)) {
        const s = await ds.get(i);
        assert.deepEqual(Object.keys(s), ['text', 'id', 'big', 'ids', 'xs', 'raw']);
        assert.deepEqual((s.id as Tensor).shape, []);
        assert.equal((s.id as Tensor).data[0], i);
        assert.deepEqual(Array.from(s.text as Int32Array), EXPECTED[TEXTS[i % TEXTS.length]!]);
        assert.deepEqual(Buffer.from(s.big as Uint8Array).toString('utf8'), `é${i}`);
        assert.equal((s.ids as Tensor).dtype, 'int32');
        assert.deepEqual(Array.from((s.ids as Tensor).data as Int32Array), range(i % 4).map((j) => i * 10 + j));
        assert.equal((s.xs as Tensor).dtype, 'float32');
        assert.deepEqual(Array.from((s.xs as Tensor).data as Float32Array), range(i % 3).map((j) => j / 2));
        assert.deepEqual(Array.from(s.raw as Uint8Array), [i, 255 - i]);
      }
      assert.equal(ds.decodedBatches, 3, 'rows in order decode each record batch once');
      await ds.close();
    });
  }

  it('a reopened copy (as reader workers make) reads the same, and raggedMax comes from the tokenizer maxLength', async () => {
    const ds = sources.arrow(file('file'), { columns: ['id'], ragged: { text: { tokenizer: { path: TOKENIZER, maxLength: 3 } }, ids: 'values' } }) as ArrowRaggedSource;
    assert.deepEqual(ds.raggedMax, { text: 3 });
    const again = (await openSource(specOf(ds)!)) as ArrowRaggedSource;
    const direct = openArrowRagged(specOf(ds)!.options as never);
    for (const i of [11, 0, 6, 5]) {
      assert.deepEqual(await again.get(i), await ds.get(i));
      assert.deepEqual(await direct.get(i), await ds.get(i));
      assert.equal(((await ds.get(i)).text as Int32Array).length, 3);
    }
    await ds.close();
    await again.close();
    await direct.close();
  });

  it('refuses a ragged column that does not exist, a tokenizer on a list, and values of a number column', () => {
    const path = file('stream');
    assert.throws(() => sources.arrow(path, { ragged: { nope: 'values' } }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('ragged.nope'));
    assert.throws(() => sources.arrow(path, { ragged: { ids: { tokenizer: { path: TOKENIZER } } } }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('ragged.ids'));
    assert.throws(() => sources.arrow(path, { ragged: { id: 'values' } }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('ragged.id'));
    assert.throws(() => sources.arrow(path, { ragged: {} }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('ragged'));
  });
});
