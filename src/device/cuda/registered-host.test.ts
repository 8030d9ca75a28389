// Which bytes of a buffer can be pinned: the largest whole-page range inside it. Pure, runs anywhere.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PAGE_BYTES, pageAlignedRange } from './registered-host.js';

describe('pageAlignedRange', () => {
  const page = BigInt(PAGE_BYTES);

  it('a page-aligned buffer is pinned whole', () => {
    assert.deepEqual(pageAlignedRange(10n * page, 0, 8 * PAGE_BYTES), { start: 0, end: 8 * PAGE_BYTES });
  });

  it('a buffer 16 bytes past a page start (a large malloc) loses its partial first and last page', () => {
    assert.deepEqual(pageAlignedRange(10n * page + 16n, 0, 8 * PAGE_BYTES), { start: PAGE_BYTES - 16, end: 8 * PAGE_BYTES - 16 });
  });

  it('a sub-range is aligned within itself', () => {
    const r = pageAlignedRange(10n * page, 100, 3 * PAGE_BYTES);
    assert.deepEqual(r, { start: PAGE_BYTES, end: 3 * PAGE_BYTES });
  });

  it('a range holding no whole page pins nothing', () => {
    const r = pageAlignedRange(10n * page + 1n, 0, PAGE_BYTES);
    assert.equal(r.end - r.start, 0);
    assert.equal(pageAlignedRange(10n * page, 0, 0).end, 0);
  });
});
