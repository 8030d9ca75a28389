// Piece tables (src/collate/pieces.ts): pad, pack and sequence-packing windows of fixed-capacity
// rows through one host mechanism, equal byte for byte to collateField (src/collate/collate.ts) and
// packBatch (src/sampler/pack-plan.ts) on random inputs — several dtypes, trailing dimensions, fill
// values, truncation — and the edge cases (empty rows, L under a row's length, a batch of one, no
// pieces); every output byte written (stale outputs do not show through); bad tables refused.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LoaderError } from '../src/errors.js';
import { type RaggedRow, collateField, parseCollate } from '../src/collate/collate.js';
import { PIECE_INTS, type PieceRows, type PieceTable, applyPieces, checkPieces, collatePieces, fillBits, fillBitsOf, packPieces, padPieces, windowPieces } from '../src/collate/pieces.js';
import { batchPositions } from '../src/pipeline/batch-planner.js';
import { rowMap } from './fixtures/pieces-device.js';
import { packBatch, packPlan, parsePack } from '../src/sampler/pack-plan.js';
import { Rng, epochPermutation } from '../src/sampler/rng.js';

type Ctor = new (n: number) => RaggedRow;
const DTYPES: [string, Ctor][] = [['int32', Int32Array], ['uint16', Uint16Array], ['float32', Float32Array], ['int8', Int8Array], ['float64', Float64Array]];

function bytes(a: ArrayBufferView): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** B rows of random length in [0, maxLen] (× per elements), random contents of the dtype. */
function randomRows(ctor: Ctor, B: number, maxLen: number, per: number, rng: Rng): RaggedRow[] {
  return Array.from({ length: B }, () => {
    const n = rng.below(maxLen + 1) * per;
    const row = new ctor(n);
    for (let k = 0; k < n; k++) row[k] = ctor === Float32Array || ctor === Float64Array ? rng.below(1 << 20) / 7 - 3000 : rng.below(1 << 16) - (ctor === Uint16Array ? 0 : 100);
    return row;
  });
}

/** The rows as the tiers carry them: `capacity` positions each, positions past the row's length zero. */
function fixedRows(rows: readonly RaggedRow[], capacity: number, per: number): { src: Uint8Array; layout: PieceRows } {
  const ctor = rows[0]!.constructor as Ctor;
  const all = new ctor(rows.length * capacity * per);
  rows.forEach((r, i) => all.set(r.subarray(0, Math.min(r.length, capacity * per)), i * capacity * per));
  const elementBytes = all.BYTES_PER_ELEMENT as 1 | 2 | 4 | 8;
  return { src: bytes(all), layout: { rows: rows.length, rowBytes: capacity * per * elementBytes, elementBytes, per } };
}

/** Outputs pre-filled with garbage, so a byte the pieces leave unwritten shows. */
function outputs(t: PieceTable, layout: PieceRows, fill: bigint, tags: { segment?: 1 | 4; position?: boolean }) {
  const data = new Uint8Array(t.total * layout.per * layout.elementBytes).fill(0xab);
  const segment = tags.segment === 4 ? new Int32Array(t.total).fill(-7) : tags.segment === 1 ? new Uint8Array(t.total).fill(0xcd) : undefined;
  const position = tags.position ? new Int32Array(t.total).fill(-9) : undefined;
  return { data, fill, ...(segment ? { segment } : {}), ...(position ? { position } : {}) };
}

