// The fuzzer itself must fail when a parser misbehaves, or its clean runs prove nothing.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertFuzzClean, fuzz } from './fuzz.js';
import { TEST_MS } from '../fixtures.js';

const TARGETS = new URL('./fuzz-targets.ts', import.meta.url).href;
const valid = new TextEncoder().encode('MAGIC:0016:abcdefghijklmnop');

test('fuzz: a strict parser passes, with both clean reads and refusals', async () => {
  const report = await fuzz({ valid, ext: '.bin', module: TARGETS, target: 'strict', cases: 300, seed: 1 });
  assertFuzzClean(report);
  assert.ok(report.ok > 0 && (report.refused.ERR_BAD_FILE ?? 0) > 0, JSON.stringify(report));
});

test('fuzz: an untyped error (a huge allocation from a header field) is reported as a failure', async () => {
  const report = await fuzz({ valid, ext: '.bin', module: TARGETS, target: 'trusting', cases: 300, seed: 1 });
  assert.ok(report.failures.length > 0);
  assert.match(report.failures[0]!.error, /RangeError/);
  assert.throws(() => assertFuzzClean(report), /not handled cleanly/);
});

test('fuzz: a parser that hangs is caught and named by its case', { timeout: TEST_MS }, async () => {
  await assert.rejects(fuzz({ valid, ext: '.bin', module: TARGETS, target: 'hanging', cases: 50, seed: 1, stallMs: 500 }), /case \d+ .* hung/);
});
