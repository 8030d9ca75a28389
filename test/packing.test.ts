// Sequence packing plans (src/sampler/pack-plan.ts): every document of the order placed exactly once
// (best-fit: whole; concat: every token once, split across windows), no window over contextLength,
// segment and position ids that match the pieces, the plan a pure function of the order (so of seed
// and epoch), utilization ≥ 95 % best-fit on log-normal lengths (median 300, contextLength 2048),
// ERR_TOO_LONG for a document over contextLength in best-fit unless truncate, bad options refused.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LoaderError } from '../src/errors.js';
import { packBatch, packPlan, parsePack } from '../src/sampler/pack-plan.js';
import { Rng, epochPermutation } from '../src/sampler/rng.js';

function logNormal(n: number, seed: number, median: number, sigma: number, max = Infinity): Uint32Array {
  const rng = Rng.seed(seed);
  return Uint32Array.from({ length: n }, () => Math.max(1, Math.min(max, Math.round(median * Math.exp(sigma * rng.normal())))));
}

const code = (c: string) => (e: unknown) => e instanceof LoaderError && e.code === c;

describe('packing plan', () => {
  it('best-fit: every document exactly once, whole, no window over contextLength, ≥ 95 % utilization', () => {
    const lengths = logNormal(20_000, 7, 300, 0.9);
    const order = epochPermutation(123, 0, lengths.length);
    const s = parsePack({ contextLength: 2048, mode: 'best-fit', window: 1000, truncate: true })!;
    const plan = packPlan(order, (i) => lengths[i]!, s);
    const seen = new Uint8Array(order.length);
    for (let w = 0; w + 1 < plan.windows.length; w++) {
      let fill = 0;
      for (let i = plan.windows[w]!; i < plan.windows[w + 1]!; i++) {
        const p = plan.pieces[i]!;
        assert.equal(p.start, 0);
        assert.equal(p.length, Math.min(2048, lengths[order[p.pick]!]!));
        seen[p.pick]!++;
        fill += p.length;
      }
      assert.ok(fill <= 2048 && fill > 0);
    }
    assert.ok(seen.every((v) => v === 1), 'each pick once');
    const util = plan.realTokens / plan.slots;
    assert.ok(util >= 0.95, `utilization ${util}`);
  });

  it('concat: every token of every document exactly once, windows full but the last', () => {
    const lengths = logNormal(500, 3, 300, 1);
    const order = epochPermutation(5, 2, lengths.length);
    const plan = packPlan(order, (i) => lengths[i]!, parsePack({ contextLength: 512, mode: 'concat' })!);
    const covered = Array.from(order, () => 0);
    const next = Array.from(order, () => 0);
    for (const p of plan.pieces) {
      assert.equal(p.start, next[p.pick]);
      next[p.pick] = p.start + p.length;
      covered[p.pick] = covered[p.pick]! + p.length;
    }
    assert.deepEqual(covered, Array.from(order, (s) => lengths[s]!));
    const total = lengths.reduce((a, b) => a + b, 0);
    assert.equal(plan.realTokens, total);
    assert.equal(plan.windows.length - 1, Math.ceil(total / 512));
  });

  it('is a pure function of the order: same seed and epoch, same plan; another epoch, another', () => {
    const lengths = logNormal(3000, 11, 300, 0.8, 2048);
    const s = parsePack({ contextLength: 2048, window: 500 })!;
    const a = packPlan(epochPermutation(9, 1, 3000), (i) => lengths[i]!, s);
    const b = packPlan(epochPermutation(9, 1, 3000), (i) => lengths[i]!, s);
    const c = packPlan(epochPermutation(9, 2, 3000), (i) => lengths[i]!, s);
    assert.deepEqual(a, b);
    assert.notDeepEqual(a.pieces, c.pieces);
  });

  it('builds tokens, segment_ids and position_ids that match the pieces', () => {
    const docs = [Int32Array.of(1, 2, 3), Int32Array.of(4, 5), Int32Array.of(6, 7, 8, 9, 10)];
    const order = Uint32Array.of(0, 1, 2);
    const plan = packPlan(order, (i) => docs[i]!.length, parsePack({ contextLength: 4, mode: 'concat' })!);
    const b = packBatch(plan, 0, plan.windows.length - 1, 4, (p) => docs[order[p]!]!);
    assert.deepEqual([...b.tokens], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 0]);
    assert.deepEqual([...b.segment_ids], [1, 1, 1, 2, 1, 2, 2, 2, 1, 1, 0, 0]);
    assert.deepEqual([...b.position_ids], [0, 1, 2, 0, 1, 0, 1, 2, 3, 4, 0, 0]);
  });

  it('places no empty document: every window holds a token, and an order of empty documents has no window', () => {
    const lengths = [0, 5, 0, 0, 3, 0, 2, 0];
    for (const mode of ['concat', 'best-fit'] as const) {
      for (const window of [1, 2, 8]) {
        const s = parsePack({ contextLength: 4, mode, ...(mode === 'best-fit' ? { window, truncate: true } : {}) })!;
        const plan = packPlan(Uint32Array.from(lengths.keys()), (i) => lengths[i]!, s);
        assert.ok(plan.pieces.every((p) => p.length > 0 && lengths[p.pick]! > 0), `${mode}: no empty piece`);
        for (let w = 0; w + 1 < plan.windows.length; w++) assert.ok(plan.windows[w + 1]! > plan.windows[w]!, `${mode}, window ${w} is empty`);
        assert.equal(plan.realTokens, mode === 'concat' ? 10 : 9);
        const none = packPlan(Uint32Array.of(0, 2, 3), (i) => lengths[i]!, s);
        assert.deepEqual([...none.windows], [0]);
        assert.equal(none.slots, 0);
      }
    }
  });

  it('refuses a document over contextLength in best-fit unless truncate', () => {
    const s = parsePack({ contextLength: 8 })!;
    assert.throws(() => packPlan(Uint32Array.of(0, 1), (i) => (i === 1 ? 9 : 3), s), (e: unknown) => code('ERR_TOO_LONG')(e) && /document 1 has 9 tokens/.test((e as Error).message));
    const t = packPlan(Uint32Array.of(0, 1), (i) => (i === 1 ? 9 : 3), { ...s, truncate: true });
    assert.equal(t.realTokens, 11);
  });

  it('refuses bad pack options', () => {
    for (const [o, re] of [
      [{}, /pack\.contextLength/],
      [{ contextLength: 0 }, /pack\.contextLength/],
      [{ contextLength: 8, mode: 'greedy' }, /pack\.mode/],
      [{ contextLength: 8, window: 1.5 }, /pack\.window/],
      [{ contextLength: 8, extra: 1 }, /pack\.extra/],
      // Best-fit's settings mean nothing to concat, which lays documents end to end and splits them.
      [{ contextLength: 8, mode: 'concat', window: 4 }, /`pack\.window` must be left out with mode 'concat'/],
      [{ contextLength: 8, mode: 'concat', truncate: true }, /`pack\.truncate` must be left out with mode 'concat'/],
      [{ contextLength: 8, mode: 'concat', truncate: false }, /`pack\.truncate`/],
      ['x', /pack/],
    ] as [unknown, RegExp][]) {
      assert.throws(() => parsePack(o), (e: unknown) => code('ERR_INVALID_OPTION')(e) && re.test((e as Error).message));
    }
  });
});
