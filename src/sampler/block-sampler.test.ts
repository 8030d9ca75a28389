import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BlockSampler, fixedBlockStarts } from './block-sampler.js';
import { toU64 } from './rng.js';

const seed = toU64(7);
/** Block b of `sizes`' blocks holds samples [starts[b], starts[b + 1]). */
function startsOf(sizes: readonly number[]): number[] {
  const out: number[] = [];
  let at = 0;
  for (const s of sizes) {
    out.push(at);
    at += s;
  }
  return out;
}
const blockOf = (starts: readonly number[], sample: number) => starts.findLastIndex((s) => s <= sample);
const sorted = (a: ArrayLike<number>) => Array.from(a).sort((x, y) => x - y);
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

describe('block sampler', () => {
  const sizes = [5, 9, 1, 7, 3, 12, 8, 2, 6, 4];
  const starts = startsOf(sizes);
  const n = 57;

  for (const within of [true, false]) {
    it(`every pick exactly once per epoch (within: ${within}, augment 1 and 3)`, () => {
      for (const augment of [1, 3]) {
        const s = new BlockSampler(starts, n, augment, seed, { window: 3, within });
        assert.equal(s.length, n * augment);
        for (const epoch of [0, 1, 5]) assert.deepEqual(sorted(s.indices(epoch)), range(n * augment));
      }
    });
  }

  it('is a pure function of (seed, epoch) and differs across epochs and seeds', () => {
    const a = new BlockSampler(starts, n, 1, seed, { window: 3, within: true });
    const b = new BlockSampler(starts, n, 1, toU64(7), { window: 3, within: true });
    assert.deepEqual(a.indices(2), b.indices(2));
    assert.deepEqual(a.indices(2), a.indices(2));
    assert.notDeepEqual(a.indices(2), a.indices(3));
    assert.notDeepEqual(a.indices(2), new BlockSampler(starts, n, 1, toU64(8), { window: 3, within: true }).indices(2));
  });

  /** The block order of an epoch, read off a shard-only order (the same block permutation: NOTE [Block order]). */
  const blockRuns = (order: ArrayLike<number>, augment: number) => {
    const runs: number[] = [];
    for (let i = 0; i < order.length; ) {
      const b = blockOf(starts, Math.floor(order[i]! / augment));
      runs.push(b);
      i += sizes[b]! * augment;
    }
    return runs;
  };

  it('each window holds exactly the picks of its `window` blocks, interleaved', () => {
    const window = 3;
    const blocks = blockRuns(new BlockSampler(starts, n, 1, seed, { window, within: false }).indices(4), 1);
    const order = Array.from(new BlockSampler(starts, n, 1, seed, { window, within: true }).indices(4));
    let at = 0;
    let mixed = 0;
    for (let w = 0; w * window < blocks.length; w++) {
      const mine = blocks.slice(w * window, (w + 1) * window);
      const want = mine.flatMap((b) => range(sizes[b]!).map((i) => starts[b]! + i));
      const got = order.slice(at, at + want.length);
      assert.deepEqual(sorted(got), sorted(want), `window ${w}: blocks ${mine}`);
      if (got.some((p, i) => i > 0 && blockOf(starts, p) !== blockOf(starts, got[i - 1]!))) mixed++;
      at += want.length;
    }
    assert.equal(at, n);
    assert.ok(mixed > 1, 'samples of a window are interleaved across its blocks');
  });

  it('shard-only (within: false) keeps each block whole and in its own order, the blocks permuted', () => {
    const s = new BlockSampler(starts, n, 2, seed, { window: 8, within: false });
    const order = Array.from(s.indices(1));
    const runs = blockRuns(order, 2);
    let i = 0;
    for (const b of runs) {
      const len = sizes[b]! * 2;
      assert.deepEqual(order.slice(i, i + len), range(len).map((k) => starts[b]! * 2 + k), `block ${b} whole and in order`);
      i += len;
    }
    assert.deepEqual(sorted(runs), range(sizes.length));
    assert.notDeepEqual(runs, range(sizes.length), 'blocks are permuted');
    assert.notDeepEqual(runs, blockRuns(s.indices(2), 2), 'another epoch, another block order');
  });

  it('a window as wide as the dataset mixes all picks; empty blocks are dropped', () => {
    const s = new BlockSampler([0, 0, 10, 10, 20, 30], 30, 1, seed, { window: 100, within: true });
    assert.equal(s.blocks, 3);
    const order = s.indices(0);
    assert.deepEqual(sorted(order), range(30));
    assert.ok([0, 10, 20].some((at) => sorted(order.subarray(at, at + 10)).join() !== range(10).map((i) => i + at).join()));
  });

  it("streams (blocks per node): every pick once; each stream's picks come in chunks from its own blocks", () => {
    const s = new BlockSampler(starts, n, 1, seed, { window: 2, within: true }, { streams: 3, chunk: 4 });
    for (const epoch of [0, 3]) {
      const order = Array.from(s.indices(epoch));
      assert.deepEqual(sorted(order), range(n));
      // Chunk k of the first rounds (while all three streams have picks) belongs to stream k mod 3: their blocks never meet.
      const streamBlocks = [new Set<number>(), new Set<number>(), new Set<number>()];
      for (let c = 0; c < 3 * 3; c++) for (const p of order.slice(c * 4, c * 4 + 4)) streamBlocks[c % 3]!.add(blockOf(starts, p));
      for (let g = 0; g < 3; g++) for (let h = g + 1; h < 3; h++) assert.deepEqual([...streamBlocks[g]!].filter((b) => streamBlocks[h]!.has(b)), [], `streams ${g} and ${h} share no block (epoch ${epoch})`);
    }
    assert.deepEqual(s.layoutOf(1), { streams: 3, chunk: 4 });
    s.resumeWith(1, { streams: 1, chunk: 1 });
    assert.deepEqual(s.indices(1), new BlockSampler(starts, n, 1, seed, { window: 2, within: true }).indices(1), 'a resumed epoch keeps the layout it was saved with');
    assert.deepEqual(s.layoutOf(2), { streams: 3, chunk: 4 });
  });

  it('fixed blocks cut the samples in runs of `size`, the last shorter', () => {
    assert.deepEqual(Array.from(fixedBlockStarts(10, 4)), [0, 4, 8]);
    assert.deepEqual(Array.from(fixedBlockStarts(8, 4)), [0, 4]);
    assert.deepEqual(Array.from(fixedBlockStarts(3, 65536)), [0]);
  });

  it('the bounds fingerprint changes with the blocks', () => {
    const h = (st: number[]) => new BlockSampler(st, 30, 1, seed, { window: 2, within: true }).boundsHash;
    assert.equal(h([0, 10, 20]), h([0, 10, 20]));
    assert.notEqual(h([0, 10, 20]), h([0, 11, 20]));
    assert.match(h([0, 10, 20]), /^[0-9a-f]{8}$/);
  });
});
