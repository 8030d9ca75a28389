import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LoaderError } from '../errors.js';
import { SWITCHES, parseSwitch, readSwitch, switchName, switchTableRows } from './env.js';
import { WARNING_CODES as WARNINGS } from './warnings.js';

const SRC = fileURLToPath(new URL('..', import.meta.url));
const ROOT = join(SRC, '..');

/** Codes of process warnings (`process.emitWarning(…, { code })`): named STOKER_* too, but not switches. */
const WARNING_CODES = new Set<string>(Object.values(WARNINGS));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [path] : [];
  });
}

describe('environment switches (base/env.ts)', () => {
  it('the table: every name STOKER_*, unique, every switch documented with a kind and a default', () => {
    const names = Object.values(SWITCHES).map((s) => s.name);
    assert.equal(new Set(names).size, names.length);
    for (const s of Object.values(SWITCHES)) {
      assert.match(s.name, /^STOKER_[A-Z0-9_]+$/);
      assert.ok(s.kind === 'user' || s.kind === 'bench', s.name);
      assert.ok(s.doc.length > 20 && s.default !== '', s.name);
      assert.ok(!WARNING_CODES.has(s.name), s.name);
    }
  });

  it('docs/env.md holds the table, row for row', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'env.md'), 'utf8');
    const rows = doc.split('\n').filter((l) => l.startsWith('| `STOKER_'));
    assert.deepEqual(rows, switchTableRows(), 'docs/env.md differs from the table in src/base/env.ts: write the rows of switchTableRows() into it');
  });

  it('no file of src/ but base/env.ts names an environment switch (the process-warning codes of base/warnings.ts aside)', () => {
    const offenders: string[] = [];
    for (const file of sourceFiles(SRC)) {
      const rel = relative(SRC, file).split('\\').join('/');
      if (rel === 'base/env.ts' || rel === 'base/warnings.ts') continue;
      for (const name of readFileSync(file, 'utf8').match(/STOKER_[A-Za-z0-9_]*/g) ?? []) {
        offenders.push(`${rel}: ${name}`);
      }
    }
    assert.deepEqual(offenders, [], 'read switches through readSwitch (src/base/env.ts), emit warnings through warn (src/base/warnings.ts), and name them there only');
  });

  it('parsers keep the typed errors: ERR_INVALID_OPTION naming the variable, TypeError for the decode-process knobs', () => {
    assert.throws(() => readSwitch('jpegSlots', { STOKER_JPEG_SLOTS: '9' }), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_OPTION' && /`STOKER_JPEG_SLOTS` must be an integer from 1 to 8/.test(e.message));
    assert.throws(() => readSwitch('decodeReaders', { STOKER_DECODE_READERS: 'many' }), { code: 'ERR_INVALID_OPTION', message: /`STOKER_DECODE_READERS` must be an integer from 1 to 64/ });
    assert.throws(() => parseSwitch('decodeAhead', '-1'), { code: 'ERR_INVALID_OPTION', message: /STOKER_DECODE_AHEAD/ });
    assert.throws(() => parseSwitch('decodeHeld', '0'), (e: unknown) => e instanceof TypeError && e.message.includes('STOKER_DECODE_HELD="0"'));
    assert.throws(() => parseSwitch('decodeChildFlags', '--a b'), (e: unknown) => e instanceof TypeError && e.message.includes('"b" is not a flag'));
  });

  it('values: unset and empty give the default; the off switches; read from the env given, at call time', () => {
    assert.equal(readSwitch('jpegSlots', {}), undefined);
    assert.equal(readSwitch('jpegSlots', { STOKER_JPEG_SLOTS: '' }), undefined);
    assert.equal(readSwitch('jpegSlots', { STOKER_JPEG_SLOTS: '3' }), 3);
    assert.equal(readSwitch('decodeAhead', { STOKER_DECODE_AHEAD: '0' }), 0);
    assert.equal(readSwitch('decodeHeld', {}), 2);
    assert.equal(readSwitch('vramPool', { STOKER_VRAM_POOL: ' OFF ' }), false);
    assert.equal(readSwitch('vramPool', { STOKER_VRAM_POOL: 'on' }), true);
    assert.equal(readSwitch('turboJpeg', { STOKER_TURBOJPEG: 'off' }), false);
    assert.equal(readSwitch('turboJpeg', { STOKER_TURBOJPEG: '' }), undefined);
    assert.equal(readSwitch('wasm', { STOKER_WASM: 'off' }), false);
    assert.equal(readSwitch('wasm', {}), true);
    assert.equal(readSwitch('walkThreads', { STOKER_WALK_THREADS: '0' }), undefined);
    assert.equal(readSwitch('decodeTiming', { STOKER_DECODE_TIMING: '0' }), false);
    assert.equal(readSwitch('serveTiming', { STOKER_SERVE_TIMING: '0' }), true);
    const name = switchName('walkThreads');
    const saved = process.env[name];
    try {
      process.env[name] = '5';
      assert.equal(readSwitch('walkThreads'), 5);
      process.env[name] = '3';
      assert.equal(readSwitch('walkThreads'), 3);
    } finally {
      if (saved === undefined) delete process.env[name];
      else process.env[name] = saved;
    }
  });
});
