// The host half of the device piece table: the grid covers every piece's widest span in chunks of
// whole positions within the driver's grid limits, and the fill pattern repeats the element's bits.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fillPattern, piecesGrid } from './pieces-grid.js';

describe('piecesGrid and fillPattern', () => {
  it('one block column per piece (one block when there are none), chunks covering the widest span', () => {
    assert.deepEqual(piecesGrid(4, 256, 2048), { x: 256, y: 1, chunk: 2048 });
    assert.deepEqual(piecesGrid(2, 0, 10), { x: 1, y: 1, chunk: 4096 });
    const wide = piecesGrid(4096, 3, 100_000);
    assert.equal(wide.chunk, 2);
    assert.equal(wide.y, 50_000);
    const huge = piecesGrid(1, 1, 2 ** 31 - 1);
    assert.ok(huge.y <= 65535 && huge.y * huge.chunk >= 2 ** 31 - 1, `grid ${JSON.stringify(huge)}`);
  });

  it('repeats the element bits over 8 bytes, masking bits beyond the element', () => {
    assert.equal(fillPattern(0xffffn, 2), 0xffffffffffffffffn);
    assert.equal(fillPattern(0x3f800000n, 4), 0x3f8000003f800000n);
    assert.equal(fillPattern(0x1abn, 1), 0xababababababababn);
    assert.equal(fillPattern(0x0123456789abcdefn, 8), 0x0123456789abcdefn);
  });
});
