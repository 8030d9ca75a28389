// Tokenization with Hugging Face's tokenizers library (the Rust crate, as a Node addon) from a local
// tokenizer.json: the tiny BPE fixture (test/fixtures/text/make-tokenizer.py, written by hand in HF's
// format) gives the ids its merges give by hand; the fixtures of make-reference-tokenizers.py give
// the library's ids where a port that walks UTF-16 units or splits otherwise does not; options are
// checked; a broken file is a typed error naming it.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { resolveTokenizer, tokenize } from '../../src/dataset/formats/text/tokenizer.js';
import { EXPECTED, REFERENCE, TOKENIZER } from './text-targets.js';

const dir = mkdtempSync(join(tmpdir(), 'stoker-tokenizer-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('tokenizer', () => {
  it('gives the ids the BPE merges give by hand, wrapped in <s> … </s> unless addSpecialTokens is false', async () => {
    const withSpecials = resolveTokenizer({ path: TOKENIZER });
    const plain = resolveTokenizer({ path: TOKENIZER, addSpecialTokens: false });
    for (const [text, ids] of Object.entries(EXPECTED)) {
      assert.deepEqual(Array.from(await tokenize(plain, text)), ids, text);
      assert.deepEqual(Array.from(await tokenize(withSpecials, text)), [1, ...ids, 2], text);
      assert.ok((await tokenize(plain, text)) instanceof Int32Array);
    }
  });

  it("gives the ids Hugging Face's tokenizers library gives: CJK beyond U+FFFF (BERT), U+FEFF inside a byte-level word (GPT-2), equal-score Unigram paths", async () => {
    for (const { path, text, ids } of REFERENCE) {
      assert.deepEqual(Array.from(await tokenize(resolveTokenizer({ path }), text)), ids, `${path}: ${JSON.stringify(text)}`);
    }
  });

  it('keeps the first maxLength ids, special tokens included', async () => {
    const t = resolveTokenizer({ path: TOKENIZER, maxLength: 3 });
    assert.deepEqual(Array.from(await tokenize(t, 'lower newest, low!')), [1, 18, 19]);
  });

  it('refuses bad options and a file that is not a tokenizer.json, naming the knob or the file', () => {
    assert.throws(() => resolveTokenizer('tokenizer.json'), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('`tokenizer`'));
    assert.throws(() => resolveTokenizer({ path: TOKENIZER, maxLength: 0 }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('tokenizer.maxLength'));
    assert.throws(() => resolveTokenizer({ path: TOKENIZER, addSpecial: true }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('addSpecial'));
    assert.throws(() => resolveTokenizer({ path: TOKENIZER, config: 'tokenizer_config.json' }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('tokenizer.config') && e.message.includes('tokenizer.json alone'));
    assert.throws(() => resolveTokenizer({ path: join(dir, 'none.json') }), { code: 'ERR_FILE_ACCESS' });
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, '{"model": ');
    assert.throws(() => resolveTokenizer({ path: broken }), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes(broken));
    const notOne = join(dir, 'not-one.json');
    writeFileSync(notOne, '{"model": {"type": "Nope"}}');
    assert.throws(() => resolveTokenizer({ path: notOne }), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes(notOne));
  });
});
