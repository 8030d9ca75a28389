// Host collates of ragged fields (src/collate/collate.ts): pad to the longest / a multiple / a fixed
// length with lengths and mask, pack with cu_seqlens, user functions; every row's content lands
// where the lengths or offsets say (each sample exactly once in its batch), truncation when stated,
// ERR_TOO_LONG otherwise, and bad collate options refused with ERR_INVALID_OPTION naming the knob.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LoaderError } from '../src/errors.js';
import { collateField, parseCollate } from '../src/collate/collate.js';
import { Rng } from '../src/sampler/rng.js';

/** Row i: a distinct run of ids (i × 1000 + k), length 1…20. */
function rows(n: number, seed: number): Int32Array[] {
  const rng = Rng.seed(seed);
  return Array.from({ length: n }, (_, i) => Int32Array.from({ length: 1 + rng.below(20) }, (_, k) => i * 1000 + k + 1));
}

const code = (c: string) => (e: unknown) => e instanceof LoaderError && e.code === c;

describe('collate: pad', () => {
  it('pads to the longest with lengths and mask, every row intact and padded with value', () => {
    const r = rows(9, 1);
    const spec = parseCollate({ tokens: { pad: { value: -1, mask: true } } }, ['tokens']).get('tokens')!;
    const out = collateField('tokens', spec, r, r.map((_, i) => i));
    const L = Math.max(...r.map((x) => x.length));
    assert.deepEqual(out.tokens!.shape, [9, L]);
    assert.deepEqual([...out.tokens_lengths!.data], r.map((x) => x.length));
    for (let i = 0; i < 9; i++) {
      const row = out.tokens!.data.subarray(i * L, (i + 1) * L);
      assert.deepEqual([...row.subarray(0, r[i]!.length)], [...r[i]!]);
      assert.ok([...row.subarray(r[i]!.length)].every((v) => v === -1));
      const m = out.tokens_mask!.data.subarray(i * L, (i + 1) * L);
      assert.deepEqual([...m], Array.from({ length: L }, (_, k) => (k < r[i]!.length ? 1 : 0)));
    }
  });

  it('pads to a multiple and to a fixed length', () => {
    const r = [Int32Array.of(1, 2, 3), Int32Array.of(4)];
    const m = collateField('t', parseCollate({ t: { pad: { to: { multiple: 8 } } } }, ['t']).get('t')!, r, [0, 1]);
    assert.deepEqual(m.t!.shape, [2, 8]);
    const f = collateField('t', parseCollate({ t: { pad: { to: 5 } } }, ['t']).get('t')!, r, [0, 1]);
    assert.deepEqual([...f.t!.data], [1, 2, 3, 0, 0, 4, 0, 0, 0, 0]);
  });

  it('refuses a row over the capacity with ERR_TOO_LONG naming field, sample, length and capacity', () => {
    const spec = parseCollate({ t: { pad: { to: 2 } } }, ['t']).get('t')!;
    assert.throws(() => collateField('t', spec, [Int32Array.of(1, 2, 3)], [42]), (e: unknown) => code('ERR_TOO_LONG')(e) && /`t`.*sample 42.*length 3.*capacity 2/.test((e as Error).message));
    const cap = parseCollate({ t: 'pad' }, ['t'], { t: 2 }).get('t')!;
    assert.throws(() => collateField('t', cap, [Int32Array.of(1, 2, 3)], [0]), code('ERR_TOO_LONG'));
  });

  it('truncates when stated', () => {
    const spec = parseCollate({ t: { pad: { to: 2, truncate: true } } }, ['t']).get('t')!;
    const out = collateField('t', spec, [Int32Array.of(1, 2, 3), Int32Array.of(9)], [0, 1]);
    assert.deepEqual([...out.t!.data], [1, 2, 9, 0]);
    assert.deepEqual([...out.t_lengths!.data], [2, 1]);
  });

  it('pads rows with trailing dimensions', () => {
    const r = [Float32Array.of(1, 2, 3, 4), Float32Array.of(5, 6)];
    const out = collateField('a', parseCollate({ a: 'pad' }, ['a']).get('a')!, r, [0, 1], 2);
    assert.deepEqual(out.a!.shape, [2, 2, 2]);
    assert.deepEqual([...out.a!.data], [1, 2, 3, 4, 5, 6, 0, 0]);
  });
});

describe('collate: pack and functions', () => {
  it('packs rows end to end with cu_seqlens offsets; each row exactly once', () => {
    const r = rows(13, 2);
    const out = collateField('tokens', parseCollate({ tokens: 'pack' }, ['tokens']).get('tokens')!, r, r.map((_, i) => i));
    const cu = out.tokens_cu_seqlens!.data;
    assert.equal(cu.length, 14);
    assert.equal(cu[0], 0);
    for (let i = 0; i < 13; i++) assert.deepEqual([...out.tokens!.data.subarray(cu[i]!, cu[i + 1]!)], [...r[i]!]);
    assert.equal(out.tokens!.data.length, cu[13]);
  });

  it('calls a user function with the rows and ids', () => {
    const spec = parseCollate({ t: (rs: readonly Int32Array[], ids: readonly number[]) => ({ t: Int32Array.from(rs.map((x, i) => x.length + ids[i]!)) }) }, ['t']).get('t')!;
    const out = collateField('t', spec, [Int32Array.of(1, 2), Int32Array.of(3)], [10, 20]);
    assert.deepEqual([...out.t!.data], [12, 21]);
  });
});

describe('collate options', () => {
  const bad: [unknown, RegExp][] = [
    [{ nope: 'pad' }, /collate\.nope/],
    [{ t: 'squeeze' }, /collate\.t/],
    [{ t: { pad: {}, pack: {} } }, /exactly one/],
    [{ t: { pad: { to: 0 } } }, /collate\.t\.pad\.to/],
    [{ t: { pad: { to: { multiple: -2 } } } }, /multiple/],
    [{ t: { pad: { value: 'x' } } }, /pad\.value/],
    [{ t: { pad: { masks: true } } }, /mask/],
    [{ t: { pack: { truncate: 1 } } }, /pack\.truncate/],
    [{}, /collate\.t.*give/],
    [3, /collate/],
  ];
  for (const [opt, re] of bad) {
    it(`refuses ${JSON.stringify(opt)}`, () => {
      assert.throws(() => parseCollate(opt, ['t']), (e: unknown) => code('ERR_INVALID_OPTION')(e) && re.test((e as Error).message));
    });
  }
});
