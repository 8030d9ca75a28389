// Tokenization with Hugging Face's JavaScript tokenizers from a local tokenizer.json: the tiny BPE
// fixture (test/fixtures/text/make-tokenizer.py, written by hand in HF's format) gives the ids its
// merges give by hand; options are checked; a broken file is a typed error naming it.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { resolveTokenizer, tokenize } from '../../src/dataset/formats/text/tokenizer.js';
import { EXPECTED, TOKENIZER } from './text-targets.js';

const dir = mkdtempSync(join(tmpdir(), 'stoker-tokenizer-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('tokenizer', () => {
  it('gives the ids the BPE merges give by hand, wrapped in <s> … </s> unless addSpecialTokens is false', () => {
    const withSpecials = resolveTokenizer({ path: TOKENIZER });
    const plain = resolveTokenizer({ path: TOKENIZER, addSpecialTokens: false });
    for (const [text, ids] of Object.entries(EXPECTED)) {
      assert.deepEqual(Array.from(tokenize(plain, text)), ids, text);
      assert.deepEqual(Array.from(tokenize(withSpecials, text)), [1, ...ids, 2], text);
      assert.ok(tokenize(plain, text) instanceof Int32Array);
    }
  });

  it('keeps the first maxLength ids, special tokens included', () => {
    const t = resolveTokenizer({ path: TOKENIZER, maxLength: 3 });
    assert.deepEqual(Array.from(tokenize(t, 'lower newest, low!')), [1, 18, 19]);
  });

  it('refuses bad options and a file that is not a tokenizer.json, naming the knob or the file', () => {
    assert.throws(() => resolveTokenizer('tokenizer.json'), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('`tokenizer`'));
    assert.throws(() => resolveTokenizer({ path: TOKENIZER, maxLength: 0 }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('tokenizer.maxLength'));
    assert.throws(() => resolveTokenizer({ path: TOKENIZER, addSpecial: true }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('addSpecial'));
    assert.throws(() => resolveTokenizer({ path: join(dir, 'none.json') }), { code: 'ERR_FILE_ACCESS' });
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, '{"model": ');
    assert.throws(() => resolveTokenizer({ path: broken }), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes(broken));
    const notOne = join(dir, 'not-one.json');
    writeFileSync(notOne, '{"model": {"type": "Nope"}}');
    assert.throws(() => resolveTokenizer({ path: notOne }), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes(notOne));
  });
});
