import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EpochPlan } from '../pipeline/epoch-plan.js';
import { PickKey } from './pick-key.js';
import { RandomSampler } from './random-sampler.js';
import { Rng } from './rng.js';
import { SequentialSampler } from './sequential-sampler.js';

describe('picks and keys', () => {
  it('decodes a pick sample-major: pick 7 with k 3 → (2, 1); with k 1 → (7, 0)', () => {
    const a = PickKey.fromPick(7, 3, 0, 42);
    assert.deepEqual([a.sample, a.repeat], [2, 1]);
    const b = PickKey.fromPick(7, 1, 0, 42);
    assert.deepEqual([b.sample, b.repeat], [7, 0]);
    assert.deepEqual(Array.from(new EpochPlan(0, Uint32Array.of(0, 1, 2, 7, 8), 3, 2, false).samples), [0, 0, 0, 2, 2]);
  });

  it('gives the same stream for the same key and another for another repeat, epoch, sample or seed', () => {
    const draws = (k: PickKey) => { const r = k.rng(); return [r.nextU32(), r.nextU32(), r.nextU32()]; };
    const base = draws(new PickKey(5, 1, 2, 42));
    assert.deepEqual(draws(new PickKey(5, 1, 2, 42)), base);
    assert.notDeepEqual(draws(new PickKey(5, 0, 2, 42)), base);
    assert.notDeepEqual(draws(new PickKey(5, 1, 3, 42)), base);
    assert.notDeepEqual(draws(new PickKey(6, 1, 2, 42)), base);
    assert.notDeepEqual(draws(new PickKey(5, 1, 2, 43)), base);
  });

  it('derives the key seed with the frozen constants of the reference', () => {
    // h = seed·C1 + epoch·C2; h ^= sample·C3; h ^= repeat·C4; h ^= h >> 33 — computed here with BigInt.
    const M = (1n << 64n) - 1n;
    const [seed, epoch, sample, repeat] = [123456789n, 7n, 4242n, 3n];
    let h = (seed * 0x9e3779b97f4a7c15n + epoch * 0xbf58476d1ce4e5b9n) & M;
    h ^= (sample * 0x94d049bb133111ebn) & M;
    h ^= (repeat * 0xd6e8feb86659fd93n) & M;
    h ^= h >> 33n;
    const expected = Rng.seed(h).nextU64();
    assert.equal(new PickKey(4242, 3, 7, seed).rng().nextU64(), expected);
  });
});

describe('built-in samplers', () => {
  it('sequential gives 0 … n−1 every epoch', () => {
    const s = new SequentialSampler(5);
    assert.deepEqual(Array.from(s.indices(0)), [0, 1, 2, 3, 4]);
    assert.deepEqual(Array.from(s.indices(9)), [0, 1, 2, 3, 4]);
  });

  it('random gives a permutation that is a pure function of (seed, epoch)', () => {
    const a = new RandomSampler(100, 1);
    const e0 = Array.from(a.indices(0));
    assert.deepEqual([...e0].sort((x, y) => x - y), Array.from({ length: 100 }, (_, i) => i));
    assert.deepEqual(Array.from(new RandomSampler(100, 1).indices(0)), e0);
    assert.notDeepEqual(Array.from(a.indices(1)), e0);
    assert.notDeepEqual(Array.from(new RandomSampler(100, 2).indices(0)), e0);
    assert.equal(a.length, 100);
  });
});
