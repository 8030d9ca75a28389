// Toy parsers for fuzz.test.ts: one strict, one that trusts a header field, one that hangs.

import { readFileSync } from 'node:fs';
import { badFile } from '../../src/errors.js';

/** A strict little parser: magic, a 4-digit length, then exactly that many bytes. */
export function strict(path: string): void {
  const b = readFileSync(path);
  if (b.subarray(0, 6).toString('latin1') !== 'MAGIC:') throw badFile(path, 0, 'bad magic');
  const n = Number(b.subarray(6, 10).toString('latin1'));
  if (!Number.isInteger(n) || b.length !== 11 + n) throw badFile(path, 6, `length field ${n} does not match`);
}

/** The same parser, trusting the length field for an allocation. */
export function trusting(path: string): void {
  const b = readFileSync(path);
  if (b.subarray(0, 6).toString('latin1') !== 'MAGIC:') throw badFile(path, 0, 'bad magic');
  const n = Number(b.subarray(6, 10).toString('latin1'));
  if (!Number.isInteger(n)) throw badFile(path, 6, 'length field');
  new Uint8Array(n * 1e12);
}

/** Hangs when the length field is not 16. */
export function hanging(path: string): void {
  const b = readFileSync(path);
  if (b.subarray(6, 10).toString('latin1') !== '0016') for (;;);
}
