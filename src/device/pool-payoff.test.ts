import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PoolPayoff, RETRIAL_EPOCHS, type PoolPhase } from './pool-payoff.js';

const FULL = { active: true, admitting: false };

/** Run epochs through the policy: `msPerBatch(phase)` is what an epoch in that phase costs. */
function epochs(p: PoolPayoff, count: number, msPerBatch: (phase: PoolPhase) => number, pool = FULL): PoolPhase[] {
  const phases: PoolPhase[] = [];
  for (let e = 0; e < count; e++) {
    const phase = p.begin(pool);
    phases.push(phase);
    p.end({ complete: true, batches: 10, wallMs: 10 * msPerBatch(phase) });
  }
  return phases;
}

describe('a partial VRAM pool stitches only while it pays (NOTE [A pool that does not pay stays dormant])', () => {
  it('no pool, then a filling pool, stitch without a trial', () => {
    const p = new PoolPayoff();
    assert.equal(p.begin({ active: false, admitting: false }), 'none');
    assert.equal(p.stitching, true);
    assert.equal(p.begin({ active: true, admitting: true }), 'filling');
    assert.equal(p.stitching, true);
  });

  it('a full pool whose stitched epochs cost more than bypassed ones goes dormant after one trial each way', () => {
    const p = new PoolPayoff();
    const phases = epochs(p, 5, (phase) => (phase === 'trial-stitch' || phase === 'stitching' ? 17 : 10));
    assert.deepEqual(phases, ['trial-stitch', 'trial-bypass', 'dormant', 'dormant', 'dormant']);
    assert.equal(p.stitching, false);
  });

  it('a full pool whose stitched epochs cost less (or the same) keeps stitching', () => {
    const cheaper = epochs(new PoolPayoff(), 4, (phase) => (phase === 'trial-bypass' ? 10 : 6));
    assert.deepEqual(cheaper, ['trial-stitch', 'trial-bypass', 'stitching', 'stitching']);
    const tie = epochs(new PoolPayoff(), 3, () => 10);
    assert.deepEqual(tie, ['trial-stitch', 'trial-bypass', 'stitching'], 'ties go to the pool');
  });

  it('an epoch left before its end measures nothing: its trial is repeated', () => {
    const p = new PoolPayoff();
    assert.equal(p.begin(FULL), 'trial-stitch');
    p.end({ complete: false, batches: 3, wallMs: 1 });
    assert.equal(p.begin(FULL), 'trial-stitch');
    p.end({ complete: true, batches: 0, wallMs: 0 });
    assert.equal(p.begin(FULL), 'trial-stitch', 'an epoch of no batch measures nothing either');
  });

  it(`reruns the trial every ${RETRIAL_EPOCHS} epochs, so a change in the costs is followed`, () => {
    const p = new PoolPayoff();
    let stitchCost = 20;
    const phases = epochs(p, 2 + RETRIAL_EPOCHS, (phase) => (phase === 'trial-stitch' || phase === 'stitching' ? stitchCost : 10));
    assert.deepEqual(phases.slice(0, 3), ['trial-stitch', 'trial-bypass', 'dormant']);
    assert.ok(phases.slice(2).every((x) => x === 'dormant'));
    stitchCost = 5;
    const next = epochs(p, 4, (phase) => (phase === 'trial-stitch' || phase === 'stitching' ? stitchCost : 10));
    assert.deepEqual(next, ['trial-stitch', 'trial-bypass', 'stitching', 'stitching']);
  });
});
