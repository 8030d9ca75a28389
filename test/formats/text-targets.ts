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
