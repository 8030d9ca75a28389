// inspectPath on the text formats: JSONL (numeric and array fields of record 0 read, text fields
// listed), Parquet (the committed fixture: strings and binary left out), a Megatron .idx (documents,
// with the longest as raggedMax); ragged fields are named in the details.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { detectFormat, inspectPath } from '../../src/dataset/open-path.js';
import { sources } from '../../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'stoker-inspect-text-'));
const savedCache = process.env.XDG_CACHE_HOME;
// The JSONL line index is cached: into this test's folder, not the user's cache.
before(() => {
  process.env.XDG_CACHE_HOME = join(dir, 'cache');
});
after(() => {
  if (savedCache === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = savedCache;
  rmSync(dir, { recursive: true, force: true });
});

/** A Megatron index of uint16 documents with these lengths (one sequence each), and its .bin. */
function megatron(lengths: number[]): string {
  const S = lengths.length;
  const idx = Buffer.alloc(34 + 12 * S + 8 * (S + 1));
  idx.write('MMIDIDX\x00\x00', 0, 'latin1');
  idx.writeBigUInt64LE(1n, 9);
  idx.writeUInt8(8, 17);
  idx.writeBigUInt64LE(BigInt(S), 18);
  idx.writeBigUInt64LE(BigInt(S + 1), 26);
  let p = 0;
  lengths.forEach((n, s) => {
    idx.writeInt32LE(n, 34 + 4 * s);
    idx.writeBigInt64LE(BigInt(p), 34 + 4 * S + 8 * s);
    p += 2 * n;
  });
  for (let d = 0; d <= S; d++) idx.writeBigInt64LE(BigInt(d), 34 + 12 * S + 8 * d);
  writeFileSync(join(dir, 'docs.bin'), Buffer.alloc(p));
  writeFileSync(join(dir, 'docs.idx'), idx);
  return join(dir, 'docs.idx');
}

describe('inspectPath (text formats)', () => {
  it('describes a JSONL file by the numeric and array fields of its first record, listing the text fields', async () => {
    const path = join(dir, 'd.jsonl');
    writeFileSync(path, '{"text": "hi", "label": 1, "ids": [1, 2, 3]}\n{"text": "yo", "label": 0, "ids": [4]}\n');
    assert.equal(detectFormat(path), 'jsonl');
    const d = await inspectPath(path);
    assert.equal(d.length, 2);
    assert.deepEqual(d.columns.map((c) => [c.name, c.dtype, c.shape]), [['label', 'float32', []], ['ids', 'float32', [3]]]);
    assert.deepEqual(d.details.ragged, ['ids']);
    assert.deepEqual(d.details.text, ['text']);
  });

  it('describes a Parquet file by its numeric and list columns, listing the string columns', async () => {
    const path = fileURLToPath(new URL('../fixtures/text/small.parquet', import.meta.url));
    assert.equal(detectFormat(path), 'parquet');
    const d = await inspectPath(path);
    assert.equal(d.length, 10);
    assert.deepEqual(d.columns.map((c) => [c.name, c.dtype]), [['id', 'int64'], ['label', 'int32'], ['x', 'float32'], ['ids', 'int32']]);
    assert.deepEqual(d.details.text, ['text']);
    assert.deepEqual(d.details.ragged, ['ids']);
    assert.equal(d.details.rowGroups, 3);
  });

  it('describes a Megatron index as documents with the longest as raggedMax', async () => {
    const path = megatron([3, 9, 4]);
    assert.equal(detectFormat(path), 'megatron');
    const d = await inspectPath(path);
    assert.equal(d.length, 3);
    assert.deepEqual(d.columns.map((c) => [c.name, c.dtype]), [['tokens', 'uint16']]);
    assert.deepEqual(d.details.raggedMax, { tokens: 9 });
    assert.equal(d.readWith, `sources.tokens(${JSON.stringify(path.replace(/\.idx$/, '.bin'))}, { index: true })`);
  });

  it('recognises a Megatron .bin by the index beside it, and a flat .bin as nanoGPT token windows, naming the source that reads each', async () => {
    const idx = megatron([3, 9, 4]);
    const bin = idx.replace(/\.idx$/, '.bin');
    assert.equal(detectFormat(bin), 'megatron');
    const pair = await inspectPath(bin);
    assert.equal(pair.length, 3);
    assert.deepEqual(pair.details.raggedMax, { tokens: 9 });

    const flat = join(dir, 'train.bin');
    writeFileSync(flat, Buffer.from(Uint16Array.from({ length: 1000 }, (_, i) => i).buffer));
    assert.equal(detectFormat(flat), 'tokens');
    const d = await inspectPath(flat, { contextLength: 64 });
    // Windows of 65 tokens every 64: floor((1000 − 1) / 64) of them.
    assert.equal(d.length, 15);
    assert.deepEqual(d.columns.map((c) => [c.name, c.dtype, c.shape]), [['tokens', 'uint16', [65]]]);
    assert.equal(d.details.tokens, 1000);
    assert.equal(d.readWith, `sources.tokens(${JSON.stringify(flat)}, { contextLength: 64 })`);
    assert.equal(sources.tokens(flat, { contextLength: 64 }).length, d.length, 'the named call reads what inspect describes');
    const wide = await inspectPath(flat, { contextLength: 64, tokenDtype: 'uint32' });
    assert.equal(wide.details.tokens, 500);
    assert.match(wide.readWith, /dtype: 'uint32'/);
  });
});
