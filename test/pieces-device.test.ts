// Backend.pieces on the sim backend: the shared device suite (test/fixtures/pieces-device.ts: pad,
// pack and packing windows equal to applyPieces byte for byte, poisoned outputs fully written), the
// work ordered on its stream like any other device work, operands that do not fit their buffers
// refused at enqueue, a bad table faulting when the work runs (as a GPU would), and no device bytes
// left behind.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LoaderError } from '../src/errors.js';
import { type PiecesOp } from '../src/device/backend.js';
import { SimBackend } from '../src/device/sim/sim-backend.js';
import { padPieces } from '../src/collate/pieces.js';
import { devicePieces, piecesSuite } from './fixtures/pieces-device.js';

describe('Backend.pieces on sim', () => {
  const backend = new SimBackend();
  piecesSuite(() => backend);

  it('leaves no device bytes behind', () => {
    assert.equal(backend.live().device, 0);
  });
});

describe('Backend.pieces on sim: ordering and refusals', () => {
  function op(b: SimBackend, over: Partial<PiecesOp> = {}): PiecesOp {
    const t = padPieces([2, 1], 2);
    const src = b.alloc(16);
    const dst = b.alloc(16);
    const table = b.alloc(t.count * 20);
    b.copyToDevice(src, 0, new Uint8Array(new Int32Array([1, 2, 3, 0]).buffer), 'copy');
    b.copyToDevice(table, 0, new Uint8Array(t.table.buffer), 'copy');
    return { src, srcOffset: 0, rows: 2, rowBytes: 8, elementBytes: 4, per: 1, dst, dstOffset: 0, fill: 9n, table, tableOffset: 0, count: t.count, total: t.total, maxSpan: t.maxSpan, ...over };
  }

  it('runs in stream order: nothing is written before an event after it is done', () => {
    const b = new SimBackend();
    const o = op(b);
    b.pieces(o, 'copy');
    const out = new Uint8Array(16);
    b.copyToHost(out, o.dst, 0, 'copy');
    assert.deepEqual([...new Int32Array(out.buffer)], [0, 0, 0, 0], 'queued, not yet run');
    const ev = b.record('copy');
    b.synchronize(ev);
    assert.deepEqual([...new Int32Array(out.buffer)], [1, 2, 3, 9]);
  });

  it('refuses operands that overflow or misalign their buffers, naming the operand', () => {
    const b = new SimBackend();
    assert.throws(() => b.pieces(op(b, { rows: 3 }), 'copy'), /3 rows of 8 bytes from offset 0 overflow the source \(16 bytes\)/);
    assert.throws(() => b.pieces(op(b, { total: 5 }), 'copy'), /5 positions of 4 bytes .* overflow the destination/);
    assert.throws(() => b.pieces(op(b, { dstOffset: 2, total: 3, maxSpan: 2 }), 'copy'), /not aligned to its 4-byte elements/);
    assert.throws(() => b.pieces(op(b, { count: 3 }), 'copy'), /3 pieces from offset 0 overflow \(or misalign\) the table/);
    assert.throws(() => b.pieces(op(b, { elementBytes: 3 as 4 }), 'copy'), /elementBytes must be 1, 2, 4 or 8/);
    assert.throws(() => b.pieces(op(b, { maxSpan: 0 }), 'copy'), /maxSpan 0 is not the table's widest span/);
  });

  it('a table naming a row out of range faults when the work runs, as an illegal address would on a GPU', () => {
    const b = new SimBackend();
    const o = op(b);
    b.copyToDevice(o.table, 0, new Uint8Array(new Int32Array([5, 0, 0, 1, 1]).buffer), 'copy');
    b.pieces(o, 'copy');
    const ev = b.record('copy');
    assert.throws(() => b.synchronize(ev), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_TENSOR' && /piece 0 reads row 5 of 2/.test(e.message));
  });

  it('the shared helper frees what it allocated even when the op is refused', () => {
    const b = new SimBackend();
    assert.throws(() => devicePieces(b, { src: new Uint8Array(8), rows: { rows: 1, rowBytes: 8, elementBytes: 3 as 4, per: 1 }, table: padPieces([1], 2), fill: 0n }));
    assert.equal(b.live().device, 0);
  });
});
