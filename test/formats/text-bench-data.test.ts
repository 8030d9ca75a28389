// bench/text_data.py's files: the same bytes from the same seed (the dev machine and the GPU host
// bench the same data), a JSONL every record of which sources.jsonl reads, and a byte-level BPE
// tokenizer.json that Hugging Face's tokenizers library loads and that round-trips every document's text
// (decode(ids) is the text, then <|endoftext|>), with merges that shorten it. Skipped without python3.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { sources } from '../../src/index.js';
import { TEST_MS } from '../fixtures.js';

const { Tokenizer } = createRequire(import.meta.url)('tokenizers') as typeof import('tokenizers');
const PYTHON = '/usr/bin/python3';
const SCRIPT = fileURLToPath(new URL('../../bench/text_data.py', import.meta.url));
const skip = existsSync(PYTHON) ? false : `${PYTHON} is not installed`;
const dir = mkdtempSync(join(tmpdir(), 'stoker-textdata-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function make(sub: string, seed: number): string {
  const out = join(dir, sub);
  const r = spawnSync(PYTHON, [SCRIPT, out, '--docs', '40', '--seed', String(seed), '--vocab', '600'], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  return out;
}

describe('bench/text_data.py', { skip, timeout: TEST_MS }, () => {
  it('writes the same corpus and tokenizer from the same seed, and another corpus from another seed', () => {
    const a = make('a', 5);
    const b = make('b', 5);
    const c = make('c', 6);
    for (const f of ['corpus.jsonl', 'tokenizer.json']) assert.ok(readFileSync(join(a, f)).equals(readFileSync(join(b, f))), f);
    assert.ok(!readFileSync(join(a, 'corpus.jsonl')).equals(readFileSync(join(c, 'corpus.jsonl'))));
  });

  it('gives a JSONL sources.jsonl reads and a tokenizer that round-trips every document', async () => {
    const d = make('d', 7);
    const tokenizer = join(d, 'tokenizer.json');
    const lines = readFileSync(join(d, 'corpus.jsonl'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as { id: number; text: string });
    const ds = sources.jsonl(join(d, 'corpus.jsonl'), { fields: { id: 'int32' }, text: 'text', tokenizer: { path: tokenizer } });
    assert.equal(ds.length, 40);
    const json = JSON.parse(readFileSync(tokenizer, 'utf8'));
    const tok = Tokenizer.fromFile(tokenizer);
    const eos = json.model.vocab['<|endoftext|>'];
    assert.equal(eos, 598, 'a full vocabulary of 600: 598 bytes and merges, then the two specials');
    let ids = 0;
    let bytes = 0;
    for (let i = 0; i < ds.length; i++) {
      const s = (await ds.get(i)) as Record<string, any>;
      assert.equal(s.id.data[0], lines[i]!.id);
      const text = s.text as Int32Array;
      assert.equal(text[text.length - 1], eos, '<|endoftext|> ends each document');
      assert.equal(await tok.decode(Array.from(text), true), lines[i]!.text);
      ids += text.length;
      bytes += Buffer.byteLength(lines[i]!.text);
    }
    assert.ok(ids < bytes / 1.5, `merges shorten the text: ${ids} ids for ${bytes} bytes`);
    ds.close();
  });
});
