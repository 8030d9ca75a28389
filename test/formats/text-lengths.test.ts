// Lengths of tokenized text (`loadLengths(field)`): equal to what get(i) gives for every record of
// a JSONL file written by Python's json, of the Parquet fixture and of an Arrow file; counted by a
// pool of worker threads over contiguous ranges, cached on disk and read back by a second open
// without starting a worker; a changed file or tokenizer recounted; a bad record a typed error
// naming the file and its line; and DataLoader.create(sources.jsonl(… tokenizer …), { pack })
// delivering every token of every document exactly once, best-fit and concat, with reader workers.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { appendFileSync, copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Field, Int32, List, Table, Utf8, tableToIPC, vectorFromArray } from 'apache-arrow';
import { parquetWriteBuffer } from 'hyparquet-writer';
import type { ArrowRaggedSource } from '../../src/dataset/formats/arrow/arrow-ragged.js';
import { lengthThreads, lengthWorkersStarted, lengthsCacheDir } from '../../src/dataset/formats/text/text-lengths.js';
import { DataLoader, LoaderError, type Tensor, sources } from '../../src/index.js';
import { TEST_MS, range } from '../fixtures.js';
import { TOKENIZER } from './text-targets.js';

const PYTHON = '/usr/bin/python3';
const noPython = existsSync(PYTHON) ? false : `${PYTHON} is not installed`;
const SMALL = fileURLToPath(new URL('../fixtures/text/small.parquet', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'stoker-text-lengths-'));
const savedCache = process.env.XDG_CACHE_HOME;
before(() => {
  process.env.XDG_CACHE_HOME = join(dir, 'cache');
});
after(() => {
  if (savedCache === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = savedCache;
  rmSync(dir, { recursive: true, force: true });
});

/**
 * n records by Python's json.dumps: `text` of 1–40 words of the BPE fixture's vocabulary (seeded),
 * `ids` a list of i % 5 numbers; a blank line after record 2; `bad`: record `bad` holds a number
 * as its text instead.
 */
const WRITE = `
import json, random, sys
path, n, bad = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
words = ['lower', 'newest,', 'low!', 'wider', 'low', 'new', 'est', 'lowest', 'wide']
rng = random.Random(n)
with open(path, 'w', encoding='utf-8') as f:
    for i in range(n):
        text = ' '.join(rng.choice(words) for _ in range(rng.randint(1, 40)))
        f.write(json.dumps({'id': i, 'text': 12 if i == bad else text, 'ids': list(range(i % 5))}) + '\\n')
        if i == 2:
            f.write('\\n')
`;

let fileNo = 0;
function written(n: number, bad = -1): string {
  const path = join(dir, `d${fileNo++}.jsonl`);
  execFileSync(PYTHON, ['-c', WRITE, path, String(n), String(bad)], { stdio: ['ignore', 'ignore', 'inherit'] });
  return path;
}

const lengthOf = (v: unknown) => (v instanceof Int32Array || v instanceof Uint8Array ? v.length : (v as Tensor).shape[0]!);

describe('loadLengths of tokenized text', { skip: noPython, timeout: TEST_MS }, () => {
  it('JSONL: every record\'s token count equals get(i)\'s, counted by one worker per 2 000 records over contiguous ranges', async () => {
    const path = written(4500);
    const tokenizer = { path: TOKENIZER, addSpecialTokens: true };
    const ds = sources.jsonl(path, { text: 'text', fields: { ids: 'int32' }, tokenizer });
    const before = lengthWorkersStarted();
    const lengths = await ds.loadLengths('text');
    assert.equal(lengthWorkersStarted() - before, lengthThreads(4500));
    assert.ok(lengthThreads(4500) >= 1 && lengthThreads(4500) <= 2);
    assert.equal(lengths.length, 4500);
    for (const i of range(4500)) assert.equal(lengths[i], ((await ds.get(i)).text as Int32Array).length, `record ${i}`);
    assert.ok(new Set(lengths).size > 20, 'the lengths vary');
    // A list field: its first dimension, on this thread (no tokenizer, no worker).
    const mid = lengthWorkersStarted();
    const ids = await ds.loadLengths('ids');
    assert.equal(lengthWorkersStarted(), mid);
    for (const i of range(4500)) assert.equal(ids[i], i % 5);
    await assert.rejects(ds.loadLengths('id'), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_OPTION' && /"id"/.test(e.message));
    await assert.rejects(ds.loadLengths(), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_OPTION' && /"ids", "text"/.test(e.message));
    ds.close();
  });

  it('a second open reads the cache without starting a worker; a changed file or tokenizer is counted again', async () => {
    const path = written(300);
    const open = (tokenizer: { path: string; maxLength?: number }) => sources.jsonl(path, { text: 'text', tokenizer });
    const first = await open({ path: TOKENIZER }).loadLengths();
    assert.ok(readdirSync(lengthsCacheDir()).some((f) => f.endsWith('.len')), 'the table is cached');
    let started = lengthWorkersStarted();
    const again = open({ path: TOKENIZER });
    assert.deepEqual(await again.loadLengths(), first);
    assert.equal(lengthWorkersStarted(), started, 'no worker for a cached table');
    again.close();

    // Another maxLength: other lengths, counted again.
    const capped = open({ path: TOKENIZER, maxLength: 6 });
    const short = await capped.loadLengths();
    assert.equal(lengthWorkersStarted(), started + 1);
    for (const i of range(300)) assert.equal(short[i], Math.min(6, first[i]!));
    for (const i of [0, 7, 299]) assert.equal(short[i], ((await capped.get(i)).text as Int32Array).length);
    capped.close();

    // Another tokenizer.json (the same vocabulary, written again with other whitespace): counted again.
    const copy = join(dir, 'tokenizer-copy.json');
    writeFileSync(copy, JSON.stringify(JSON.parse(readFileSync(TOKENIZER, 'utf8')), null, 1));
    started = lengthWorkersStarted();
    assert.deepEqual(await open({ path: copy }).loadLengths(), first);
    assert.equal(lengthWorkersStarted(), started + 1);
    // The same bytes under another path are the same tokenizer: the cache is keyed by its digest.
    const same = join(dir, 'tokenizer-same.json');
    copyFileSync(TOKENIZER, same);
    assert.deepEqual(await open({ path: same }).loadLengths(), first);
    assert.equal(lengthWorkersStarted(), started + 1);

    // The file grows by one record: a new table, of the new length.
    appendFileSync(path, `${JSON.stringify({ text: 'lower lower lower' })}\n`);
    const grown = open({ path: TOKENIZER });
    const more = await grown.loadLengths();
    assert.equal(lengthWorkersStarted(), started + 2);
    assert.equal(more.length, 301);
    assert.deepEqual(more.subarray(0, 300), first);
    assert.equal(more[300], ((await grown.get(300)).text as Int32Array).length);
    grown.close();
  });

  it('a damaged cached table is not used: the lengths are counted again', async () => {
    const path = written(50);
    const want = await sources.jsonl(path, { text: 'text', tokenizer: { path: TOKENIZER, maxLength: 30 } }).loadLengths();
    for (const f of readdirSync(lengthsCacheDir())) {
      const p = join(lengthsCacheDir(), f);
      const bytes = readFileSync(p);
      bytes.writeUInt32LE(1000, bytes.length - 4);
      writeFileSync(p, bytes);
    }
    const started = lengthWorkersStarted();
    assert.deepEqual(await sources.jsonl(path, { text: 'text', tokenizer: { path: TOKENIZER, maxLength: 30 } }).loadLengths(), want);
    assert.equal(lengthWorkersStarted(), started + 1, 'a length past maxLength is refused, and the pass runs again');
  });

  it('a bad record fails the pass with a typed error naming the file and its line', async () => {
    const path = written(2600, 2345);
    const ds = sources.jsonl(path, { text: 'text', tokenizer: { path: TOKENIZER } });
    // Record 2345 is on line 2347: the blank line after record 2 is a line but not a record.
    const bad = (e: unknown) => e instanceof LoaderError && e.code === 'ERR_BAD_FILE' && e.message.includes(path) && /record 2345/.test(e.message) && /line 2347/.test(e.message);
    await assert.rejects(ds.loadLengths('text'), bad);
    await assert.rejects(DataLoader.create(ds, { batchSize: 4, pack: { contextLength: 256 } }), bad);
    ds.close();
  });

  it('Parquet: the fixture\'s text and list columns, and a larger file over several workers, equal to get(i)', async () => {
    const small = await sources.parquet(SMALL, { columns: ['ids', 'text'], tokenizer: { path: TOKENIZER, addSpecialTokens: false } });
    const text = await small.loadLengths('text');
    const ids = await small.loadLengths('ids');
    for (const i of range(10)) {
      const s = await small.get(i);
      assert.equal(text[i], lengthOf(s.text), `text ${i}`);
      assert.equal(ids[i], lengthOf(s.ids), `ids ${i}`);
    }
    small.close();
    const n = 4100;
    const words = ['lower', 'newest,', 'low!', 'wider'];
    const path = join(dir, 'big.parquet');
    writeFileSync(path, new Uint8Array(parquetWriteBuffer({
      rowGroupSize: 700,
      columnData: [{ name: 'text', data: range(n).map((i) => range(1 + ((i * 7) % 23)).map((k) => words[(i + k) % 4]).join(' ')) }],
      schema: [{ name: 'root', num_children: 1 }, { name: 'text', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' }],
    })));
    const big = await sources.parquet(path, { tokenizer: { path: TOKENIZER } });
    const started = lengthWorkersStarted();
    const lengths = await big.loadLengths();
    assert.equal(lengthWorkersStarted() - started, lengthThreads(n));
    for (const i of range(n)) assert.equal(lengths[i], lengthOf((await big.get(i)).text), `row ${i}`);
    big.close();
  });

  it('Arrow: a tokenized string column through the pool, a list column from its offsets, equal to get(i)', async () => {
    const ids = range(30);
    const table = (from: number, to: number) => new Table({
      text: vectorFromArray(ids.slice(from, to).map((i) => range(1 + (i % 6)).map(() => 'lower newest').join(' ')), new Utf8()),
      xs: vectorFromArray(ids.slice(from, to).map((i) => range(i % 4)), new List(new Field('item', new Int32()))),
    });
    const path = join(dir, 't.arrow');
    writeFileSync(path, tableToIPC(table(0, 12).concat(table(12, 30)), 'file'));
    const ds = sources.arrow(path, { ragged: { text: { tokenizer: { path: TOKENIZER } }, xs: 'values' } }) as ArrowRaggedSource;
    const text = await ds.loadLengths('text');
    const started = lengthWorkersStarted();
    const xs = await ds.loadLengths('xs');
    assert.equal(lengthWorkersStarted(), started, 'a list column needs no worker');
    for (const i of ids) {
      const s = await ds.get(i);
      assert.equal(text[i], lengthOf(s.text));
      assert.equal(xs[i], i % 4);
    }
    await ds.close();
  });
});

/** The documents a packed epoch delivers, rebuilt from segment and position ids (a piece at position > 0 continues the last document). */
async function packedDocuments(loader: DataLoader<never>, epoch: number, C: number): Promise<string[]> {
  const docs: number[][] = [];
  for await (const b of loader.epoch(epoch)) {
    const tokens = (b.get('text') as Tensor).data as Int32Array;
    const seg = (b.get('segment_ids') as Tensor).data as Int32Array;
    const pos = (b.get('position_ids') as Tensor).data as Int32Array;
    assert.equal((b.get('text') as Tensor).shape[1], C);
    for (let k = 0; k < tokens.length; k++) {
      if (seg[k]! <= 0) continue;
      if (pos[k] === 0) docs.push([]);
      const doc = docs[docs.length - 1]!;
      assert.equal(pos[k], doc.length, 'positions count up within a document');
      doc.push(tokens[k]!);
    }
  }
  return docs.map((d) => d.join(',')).sort();
}

describe('pack over tokenized JSONL', { skip: noPython, timeout: TEST_MS }, () => {
  it('delivers every token of every document exactly once per epoch (best-fit and concat, with and without reader workers)', async () => {
    const path = written(600);
    const tokenizer = { path: TOKENIZER };
    const ds = sources.jsonl(path, { text: 'text', tokenizer });
    const want = (await Promise.all(range(ds.length).map(async (i) => Array.from((await ds.get(i)).text as Int32Array).join(',')))).sort();
    const total = want.reduce((n, d) => n + d.split(',').length, 0);
    ds.close();
    const C = 128;
    for (const mode of ['best-fit', 'concat'] as const) {
      for (const workers of [0, 2]) {
        const loader = await DataLoader.create(sources.jsonl(path, { text: 'text', tokenizer }), { batchSize: 4, workers, pack: { contextLength: C, mode } });
        assert.deepEqual(loader.names, ['text', 'segment_ids', 'position_ids']);
        for (const e of [0, 1]) assert.deepEqual(await packedDocuments(loader as never, e, C), want, `${mode}, ${workers} workers, epoch ${e}`);
        const p = loader.stats().epochs[0]!.packing!;
        assert.equal(p.realTokens, total);
        await loader.close();
      }
    }
  });

  it("pads tokenized JSONL with no maxLength: the capacity is the longest document, from the length pass", async () => {
    const path = written(300);
    const ds = sources.jsonl(path, { text: 'text', tokenizer: { path: TOKENIZER } });
    const lengths = await ds.loadLengths();
    const loader = await DataLoader.create(ds, { batchSize: 16, collate: { text: 'pad' }, dropLast: false });
    const seen: number[] = [];
    for await (const b of loader.epoch(0)) {
      const ids = [...b.sampleIds];
      const got = (b.get('text_lengths') as Tensor).data as Int32Array;
      ids.forEach((id, r) => assert.equal(got[r], lengths[id]));
      assert.equal((b.get('text') as Tensor).shape[1], Math.max(...ids.map((id) => lengths[id]!)));
      seen.push(...ids);
    }
    assert.deepEqual(seen.sort((a, b) => a - b), range(300));
    await loader.close();
  });

  it('batchTokens over tokenized JSONL: every document once, no batch over its budget', async () => {
    const path = written(400);
    const ds = sources.jsonl(path, { text: 'text', tokenizer: { path: TOKENIZER } });
    const lengths = await ds.loadLengths();
    const loader = await DataLoader.create(ds, { batchSize: 64, batchTokens: 600, collate: { text: 'pad' }, dropLast: false });
    const seen: number[] = [];
    for await (const b of loader.epoch(0)) {
      const ids = [...b.sampleIds];
      assert.ok(ids.reduce((n, id) => n + lengths[id]!, 0) <= 600, 'within the budget');
      const got = (b.get('text_lengths') as Tensor).data as Int32Array;
      ids.forEach((id, r) => assert.equal(got[r], lengths[id]));
      seen.push(...ids);
    }
    assert.deepEqual(seen.sort((a, b) => a - b), range(400));
    await loader.close();
  });
});
