// sources.tokens: token files written by Python (the struct module, as nanoGPT's prepare.py and
// Megatron's _IndexWriter lay them out) read back exactly — windows with the target shift through
// the loader with reader workers, Megatron documents as ragged samples with raggedMax from the
// index — and damaged indexes refused with a typed error naming the file.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { MegatronTokens, TokenWindows, tokensSource } from '../../src/dataset/formats/text/token-file.js';
import { openSource, specOf } from '../../src/dataset/source-spec.js';
import { DataLoader, sources } from '../../src/index.js';
import { HANG_MS, TEST_MS, collect, range, sorted, tempDir, within } from '../fixtures.js';

const PYTHON = '/usr/bin/python3';
const noPython = existsSync(PYTHON) ? false : `${PYTHON} is not installed`;
const dir = mkdtempSync(join(tmpdir(), 'stoker-tokens-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function python(script: string, ...args: string[]): void {
  execFileSync(PYTHON, ['-c', script, ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
}

/** Token k of the test streams: a value that differs from its neighbours and fits uint16. */
const tok = (k: number) => (k * 7919 + 13) % 65521;

/** nanoGPT's layout (prepare.py: `np.array(ids, dtype=np.uint16).tofile(...)`): raw little-endian ids. */
const FLAT = `
import struct, sys
path, n, fmt = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(path, 'wb') as f:
    f.write(struct.pack('<%d%s' % (n, fmt), *[(k * 7919 + 13) % 65521 for k in range(n)]))
`;

/** Megatron's _IndexWriter, field by field; documents given as lists of sequence lengths (JSON). */
const MEGATRON = `
import json, struct, sys
prefix, docs, code = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
size = {8: 2, 4: 4}[code]
fmt = {8: 'H', 4: 'i'}[code]
lengths, doc_idx, k = [], [0], 0
with open(prefix + '.bin', 'wb') as b:
    for doc in docs:
        for n in doc:
            b.write(struct.pack('<%d%s' % (n, fmt), *[(j * 7919 + 13) % 65521 for j in range(k, k + n)]))
            k += n
            lengths.append(n)
        doc_idx.append(len(lengths))
pointers, p = [], 0
for n in lengths:
    pointers.append(p)
    p += n * size
with open(prefix + '.idx', 'wb') as f:
    f.write(b'MMIDIDX\\x00\\x00')
    f.write(struct.pack('<Q', 1))
    f.write(struct.pack('<B', code))
    f.write(struct.pack('<Q', len(lengths)))
    f.write(struct.pack('<Q', len(doc_idx)))
    f.write(struct.pack('<%di' % len(lengths), *lengths))
    f.write(struct.pack('<%dq' % len(pointers), *pointers))
    f.write(struct.pack('<%dq' % len(doc_idx), *doc_idx))
`;

let fileNo = 0;
function flat(n: number, fmt: 'H' | 'I'): string {
  const path = join(dir, `flat${fileNo++}.bin`);
  python(FLAT, path, String(n), fmt);
  return path;
}
function megatron(docs: number[][], code = 8, into = dir): string {
  const prefix = join(into, `mega${fileNo++}`);
  python(MEGATRON, prefix, JSON.stringify(docs), String(code));
  return `${prefix}.bin`;
}

describe('sources.tokens (nanoGPT .bin)', { skip: noPython }, () => {
  it('sample i is the contextLength + 1 tokens from token i × contextLength, and the tail that fills no window is never a sample', () => {
    const path = flat(1000, 'H');
    const ds = sources.tokens(path, { contextLength: 64 }) as TokenWindows;
    assert.equal(ds.tokens, 1000);
    assert.equal(ds.length, Math.floor((1000 - 65) / 64) + 1);
    for (const i of [0, 1, 7, ds.length - 1]) {
      const { tokens } = ds.get(i);
      assert.ok(tokens instanceof Uint16Array);
      assert.deepEqual(Array.from(tokens), range(65).map((j) => tok(i * 64 + j)));
    }
    // Consecutive windows share one token: input of window i+1 starts at the target's last token.
    assert.equal(ds.get(1).tokens[0], ds.get(0).tokens[64]);
    assert.throws(() => ds.get(ds.length), { code: 'ERR_INVALID_DATASET' });
    ds.close();
  });

  it('reads uint32 tokens with a stride, and a reopened copy (as a reader worker makes) reads the same', async () => {
    const path = flat(301, 'I');
    const ds = tokensSource(path, { dtype: 'uint32', contextLength: 16, stride: 5 }) as TokenWindows;
    assert.equal(ds.length, Math.floor((301 - 17) / 5) + 1);
    const again = (await openSource(specOf(ds)!)) as TokenWindows;
    for (const i of range(ds.length)) {
      const t = ds.get(i).tokens;
      assert.ok(t instanceof Uint32Array);
      assert.deepEqual(Array.from(t), range(17).map((j) => tok(i * 5 + j)));
      assert.deepEqual(again.get(i).tokens, t);
    }
    ds.close();
    again.close();
  });

  it('refuses a file that is not a whole number of tokens, one shorter than a window, and missing contextLength', () => {
    const odd = join(dir, 'odd.bin');
    writeFileSync(odd, new Uint8Array(41));
    assert.throws(() => sources.tokens(odd, { contextLength: 4 }), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes(odd) && e.message.includes('uint16'));
    assert.throws(() => sources.tokens(flat(10, 'H'), { contextLength: 10 }), { code: 'ERR_EMPTY_DATASET' });
    assert.throws(() => sources.tokens(odd, {}), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('contextLength'));
    assert.throws(() => sources.tokens(odd, { contextLength: 4, dtype: 'int8' as never }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('dtype'));
    assert.throws(() => sources.tokens(odd, { contextLenght: 4 } as never), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('contextLenght'));
  });

  it('delivers every window exactly once per epoch, with its tokens, through 2 reader workers', { timeout: TEST_MS }, async () => {
    const path = flat(20_000, 'H');
    const ds = sources.tokens(path, { contextLength: 128 }) as TokenWindows;
    const loader = await DataLoader.create(ds, { batchSize: 8, workers: 2, mode: 'streaming', dropLast: false, seed: 3 });
    try {
      assert.equal(loader.stats().workers, 2);
      for (let epoch = 0; epoch < 2; epoch++) {
        const batches = await within(HANG_MS, `epoch ${epoch}`, collect(loader.epoch(epoch)));
        assert.deepEqual(sorted(batches.flatMap((b) => Array.from(b.sampleIds))), range(ds.length));
        for (const b of batches) {
          const t = b.get('tokens');
          assert.deepEqual(t.shape, [b.rows, 129]);
          b.sampleIds.forEach((id, r) => assert.deepEqual(Array.from((t.data as Uint16Array).subarray(r * 129, r * 129 + 129)), range(129).map((j) => tok(id * 128 + j))));
          b.release();
        }
      }
    } finally {
      await loader.close();
    }
  });
});


/**
 * Megatron's _IndexWriter, field by field, for any of its dtype codes and with the sequence pointers
 * given (byte offsets; gaps of filler bytes between sequences, as a merge or a filtering tool can
 * leave them), then the documents as Megatron's IndexedDataset reads them with numpy
 * (`numpy.frombuffer(bin, dtype, count=length, offset=pointer)` per sequence, a document's
 * sequences in order), printed as JSON strings: the reference the source must match.
 */
const MEGATRON_ANY = `
import json, struct, sys
import numpy
prefix, docs, code, gaps, tail = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4]), int(sys.argv[5])
dtype = {1: numpy.uint8, 2: numpy.int8, 3: numpy.int16, 4: numpy.int32, 5: numpy.int64, 6: numpy.float64, 7: numpy.float32, 8: numpy.uint16}[code]
def value(k):
    if dtype in (numpy.float32, numpy.float64):
        return k * 0.37 - 5.25
    info = numpy.iinfo(dtype)
    return int(info.min) + (k * 2654435761 + 97) % (int(info.max) - int(info.min) + 1)
lengths, doc_idx, pointers, k = [], [0], [], 0
with open(prefix + '.bin', 'wb') as b:
    for doc in docs:
        for n in doc:
            b.write(b'\\xab' * gaps[len(lengths) % len(gaps)])
            pointers.append(b.tell())
            b.write(numpy.array([value(j) for j in range(k, k + n)], dtype=dtype).tobytes())
            k += n
            lengths.append(n)
        doc_idx.append(len(lengths))
    b.write(b'\\xcd' * tail)
with open(prefix + '.idx', 'wb') as f:
    f.write(b'MMIDIDX\\x00\\x00')
    f.write(struct.pack('<Q', 1))
    f.write(struct.pack('<B', code))
    f.write(struct.pack('<Q', len(lengths)))
    f.write(struct.pack('<Q', len(doc_idx)))
    f.write(numpy.array(lengths, dtype=numpy.int32).tobytes())
    f.write(numpy.array(pointers, dtype=numpy.int64).tobytes())
    f.write(numpy.array(doc_idx, dtype=numpy.int64).tobytes())
data = open(prefix + '.bin', 'rb').read()
out = []
for d in range(len(doc_idx) - 1):
    parts = [numpy.frombuffer(data, dtype=dtype, count=int(lengths[s]), offset=int(pointers[s])) for s in range(doc_idx[d], doc_idx[d + 1])]
    out.append([repr(float(v)) if dtype in (numpy.float32, numpy.float64) else str(int(v)) for p in parts for v in p])
print(json.dumps(out))
`;

const NAMES: Record<number, string> = { 1: 'uint8', 2: 'int8', 3: 'int16', 4: 'int32', 5: 'int64', 6: 'float64', 7: 'float32', 8: 'uint16' };

/** Write with MEGATRON_ANY; the .bin path and numpy's documents (as strings). */
function megatronAny(docs: number[][], code: number, gaps: number[] = [0], tail = 0): { bin: string; numpy: string[][] } {
  const prefix = join(dir, `any${fileNo++}`);
  const out = execFileSync(PYTHON, ['-c', MEGATRON_ANY, prefix, JSON.stringify(docs), String(code), JSON.stringify(gaps), String(tail)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  return { bin: `${prefix}.bin`, numpy: JSON.parse(out) as string[][] };
}

/** An integer document as decimal strings, as the reference prints it (int64 included). */
function asStrings(a: ArrayLike<number | bigint>): string[] {
  return Array.from(a as ArrayLike<number>, String);
}

const noNumpy = noPython || (() => {
  try {
    execFileSync(PYTHON, ['-c', 'import numpy'], { stdio: 'ignore' });
    return false;
  } catch {
    return `${PYTHON} has no numpy`;
  }
})();

describe('sources.tokens (Megatron indexes as Megatron reads them)', { skip: noNumpy }, () => {
  const docs = [[5], [3, 4], [], [9], [1, 1, 1], [6]];

  it('reads every dtype code Megatron writes (1 uint8 … 8 uint16), each document the values numpy reads', () => {
    for (const code of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const { bin, numpy } = megatronAny(docs, code);
      const ds = sources.tokens(bin, { index: true }) as MegatronTokens;
      assert.equal(ds.dtype, NAMES[code], `code ${code}`);
      assert.deepEqual(Array.from(ds.lengths), numpy.map((d) => d.length), `code ${code}: lengths`);
      const float = code === 6 || code === 7;
      for (const d of range(docs.length)) {
        const got = ds.get(d).tokens;
        if (float) assert.deepEqual(Array.from(got as Float64Array), numpy[d]!.map(Number), `code ${code} document ${d}`);
        else assert.deepEqual(asStrings(got), numpy[d], `code ${code} document ${d}`);
      }
      ds.close();
    }
  });

  it('follows the pointers as given: sequences with gaps between them and bytes after the last, each document the values numpy reads', async () => {
    for (const code of [8, 4, 5]) {
      const { bin, numpy } = megatronAny(docs, code, [3, 0, 8, 1], 5);
      const ds = sources.tokens(bin, { index: true }) as MegatronTokens;
      assert.deepEqual(Array.from(ds.lengths), numpy.map((d) => d.length), `code ${code}: lengths`);
      assert.deepEqual(ds.raggedMax, { tokens: Math.max(...numpy.map((d) => d.length)) });
      const again = (await openSource(specOf(ds)!)) as MegatronTokens;
      for (const d of range(docs.length)) {
        assert.deepEqual(asStrings(ds.get(d).tokens), numpy[d], `code ${code} document ${d}`);
        assert.deepEqual(asStrings(again.get(d).tokens), numpy[d]);
      }
      ds.close();
      again.close();
    }
  });

  it('refuses an index of 0 documents with ERR_EMPTY_DATASET naming the file', () => {
    const { bin } = megatronAny([], 8);
    const idx = bin.replace(/\.bin$/, '.idx');
    assert.throws(() => sources.tokens(bin, { index: true }), (e: any) => e.code === 'ERR_EMPTY_DATASET' && e.message.includes(idx));
  });

  it('refuses a sequence that lies past the end of the .bin, naming both files', () => {
    const { bin } = megatronAny([[4], [2, 3]], 8);
    writeFileSync(bin, readFileSync(bin).subarray(0, 16));
    assert.throws(() => sources.tokens(bin, { index: true }), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes(bin) && e.message.includes('.idx') && e.message.includes('past the end'));
  });
});

describe('sources.tokens (Megatron .bin + .idx)', { skip: noPython }, () => {
  // Documents of several sequences, an empty one, and a long one.
  const docs = [[5], [3, 4], [], [40], [1, 1, 1], [12]];
  const starts = docs.map((_, d) => docs.slice(0, d).flat().reduce((a, b) => a + b, 0));
  const lengths = docs.map((d) => d.reduce((a, b) => a + b, 0));

  it("gives document i as a ragged 'tokens' field, with raggedMax the longest document from the index", async () => {
    const bin = megatron(docs);
    const ds = sources.tokens(bin, { index: true }) as MegatronTokens;
    assert.ok(ds instanceof MegatronTokens);
    assert.equal(ds.length, docs.length);
    assert.equal(ds.dtype, 'uint16');
    assert.deepEqual(ds.ragged, ['tokens']);
    assert.deepEqual(ds.raggedMax, { tokens: 40 });
    assert.deepEqual(Array.from(ds.lengths), lengths, 'lengths per document, for token budgets');
    const again = (await openSource(specOf(ds)!)) as MegatronTokens;
    for (const d of range(docs.length)) {
      const expected = range(lengths[d]!).map((j) => tok(starts[d]! + j));
      assert.deepEqual(Array.from(ds.get(d).tokens as Uint16Array), expected, `document ${d}`);
      assert.deepEqual(Array.from(again.get(d).tokens as Uint16Array), expected);
    }
    ds.close();
    again.close();
  });

  it('packs the documents of a file Megatron\'s writer made: every token exactly once per epoch, in reader workers (concat), or padded (best-fit, truncated)', async () => {
    const many = range(120).map((d) => [1 + ((d * 37) % 23), ...(d % 5 === 0 ? [9] : [])]);
    const bin = megatron(many);
    const all = many.flat().reduce((a, b) => a + b, 0);
    const want = range(all).map(tok).sort((a, b) => a - b);
    const concat = await DataLoader.create(sources.tokens(bin, { index: true }), { batchSize: 3, workers: 2, pack: { contextLength: 16, mode: 'concat' } });
    for (const epoch of [0, 1]) {
      const got: number[] = [];
      for await (const b of concat.epoch(epoch)) {
        const t = b.get('tokens').data as Uint16Array;
        const seg = b.get('segment_ids').data as Int32Array;
        t.forEach((v, k) => seg[k]! > 0 && got.push(v));
      }
      assert.deepEqual(got.sort((a, b) => a - b), want, `epoch ${epoch}`);
    }
    assert.ok(concat.stats().epochs[0]!.packing!.utilization > 0.95);
    await concat.close();
    const cut = await DataLoader.create(sources.tokens(bin, { index: true }), { batchSize: 4, pack: { contextLength: 16, truncate: true } });
    let real = 0;
    for await (const b of cut.epoch(0)) real += (b.get('segment_ids').data as Int32Array).filter((s) => s > 0).length;
    assert.equal(real, many.reduce((a, d) => a + Math.min(16, d.reduce((x, y) => x + y, 0)), 0));
    await cut.close();
  });

  it('reads int32 indexes (dtype code 4) through an explicit .idx path, and refuses a dtype that contradicts the index', () => {
    const bin = megatron([[3], [2, 2]], 4);
    const ds = sources.tokens(bin, { index: bin.replace(/\.bin$/, '.idx') }) as MegatronTokens;
    assert.equal(ds.dtype, 'int32');
    assert.deepEqual(Array.from(ds.get(1).tokens as Int32Array), range(4).map((j) => tok(3 + j)));
    ds.close();
    assert.throws(() => sources.tokens(bin, { index: true, dtype: 'uint16' }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('int32'));
    assert.throws(() => sources.tokens(bin, { index: true, contextLength: 8 }), (e: any) => e.code === 'ERR_INVALID_OPTION' && e.message.includes('contextLength'));
  });

  it('refuses a damaged index with ERR_BAD_FILE naming the file: magic, truncation, a pointer past the .bin, boundaries past the end, a .bin too short, an unknown dtype code', () => {
    const damaged = (edit: (b: Buffer) => Buffer, binEdit?: (b: Buffer) => Buffer) => {
      const bin = megatron([[4], [2, 3]]);
      const idx = bin.replace(/\.bin$/, '.idx');
      writeFileSync(idx, edit(readFileSync(idx)));
      if (binEdit) writeFileSync(bin, binEdit(readFileSync(bin)));
      return { bin, idx };
    };
    const S = 3;
    const pointersAt = 34 + 4 * S;
    const docsAt = pointersAt + 8 * S;
    const cases: [string, (b: Buffer) => Buffer, ((b: Buffer) => Buffer) | undefined, string][] = [
      ['bad magic', (b) => (b.write('XX', 0, 'latin1'), b), undefined, 'MMIDIDX'],
      ['truncated', (b) => b.subarray(0, b.length - 3), undefined, 'should hold'],
      ['pointer past the end', (b) => (b.writeBigInt64LE(16n, pointersAt + 8), b), undefined, 'past the end'],
      ['boundary past the end', (b) => (b.writeBigInt64LE(9n, docsAt + 8), b), undefined, 'rise from 0'],
      ['bin too short', (b) => b, (b) => b.subarray(0, b.length - 2), 'do not belong together'],
      ['unknown dtype code', (b) => (b.writeUInt8(9, 17), b), undefined, 'dtype code 9'],
    ];
    for (const [what, edit, binEdit, says] of cases) {
      const { bin, idx } = damaged(edit, binEdit);
      assert.throws(
        () => sources.tokens(bin, { index: true }),
        (e: any) => e.code === 'ERR_BAD_FILE' && (e.message.includes(idx) || e.message.includes(bin)) && e.message.includes(says),
        what,
      );
    }
  });

  // NOTE: each loader below reads through reader workers; an epoch is awaited under HANG_MS, so a
  // batch that never settles (a window with no token, so a batch with no row) fails instead of hanging.
  it('packs empty documents into no window: all empty is refused at create, a mix packs only the tokens', { timeout: TEST_MS }, async (t) => {
    const into = tempDir(t, 'stoker-empty-docs-');
    for (const empty of [[[0], [0], [0], [0]], [[], [], []]]) {
      const bin = megatron(empty, 8, into);
      for (const mode of ['concat', 'best-fit'] as const) {
        await assert.rejects(
          within(HANG_MS, `create (${mode})`, DataLoader.create(sources.tokens(bin, { index: true }), { batchSize: 2, workers: 2, pack: { contextLength: 4, mode } })),
          (e: any) => e.code === 'ERR_EMPTY_DATASET' && e.message.includes('pack') && e.message.includes(`${empty.length} documents`),
          `${JSON.stringify(empty)}, ${mode}`,
        );
      }
    }
    // Empty documents first, between and last: every token once, no window without a token.
    const mixed = [[0], [5], [], [3], [0], [2, 2], [0], []];
    const bin = megatron(mixed, 8, into);
    const all = mixed.flat().reduce((a, b) => a + b, 0);
    for (const mode of ['concat', 'best-fit'] as const) {
      const loader = await DataLoader.create(sources.tokens(bin, { index: true }), { batchSize: 1, workers: 2, pack: { contextLength: 4, mode, ...(mode === 'best-fit' ? { truncate: true, window: 2 } : {}) } });
      try {
        const batches = await within(HANG_MS, `epoch of ${mode}`, collect(loader.epoch(0)));
        assert.equal(batches.length, loader.epoch(0).length);
        const got: number[] = [];
        for (const b of batches) {
          const tokens = b.get('tokens').data as Uint16Array;
          const seg = b.get('segment_ids').data as Int32Array;
          assert.ok(seg.some((s) => s > 0), `${mode}: a window with no token`);
          assert.ok(b.rows > 0);
          // Segments count the documents that are in the window: 1, 2, … with no gap.
          const segs = [...new Set(seg.filter((s) => s > 0))];
          assert.deepEqual(segs, range(segs.length).map((k) => k + 1), `${mode}: segment ids ${[...seg]}`);
          tokens.forEach((v, k) => seg[k]! > 0 && got.push(v));
          b.release();
        }
        if (mode === 'concat') assert.deepEqual(got.sort((a, b) => a - b), range(all).map(tok).sort((a, b) => a - b));
        else assert.equal(got.length, 4 + 3 + 4);
      } finally {
        await loader.close();
      }
    }
  });
});
