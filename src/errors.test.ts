import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { WARNING_CODES } from './base/warnings.js';
import { BatchError, ERROR_CODES, type LoaderErrorCode } from './errors.js';

const page = readFileSync(new URL('../docs/errors.md', import.meta.url), 'utf8');
/** The level-2 headings of docs/errors.md: one per code, nothing else. */
const headings = [...page.matchAll(/^## (.*)$/gm)].map((m) => m[1]!.trim());

describe('docs/errors.md, the table of error codes', () => {
  it('lists every process-warning code of base/warnings.ts, and no other', () => {
    const listed = [...page.matchAll(/^\| `(STOKER_[A-Z_]+)` \|/gm)].map((m) => m[1]!).sort();
    assert.deepEqual(listed, Object.values(WARNING_CODES).sort());
  });


  it('has a section for every code of LoaderErrorCode', () => {
    const missing = ERROR_CODES.filter((code) => !headings.includes(code));
    assert.deepEqual(missing, [], `codes without a section in docs/errors.md: ${missing.join(', ')}`);
  });

  it('has no section that is not a code', () => {
    const known = new Set<string>(ERROR_CODES);
    const stray = headings.filter((h) => !known.has(h));
    assert.deepEqual(stray, [], `headings of docs/errors.md that are no LoaderErrorCode: ${stray.join(', ')}`);
  });

  it('has one section per code, and a row of the summary table per code', () => {
    assert.equal(new Set(headings).size, headings.length);
    for (const code of ERROR_CODES) assert.match(page, new RegExp(`^\\| \\[\`${code}\`\\]\\(#${code.toLowerCase()}\\) \\|`, 'm'), `${code} in the table`);
  });

  it("documents the subclasses' codes too (BatchError, CudaError)", () => {
    const code: LoaderErrorCode = new BatchError(0, 0, [1], 'dataset', new Error('x')).code;
    for (const c of [code, 'ERR_CUDA', 'ERR_DEVICE_OOM'] as const) assert.ok(headings.includes(c), c);
  });
});
