// Ragged fields through sources.concat and sources.mix (NOTE [ragged parts], concat-source.ts):
// `ragged`, `raggedMax` (the max over the parts), `lengths` (in the concat layout) and `loadLengths`
// pass through, so a mixture of JSONL files written by Python's json is padded — every batch with
// the exact shares of the parts, each part's draws whole shuffled epochs of it, every row the
// part's own record — and packed, every delivered document one of its batch's picks, whole.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DataLoader, type Tensor, sources } from '../src/index.js';
import { mixSampler, mixtureOf } from '../src/dataset/mix-source.js';
import { apportion } from '../src/sampler/mix-sampler.js';
import { toU64 } from '../src/sampler/rng.js';
import { TOKENIZER } from './formats/text-targets.js';
import { TEST_MS, range, sorted } from './fixtures.js';

const PYTHON = '/usr/bin/python3';
const noPython = existsSync(PYTHON) ? false : `${PYTHON} is not installed`;
const dir = mkdtempSync(join(tmpdir(), 'stoker-text-mix-'));
const savedCache = process.env.XDG_CACHE_HOME;
before(() => {
  process.env.XDG_CACHE_HOME = join(dir, 'cache');
});
after(() => {
  if (savedCache === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = savedCache;
  rmSync(dir, { recursive: true, force: true });
});

/** Part p's file: n records { id: p·1000 + i, text: 1–30 words } by Python's json, seeded by p. */
const WRITE = `
import json, random, sys
path, p, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
words = ['lower', 'newest,', 'low!', 'wider', 'low', 'new', 'est']
rng = random.Random(p)
with open(path, 'w', encoding='utf-8') as f:
    for i in range(n):
        f.write(json.dumps({'id': p * 1000 + i, 'text': ' '.join(rng.choice(words) for _ in range(rng.randint(1, 30)))}) + '\\n')
`;

function partFile(p: number, n: number): string {
  const path = join(dir, `part${p}-${n}.jsonl`);
  if (!existsSync(path)) execFileSync(PYTHON, ['-c', WRITE, path, String(p), String(n)], { stdio: ['ignore', 'ignore', 'inherit'] });
  return path;
}

const SIZES = [23, 70, 41];
const WEIGHTS = [1, 5, 2];
const MAX = [12, 30, 20];

function parts(options: { id?: boolean; maxLength?: boolean } = {}) {
  return SIZES.map((n, p) =>
    sources.jsonl(partFile(p, n), { ...(options.id === false ? {} : { fields: { id: 'int32' } }), text: 'text', tokenizer: { path: TOKENIZER, ...(options.maxLength === false ? {} : { maxLength: MAX[p] }) } }),
  );
}

/** Each part's documents' ids, by global sample id of the concat layout. */
async function documents(ps: ReturnType<typeof parts>): Promise<Int32Array[]> {
  return Promise.all(ps.flatMap((ds) => range(ds.length).map(async (i) => (await ds.get(i)).text as Int32Array)));
}

describe('ragged fields through concat and mix', { skip: noPython, timeout: TEST_MS }, () => {
  it('pass ragged, raggedMax (the max over the parts), lengths and loadLengths through in the concat layout', async () => {
    const ps = parts();
    const mix = sources.mix(ps.map((dataset, p) => ({ dataset, weight: WEIGHTS[p]! })));
    assert.deepEqual(mix.ragged, ['text']);
    assert.deepEqual(mix.raggedMax, { text: 30 });
    const loaded = await (mix as unknown as { loadLengths(f?: string): Promise<Uint32Array> }).loadLengths('text');
    assert.deepEqual([...loaded], (await documents(ps)).map((d) => d.length));
    // A part without a bound leaves the field unbounded; token files' lengths concatenate as a table.
    const unbounded = sources.concat([...parts({ maxLength: false }).slice(0, 1), ps[1]!]);
    assert.deepEqual(unbounded.raggedMax, {});
    const declared = (lengths: number[]) => ({ length: lengths.length, lengths: Uint32Array.from(lengths), ragged: ['tokens'], get: (i: number) => ({ tokens: new Int32Array(lengths[i]!) }) });
    const tok = sources.concat([declared([3, 7]), declared([6])]);
    assert.deepEqual([...((tok as unknown as { lengths: Uint32Array }).lengths)], [3, 7, 6]);
    await mix.close();
  });

  for (const workers of [0, 2]) {
    it(`a padded mixture of JSONL files: exact shares per batch, whole part epochs, each row its record (${workers} workers)`, async () => {
      const ps = parts();
      const docs = await documents(ps);
      const mix = sources.mix(ps.map((dataset, p) => ({ dataset, weight: WEIGHTS[p]! })));
      const B = 8;
      const loader = await DataLoader.create(mix, { batchSize: B, seed: 5, workers, dropLast: false, collate: { text: 'pad' } });
      assert.deepEqual(loader.names, ['id', 'text', 'text_lengths']);
      const ids: number[] = [];
      for (const e of [0, 1, 2]) {
        for await (const b of loader.epoch(e)) {
          const text = b.get('text') as Tensor;
          const lengths = (b.get('text_lengths') as Tensor).data as Int32Array;
          const id = (b.get('id') as Tensor).data as Int32Array;
          const [rows, L] = text.shape as [number, number];
          assert.ok(L <= 30, 'padded to the longest of the batch, within the parts\' bounds');
          for (let r = 0; r < rows; r++) {
            const s = b.sampleIds[r]!;
            const doc = docs[s]!;
            const p = id[r]! >= 2000 ? 2 : id[r]! >= 1000 ? 1 : 0;
            assert.equal(s, [0, 23, 93][p]! + (id[r]! % 1000), 'the row is the sample id\'s record');
            assert.equal(lengths[r], doc.length);
            assert.deepEqual([...((text.data as Int32Array).subarray(r * L, r * L + doc.length))], [...doc]);
            assert.ok((text.data as Int32Array).subarray(r * L + doc.length, (r + 1) * L).every((v) => v === 0), 'padding');
          }
          if (rows === B) {
            const got = [0, 1, 2].map((p) => [...id].filter((x) => Math.floor(x / 1000) === p).length);
            assert.deepEqual(got, apportion(B, WEIGHTS), `epoch ${e}: the batch's shares`);
          }
          ids.push(...id);
        }
      }
      // Each part's draws, in order, are whole shuffled epochs of that part.
      SIZES.forEach((n, p) => {
        const mine = ids.filter((x) => Math.floor(x / 1000) === p).map((x) => x % 1000);
        for (let c = 0; c + n <= mine.length; c += n) assert.deepEqual(sorted(mine.slice(c, c + n)), range(n), `part ${p}, its epoch ${c / n}`);
        const rest = mine.slice(mine.length - (mine.length % n));
        assert.equal(new Set(rest).size, rest.length, `part ${p}'s unfinished epoch repeats no sample`);
      });
      await loader.close();
    });
  }

  it('a packed mixture of JSONL files (lengths computed through the parts): each batch holds its picks\' documents whole, the epoch the mixture\'s picks exactly once', async () => {
    const ps = parts({ id: false, maxLength: false });
    const docs = (await documents(ps)).map((d) => [...d].join(','));
    const mix = sources.mix(ps.map((dataset, p) => ({ dataset, weight: WEIGHTS[p]! })), { window: 16 });
    const C = 160;
    const loader = await DataLoader.create(mix, { batchSize: 2, seed: 9, dropLast: false, pack: { contextLength: C } });
    assert.deepEqual(loader.names, ['text', 'segment_ids', 'position_ids']);
    const picks: number[] = [];
    for await (const b of loader.epoch(0)) {
      const tokens = (b.get('text') as Tensor).data as Int32Array;
      const seg = (b.get('segment_ids') as Tensor).data as Int32Array;
      const pos = (b.get('position_ids') as Tensor).data as Int32Array;
      const got: number[][] = [];
      for (let k = 0; k < tokens.length; k++) {
        if (seg[k]! <= 0) continue;
        if (pos[k] === 0) got.push([]);
        got[got.length - 1]!.push(tokens[k]!);
      }
      assert.deepEqual(got.map((d) => d.join(',')).sort(), [...b.sampleIds].map((s) => docs[s]!).sort(), 'the batch\'s documents are its picks\' records, whole');
      picks.push(...b.sampleIds);
    }
    // Best-fit reorders documents within its window: the epoch's picks are the mixture's, as a multiset.
    const want = mixSampler(mixtureOf(mix)!, { seed: toU64(9), shuffle: true, augment: 1, batchSize: 2, resume: undefined }).indices(0);
    assert.deepEqual(sorted(picks), sorted([...want]));
    assert.equal(loader.stats().epochs[0]!.packing!.realTokens, picks.reduce((t, s) => t + docs[s]!.split(',').length, 0));
    await loader.close();
  });
});
