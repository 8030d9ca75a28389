// Shared by the text-source tests: the tiny BPE tokenizer fixture and the ids it gives, worked out
// by hand from its vocabulary and merges (test/fixtures/text/make-tokenizer.py).

import { fileURLToPath } from 'node:url';

export const TOKENIZER = fileURLToPath(new URL('../fixtures/text/tokenizer.json', import.meta.url));

/**
 * Without special tokens (<s> is 1, </s> is 2): w 5, i 11, d 12, "," 13, "!" 14, low 16, er 17,
 * lower 18, ne 19, est 21. "newest" is n e w e s t → ne w e s t → ne w es t → ne w est; "wider"
 * is w i d e r → w i d er; "lower" is l o w e r → lo w e r → low e r → low er → lower.
 */
export const EXPECTED: Readonly<Record<string, readonly number[]>> = {
  'lower newest, low!': [18, 19, 5, 21, 13, 16, 14],
  wider: [5, 11, 12, 17],
  'low lower': [16, 18],
};

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/text/${name}`, import.meta.url));

/**
 * Texts and the ids (special tokens added) that Hugging Face's tokenizers library — the Rust one,
 * `tokenizers` 0.23.2, as Python's `Tokenizer.from_file(path).encode(text).ids` gives them — gives
 * for the tokenizers of test/fixtures/text/make-reference-tokenizers.py. The first of each family is
 * a case a tokenizer that does not follow that library gets wrong: BERT's normalizer puts a space
 * around every CJK ideograph, those beyond U+FFFF too ([CLS] 𠀀 𠀁 [SEP], not [CLS] [UNK] [SEP]); to
 * GPT-2's split regex U+FEFF is not whitespace, so "use\ufeff//" is use + "\ufeff//" and the merges
 * give ï»¿/ + /; the Unigram lattice keeps ▁ . .. of two equal-score paths.
 */
export const REFERENCE: readonly { path: string; text: string; ids: readonly number[] }[] = [
  { path: fixture('bert-tokenizer.json'), text: '\u{20000}\u{20001}', ids: [2, 12, 13, 3] },
  { path: fixture('bert-tokenizer.json'), text: 'Hello 中文\u{20000} world!', ids: [2, 5, 10, 11, 12, 6, 9, 3] },
  { path: fixture('bert-tokenizer.json'), text: 'Cafés \u{2a6d6}!', ids: [2, 7, 8, 14, 9, 3] },
  { path: fixture('bytelevel-tokenizer.json'), text: 'use\ufeff//', ids: [261, 258, 47] },
  { path: fixture('bytelevel-tokenizer.json'), text: 'use //', ids: [261, 32, 259] },
  { path: fixture('unigram-tokenizer.json'), text: 'é …', ids: [2, 0, 2, 3, 4, 1] },
  { path: fixture('unigram-tokenizer.json'), text: 'a...b', ids: [6, 3, 4, 7, 1] },
];
