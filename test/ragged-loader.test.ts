// Ragged fields through the loader (NOTE [ragged rows], src/dataset/schema.ts): every document
// exactly once per epoch with its exact tokens through pad / pack / function collates, on the main
// thread and in reader workers, through the RAM cache, the disk stage and resident mode; ERR_TOO_LONG
// or truncation as stated; options refused at create with the knob named. Sequence packing
// (`pack`): every token of every document exactly once per epoch in best-fit and concat, segment and
// position ids that name each token's document and place, utilization in stats(), resume at random
// points and onto another world size equal to the uninterrupted run, and a mismatched resume refused.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { BatchError, DataLoader, DeviceTensor, type LoaderOptions, LoaderError, type Tensor, sources } from '../src/index.js';
import { type RaggedOptions, docLength, openRagged } from './fixtures/ragged-source.js';
import { tempDir } from './fixtures.js';
import { allTokens, checkPadded, code, epochIds, hostBatch, ints, packedTokens, raggedDeviceSuite, sortedRange } from './fixtures/ragged-checks.js';

const FIXTURE = new URL('./fixtures/ragged-source.ts', import.meta.url).href;

describe('ragged fields: pad collate through the tiers', () => {
  const o: RaggedOptions = { n: 53, withLabel: true, maxLength: 40 };

  for (const [name, extra] of [
    ['main thread, RAM cache', {}],
    ['no sample cache', { sampleCache: false }],
    ['resident mode', { mode: 'resident' }],
  ] as [string, LoaderOptions][]) {
    it(`delivers every document exactly once with its tokens and lengths (${name}), two epochs`, async () => {
      const loader = await DataLoader.create(openRagged(o), { dropLast: false, collate: { tokens: 'pad' }, ...extra, batchSize: 8 });
      assert.deepEqual(loader.names, ['tokens', 'tokens_lengths', 'label']);
      for (const e of [0, 1]) {
        const ids = await epochIds(loader, e, (b: { get(n: string): unknown; sampleIds: Uint32Array; names: readonly string[] }) => {
          const got = checkPadded(b, o);
          assert.deepEqual([...((b.get('label') as Tensor).data as Float64Array)], got);
          return got;
        });
        assert.deepEqual(ids.sort((a, b) => a - b), sortedRange(o.n), `epoch ${e}`);
      }
      if (extra.sampleCache === undefined && extra.mode === undefined) assert.ok(loader.stats().epochs[1]!.rowsFromCache > 0, 'epoch 1 served from the RAM cache');
      await loader.close();
    });
  }

  it('delivers the same rows through reader workers and the disk stage', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stoker-ragged-'));
    try {
      const spec = sources.module(FIXTURE, 'openRagged', o);
      const loader = await DataLoader.create(spec, {
        batchSize: 8, dropLast: false, workers: 2, collate: { tokens: 'pad' }, diskStage: { gigabytes: 0.01, dir }, ramMaxUsage: 0.05,
      });
      for (const e of [0, 1]) {
        const ids = await epochIds(loader, e, (b) => checkPadded(b, o));
        assert.deepEqual(ids.sort((a, b) => a - b), sortedRange(o.n));
      }
      await loader.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('pads to a multiple with a mask and a pad value, and to a fixed length', async () => {
    const multiple = await DataLoader.create(openRagged(o), { batchSize: 5, collate: { tokens: { pad: { to: { multiple: 16 }, mask: true, value: -7 } } } });
    assert.deepEqual(multiple.names, ['tokens', 'tokens_lengths', 'tokens_mask', 'label']);
    for await (const b of multiple.epoch(0)) {
      const t = b.get('tokens') as Tensor;
      const [B, L] = t.shape as [number, number];
      assert.equal(L % 16, 0);
      const lengths = ints(b.get('tokens_lengths'));
      const mask = (b.get('tokens_mask') as Tensor).data as Uint8Array;
      for (let r = 0; r < B; r++) {
        for (let k = 0; k < L; k++) {
          assert.equal(mask[r * L + k], k < lengths[r]! ? 1 : 0);
          if (k >= lengths[r]!) assert.equal((t.data as Int32Array)[r * L + k], -7);
        }
      }
    }
    await multiple.close();
    const fixed = await DataLoader.create(openRagged(o), { batchSize: 5, collate: { tokens: { pad: { to: 48 } } } });
    for await (const b of fixed.epoch(0)) assert.deepEqual((b.get('tokens') as Tensor).shape, [5, 48]);
    await fixed.close();
  });

  it('packs rows with cu_seqlens, every token in place', async () => {
    const loader = await DataLoader.create(openRagged(o), { batchSize: 6, dropLast: false, collate: { tokens: 'pack' } });
    assert.deepEqual(loader.names, ['tokens', 'tokens_cu_seqlens', 'label']);
    const seen: number[] = [];
    for await (const b of loader.epoch(0)) {
      const cu = ints(b.get('tokens_cu_seqlens'));
      const data = ints(b.get('tokens'));
      assert.equal(cu.length, b.rows + 1);
      assert.equal(data.length, cu[b.rows]);
      b.sampleIds.forEach((id, r) => {
        assert.equal(cu[r + 1]! - cu[r]!, docLength(id, o));
        for (let k = cu[r]!; k < cu[r + 1]!; k++) assert.equal(data[k], id * 4096 + (k - cu[r]!) + 1);
        seen.push(id);
      });
    }
    assert.deepEqual(seen.sort((a, b) => a - b), sortedRange(o.n));
    await loader.close();
  });

  it('runs a function collate on the host and names its outputs from the first batch', async () => {
    const loader = await DataLoader.create(openRagged(o), {
      batchSize: 4,
      collate: { tokens: (rows: readonly Int32Array[]) => ({ tokens_sum: Int32Array.from(rows, (r) => r.reduce((a, v) => a + v, 0)) }) },
    });
    for await (const b of loader.epoch(0)) {
      assert.deepEqual(b.names, ['tokens_sum', 'label']);
      const sums = ints(b.get('tokens_sum'));
      b.sampleIds.forEach((id, r) => {
        const n = docLength(id, o);
        assert.equal(sums[r], n * (id * 4096 + 1) + (n * (n - 1)) / 2);
      });
    }
    assert.deepEqual(loader.names, ['tokens_sum', 'label']);
    await loader.close();
  });

  it('a document over the capacity fails its batch with ERR_TOO_LONG, or is truncated when stated', async () => {
    const long: RaggedOptions = { n: 16, maxLength: 10, longAt: { 5: 30 }, declare: false };
    const loader = await DataLoader.create(openRagged(long), { batchSize: 4, shuffle: false, collate: { tokens: { pad: { maxLength: 12 } } } });
    await assert.rejects(
      async () => {
        for await (const _ of loader.epoch(0));
      },
      (e: unknown) => e instanceof BatchError && code('ERR_TOO_LONG')(e.cause) && /`tokens`.*sample 5.*length 30.*capacity 12/.test((e.cause as Error).message),
    );
    await loader.close();
    const cut = await DataLoader.create(openRagged(long), { batchSize: 4, shuffle: false, collate: { tokens: { pad: { maxLength: 12, truncate: true } } } });
    for await (const b of cut.epoch(0)) {
      const r = [...b.sampleIds].indexOf(5);
      if (r < 0) continue;
      assert.equal(ints(b.get('tokens_lengths'))[r], 12);
      const L = (b.get('tokens') as Tensor).shape[1]!;
      assert.deepEqual([...ints(b.get('tokens')).subarray(r * L, r * L + 12)], Array.from({ length: 12 }, (_, k) => 5 * 4096 + k + 1));
    }
    await cut.close();
  });

  it('gives each ragged field without a capacity its own longest length, whatever the order of the collate keys', async (t) => {
    // Two list fields of a JSONL, neither with maxLength: `a` up to 50 long, `b` up to 200. Each
    // field's capacity is the longest of its own lengths (loadLengths(field)): no batch fails, and
    // with truncate: true no row is cut.
    const file = path.join(tempDir(t, 'two-ragged'), 'two.jsonl');
    const lenA = (i: number) => 1 + ((i * 37) % 50);
    const lenB = (i: number) => 1 + ((i * 53) % 200);
    const row = (n: number, i: number) => Array.from({ length: n }, (_, k) => i * 1000 + k);
    fs.writeFileSync(file, Array.from({ length: 400 }, (_, i) => JSON.stringify({ a: row(lenA(i), i), b: row(lenB(i), i) }) + '\n').join(''));
    const seen: string[] = [];
    for (const keys of [['a', 'b'], ['b', 'a']]) {
      for (const truncate of [false, true]) {
        const collate = Object.fromEntries(keys.map((k) => [k, { pad: { truncate } }]));
        const loader = await DataLoader.create(sources.jsonl(file, { fields: { a: 'int32', b: 'int32' }, index: 'off' }), { batchSize: 50, shuffle: false, collate });
        const got: number[] = [];
        for await (const b of loader.epoch(0)) {
          for (const [field, len] of [['a', lenA], ['b', lenB]] as const) {
            const data = ints(b.get(field));
            const L = (b.get(field) as Tensor).shape[1]!;
            b.sampleIds.forEach((id, r) => {
              assert.equal(ints(b.get(`${field}_lengths`))[r], len(id), `${keys}, truncate ${truncate}: ${field} of sample ${id}`);
              assert.deepEqual([...data.subarray(r * L, r * L + len(id))], row(len(id), id));
            });
          }
          got.push(...b.sampleIds);
        }
        assert.deepEqual(got, sortedRange(400));
        seen.push(JSON.stringify(loader.names));
        await loader.close();
      }
    }
    assert.equal(new Set(seen.map((n) => JSON.stringify(JSON.parse(n).sort()))).size, 1);
    // One table per sample describes no one of two fields: `lengths` alone is refused, and a token
    // budget must be told what to count.
    const open = () => sources.jsonl(file, { fields: { a: 'int32', b: 'int32' }, index: 'off' });
    const collate = { a: 'pad', b: 'pad' } as const;
    await assert.rejects(DataLoader.create(open(), { batchSize: 8, collate, lengths: new Uint32Array(400) }), (e: unknown) => code('ERR_INVALID_OPTION')(e) && /`lengths`.*"a", "b"/.test((e as Error).message));
    await assert.rejects(DataLoader.create(open(), { batchSize: 8, collate, batchTokens: 4096 }), (e: unknown) => code('ERR_INVALID_OPTION')(e) && /`lengths`.*several ragged fields/.test((e as Error).message));
    const budget = await DataLoader.create(open(), { batchSize: 8, collate, batchTokens: 4096, lengths: Uint32Array.from({ length: 400 }, (_, i) => lenA(i) + lenB(i)) });
    assert.equal(budget.names.length, 4);
    await budget.close();
  });

  it('refuses what cannot work at create, naming the knob', async () => {
    const plain = openRagged({ n: 8 });
    await assert.rejects(DataLoader.create(plain, { batchSize: 2 }), (e: unknown) => code('ERR_INVALID_OPTION')(e) && /collate\.tokens/.test((e as Error).message));
    await assert.rejects(DataLoader.create(plain, { batchSize: 2, collate: { nope: 'pad' } }), (e: unknown) => code('ERR_INVALID_OPTION')(e) && /collate\.nope/.test((e as Error).message));
    await assert.rejects(DataLoader.create(plain, { batchSize: 2, collate: { tokens: { pad: { to: 'widest' } } } }), (e: unknown) => code('ERR_INVALID_OPTION')(e) && /collate\.tokens\.pad\.to/.test((e as Error).message));
    // An undeclared ragged field with no bound anywhere: the capacity must be given.
    await assert.rejects(DataLoader.create(openRagged({ n: 8, declare: false }), { batchSize: 2, collate: { tokens: 'pad' } }), (e: unknown) => code('ERR_INVALID_OPTION')(e) && /maxLength/.test((e as Error).message));
    await assert.rejects(DataLoader.create(sources.arrays({ x: new Int32Array(8) }), { batchSize: 2, collate: { x: { pad: { maxLength: 4 } } } }), (e: unknown) => code('ERR_INVALID_OPTION')(e) && /per-sample/.test((e as Error).message));
    await assert.rejects(DataLoader.create(plain, { batchSize: 2, collate: 'pad' as never }), code('ERR_INVALID_OPTION'));
  });
});

describe('sequence packing (pack)', () => {
  const o: RaggedOptions = { n: 300, maxLength: 200, seed: 3 };
  const C = 256;

  for (const mode of ['best-fit', 'concat'] as const) {
    it(`${mode}: every token of every document exactly once per epoch, with segment and position ids`, async () => {
      const loader = await DataLoader.create(openRagged(o), { batchSize: 4, pack: { contextLength: C, mode, ...(mode === 'best-fit' ? { window: 64 } : {}) } });
      assert.deepEqual(loader.names, ['tokens', 'segment_ids', 'position_ids']);
      for (const e of [0, 1]) {
        const got: number[] = [];
        let batches = 0;
        for await (const b of loader.epoch(e)) {
          batches++;
          assert.equal((b.get('tokens') as Tensor).shape[1], C);
          got.push(...packedTokens(b, C));
        }
        assert.equal(batches, loader.epoch(e).length);
        assert.deepEqual(got.sort((a, b) => a - b), allTokens(o), `epoch ${e}`);
      }
      const p = loader.stats().epochs[0]!.packing!;
      assert.equal(p.realTokens, allTokens(o).length);
      assert.equal(p.slots, p.windows * C);
      assert.ok(p.utilization > (mode === 'concat' ? 0.99 : 0.9), `utilization ${p.utilization}`);
      await loader.close();
    });
  }

  it('delivers the same windows through reader workers', async () => {
    const base = await DataLoader.create(openRagged(o), { batchSize: 4, pack: { contextLength: C } });
    const want: number[][] = [];
    for await (const b of base.epoch(0)) want.push(packedTokens(b, C));
    await base.close();
    const loader = await DataLoader.create(sources.module(FIXTURE, 'openRagged', o), { batchSize: 4, workers: 2, pack: { contextLength: C } });
    const got: number[][] = [];
    for await (const b of loader.epoch(0)) got.push(packedTokens(b, C));
    await loader.close();
    assert.deepEqual(got, want);
  });

  it('resumes at random points, and onto two ranks, equal to the uninterrupted run', async () => {
    for (const mode of ['best-fit', 'concat'] as const) {
      const opts: LoaderOptions = { batchSize: 3, pack: { contextLength: C, mode, ...(mode === 'best-fit' ? { window: 50 } : {}) } };
      const full = await DataLoader.create(openRagged(o), opts);
      const want: number[][] = [];
      for await (const b of full.epoch(0)) want.push(packedTokens(b, C));
      await full.close();
      for (const stop of [1, Math.floor(want.length / 2), want.length - 1]) {
        const first = await DataLoader.create(openRagged(o), opts);
        const got: number[][] = [];
        for await (const b of first.epoch(0)) {
          got.push(packedTokens(b, C));
          if (got.length === stop) break;
        }
        const state = JSON.parse(JSON.stringify(first.state()));
        await first.close();
        const rest = await DataLoader.create(openRagged(o), { ...opts, resume: state });
        for await (const b of rest.epoch(state.epoch)) got.push(packedTokens(b, C));
        await rest.close();
        assert.deepEqual(got, want, `${mode}, stopped after ${stop}`);
      }
      // Two ranks take the rest in turn: together, exactly the rest of the windows.
      const first = await DataLoader.create(openRagged(o), opts);
      let taken = 0;
      for await (const _ of first.epoch(0)) if (++taken === 2) break;
      const state = first.state();
      await first.close();
      const ranks: number[][][] = [[], []];
      for (const rank of [0, 1]) {
        const r = await DataLoader.create(openRagged(o), { ...opts, resume: state, rank, worldSize: 2, shards: 'drop' });
        for await (const b of r.epoch(0)) ranks[rank]!.push(packedTokens(b, C));
        await r.close();
      }
      assert.equal(ranks[0]!.length, ranks[1]!.length, 'every rank as many batches');
      const interleaved = ranks[0]!.flatMap((b, s) => [b, ranks[1]![s]!]);
      assert.deepEqual(interleaved, want.slice(2, 2 + interleaved.length), mode);
    }
  });

  it("two ranks under shards: 'pad' resumed mid-epoch get the uninterrupted run's windows, the padding included", async () => {
    // 2 ranks of batches of 2 windows: the epoch's batch count is odd for these documents, so rank 1
    // pads with a batch from the epoch's start, in the uninterrupted run and in every resumed one.
    for (const mode of ['concat', 'best-fit'] as const) {
      const opts: LoaderOptions = { batchSize: 2, shards: 'pad', pack: { contextLength: C, mode } };
      const run = async (rank: number, stop = Infinity, resume?: LoaderOptions['resume']) => {
        const loader = await DataLoader.create(openRagged(o), { ...opts, rank, worldSize: 2, resume });
        const got: number[][] = [];
        for await (const b of loader.epoch(0)) {
          got.push(packedTokens(b, C));
          if (got.length === stop) break;
        }
        const state = JSON.parse(JSON.stringify(loader.state()));
        await loader.close();
        return { got, state };
      };
      const full = [await run(0), await run(1)].map((r) => r.got);
      const windows = full[0]!.length + full[1]!.length;
      assert.ok(windows % 2 === 0 && full[1]!.length === full[0]!.length);
      for (const stop of [1, 4, full[0]!.length - 1]) {
        const first = [await run(0, stop), await run(1, stop)];
        assert.deepEqual(first[0]!.state, first[1]!.state);
        for (const rank of [0, 1]) {
          const rest = await run(rank, Infinity, first[0]!.state);
          assert.deepEqual([...first[rank]!.got, ...rest.got].flat(), full[rank]!.flat(), `${mode}, rank ${rank}, stopped after ${stop}`);
        }
      }
    }
  });

  it('refuses a resume with other pack settings, and options that cannot pack', async () => {
    const loader = await DataLoader.create(openRagged(o), { batchSize: 3, pack: { contextLength: C } });
    for await (const _ of loader.epoch(0)) break;
    const state = loader.state();
    await loader.close();
    await assert.rejects(DataLoader.create(openRagged(o), { batchSize: 3, pack: { contextLength: 512 }, resume: state }), (e: unknown) => code('ERR_RESUME_MISMATCH')(e) && /pack.contextLength/.test((e as Error).message));
    // Its position counts windows: a loader of plain or token-budget batches would read it as picks.
    for (const other of [{ collate: { tokens: 'pad' } }, { collate: { tokens: 'pad' }, batchTokens: 4096 }] as Partial<LoaderOptions>[]) {
      await assert.rejects(DataLoader.create(openRagged(o), { ...other, batchSize: 3, resume: state }), (e: unknown) => code('ERR_RESUME_MISMATCH')(e) && /saved mid-epoch with `pack`/.test((e as Error).message), JSON.stringify(other));
    }
    // And the other way: a state of plain or token-budget batches is not a packed one's.
    for (const [other, knob] of [[{ collate: { tokens: 'pad' } }, 'no `pack`'], [{ collate: { tokens: 'pad' }, batchTokens: 4096 }, '`batchTokens`']] as [Partial<LoaderOptions>, string][]) {
      const plain = await DataLoader.create(openRagged(o), { ...other, batchSize: 3 });
      for await (const _ of plain.epoch(0)) break;
      const saved = plain.state();
      await plain.close();
      await assert.rejects(DataLoader.create(openRagged(o), { batchSize: 3, pack: { contextLength: C }, resume: saved }), (e: unknown) => code('ERR_RESUME_MISMATCH')(e) && (e as Error).message.includes(knob) && /`pack`/.test((e as Error).message), knob);
      // At an epoch's start nothing was cut yet: any batches may follow.
      const next = await DataLoader.create(openRagged(o), { batchSize: 3, pack: { contextLength: C }, resume: { ...saved, epoch: 1, position: 0 } });
      await next.close();
    }
    const atStart = await DataLoader.create(openRagged(o), { batchSize: 3, collate: { tokens: 'pad' }, resume: { ...state, epoch: 1, position: 0 } });
    await atStart.close();
    await assert.rejects(DataLoader.create(openRagged({ ...o, withLabel: true }), { batchSize: 3, pack: { contextLength: C } }), (e: unknown) => code('ERR_INVALID_OPTION')(e) && /only the field/.test((e as Error).message));
    await assert.rejects(DataLoader.create(openRagged(o), { batchSize: 3, pack: { contextLength: 0 } }), (e: unknown) => code('ERR_INVALID_OPTION')(e) && /pack\.contextLength/.test((e as Error).message));
    // A packed batch's positions are addressed as int32: batchSize × contextLength ≤ 2^31 − 1, checked at create.
    for (const mode of ['best-fit', 'concat'] as const) {
      await assert.rejects(
        DataLoader.create(openRagged(o), { batchSize: 2, pack: { contextLength: 2 ** 40, mode } }),
        (e: unknown) => code('ERR_INVALID_OPTION')(e) && /`pack\.contextLength` must be at most 1073741823 .*batchSize 2.*got 1099511627776/.test((e as Error).message),
        mode,
      );
    }
    await assert.rejects(DataLoader.create(openRagged(o), { batchSize: 3, pack: { contextLength: C, mode: 'concat', window: 8 } }), (e: unknown) => code('ERR_INVALID_OPTION')(e) && /pack\.window/.test((e as Error).message));
    await assert.rejects(DataLoader.create(openRagged(o), { batchSize: 3, pack: { contextLength: 100 } }), code('ERR_TOO_LONG'));
    await assert.rejects(DataLoader.create(openRagged(o), { batchSize: 3, pack: { contextLength: C }, batchTokens: 1000 }), code('ERR_INVALID_OPTION'));
  });

  it('never cuts a document to a `lengths` that disagrees with it: refused at create against declared lengths, else when the document is read', async () => {
    const small: RaggedOptions = { n: 40, maxLength: 30, seed: 4 };
    const truth = Uint32Array.from({ length: small.n }, (_, i) => docLength(i, small));
    const longest = truth.indexOf(Math.max(...truth));
    const victim = truth.findIndex((n, i) => n > 2 && i !== longest);
    const shorter = Uint32Array.from(truth, (n, i) => (i === victim ? n - 1 : n));
    const longer = Uint32Array.from(truth, (n, i) => (i === victim ? n + 3 : n));
    for (const mode of ['concat', 'best-fit'] as const) {
      const pack = { contextLength: 64, mode, ...(mode === 'best-fit' ? { truncate: true } : {}) };
      // A table of another length than the dataset's.
      await assert.rejects(DataLoader.create(openRagged(small), { batchSize: 2, pack, lengths: truth.subarray(1) }), (e: unknown) => code('ERR_INVALID_OPTION')(e) && /`lengths`.*40 entries/.test((e as Error).message));
      for (const lengths of [shorter, longer]) {
        // The source declares its lengths: the option is checked against them at create.
        await assert.rejects(
          DataLoader.create(openRagged(small), { batchSize: 2, pack, lengths }),
          (e: unknown) => code('ERR_INVALID_OPTION')(e) && new RegExp(`\`lengths\`.*sample ${victim}`).test((e as Error).message),
          `${mode}: declared lengths`,
        );
        // It does not: the batch that reads the document fails, naming `lengths` and the sample.
        const loader = await DataLoader.create(openRagged({ ...small, declare: false }), { batchSize: 2, shuffle: false, pack: { ...pack, field: 'tokens' }, lengths });
        await assert.rejects(
          async () => {
            for await (const _ of loader.epoch(0));
          },
          (e: unknown) => e instanceof BatchError && code('ERR_INVALID_OPTION')(e.cause) && new RegExp(`\`lengths\`.*sample ${victim} has ${lengths[victim]}.*read ${truth[victim]}`).test((e.cause as Error).message),
          `${mode}: lengths ${lengths[victim]} for a document of ${truth[victim]}`,
        );
        await loader.close();
      }
    }
  });

  it('truncates documents over the window in best-fit when stated', async () => {
    const loader = await DataLoader.create(openRagged(o), { batchSize: 4, pack: { contextLength: 100, truncate: true } });
    const got: number[] = [];
    for await (const b of loader.epoch(0)) got.push(...packedTokens(b, 100));
    assert.deepEqual(got.sort((a, b) => a - b), allTokens(o, 100));
    await loader.close();
  });
});

raggedDeviceSuite('sim');

describe('token budgets with ragged rows (batchTokens + pad)', () => {
  const o: RaggedOptions = { n: 200, maxLength: 60, seed: 5 };

  for (const device of ['cpu', 'sim']) {
    it(`every document exactly once, no batch over the budget, resume equal to the uninterrupted run (${device})`, async () => {
      const opts: LoaderOptions = { device, batchSize: 32, batchTokens: 256, collate: { tokens: 'pad' } };
      const run = async (extra: Partial<LoaderOptions>, stop = Infinity) => {
        const loader = await DataLoader.create(openRagged(o), { ...opts, ...extra });
        const batches: number[][] = [];
        for await (const raw of loader.epoch(0)) {
          const b = await hostBatch(raw as never);
          const t = b.get('tokens')!;
          assert.ok(t.shape[0]! * t.shape[1]! <= 256, `batch of ${t.shape[0]} × ${t.shape[1]} over the budget`);
          batches.push(checkPadded(b, o));
          if (batches.length === stop) break;
        }
        const state = loader.state();
        await loader.close();
        return { batches, state };
      };
      const full = await run({});
      assert.deepEqual(full.batches.flat().sort((a, b) => a - b), sortedRange(o.n));
      const first = await run({}, 3);
      const rest = await run({ resume: JSON.parse(JSON.stringify(first.state)) });
      assert.deepEqual([...first.batches, ...rest.batches], full.batches);
    });
  }
});
