// sources.jsonl: files written by Python's json module read back exactly — scalars of their dtype,
// arrays as ragged fields, text tokenized with the BPE fixture — with the line index built once and
// cached by path, size and mtime; text without a tokenizer refused with a typed error; a corrupt
// line failing only its batch, through the loader with and without reader workers.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { jsonlCacheDir, jsonlIndexBuilds } from '../../src/dataset/formats/text/jsonl-index.js';
import { JsonlSource, jsonlSource } from '../../src/dataset/formats/text/jsonl.js';
import { openSource, specOf } from '../../src/dataset/source-spec.js';
import { BatchError, DataLoader, type Tensor, sources } from '../../src/index.js';
import { HANG_MS, TEST_MS, collect, range, sorted, within } from '../fixtures.js';
import { EXPECTED, TOKENIZER } from './text-targets.js';

const PYTHON = '/usr/bin/python3';
const noPython = existsSync(PYTHON) ? false : `${PYTHON} is not installed`;
const dir = mkdtempSync(join(tmpdir(), 'stoker-jsonl-'));
const savedCache = process.env.XDG_CACHE_HOME;
before(() => {
  process.env.XDG_CACHE_HOME = join(dir, 'cache');
});
after(() => {
  if (savedCache === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = savedCache;
  rmSync(dir, { recursive: true, force: true });
});

const TEXTS = Object.keys(EXPECTED);

/**
 * n records by Python's json.dumps, one per line, with a blank line after record 2 and the usual
 * trailing newline: id, label (id mod 3), x (id mod 4 quarter-steps: exact in float32), text.
 */
const WRITE = `
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
texts = json.loads(sys.argv[3])
with open(path, 'w', encoding='utf-8') as f:
    for i in range(n):
        f.write(json.dumps({'id': i, 'label': i % 3, 'x': [j / 4 for j in range(i % 4)], 'text': texts[i % len(texts)], 'note': 'é ✓'}) + '\\n')
        if i == 2:
            f.write('\\n')
`;

let fileNo = 0;
function written(n: number): string {
  const path = join(dir, `d${fileNo++}.jsonl`);
  execFileSync(PYTHON, ['-c', WRITE, path, String(n), JSON.stringify(TEXTS)], { stdio: ['ignore', 'ignore', 'inherit'] });
  return path;
}

describe('sources.jsonl', { skip: noPython }, () => {
  it('reads each record exactly: scalars of their dtype, arrays as ragged fields, text as token ids', async () => {
    const path = written(11);
    const ds = sources.jsonl(path, { fields: { id: 'int64', label: 'int32', x: 'float32' }, text: 'text', tokenizer: { path: TOKENIZER, addSpecialTokens: false } });
    assert.equal(ds.length, 11, 'the blank line and the trailing newline are not records');
    assert.deepEqual(ds.ragged, ['x', 'text']);
    assert.deepEqual(ds.raggedMax, {});
    for (const i of range(11)) {
      const s = await ds.get(i);
      assert.equal((s.id as Tensor).dtype, 'int64');
      assert.deepEqual((s.id as Tensor).shape, []);
      assert.equal((s.id as Tensor).data[0], BigInt(i));
      assert.equal((s.label as Tensor).data[0], i % 3);
      assert.deepEqual((s.x as Tensor).shape, [i % 4]);
      assert.deepEqual(Array.from((s.x as Tensor).data as Float32Array), range(i % 4).map((j) => j / 4));
      assert.ok(s.text instanceof Int32Array);
      assert.deepEqual(Array.from(s.text), EXPECTED[TEXTS[i % TEXTS.length]!]);
    }
    ds.close();
  });

  it('gives tokenized text fields raggedMax from the tokenizer maxLength, and a reopened copy reads the same', async () => {
    const path = written(5);
    const ds = jsonlSource(path, { fields: ['x'], text: ['text'], tokenizer: { path: TOKENIZER, maxLength: 4 } });
    assert.deepEqual(ds.raggedMax, { text: 4 });
    const again = (await openSource(specOf(ds)!)) as JsonlSource;
    for (const i of range(5)) {
      assert.deepEqual(Array.from((await ds.get(i)).text as Int32Array), [1, ...EXPECTED[TEXTS[i % TEXTS.length]!]!, 2].slice(0, 4));
      assert.deepEqual(await again.get(i), await ds.get(i));
    }
    ds.close();
    again.close();
  });

  it('builds the line index once and reuses the cached one, until the file changes', async () => {
    const path = written(7);
    const b0 = jsonlIndexBuilds();
    jsonlSource(path, { fields: ['label'] }).close();
    assert.equal(jsonlIndexBuilds(), b0 + 1);
    assert.ok(readdirSync(jsonlCacheDir()).length > 0, 'the index is cached under XDG_CACHE_HOME');
    const cached = jsonlSource(path, { fields: ['label'] });
    assert.equal(jsonlIndexBuilds(), b0 + 1, 'the second open reads the cache');
    assert.equal(cached.length, 7);
    cached.close();
    appendFileSync(path, '{"label": 9}\n');
    const grown = jsonlSource(path, { fields: ['label'] });
    assert.equal(jsonlIndexBuilds(), b0 + 2, 'a changed file is indexed again');
    assert.equal(grown.length, 8);
    assert.equal(((await grown.get(7)).label as Tensor).data[0], 9);
    grown.close();
    jsonlSource(path, { fields: ['label'], index: 'off' }).close();
    assert.equal(jsonlIndexBuilds(), b0 + 3, "index: 'off' builds every time");
  });

  it('refuses text fields without a tokenizer with a typed error pointing at the tokenizer option', () => {
    const path = written(3);
    for (const options of [{ text: 'text' }, { fields: ['text'] }]) {
      assert.throws(() => sources.jsonl(path, options), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('tokenizer') && e.message.includes('"text"'));
    }
    assert.throws(() => sources.jsonl(path, {}), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('fields'));
    assert.throws(() => sources.jsonl(path, { fields: ['missing'] }), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes('"missing"'));
    assert.throws(() => sources.jsonl(path, { fields: { label: 'float16' } }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('fields.label'));
  });

  it('refuses a tokenizer given without a text field to use it on (it was silently ignored), naming both options', () => {
    const path = written(3);
    assert.throws(() => sources.jsonl(path, { fields: ['label'], tokenizer: { path: TOKENIZER } }), (e: any) => e.code === 'ERR_INVALID_OPTION' && /`tokenizer` is given, but no `text` field/.test(e.message));
  });

  it("reads Python's NaN, Infinity and -Infinity (json.dumps writes them) as those floats, and refuses them in integer fields", async () => {
    const path = join(dir, 'nonfinite.jsonl');
    execFileSync(PYTHON, ['-c', `
import json, sys
nan, inf = float('nan'), float('inf')
with open(sys.argv[1], 'w') as f:
    f.write(json.dumps({'x': nan, 'v': [1.5, nan, -inf, inf], 'd': -inf, 'note': 'NaN, Infinity: -Infinity', 'n': 3, 'deep': {'k': [nan]}}) + '\\n')
    f.write(json.dumps({'x': inf, 'v': [], 'd': 0.1, 'note': '"NaN"', 'n': nan, 'deep': {}}) + '\\n')
    f.write(json.dumps({'x': -inf, 'v': [-0.0], 'd': nan, 'note': '', 'n': inf, 'deep': None}) + '\\n')
`, path]);
    const ds = jsonlSource(path, { fields: { x: 'float32', v: 'float64', d: 'float64' } });
    const got = await Promise.all(range(3).map((i) => ds.get(i)));
    const values = (i: number, f: string) => Array.from((got[i]![f] as Tensor).data as Float64Array);
    assert.deepEqual(values(0, 'x'), [NaN]);
    assert.deepEqual(values(0, 'v'), [1.5, NaN, -Infinity, Infinity]);
    assert.deepEqual(values(0, 'd'), [-Infinity]);
    assert.deepEqual(values(1, 'x'), [Infinity]);
    assert.deepEqual(values(1, 'v'), []);
    assert.deepEqual(values(1, 'd'), [0.1]);
    assert.deepEqual(values(2, 'x'), [-Infinity]);
    assert.ok(Object.is(values(2, 'v')[0], -0));
    assert.deepEqual(values(2, 'd'), [NaN]);
    assert.deepEqual(ds.record(0).note, 'NaN, Infinity: -Infinity', 'text inside strings is left alone');
    assert.deepEqual(ds.record(1).note, '"NaN"');
    assert.deepEqual(ds.record(0).deep, { k: [NaN] });
    ds.close();
    const ints = jsonlSource(path, { fields: { n: 'int32' } });
    assert.equal(((await ints.get(0)).n as Tensor).data[0], 3);
    await assert.rejects(() => ints.get(1), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes(path) && e.message.includes('record 1') && e.message.includes('NaN') && e.message.includes('int32'));
    await assert.rejects(() => ints.get(2), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes('record 2') && e.message.includes('Infinity'));
    ints.close();
    const int64 = jsonlSource(path, { fields: { n: 'int64' } });
    await assert.rejects(() => int64.get(1), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes('NaN') && e.message.includes('int64'));
    int64.close();
  });

  it('refuses text with a lone surrogate (a JSON \\ud800 escape: not Unicode) rather than tokenizing a replacement character', async () => {
    const path = join(dir, 'surrogate.jsonl');
    writeFileSync(path, '{"text": "low"}\n{"text": "lo\\ud800w"}\n{"text": "\\ud83d\\ude00 low"}\n');
    const ds = jsonlSource(path, { text: 'text', tokenizer: { path: TOKENIZER, addSpecialTokens: false } });
    assert.deepEqual(Array.from((await ds.get(0)).text as Int32Array), [16]);
    await assert.rejects(() => ds.get(1), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes(path) && e.message.includes('record 1') && e.message.includes('lone surrogate') && e.message.includes('U+D800'));
    assert.ok(((await ds.get(2)).text as Int32Array).length > 0, 'a surrogate pair is a character');
    ds.close();
  });

  it('still refuses lines that are not JSON even with NaN or Infinity in them', async () => {
    const path = join(dir, 'nonfinite-bad.jsonl');
    writeFileSync(path, '{"a": 1}\n{"a": NaNa}\n{"a": -NaN}\n{"a": Infinity,}\n{"a": nan}\n{"a": [Infinity}\n{"a": "x" NaN}\n');
    const ds = jsonlSource(path, { fields: ['a'] });
    for (const i of range(6).map((k) => k + 1)) await assert.rejects(() => ds.get(i), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes(`record ${i} is not valid JSON`), `record ${i}`);
    ds.close();
  });

  it('fails the read of a corrupt or mistyped line with ERR_BAD_FILE naming the file and the record', async () => {
    const path = join(dir, 'corrupt.jsonl');
    writeFileSync(path, '{"a": 1}\n{"a": 2\n{"a": "three"}\n[4]\n');
    const ds = jsonlSource(path, { fields: { a: 'int32' } });
    assert.equal(ds.length, 4);
    assert.equal(((await ds.get(0)).a as Tensor).data[0], 1);
    await assert.rejects(() => ds.get(1), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes(path) && e.message.includes('record 1 is not valid JSON'));
    await assert.rejects(() => ds.get(2), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes('record 2') && e.message.includes('not a number'));
    await assert.rejects(() => ds.get(3), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes('not a JSON object'));
    ds.close();
  });

  for (const workers of [0, 2]) {
    it(`delivers every record exactly once per epoch, and a corrupt line fails only its batch (workers: ${workers})`, { timeout: TEST_MS }, async () => {
      const n = 40;
      const path = join(dir, `loader${workers}.jsonl`);
      writeFileSync(path, range(n).map((i) => (i === 13 ? '{"id": 13, "y": ' : JSON.stringify({ id: i, y: i * 2 }))).join('\n') + '\n');
      const loader = await DataLoader.create(sources.jsonl(path, { fields: { id: 'int32', y: 'float32' } }), { batchSize: 4, workers, shuffle: false, mode: 'streaming', errors: 'skip' });
      try {
        const batches = await within(HANG_MS, 'epoch 0', collect(loader.epoch(0)));
        const ids = batches.flatMap((b) => Array.from(b.get('id').data as Int32Array));
        assert.deepEqual(sorted(ids), range(n).filter((i) => i < 12 || i >= 16));
        for (const b of batches) {
          assert.deepEqual(Array.from(b.get('y').data as Float32Array), Array.from(b.get('id').data as Int32Array, (i) => i * 2));
          b.release();
        }
        const s = loader.stats().epochs[0]!;
        assert.equal(s.skippedBatches, 1);
        assert.deepEqual(s.skipped[0]!.sampleIds, [12, 13, 14, 15]);
        assert.match(s.skipped[0]!.reason, /record 13 is not valid JSON/);
      } finally {
        await loader.close();
      }
    });
  }

  it('a corrupt line surfaces as a BatchError naming its samples under errors: throw', { timeout: TEST_MS }, async () => {
    const path = join(dir, 'throw.jsonl');
    writeFileSync(path, range(8).map((i) => (i === 5 ? 'not json' : JSON.stringify({ y: i }))).join('\n'));
    const loader = await DataLoader.create(sources.jsonl(path, { fields: ['y'] }), { batchSize: 4, shuffle: false, mode: 'streaming' });
    try {
      const error = await within(HANG_MS, 'failing epoch', collect(loader.epoch(0)).then(() => undefined, (e: unknown) => e));
      assert.ok(error instanceof BatchError);
      assert.deepEqual(error.sampleIds, [4, 5, 6, 7]);
    } finally {
      await loader.close();
    }
  });
});
