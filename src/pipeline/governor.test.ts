import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Governor } from './governor.js';

const cpu = { sampleBytes: 16, batchSize: 4, probe: undefined, vramMaxUsage: 0.9 };

describe('the streaming governor', () => {
  it('starts at the bootstrap depth, then sizes a CPU epoch at capacity 2 with a first target of 1', () => {
    const g = new Governor(cpu, undefined, undefined);
    assert.equal(g.capacity, 4);
    g.beginEpoch();
    assert.equal(g.capacity, 2);
    assert.equal(g.target, 1);
  });

  it("sizes a CPU epoch at the source's depth (never below the double buffer); a device with a probe ignores it", () => {
    const g = new Governor({ ...cpu, hostDepth: 8 }, undefined, undefined);
    g.beginEpoch();
    assert.equal(g.capacity, 8);
    assert.equal(g.target, 2, 'the first target is a third of it until the honest resize');
    g.onConsumed();
    g.onConsumed();
    assert.equal(g.target, 8);
    const low = new Governor({ ...cpu, hostDepth: 1 }, undefined, undefined);
    low.beginEpoch();
    assert.equal(low.capacity, 2);
    const gib = 2 ** 30;
    const probed = new Governor({ sampleBytes: gib / 4, batchSize: 4, probe: () => ({ used: 0, total: 10 * gib }), vramMaxUsage: 0.9, hostDepth: 3 }, undefined, undefined);
    probed.beginEpoch();
    assert.equal(probed.capacity, 9, 'the VRAM budget, not the hint');
  });

  it('fires the honest resize on the second consumed batch, not the first', () => {
    const g = new Governor(cpu, undefined, undefined);
    g.beginEpoch();
    g.onConsumed();
    assert.equal(g.honestResizeDone, false);
    assert.equal(g.target, 1);
    g.onConsumed();
    assert.equal(g.honestResizeDone, true);
    assert.equal(g.target, 2);
    g.beginEpoch();
    assert.equal(g.target, 2, 'later epochs start at the honest depth');
    assert.equal(g.consumed, 0);
    assert.equal(g.runConsumed, 2);
  });

  it('a user-pinned depth still latches but keeps its target', () => {
    const g = new Governor(cpu, 3, undefined);
    g.beginEpoch();
    assert.equal(g.target, 3);
    g.onConsumed();
    g.onConsumed();
    assert.equal(g.honestResizeDone, true);
    assert.equal(g.target, 3);
  });

  it('treats prefetch 0 as a window of one batch', () => {
    const g = new Governor(cpu, 0, undefined);
    g.beginEpoch();
    assert.equal(g.window, 1);
  });

  it('setDepth applies at once and turns adaptive sizing off; autoResize pins the probed depth', () => {
    const g = new Governor(cpu, undefined, undefined);
    g.beginEpoch();
    g.setDepth(8);
    assert.deepEqual([g.capacity, g.target, g.userOwned], [8, 8, true]);
    assert.equal(g.autoResize(), 2);
    assert.deepEqual([g.capacity, g.target], [2, 2]);
  });

  it('discounts the first fill by the reserve source, and lets a user reserve beat an automatic one', () => {
    const probe = () => ({ used: 0, total: 1000 * 64 });
    const sizing = { sampleBytes: 16, batchSize: 4, probe, vramMaxUsage: 0.9 };
    const bare = new Governor(sizing, undefined, undefined);
    bare.beginEpoch();
    assert.equal(bare.target, Math.floor(900 / 3));
    const user = new Governor(sizing, undefined, 0);
    user.beginEpoch();
    assert.equal(user.target, 900);
    user.setActivationReserve(64 * 100, 'auto');
    assert.equal(user.reserveSource, 'user');
    const auto = new Governor(sizing, undefined, undefined);
    auto.setActivationReserve(64 * 100, 'auto');
    auto.beginEpoch();
    assert.equal(auto.target, Math.floor(800 / 2));
  });
});
