// The CPU route's ring of slots (shm-ring.ts): a batch larger than the slots gets a new slab at once
// instead of waiting for every slot of the old one (the client may keep batches for as long as its
// loop holds them: NOTE [Kept batches], python/stoker/torch.py), and `reclaim` frees every slot but
// the ones the client keeps.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ShmRing } from './shm-ring.js';

const never = new AbortController().signal;

describe('ShmRing', { timeout: 60_000 }, () => {
  it('a larger batch gets a new slab while the client still holds slots of the old one; the old slab goes with its last slot', async () => {
    const ring = new ShmRing(2);
    const a = await ring.acquire(100, never);
    const b = await ring.acquire(100, never);
    assert.equal(a.fresh, true);
    assert.equal(b.fresh, false);
    // Both slots of slab 0 are out: the new slab must not wait for them (it did, and a client that
    // kept one of them for good hung the server and itself).
    const c = await ring.acquire(10_000, never);
    assert.equal(c.fresh, true);
    assert.notEqual(c.slab.id, a.slab.id);
    assert.ok(c.slab.slotBytes >= 10_000);
    assert.equal(ring.slabs, 2);
    assert.equal(ring.release(a.slab.id, a.slot), true);
    assert.equal(ring.release(a.slab.id, a.slot), false, 'a slot comes back once');
    assert.equal(ring.slabs, 2);
    assert.equal(existsSync(a.slab.path), true, 'still linked: the client never said it mapped it');
    assert.equal(ring.release(b.slab.id, b.slot), true);
    assert.equal(ring.slabs, 1, 'the retired slab went with its last slot');
    assert.equal(existsSync(a.slab.path), false);
    assert.equal(ring.leased, 1);
    ring.close();
    assert.equal(existsSync(c.slab.path), false);
  });

  it('reclaim frees every slot but the kept ones, on the current slab and on a retired one', async () => {
    const ring = new ShmRing(3);
    const a = await ring.acquire(100, never);
    const b = await ring.acquire(100, never);
    const c = await ring.acquire(10_000, never);
    const d = await ring.acquire(10_000, never);
    assert.equal(ring.slabs, 2);
    assert.equal(ring.leased, 2);
    ring.reclaim([{ slab: a.slab.id, slot: a.slot }, { slab: d.slab.id, slot: d.slot }, {}]);
    assert.equal(ring.slabs, 2, 'the retired slab stays for its kept slot');
    assert.equal(ring.leased, 1, 'of the current slab only the kept slot is out');
    assert.equal(ring.release(b.slab.id, b.slot), false, 'b was taken back');
    assert.equal(ring.release(c.slab.id, c.slot), false, 'c was taken back');
    const e = await ring.acquire(10_000, never);
    const f = await ring.acquire(10_000, never);
    assert.deepEqual(new Set([d.slot, e.slot, f.slot]), new Set([0, 1, 2]), 'the kept slot is not handed out again');
    assert.equal(ring.release(a.slab.id, a.slot), true);
    assert.equal(ring.slabs, 1);
    ring.reclaim();
    assert.equal(ring.leased, 0);
    ring.close();
  });
});