describe('piece tables: collates equal to collateField byte for byte', () => {
  for (const [name, ctor] of DTYPES) {
    it(`pad and pack of random ${name} rows (per 1 and 3, fills, multiples, fixed lengths with truncation)`, () => {
      const rng = Rng.seed(name.length * 31 + 5);
      for (let trial = 0; trial < 24; trial++) {
        const per = trial % 3 === 0 ? 3 : 1;
        const B = 1 + rng.below(40);
        const cap = 1 + rng.below(60);
        const rows = randomRows(ctor, B, cap, per, rng);
        const ids = rows.map((_, i) => 1000 + i);
        const value = [0, -1, 7, 2.5][trial % 4]!;
        const to = [undefined, { multiple: 8 }, 1 + rng.below(cap)][trial % 3];
        const option = trial % 5 === 4 ? { pack: { maxLength: cap } } : { pad: { value, mask: true, truncate: true, maxLength: cap, ...(to !== undefined ? { to } : {}) } };
        const spec = parseCollate({ f: option }, ['f']).get('f')!;
        if (spec.kind === 'function') throw new Error('unreachable');
        const want = collateField('f', spec, rows, ids, per);
        const lengths = rows.map((r) => r.length / per);
        const c = collatePieces('f', spec, lengths, ids, per === 1 ? [] : [per]);
        const { src, layout } = fixedRows(rows, cap, per);
        const out = outputs(c.pieces, layout, spec.kind === 'pad' ? fillBits(spec.value, rows[0]!) : 0n, { segment: c.mask ? 1 : undefined });
        applyPieces(src, layout, c.pieces, out);
        assert.deepEqual(c.shape, want.f!.shape, `trial ${trial} shape`);
        assert.deepEqual(out.data, bytes(want.f!.data), `trial ${trial} data`);
        if (spec.kind === 'pad') {
          assert.deepEqual(c.lengths, want.f_lengths!.data, `trial ${trial} lengths`);
          assert.deepEqual(out.segment, want.f_mask!.data, `trial ${trial} mask`);
        } else {
          assert.deepEqual(c.cuSeqlens, want.f_cu_seqlens!.data, `trial ${trial} cu_seqlens`);
        }
      }
    });
  }

  it('edge cases: empty rows, L under a row, a batch of one, an all-empty batch', () => {
    const cases: { rows: Int32Array[]; option: object }[] = [
      { rows: [Int32Array.of(), Int32Array.of(5, 6), Int32Array.of()], option: { pad: { mask: true, value: 9 } } },
      { rows: [Int32Array.of(1, 2, 3, 4, 5), Int32Array.of(6)], option: { pad: { to: 2, truncate: true, mask: true } } },
      { rows: [Int32Array.of(1, 2, 3)], option: { pad: { mask: true, value: -1, to: { multiple: 4 } } } },
      { rows: [Int32Array.of(1, 2, 3)], option: { pack: {} } },
      { rows: [Int32Array.of(), Int32Array.of()], option: { pad: { mask: true } } },
      { rows: [Int32Array.of(), Int32Array.of(4), Int32Array.of()], option: { pack: {} } },
    ];
    for (const [k, { rows, option }] of cases.entries()) {
      const spec = parseCollate({ t: option }, ['t']).get('t')!;
      if (spec.kind === 'function') throw new Error('unreachable');
      const ids = rows.map((_, i) => i);
      const want = collateField('t', spec, rows, ids);
      const c = collatePieces('t', spec, rows.map((r) => r.length), ids);
      const { src, layout } = fixedRows(rows, 6, 1);
      const out = outputs(c.pieces, layout, spec.kind === 'pad' ? fillBits(spec.value, rows[0]!) : 0n, { segment: c.mask ? 1 : undefined });
      applyPieces(src, layout, c.pieces, out);
      assert.deepEqual(out.data, bytes(want.t!.data), `case ${k} data`);
      assert.deepEqual(c.shape, want.t!.shape, `case ${k} shape`);
      if (c.mask) assert.deepEqual(out.segment, want.t_mask!.data, `case ${k} mask`);
      if (c.cuSeqlens) assert.deepEqual(c.cuSeqlens, want.t_cu_seqlens!.data, `case ${k} cu_seqlens`);
    }
  });

  it('refuses a row over the capacity with the same ERR_TOO_LONG as collateField', () => {
    const spec = parseCollate({ t: { pad: { to: 2 } } }, ['t']).get('t')!;
    if (spec.kind === 'function') throw new Error('unreachable');
    let want: unknown;
    try {
      collateField('t', spec, [Int32Array.of(1, 2, 3)], [42]);
    } catch (e) {
      want = e;
    }
    assert.throws(() => collatePieces('t', spec, [3], [42]), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_TOO_LONG' && e.message === (want as Error).message);
  });
});

describe('piece tables: sequence-packing windows equal to packBatch', () => {
  for (const mode of ['best-fit', 'concat'] as const) {
    for (const [name, ctor] of [['int32', Int32Array], ['uint16', Uint16Array]] as const) {
      it(`${mode}, ${name} tokens: tokens, segment_ids and position_ids byte for byte, batch by batch`, () => {
        const rng = Rng.seed(mode.length * 7 + name.length);
        const n = 300;
        const C = 64;
        const docs = Array.from({ length: n }, (_, i) => ctor.from(Array.from({ length: rng.below(mode === 'concat' ? 150 : 90) }, (_, k) => (i * 131 + k) & 0xffff)));
        const order = epochPermutation(9, 1, n);
        const plan = packPlan(order, (s) => docs[s]!.length, parsePack({ contextLength: C, mode, ...(mode === 'best-fit' ? { window: 40, truncate: true } : {}) })!);
        const windows = plan.windows.length - 1;
        const value = mode === 'concat' ? 0 : 3;
        for (let first = 0; first < windows; first += 7) {
          const count = Math.min(7, windows - first);
          const want = packBatch(plan, first, count, C, (pick) => docs[order[pick]!]! as Int32Array | Uint16Array, value);
          // The batch's rows: one fixed-capacity row per distinct pick.
          const picks = batchPositions(plan, first, count);
          const batchRows: RaggedRow[] = picks.map((pick) => docs[order[pick]!]!);
          const t = windowPieces(plan, first, count, C, rowMap(picks));
          const { src, layout } = fixedRows(batchRows, 150, 1);
          const out = outputs(t, layout, fillBits(value, batchRows[0]!), { segment: 4, position: true });
          applyPieces(src, layout, t, out);
          assert.deepEqual(out.data, bytes(want.tokens), `windows ${first}+${count} tokens`);
          assert.deepEqual(out.segment, want.segment_ids, `windows ${first}+${count} segment_ids`);
          assert.deepEqual(out.position, want.position_ids, `windows ${first}+${count} position_ids`);
        }
      });
    }
  }
});

describe('piece tables: builders and checks', () => {
  it('padPieces clips to L and spans each row; packPieces lays rows end to end with cu_seqlens', () => {
    const p = padPieces([3, 0, 9], 4);
    assert.deepEqual([...p.table], [0, 0, 0, 3, 1, 1, 0, 4, 0, 1, 2, 0, 8, 4, 1]);
    assert.deepEqual([...p.lengths], [3, 0, 4]);
    assert.equal(p.total, 12);
    assert.equal(p.maxSpan, 4);
    const k = packPieces([3, 0, 9]);
    assert.deepEqual([...k.cuSeqlens], [0, 3, 3, 12]);
    assert.deepEqual([...k.table], [0, 0, 0, 3, 1, 1, 0, 3, 0, 2, 2, 0, 3, 9, 3]);
    assert.equal(k.maxSpan, 9);
  });

  it('windowPieces: an empty document is in no window, so it takes no entry, no segment number and no row', () => {
    // Windows of 4: [0:0-3, 2:0-1], [3:0-2].
    const plan = packPlan(Uint32Array.of(0, 1, 2, 3), (s) => [3, 0, 1, 2][s]!, parsePack({ contextLength: 4, mode: 'concat' })!);
    const picks = batchPositions(plan, 0, 2);
    assert.deepEqual(picks, [0, 2, 3]);
    const t = windowPieces(plan, 0, 2, 4, rowMap(picks));
    assert.deepEqual([...t.table], [0, 0, 0, 3, 1, 1, 0, 3, 1, 2, 2, 0, 4, 2, 1]);
  });

  it('a table without pieces fills the whole output', () => {
    const t: PieceTable = { table: new Int32Array(0), count: 0, total: 5, maxSpan: 5 };
    const layout: PieceRows = { rows: 1, rowBytes: 8, elementBytes: 2, per: 1 };
    const out = outputs(t, layout, fillBits(-2, new Int16Array(1)), { segment: 4, position: true });
    applyPieces(new Uint8Array(8), layout, t, out);
    assert.deepEqual([...new Int16Array(out.data.buffer)], [-2, -2, -2, -2, -2]);
    assert.deepEqual([...out.segment!], [0, 0, 0, 0, 0]);
    assert.deepEqual([...out.position!], [0, 0, 0, 0, 0]);
  });

  it('fillBits stores the value as the dtype stores it (little-endian bit patterns)', () => {
    assert.equal(fillBits(-1, new Int32Array(1)), 0xffffffffn);
    assert.equal(fillBits(-1, new Uint16Array(1)), 0xffffn);
    assert.equal(fillBits(1, new Float32Array(1)), 0x3f800000n);
    assert.equal(fillBits(1, new Float64Array(1)), 0x3ff0000000000000n);
    assert.equal(fillBits(300, new Uint8Array(1)), 44n);
    assert.equal(fillBitsOf(-1, 'int32'), 0xffffffffn);
    assert.equal(fillBitsOf(1, 'float32'), 0x3f800000n);
    assert.equal(fillBitsOf(7, 'bfloat16'), 7n, 'half floats are stored raw, as the host collate fills them');
    assert.equal(fillBitsOf(-2, 'int64'), 0xfffffffffffffffen);
  });

  it('refuses a piece outside its row, a row out of range, overlapping or unsorted pieces, and a piece past the output', () => {
    const layout: PieceRows = { rows: 2, rowBytes: 16, elementBytes: 4, per: 1 };
    const table = (...pieces: number[][]) => ({ table: Int32Array.from(pieces.flat()), count: pieces.length, total: 8, maxSpan: 8 });
    const refused = (t: PieceTable, re: RegExp) => assert.throws(() => checkPieces(t, layout), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_TENSOR' && re.test(e.message));
    assert.equal(PIECE_INTS, 5);
    checkPieces(table([0, 0, 0, 4, 1], [1, 1, 4, 3, 2]), layout);
    refused(table([0, 2, 0, 3, 1]), /piece 0 reads positions \[2, 5\) of a row with capacity 4/);
    refused(table([2, 0, 0, 1, 1]), /piece 0 reads row 2 of 2/);
    refused(table([0, 0, 4, 2, 1], [1, 0, 2, 3, 1]), /piece 1 starts at output position 2, before the end \(6\)/);
    refused(table([0, 0, 6, 4, 1]), /ends at output position 10, past the output's 8/);
    assert.throws(() => applyPieces(new Uint8Array(32), layout, table([0, 0, 0, 4, 1], [0, 0, 3, 1, 1]), { data: new Uint8Array(32), fill: 0n }), /piece 1 starts at output position 3/);
  });
});
