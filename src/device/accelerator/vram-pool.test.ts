import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimBackend } from '../sim/sim-backend.js';
import { MARGIN_BYTES, SLAB_BYTES, VramPool, flowReserveBytes, vramPoolKilled } from './vram-pool.js';

const MiB = 2 ** 20;

function pool(totalBytes: number, rowBytes: number[], n: number, enabled = true) {
  const backend = new SimBackend({ totalBytes });
  return { backend, pool: new VramPool(backend, rowBytes, n, enabled) };
}

describe('the VRAM pool (reference §7)', () => {
  it('stays dormant until the honest probe, then installs once', () => {
    const { pool: p } = pool(2048 * MiB, [1024], 100);
    p.maybeInstall(false, 4, 1024);
    assert.equal(p.decided, false);
    p.maybeInstall(true, 4, 1024);
    assert.equal(p.decided, true);
    assert.equal(p.budget, 2048 * MiB - (4 * 1024 + MARGIN_BYTES));
  });

  it('declines a budget below one slab, and stays dormant (a pass-through)', () => {
    const { pool: p } = pool(MARGIN_BYTES + SLAB_BYTES - 1, [16], 10);
    p.maybeInstall(true, 1, 16);
    assert.equal(p.active, false);
    assert.deepEqual(p.partition([1, 2, 3]), { hits: [], misses: [0, 1, 2] });
    assert.deepEqual(p.admit([1, 2, 3], [0, 1, 2]), []);
  });

  it('reserves min(depth, 16) batches of flow', () => {
    assert.equal(flowReserveBytes(0, 100), 100);
    assert.equal(flowReserveBytes(5, 100), 500);
    assert.equal(flowReserveBytes(40, 100), 1600);
  });

  it('partitions hits and misses in caller order ([9, 1, 8, 2] with 1 and 2 pooled → hits [1, 3])', () => {
    const { pool: p } = pool(2048 * MiB, [4], 10);
    p.installWithReserve(0);
    p.admit([1, 2], [0, 1]);
    assert.deepEqual(p.partition([9, 1, 8, 2]), { hits: [1, 3], misses: [0, 2] });
  });

  it('admits a duplicated id once (the first occurrence wins) and counts captures', () => {
    const { pool: p } = pool(2048 * MiB, [4], 10);
    p.installWithReserve(0);
    const admitted = p.admit([3, 3, 4, 3], [0, 1, 2, 3]);
    assert.deepEqual(admitted, [{ position: 0, id: 3 }, { position: 2, id: 4 }]);
    assert.equal(p.figures.captured, 2);
    assert.equal(p.pooledRows, 2);
  });

  it('fills slab by slab within the budget, then stops admitting', () => {
    const rowBytes = SLAB_BYTES / 4; // 4 rows per slab
    const { pool: p } = pool(MARGIN_BYTES + 2 * SLAB_BYTES + SLAB_BYTES / 2, [rowBytes], 20);
    p.installWithReserve(0);
    const admitted = p.admit(Array.from({ length: 20 }, (_, i) => i), Array.from({ length: 20 }, (_, i) => i));
    assert.equal(admitted.length, 8, 'two slabs of four rows fit the budget');
    assert.equal(p.bytes, 2 * SLAB_BYTES);
  });

  it('eviction forgets the newest slab and latches the budget to what is left', () => {
    const rowBytes = SLAB_BYTES / 4;
    const { backend, pool: p } = pool(MARGIN_BYTES + 4 * SLAB_BYTES, [rowBytes], 20);
    p.installWithReserve(0);
    p.admit(Array.from({ length: 8 }, (_, i) => i), Array.from({ length: 8 }, (_, i) => i));
    const freed = p.evictOneSlab();
    assert.equal(freed?.length, 1);
    for (const b of freed!) backend.free(b);
    assert.equal(p.bytes, SLAB_BYTES);
    assert.equal(p.budget, SLAB_BYTES, 'the budget is latched: pressure-freed memory is never refilled');
    assert.deepEqual(p.partition([0, 3, 4, 7]).hits, [0, 1]);
    assert.deepEqual(p.admit([4, 5], [0, 1]), [], 'no room under the latched budget');
    assert.equal(p.evictOneSlab()?.length, 1);
    assert.equal(p.evictOneSlab(), undefined, 'nothing left to evict');
  });

  it('is off when disabled or killed by STOKER_VRAM_POOL=off|0', () => {
    const { pool: p } = pool(2048 * MiB, [4], 10, false);
    p.maybeInstall(true, 1, 4);
    assert.equal(p.active, false);
    assert.equal(vramPoolKilled({ STOKER_VRAM_POOL: 'OFF' }), true);
    assert.equal(vramPoolKilled({ STOKER_VRAM_POOL: '0' }), true);
    assert.equal(vramPoolKilled({ STOKER_VRAM_POOL: 'on' }), false);
    assert.equal(vramPoolKilled({}), false);
  });
});
