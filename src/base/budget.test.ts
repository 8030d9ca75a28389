import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  anchored, canFitResident, initialFillTarget, prefetchDepthFromVram, ringSlotsFromRam, sampleCacheBudget,
  formatCacheBytes, pinSourceFits, vramPoolBudget, POOL_MARGIN_BYTES,
} from './budget.js';

const GiB = 2 ** 30;
const MiB = 2 ** 20;

describe('the budget law (reference §2, tests of §10)', () => {
  it('gives a device without a probe (the CPU) a double buffer', () => {
    assert.equal(prefetchDepthFromVram(3073, 256, undefined, 0.9, 0), 2);
  });

  it('gives 2 for an unpriceable batch (zero bytes per sample or per batch)', () => {
    const probe = () => ({ used: 0, total: 16 * GiB });
    assert.equal(prefetchDepthFromVram(0, 256, probe, 0.9, 0), 2);
    assert.equal(prefetchDepthFromVram(1024, 0, probe, 0.9, 0), 2);
  });

  it('sizes depth as floor((total·u − used − reserve) / batch bytes)', () => {
    const probe = () => ({ used: 2 * GiB, total: 10 * GiB });
    // cap 9 GiB − used 2 GiB − reserve 1 GiB = 6 GiB; batch 64 MiB → 96
    assert.equal(prefetchDepthFromVram(256 * 1024, 256, probe, 0.9, 1 * GiB), 96);
    // u clamps to [0.5, 0.99]
    assert.equal(prefetchDepthFromVram(256 * 1024, 256, probe, 0.1, 0), prefetchDepthFromVram(256 * 1024, 256, probe, 0.5, 0));
    assert.equal(prefetchDepthFromVram(256 * 1024, 256, probe, 5, 0), prefetchDepthFromVram(256 * 1024, 256, probe, 0.99, 0));
  });

  it('a model above the cap still gets a double buffer (GTX 1060: used 5592 MiB, 16 KiB batch)', () => {
    const probe = () => ({ used: 5592 * MiB, total: 6_360_465_408 });
    assert.equal(prefetchDepthFromVram(16 * 1024, 1, probe, 0.9, 0), 2);
  });

  it('a batch too large for the headroom keeps the synchronous fallback (batch = free/4 → 0)', () => {
    const total = 6_360_465_408;
    const used = 5592 * MiB;
    const free = total - used;
    assert.equal(prefetchDepthFromVram(Math.floor(free / 4), 1, () => ({ used, total }), 0.9, 0), 0);
  });

  it('a failed probe declines the floor', () => {
    assert.equal(prefetchDepthFromVram(1024, 1, () => undefined, 0.9, 0), 0);
  });

  it('discounts the first fill: 30 → 10 / 15 / 30; 0 → 1; 2 bare → 1', () => {
    assert.deepEqual([initialFillTarget(30, 'bare'), initialFillTarget(30, 'auto'), initialFillTarget(30, 'user')], [10, 15, 30]);
    assert.equal(initialFillTarget(0, 'user'), 1);
    assert.equal(initialFillTarget(2, 'bare'), 1);
  });

  it('fits resident strictly below 0.90 × total − used, always without a probe, never with a failed one', () => {
    const probe = () => ({ used: 1000, total: 10_000 });
    assert.equal(canFitResident(10, 799, probe), true);
    assert.equal(canFitResident(10, 800, probe), false);
    assert.equal(canFitResident(1e9, 1e9, undefined), true);
    assert.equal(canFitResident(1, 1, () => undefined), false);
  });

  it('anchors the sample-cache budget so it does not ratchet over 10 epochs (50 GiB of 100 at r = 0.5)', () => {
    let available = 100 * GiB;
    let held = 0;
    for (let e = 0; e < 10; e++) {
      const budget = sampleCacheBudget(available, held, 0, 0.5);
      assert.equal(budget, 50 * GiB, `epoch ${e}`);
      const fill = Math.min(budget - held, 10 * GiB);
      held += fill;
      available -= fill;
    }
  });

  it('takes the ring off the top, caps the share at 0.90, and floors at 0', () => {
    assert.equal(sampleCacheBudget(100, 0, 10, 0.5), 40);
    assert.equal(sampleCacheBudget(100, 0, 10, 1.5), 80);
    assert.equal(anchored(1000, 0, 5.0), 900);
    assert.equal(sampleCacheBudget(100, 0, 60, 0.5), 0);
  });

  it('sizes the reader ring from RAM (60 GiB, r 0.5, 1 GiB batches → 30) with its fallbacks', () => {
    assert.equal(ringSlotsFromRam(GiB, 1, 0.5, 60 * GiB, 1000), 30);
    assert.equal(ringSlotsFromRam(GiB, 1, 0.5, 60 * GiB, 7), 7);
    assert.equal(ringSlotsFromRam(GiB, 1, 0.5, GiB, 1000), 0);
    assert.equal(ringSlotsFromRam(GiB, 1, 0, 60 * GiB, 1000), 0);
    assert.equal(ringSlotsFromRam(GiB, 1, 0.5, undefined, 1000), 4);
    assert.equal(ringSlotsFromRam(GiB, 1, 0.5, undefined, 3), 3);
    assert.equal(ringSlotsFromRam(0, 1, 0.5, 60 * GiB, 1000), 4);
    assert.equal(ringSlotsFromRam(GiB, 1, 5.0, 60 * GiB, 1000), 54);
  });

  it('splits one format-cache share among the reader threads, so that more readers never multiply it', () => {
    const ram = 64 * GiB;
    assert.equal(formatCacheBytes(ram, 1), 256 * 2 ** 20);
    assert.equal(formatCacheBytes(ram, 8) * 8, 256 * 2 ** 20);
    assert.equal(formatCacheBytes(4 * GiB, 1), 128 * 2 ** 20, 'RAM/32 below the 256 MiB cap');
    assert.ok(formatCacheBytes(4 * GiB, 15) * 15 <= 4 * GiB / 32);
  });

  it('pins an in-memory source only up to half the RAM, and keeps the VRAM pool clear of the flow and a margin', () => {
    assert.equal(pinSourceFits(8 * GiB, 16 * GiB), true);
    assert.equal(pinSourceFits(8 * GiB + 1, 16 * GiB), false);
    assert.equal(vramPoolBudget(10 * GiB, GiB), 10 * GiB - GiB - POOL_MARGIN_BYTES);
    assert.equal(vramPoolBudget(GiB, GiB), 0);
  });
});
