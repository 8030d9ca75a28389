// sources.arrow: Arrow IPC files and streams (as Hugging Face `datasets` writes them) read back
// exactly, by row reads and by whole record batches, through reader workers; every malformed input
// a typed error.
//
// Measured (row reads, one thread, 2-core VM shared with other jobs): a 49.6 MB stream of 100
// record batches × 1000 rows (int32, int64, float32, fixed_size_list<float32>[120]; 496 bytes a
// row), one shuffled epoch through getBatch in batches of 256 ids:
//   decoding whole record batches, cacheBytes 16 MiB (file larger than the cache)  9.48 s  (~92 record batches decoded per batch of ids)
//   decoding whole record batches, default cache (the whole file fits, per thread)  0.23 s
//   row reads                                                                      0.70 s  (211 806 positioned reads, 247 MB read)
//   sequential epoch: whole record batches 0.09 s, row reads 0.13 s (1948 reads)
// Row reads cost ~3 µs a positioned read (readSync), about 6 per record batch a batch of ids touches.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import {
  Binary, Bool, Dictionary, Field, FixedSizeList, Float32, Int32, Int8, LargeUtf8, List, Message, MessageHeader, RecordBatchStreamWriter, Table, Uint64, Utf8, Utf8View,
  tableFromIPC, tableToIPC, vectorFromArray,
} from 'apache-arrow';
import { Message as FbMessage } from 'apache-arrow/fb/message';
import { RecordBatch as FbRecordBatch } from 'apache-arrow/fb/record-batch';
import { ByteBuffer } from 'flatbuffers';
import sharp from 'sharp';
import { DataLoader, LoaderError, type Tensor } from '../../src/index.js';
import { arrowSource } from '../../src/dataset/formats/arrow/arrow.js';
import { kSourceSpec } from '../../src/dataset/source-spec.js';
import { HANG_MS, SUITE_MS, TEST_MS, collect, range, sorted, within } from '../fixtures.js';
import {
  HASH_DECODER, KIND_DECODED, KIND_FILES, batchTables, bytesOf, hfTable, kindsTable, numericBytes, numericRows, readBothWays, scrambled,
} from './arrow-targets.js';
import { assertFuzzClean, fuzz } from './fuzz.js';
import { alive, decodeChildren, gone } from './processes.js';

const dir = mkdtempSync(join(tmpdir(), 'stoker-arrow-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
function write(bytes: Uint8Array, name = `t${files++}.arrow`): string {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
}

const SIZES = [5, 3, 7, 1, 9, 4];
const N = SIZES.reduce((a, b) => a + b, 0);

/** Check every column of a batch against the values numericRows wrote for its ids. */
function checkNumeric(b: Record<string, Tensor>, ids: readonly number[], lists = false): void {
  const n = ids.length;
  assert.deepEqual(b.id!.shape, [n]);
  assert.deepEqual(Array.from(b.id!.data as Int32Array), ids);
  assert.deepEqual(Array.from(b.i8!.data as Int8Array), ids.map((i) => (i % 100) - 50));
  assert.deepEqual(Array.from(b.u16!.data as Uint16Array), ids.map((i) => i * 3));
  assert.deepEqual(Array.from(b.i64!.data as BigInt64Array), ids.map((i) => BigInt(i) * 1_000_000_000_000n - 7n));
  assert.equal(b.u64!.dtype, 'int64');
  assert.deepEqual(Array.from(b.u64!.data as BigInt64Array), ids.map((i) => BigInt(i) + 2n ** 40n));
  assert.equal(b.f16!.dtype, 'float16');
  assert.deepEqual(Array.from(b.f16!.data as Uint16Array), ids.map(half));
  assert.deepEqual(Array.from(b.f64!.data as Float64Array), ids.map((i) => i + 0.25));
  assert.equal(b.flag!.dtype, 'uint8');
  assert.deepEqual(Array.from(b.flag!.data as Uint8Array), ids.map((i) => (i % 3 === 0 ? 1 : 0)));
  assert.deepEqual(b.vec!.shape, [n, 3]);
  assert.deepEqual(Array.from(b.vec!.data as Float32Array), ids.flatMap((i) => [i, i + 0.5, -i]));
  assert.deepEqual(b.mat!.shape, [n, 3, 2]);
  assert.equal(b.mat!.dtype, 'int16');
  assert.deepEqual(Array.from(b.mat!.data as Int16Array), ids.flatMap((i) => [i, 1, 2, -i | 0, 3, 4]));
  if (lists) {
    assert.deepEqual(b.arr2d!.shape, [n, 2, 3]);
    assert.deepEqual(Array.from(b.arr2d!.data as Int32Array), ids.flatMap((i) => [i, i + 1, i + 2, i + 3, i + 4, i + 5]));
  }
}

/** The value of float16 bits (normal numbers and zero). */
function halfValue(bits: number): number {
  const e = (bits >> 10) & 0x1f;
  const v = e === 0 ? 0 : 2 ** (e - 15) * (1 + (bits & 0x3ff) / 1024);
  return bits & 0x8000 ? -v : v;
}

/** float16 bits of small halves (exact in half precision). */
function half(i: number): number {
  const v = i / 2;
  if (v === 0) return 0;
  const e = Math.floor(Math.log2(v));
  return ((e + 15) << 10) | Math.round((v / 2 ** e - 1) * 1024);
}

function shuffled(n: number, seed: number): number[] {
  return range(n).sort((a, b) => ((a * 7919 + seed) % 104729) - ((b * 7919 + seed) % 104729));
}

async function code(p: Promise<unknown> | (() => unknown)): Promise<{ code: string; message: string }> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    return { code: (e as { code: string }).code, message: (e as Error).message };
  }
  assert.fail('expected an error');
}

describe('sources.arrow', { timeout: SUITE_MS }, () => {
  for (const format of ['stream', 'file'] as const) {
    it(`reads numeric, boolean, fixed-size-list and fixed-shape list columns back exactly from an IPC ${format} of ${SIZES.length} record batches, in shuffled order`, () => {
      const path = write(numericBytes(format, SIZES, { lists: true }));
      const source = arrowSource(path);
      assert.equal(source.format, format);
      assert.equal(source.length, N);
      assert.equal(source.numRecordBatches, SIZES.length);
      assert.deepEqual(Array.from(source.partStarts()), SIZES.map((_, k) => SIZES.slice(0, k).reduce((a, b) => a + b, 0)), "each record batch's first row: the block shuffle's blocks");
      assert.deepEqual(
        source.columns.map((c) => [c.name, c.dtype, c.shape]),
        [['id', 'int32', []], ['i8', 'int8', []], ['u16', 'uint16', []], ['i64', 'int64', []], ['u64', 'int64', []], ['f16', 'float16', []], ['f64', 'float64', []], ['flag', 'uint8', []], ['vec', 'float32', [3]], ['mat', 'int16', [3, 2]], ['arr2d', 'int32', [2, 3]]],
      );
      const ids = shuffled(N, 3);
      for (let i = 0; i < N; i += 6) {
        const chunk = ids.slice(i, i + 6);
        checkNumeric(source.getBatch(chunk) as Record<string, Tensor>, chunk, true);
      }
      checkNumeric(source.getBatch([N - 1, 0, N - 1]) as Record<string, Tensor>, [N - 1, 0, N - 1], true);
    });
  }

  it('reads a stream written record batch by record batch with RecordBatchStreamWriter, and only the selected columns, in their order', () => {
    const writer = new RecordBatchStreamWriter();
    let start = 0;
    for (const n of [2, 11, 4]) {
      for (const batch of numericRows(start, n).batches) writer.write(batch);
      start += n;
    }
    writer.finish();
    const path = write(writer.toUint8Array(true));
    const source = arrowSource(path, { columns: ['vec', 'id'] });
    assert.equal(source.length, 17);
    assert.equal(source.numRecordBatches, 3);
    const b = source.getBatch([16, 2, 1, 13]) as Record<string, Tensor>;
    assert.deepEqual(Object.keys(b), ['vec', 'id']);
    assert.deepEqual(Array.from(b.id!.data as Int32Array), [16, 2, 1, 13]);
    assert.deepEqual(Array.from(b.vec!.data as Float32Array), [16, 16.5, -16, 2, 2.5, -2, 1, 1.5, -1, 13, 13.5, -13]);
  });

  it('with rowReads: false, keeps at most cacheBatches decoded record batches and at most cacheBytes; repeated record batches are hits', () => {
    const path = write(numericBytes('stream', SIZES));
    const source = arrowSource(path, { cacheBatches: 2, rowReads: false });
    const ids = shuffled(N, 11);
    for (let i = 0; i < N; i += 4) {
      source.getBatch(ids.slice(i, i + 4));
      assert.ok(source.stats().cachedBatches <= 2, JSON.stringify(source.stats()));
    }
    // Least recently used goes first: record batches 0 and 1 in, 0 touched, 2 in evicts 1.
    const lru = arrowSource(path, { cacheBatches: 2, rowReads: false });
    const stats = () => { const { reads, hits, cachedBatches } = lru.stats(); return { reads, hits, cachedBatches }; };
    lru.getBatch([0, 1, 2]);
    lru.getBatch([3, 4]);
    assert.deepEqual(stats(), { reads: 1, hits: 1, cachedBatches: 1 }, 'record batch 0 read once for two batches of ids');
    lru.getBatch([5]);
    lru.getBatch([1]);
    lru.getBatch([8]);
    assert.deepEqual(stats(), { reads: 3, hits: 2, cachedBatches: 2 });
    lru.getBatch([0]);
    lru.getBatch([6]);
    assert.deepEqual(stats(), { reads: 4, hits: 3, cachedBatches: 2 }, 'record batch 1 was evicted, 0 kept');

    // One record batch's bytes, then a budget just under it: nothing is kept, every use is a read.
    const one = arrowSource(path, { cacheBatches: 8, rowReads: false });
    one.getBatch([0]);
    const bytes = one.stats().cachedBytes;
    const tight = arrowSource(path, { cacheBatches: 8, cacheBytes: bytes - 1, rowReads: false });
    for (const i of [0, 1, 0, 1]) tight.getBatch([i]);
    assert.deepEqual(tight.stats(), { reads: 4, hits: 0, cachedBatches: 0, cachedBytes: 0, rowBatches: 0, rows: 0, rowReads: 0, rowBytes: 0 });
    const roomy = arrowSource(path, { cacheBatches: 8, cacheBytes: 3 * bytes, rowReads: false });
    for (let i = 0; i < N; i++) roomy.getBatch([i]);
    assert.ok(roomy.stats().cachedBytes <= 3 * bytes && roomy.stats().reads === SIZES.length, JSON.stringify(roomy.stats()));
  });

  it('through DataLoader with 2 reader workers (streaming), delivers every sample exactly once per epoch with its content', async () => {
    const path = write(numericBytes('file', SIZES, { lists: true }));
    const loader = await DataLoader.create(arrowSource(path, { cacheBatches: 2 }), { batchSize: 4, workers: 2, mode: 'streaming', dropLast: false, seed: 5 });
    try {
      assert.equal(loader.stats().workers, 2);
      for (let e = 0; e < 2; e++) {
        const batches = await within(HANG_MS, `epoch ${e}`, collect(loader.epoch(e)));
        const ids: number[] = [];
        for (const b of batches) {
          const cols = Object.fromEntries(loader.names!.map((name) => [name, b.get(name) as Tensor]));
          const batchIds = Array.from(cols.id!.data as Int32Array);
          assert.deepEqual(batchIds, [...b.sampleIds]);
          checkNumeric(cols, batchIds, true);
          ids.push(...batchIds);
        }
        assert.deepEqual(sorted(ids), range(N));
      }
    } finally {
      await loader.close();
    }
  });

  it('decodes Hugging Face image columns (struct<bytes: binary, path: string>) with the image decoder, in reader workers too', async () => {
    const colors = (i: number) => [(i * 37) % 256, 255 - ((i * 11) % 256), (i * 5) % 256];
    const pngs = await Promise.all(range(13).map((i) => sharp({ create: { width: 6, height: 4, channels: 3, background: { r: colors(i)[0]!, g: colors(i)[1]!, b: colors(i)[2]! } } }).png().toBuffer()));
    const table = hfTable(pngs.slice(0, 6).map((b) => new Uint8Array(b)), 0).concat(hfTable(pngs.slice(6).map((b) => new Uint8Array(b)), 6));
    const path = write(tableToIPC(table, 'stream'));
    const image = { kind: 'image', size: [2, 3], fit: 'resize' } as const;
    const source = arrowSource(path, { decoders: { image } });
    assert.deepEqual(source.columns.map((c) => c.name), ['image', 'label', 'embedding']);
    const ids = [12, 0, 7, 3];
    const b = await source.getBatch(ids);
    assert.deepEqual(b.image!.shape, [4, 3, 2, 3]);
    const px = b.image!.data as Uint8Array;
    ids.forEach((id, r) => {
      for (let c = 0; c < 3; c++) assert.ok(px.subarray(r * 18 + c * 6, r * 18 + c * 6 + 6).every((v) => v === colors(id)[c]), `row ${id} channel ${c}`);
    });
    assert.deepEqual(Array.from(b.label!.data as BigInt64Array), ids.map((i) => BigInt(i % 10)));
    assert.deepEqual(b.embedding!.shape, [4, 8]);
    assert.deepEqual(Array.from(b.embedding!.data as Float32Array).slice(0, 8), range(8).map((j) => 12 + j / 8));

    const loader = await DataLoader.create(arrowSource(path, { decoders: { image: { ...image, layout: 'hwc' } } }), { batchSize: 5, workers: 2, mode: 'streaming', dropLast: false });
    try {
      const seen: number[] = [];
      for (const batch of await within(HANG_MS, 'epoch', collect(loader.epoch(0)))) {
        const img = batch.get('image') as Tensor;
        assert.deepEqual(img.shape.slice(1), [2, 3, 3]);
        batch.sampleIds.forEach((id, r) => assert.deepEqual(Array.from((img.data as Uint8Array).subarray(r * 18, r * 18 + 3)), colors(id)));
        seen.push(...batch.sampleIds);
      }
      assert.deepEqual(sorted(seen), range(13));
    } finally {
      await loader.close();
    }
  });

  it('reads a Hugging Face image stored by path (bytes null) from the file beside the Arrow file', async () => {
    const png = await sharp({ create: { width: 2, height: 2, channels: 3, background: { r: 9, g: 8, b: 7 } } }).png().toBuffer();
    writeFileSync(join(dir, 'beside.png'), png);
    const table = hfTable([new Uint8Array(png)]);
    const byPath = new Table({
      image: vectorFromArray([{ bytes: null, path: 'beside.png' }, { bytes: null, path: 'missing.png' }], table.schema.fields[0]!.type),
    });
    const source = arrowSource(write(tableToIPC(byPath, 'stream')), { decoders: { image: { kind: 'image', size: [1, 1], layout: 'hwc' } } });
    assert.deepEqual(Array.from((await source.getBatch([0])).image!.data as Uint8Array), [9, 8, 7]);
    const e = await code(async () => source.getBatch([1]));
    assert.equal(e.code, 'ERR_FILE_ACCESS');
    assert.match(e.message, /missing\.png.*row 1/);
  });

  it('decodes a string column with a module decoder imported in each thread', async () => {
    const mod = join(dir, 'decode.mjs');
    writeFileSync(mod, 'export function decode(bytes, row) { return Float32Array.of(bytes.length, row, bytes[0]); }\n');
    const words = ['a', 'bb', 'ccc', 'dddd', 'eeeee'];
    const table = new Table({ text: vectorFromArray(words, new Utf8()), id: vectorFromArray([0, 1, 2, 3, 4], new Int32()) });
    const path = write(tableToIPC(table, 'file'));
    const options = { decoders: { text: { kind: 'module', module: pathToFileURL(mod), export: 'decode' } } } as const;
    const b = await arrowSource(path, options).getBatch([4, 1]);
    assert.deepEqual(b.text!.shape, [2, 3]);
    assert.deepEqual(Array.from(b.text!.data as Float32Array), [5, 4, 101, 2, 1, 98]);
    const loader = await DataLoader.create(arrowSource(path, options), { batchSize: 2, workers: 2, mode: 'streaming', dropLast: false, shuffle: false });
    try {
      const rows = (await within(HANG_MS, 'epoch', collect(loader.epoch(0)))).flatMap((batch) => {
        const t = batch.get('text').data as Float32Array;
        return Array.from(batch.sampleIds, (id, r) => [id, t[r * 3]!, t[r * 3 + 1]!]);
      });
      assert.deepEqual(rows, range(5).map((i) => [i, i + 1, i]));
    } finally {
      await loader.close();
    }
    const bad = arrowSource(path, { decoders: { text: { kind: 'module', module: pathToFileURL(mod), export: 'nope' } } });
    assert.match((await code(async () => bad.getBatch([0]))).message, /no function export "nope"/);
  });

  it("delivers a dictionary-encoded column as its integer codes when asked with { kind: 'codes' }", () => {
    const table = new Table({ cls: vectorFromArray(['cat', 'dog', 'cat', 'eel'], new Dictionary(new Utf8(), new Int32())) });
    for (const format of ['stream', 'file'] as const) {
      const b = arrowSource(write(tableToIPC(table, format)), { decoders: { cls: { kind: 'codes' } } }).getBatch([3, 0, 1, 2]) as Record<string, Tensor>;
      assert.equal(b.cls!.dtype, 'int32');
      assert.deepEqual(Array.from(b.cls!.data as Int32Array), [2, 0, 1, 0]);
    }
  });

  it('refuses a dictionary-encoded column without a codes decoder, naming the column and both fixes', async () => {
    const table = new Table({ label: vectorFromArray([1, 2], new Int32()), cls: vectorFromArray(['cat', 'dog'], new Dictionary(new Utf8(), new Int8())) });
    const path = write(tableToIPC(table, 'stream'));
    const e = await code(() => arrowSource(path));
    assert.equal(e.code, 'ERR_INVALID_DATASET');
    assert.match(e.message, /column "cls" \(Dictionary.*is dictionary-encoded.*decoders: \{ "cls": \{ kind: 'codes' \} \}.*leave it out with columns: \["label"\]/);
    const wrong = await code(() => arrowSource(path, { decoders: { label: { kind: 'codes' } }, columns: ['label'] }));
    assert.match(wrong.message, /column "label" \(Int32\) has decoder \{ kind: 'codes' \}, but it is not dictionary-encoded/);
  });

  it('the worker spec survives structured clone and reopens to the same content', async () => {
    const path = write(numericBytes('stream', SIZES));
    const source = arrowSource(path, { columns: ['id', 'mat'] });
    const spec = structuredClone(source[kSourceSpec]());
    const mod = (await import(spec.module)) as Record<string, (o: unknown) => typeof source>;
    const reopened = mod[spec.export]!(spec.options);
    assert.deepEqual(reopened.getBatch([20, 1]), source.getBatch([20, 1]));
    assert.equal(reopened.stats().rowBatches, 2, 'the reopened source reads rows from the table it was given');
    assert.equal(reopened.stats().reads, 0);
  });

  describe('row reads', () => {
    const KIND_SIZES = [7, 1, 13, 4, 9];
    const decoders = { ...Object.fromEntries(KIND_DECODED.map((c) => [c, HASH_DECODER])), cls8: { kind: 'codes' }, cls16: { kind: 'codes' } } as const;
    const fnv = (b: Uint8Array) => {
      let h = 0x811c9dc5;
      for (const x of b) h = Math.imul(h ^ x, 0x01000193);
      return h | 0;
    };
    const fileBytes = (i: number) => Uint8Array.of(100 + i, 7, 7, i);
    for (const [i, name] of KIND_FILES.entries()) writeFileSync(join(dir, name), fileBytes(i));

    /** Row `id` of column `name` as apache-arrow's own decode (tableFromIPC) gives it, flattened to numbers. */
    function expected(table: Table, name: string, id: number): (number | bigint)[] {
      const col = table.getChild(name)!;
      const flat = (v: unknown): (number | bigint)[] =>
        v instanceof Uint8Array ? Array.from(v)
        : typeof v === 'boolean' ? [v ? 1 : 0]
        : typeof v === 'number' || typeof v === 'bigint' ? [v]
        : Array.from(v as Iterable<unknown>).flatMap(flat);
      return flat(col.get(id));
    }

    for (const format of ['stream', 'file'] as const) {
      it(`give byte for byte what decoding whole record batches gives, and what apache-arrow's tableFromIPC gives, for every column kind (IPC ${format}, record batches of ${KIND_SIZES.join(', ')} rows, shuffled ids)`, async () => {
        const bytes = tableToIPC(kindsTable(KIND_SIZES), format);
        const path = write(bytes);
        const rows = arrowSource(path, { decoders });
        const whole = arrowSource(path, { decoders, rowReads: false });
        const n = KIND_SIZES.reduce((a, b) => a + b, 0);
        assert.equal(rows.length, n);
        const ids = shuffled(n, 5);
        const batches = [[...ids.slice(0, 9), ids[0]!, ids[3]!], ids.slice(9, 20), ids.slice(20), range(n)];
        await readBothWays(rows, whole, batches);
        const s = rows.stats();
        assert.equal(s.reads, 0, 'no record batch decoded whole');
        assert.ok(s.rowBatches >= KIND_SIZES.length && s.rows >= n, JSON.stringify(s));
        assert.equal(whole.stats().rowBatches, 0);

        const table = tableFromIPC(bytes);
        const b = await rows.getBatch(ids);
        const text = new TextEncoder();
        for (const c of rows.columns) {
          const t = b[c.name]!;
          const width = t.size / n;
          ids.forEach((id, r) => {
            const got = Array.from(t.data.subarray(r * width, (r + 1) * width) as ArrayLike<number | bigint>);
            const at = `column ${c.name} row ${id}`;
            if (KIND_DECODED.includes(c.name as (typeof KIND_DECODED)[number])) {
              const v = table.getChild(c.name)!.get(id) as Uint8Array | string | { bytes: Uint8Array | null; path: string | null };
              const raw = typeof v === 'string' ? text.encode(v) : v instanceof Uint8Array ? v : (v.bytes ?? fileBytes(KIND_FILES.indexOf(v.path as (typeof KIND_FILES)[number])));
              assert.deepEqual(got, [raw.length, fnv(raw), id], at);
            } else if (c.name === 'f16') {
              assert.deepEqual(got.map((x) => halfValue(Number(x))), expected(table, c.name, id), at);
            } else if (c.name.startsWith('cls')) {
              const col = table.getChild(c.name)!;
              assert.equal(col.data[0]!.dictionary!.get(Number(got[0])), col.get(id), at);
            } else {
              assert.deepEqual(got, expected(table, c.name, id), at);
            }
          });
        }
      });
    }

    it('check the validity bits of the rows they read: valid rows of columns with nulls read back, a null row is refused as decoding refuses it', async () => {
      const n = 12;
      const ids = range(n);
      const full = new Table({
        x: vectorFromArray(ids.map((i) => (i % 4 === 1 ? null : i * 10)), new Int32()),
        flag: vectorFromArray(ids.map((i) => (i === 6 ? null : i % 2 === 0)), new Bool()),
        pair: vectorFromArray(ids.map((i) => (i === 7 ? [1, null] : [i, -i])), new FixedSizeList(2, new Field('item', new Float32(), true))),
      });
      const parts = [full.slice(0, 5), full.slice(5, 12)];
      for (const format of ['stream', 'file'] as const) {
        const path = write(tableToIPC(new Table(parts.flatMap((p) => p.batches)), format));
        const rows = arrowSource(path);
        const whole = arrowSource(path, { rowReads: false });
        const valid = [11, 0, 3, 2, 4, 10, 8];
        await readBothWays(rows, whole, [valid]);
        const b = rows.getBatch(valid) as Record<string, Tensor>;
        assert.deepEqual(Array.from(b.x!.data as Int32Array), valid.map((i) => i * 10));
        assert.deepEqual(Array.from(b.flag!.data as Uint8Array), valid.map((i) => (i % 2 === 0 ? 1 : 0)));
        assert.deepEqual(Array.from(b.pair!.data as Float32Array), valid.flatMap((i) => [i, -i]));
        for (const [row, column] of [[1, 'x'], [9, 'x'], [6, 'flag'], [7, 'pair']] as const) {
          const viaRows = await code(() => rows.getBatch([0, row]));
          const viaWhole = await code(() => whole.getBatch([0, row]));
          assert.equal(viaRows.code, 'ERR_INVALID_DATASET');
          assert.match(viaRows.message, new RegExp(`column "${column}", row ${row} holds a null`));
          assert.equal(viaRows.message, viaWhole.message);
        }
        assert.equal(rows.stats().reads, 0);
      }
    });

    it('read neighbouring rows with one positioned read, and rows far apart with one each', () => {
      const width = 2048; // 8 KiB a row: more than the gap merged reads bridge
      const ids = range(16);
      const full = new Table({ wide: vectorFromArray(ids.map((i) => Array.from({ length: width }, (_, j) => i * 10_000 + j)), new FixedSizeList(width, new Field('item', new Float32()))) });
      const path = write(tableToIPC(new Table([...full.slice(0, 8).batches, ...full.slice(8).batches]), 'stream'));
      const source = arrowSource(path);
      const reads = () => source.stats().rowReads;
      const check = (batch: number[]) => {
        const t = (source.getBatch(batch) as Record<string, Tensor>).wide!;
        batch.forEach((id, r) => assert.equal((t.data as Float32Array)[r * width + 5], id * 10_000 + 5));
      };
      check([3, 0, 7, 1, 2, 6, 5, 4]);
      assert.equal(reads(), 1, 'rows 0-7 of record batch 0 in one read');
      assert.equal(source.stats().rowBytes, 8 * width * 4);
      check([0, 2, 4, 6]);
      assert.equal(reads(), 5);
      check([9, 8, 3, 12]);
      assert.equal(reads(), 8, 'rows 8-9 share a read; 3 and 12 take one each');
      assert.deepEqual({ ...source.stats(), rowBytes: 0 }, { reads: 0, hits: 0, cachedBatches: 0, cachedBytes: 0, rowBatches: 4, rows: 16, rowReads: 8, rowBytes: 0 });
    });

    it('read value offsets that do not start at zero (legal, though apache-arrow writes them rebased) as decoding reads them', async () => {
      // 6 rows: 7 int32 offsets (28 bytes) in a buffer padded to 32. Shrink it to 28, start the next
      // buffer 4 bytes earlier, on the padding, and add those 4 bytes to every offset.
      const ids = range(6);
      const blobs = ids.map((i) => Uint8Array.from({ length: 1 + i }, (_, j) => i * 16 + j));
      const table = new Table({
        blob: vectorFromArray(blobs, new Binary()),
        seq: vectorFromArray(ids.map((i) => [i, i + 100]), new List(new Field('item', new Int32()))),
      });
      for (const format of ['stream', 'file'] as const) {
        const bytes = Uint8Array.from(tableToIPC(table, format));
        const dv = new DataView(bytes.buffer);
        const [t] = batchTables(bytes);
        // Buffers: blob (validity, offsets, bytes), seq (validity, offsets), its items (validity, values). Nodes: blob, seq, items.
        const int64 = (at: number) => Number(dv.getBigInt64(at, true));
        const add64 = (at: number, by: number) => dv.setBigInt64(at, BigInt(int64(at) + by), true);
        const start = (b: number) => int64(t!.buffers[b]!);
        const end = (b: number) => start(b) + int64(t!.buffers[b]! + 8);
        assert.deepEqual([end(1), start(2), end(4), start(6)], [start(1) + 32, end(1), start(4) + 32, end(4)], 'the padding this test moves buffers onto');
        for (const [offsets, next, by] of [[1, 2, 4], [4, 6, 1]] as const) {
          add64(t!.buffers[offsets]! + 8, -4);
          add64(t!.buffers[next]!, -4);
          add64(t!.buffers[next]! + 8, 4);
          const at = t!.body + start(offsets);
          for (let i = 0; i <= 6; i++) dv.setInt32(at + 4 * i, dv.getInt32(at + 4 * i, true) + by, true);
        }
        add64(t!.nodes[2]!, 1); // the items hold one value more (the one before the first row's)
        const path = write(bytes);
        const rows = arrowSource(path, { decoders: { blob: HASH_DECODER } });
        await readBothWays(rows, arrowSource(path, { decoders: { blob: HASH_DECODER }, rowReads: false }), [[5, 0, 3, 1, 4, 2]]);
        const b = await rows.getBatch([5, 0, 3]);
        assert.deepEqual(Array.from(b.blob!.data as Int32Array).filter((_, i) => i % 3 === 0), [6, 1, 4]);
        assert.deepEqual(Array.from(b.seq!.data as Int32Array), [5, 105, 0, 100, 3, 103]);
        assert.equal(rows.stats().reads, 0);
      }
    });

    it('leave a record batch whose buffer table apache-arrow refuses (an unaligned buffer) to decoding, which refuses it; the others are read by row', async () => {
      const bytes = Uint8Array.from(numericBytes('stream', [3, 3, 3]));
      const dv = new DataView(bytes.buffer);
      const t = batchTables(bytes)[1]!;
      const values = t.buffers[1]!; // column "id" (int32): validity, then values
      dv.setBigInt64(values, dv.getBigInt64(values, true) + 2n, true);
      dv.setBigInt64(values + 8, dv.getBigInt64(values + 8, true) - 4n, true);
      const path = write(bytes);
      const source = arrowSource(path);
      assert.deepEqual(Array.from((source.getBatch([0, 8]) as Record<string, Tensor>).id!.data as Int32Array), [0, 8]);
      assert.equal(source.stats().rowBatches, 2);
      const e = await code(() => source.getBatch([4]));
      assert.equal(e.code, 'ERR_BAD_FILE');
      assert.match(e.message, /record batch 1 cannot be decoded/);
      // Without "id", record batch 1's other columns are read by row (decoding it whole still fails).
      const others = arrowSource(path, { columns: ['f64', 'vec'] });
      assert.deepEqual(Array.from((others.getBatch([4]) as Record<string, Tensor>).f64!.data as Float64Array), [4.25]);
      assert.equal((await code(() => arrowSource(path, { columns: ['f64'], rowReads: false }).getBatch([4]))).code, 'ERR_BAD_FILE');
    });

    it('decode every record batch whole when a selected column is a view column; columns before and after it are still read by row without it', async () => {
      // Record batches built apart: apache-arrow 21 writes the views of a sliced view column wrong.
      const part = (ids: number[]) => new Table({
        x: vectorFromArray(ids.map((i) => i * 3), new Int32()),
        v: vectorFromArray(ids.map((i) => `value ${i} ${'long '.repeat(i % 4)}`), new Utf8View()),
        y: vectorFromArray(ids.map((i) => -i), new Int32()),
      });
      const path = write(tableToIPC(part(range(4)).concat(part(range(10).slice(4))), 'stream'));
      const withView = arrowSource(path, { decoders: { v: HASH_DECODER } });
      const b = await withView.getBatch([9, 2]);
      assert.deepEqual(Array.from(b.x!.data as Int32Array), [27, 6]);
      const text = new TextEncoder().encode(`value 9 ${'long '.repeat(1)}`);
      assert.equal((b.v!.data as Int32Array)[0], text.length);
      assert.deepEqual([withView.stats().reads, withView.stats().rowBatches], [2, 0]);
      const without = arrowSource(path, { columns: ['y', 'x'] });
      assert.deepEqual(Array.from((without.getBatch([9, 2]) as Record<string, Tensor>).y!.data as Int32Array), [-9, -2]);
      assert.deepEqual([without.stats().reads, without.stats().rowBatches], [0, 2]);
    });

    it('1000 mutated buffer tables and field nodes: row reads give what decoding whole record batches gives, or both refuse with a typed error', async () => {
      const valid = numericBytes('stream', [3, 5, 4], { lists: true, blobs: true });
      const tables = batchTables(valid);
      let seed = 12345;
      const rnd = (n: number) => ((seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0) >>> 16) % n;
      const decoders = { blob: HASH_DECODER, img: HASH_DECODER };
      const ids = scrambled(12);
      const batches = [ids.slice(0, 5), ids.slice(5)];
      const outcomes: Record<string, number> = {};
      const path = join(dir, 'mutant.arrow');
      for (let c = 0; c < 1000; c++) {
        const bytes = Uint8Array.from(valid);
        const dv = new DataView(bytes.buffer);
        const t = tables[rnd(tables.length)]!;
        const list = rnd(3) === 0 ? t.nodes : t.buffers;
        const at = list[rnd(list.length)]! + 8 * rnd(2);
        const old = dv.getBigInt64(at, true);
        const choices = [0n, 1n, old + 1n, old - 1n, old + 4n, old - 4n, old + 8n, old - 8n, old * 2n, old / 2n, BigInt(t.bodyLength), BigInt(rnd(t.bodyLength + 1)), -1n, 2n ** 31n, 2n ** 62n];
        const value = choices[rnd(choices.length)]!;
        dv.setBigInt64(at, value, true);
        writeFileSync(path, bytes);
        let outcome = 'read';
        try {
          await readBothWays(arrowSource(path, { decoders }), arrowSource(path, { decoders, rowReads: false }), batches);
        } catch (e) {
          if (!(e instanceof LoaderError) || !['ERR_BAD_FILE', 'ERR_INVALID_DATASET'].includes(e.code) || !e.message.startsWith(path)) {
            assert.fail(`case ${c}: ${value} at byte ${at} (${list === t.nodes ? 'field node' : 'buffer'}): ${(e as Error).stack}`);
          }
          outcome = e.code;
        }
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      }
      assert.ok((outcomes.read ?? 0) > 100 && (outcomes.ERR_BAD_FILE ?? 0) > 100, JSON.stringify(outcomes));
    });
  });

  describe('errors', () => {
    it('an unknown column names it and lists the available ones', async () => {
      const path = write(numericBytes('stream', [3]));
      const e = await code(() => arrowSource(path, { columns: ['id', 'nope'] }));
      assert.equal(e.code, 'ERR_INVALID_OPTION');
      assert.match(e.message, /`columns`.*"nope".*"id", "i8", "u16"/);
      const d = await code(() => arrowSource(path, { columns: ['id'], decoders: { vec: { kind: 'image', size: [2, 2] } } }));
      assert.match(d.message, /decoders\.vec.*selected column/);
      assert.equal((await code(() => arrowSource(path, { cacheBatches: -1 }))).code, 'ERR_INVALID_OPTION');
      assert.match((await code(() => arrowSource(path, { rowReads: 'yes' as unknown as boolean }))).message, /`rowReads` must be true or false, got "yes"/);
    });

    it('a binary column without a decoder is refused, naming it and the image or module decoder', async () => {
      const table = new Table({ blob: vectorFromArray([Uint8Array.of(1)], new Binary()) });
      const hf = hfTable([Uint8Array.of(1, 2)]);
      for (const t of [hf, table]) {
        const e = await code(() => arrowSource(write(tableToIPC(t, 'stream'))));
        assert.equal(e.code, 'ERR_INVALID_DATASET');
        assert.match(e.message, /column "(image|blob)" \((Struct|Binary).*need a decoder: pass decoders: \{ "(image|blob)": \{ kind: 'image'/);
      }
      assert.match((await code(() => arrowSource(write(tableToIPC(hf, 'stream'))))).message, /columns: \["label","embedding"\]/);
    });

    it('a text column is refused as text: not a tensor yet, with a module decoder or `columns` as the fix (no image decoder)', async () => {
      for (const type of [new Utf8(), new LargeUtf8()]) {
        const table = new Table({ id: vectorFromArray([1], new Int32()), caption: vectorFromArray(['a cat'], type) });
        const e = await code(() => arrowSource(write(tableToIPC(table, 'stream'))));
        assert.equal(e.code, 'ERR_INVALID_DATASET');
        assert.match(e.message, /column "caption" \((Large)?Utf8\) holds text, which Stoker does not turn into a tensor yet.*decoders: \{ "caption": \{ kind: 'module', module, export \} \}.*leave it out with columns: \["id"\]/);
        assert.doesNotMatch(e.message, /kind: 'image'/);
      }
    });

    it('a variable-length list column is refused, naming the column and the row', async () => {
      const ragged = new Table({ seq: vectorFromArray([[1, 2], [3, 4], [5]], new List(new Field('item', new Int32()))) });
      const e = await code(() => arrowSource(write(tableToIPC(ragged, 'stream'))));
      assert.equal(e.code, 'ERR_INVALID_DATASET');
      assert.match(e.message, /column "seq" is a variable-length list.*row 2 holds a list of 1 where row 0 holds 2.*decoder/);
      // Ragged only in a later record batch: refused when that row is read.
      const later = new Table({ seq: vectorFromArray([[1, 2], [3, 4]], new List(new Field('item', new Int32()))) }).concat(new Table({ seq: vectorFromArray([[5, 6, 7]], new List(new Field('item', new Int32()))) }));
      const source = arrowSource(write(tableToIPC(later, 'file')));
      assert.deepEqual(Array.from((source.getBatch([1]) as Record<string, Tensor>).seq!.data as Int32Array), [3, 4]);
      assert.match((await code(() => source.getBatch([2]))).message, /row 2 holds a list of 3 where row 0 holds 2/);
    });

    it('nulls in a tensor column and uint64 values beyond int64 are refused, naming the row', async () => {
      const nulls = new Table({ x: vectorFromArray([1, null, 3], new Int32()) });
      const source = arrowSource(write(tableToIPC(nulls, 'stream')));
      assert.deepEqual(Array.from((source.getBatch([2, 0]) as Record<string, Tensor>).x!.data as Int32Array), [3, 1]);
      const e = await code(() => source.getBatch([1]));
      assert.equal(e.code, 'ERR_INVALID_DATASET');
      assert.match(e.message, /column "x", row 1 holds a null/);
      const big = new Table({ u: vectorFromArray([1n, 2n ** 63n], new Uint64()) });
      assert.match((await code(() => arrowSource(write(tableToIPC(big, 'file'))).getBatch([1]))).message, /row 1 holds the uint64 9223372036854775808/);
    });

    for (const format of ['stream', 'file'] as const) {
      it(`a truncated IPC ${format} is ERR_BAD_FILE naming the file`, async () => {
        const valid = numericBytes(format, [4, 4]);
        for (const cut of [valid.length - 1, valid.length - 8, Math.floor(valid.length / 2), 12, 3]) {
          const path = write(valid.subarray(0, cut));
          const e = await code(() => arrowSource(path));
          assert.equal(e.code, 'ERR_BAD_FILE', `cut at ${cut}: ${e.message}`);
          assert.ok(e.message.startsWith(path), e.message);
        }
      });
    }

    it('bad magic, an empty file and a missing file are refused clearly', async () => {
      const valid = numericBytes('file', [2]);
      const bad = Uint8Array.from(valid);
      bad.set([0x41, 0x52, 0x52, 0x4f, 0x58], 0);
      const e = await code(() => arrowSource(write(bad)));
      assert.equal(e.code, 'ERR_BAD_FILE');
      assert.match(e.message, /at byte 0: not an Arrow IPC file or stream: it starts with 41 52 52 4f 58/);
      assert.match((await code(() => arrowSource(write(new Uint8Array(0))))).message, /the file is empty/);
      const missing = await code(() => arrowSource(join(dir, 'no-such.arrow')));
      assert.equal(missing.code, 'ERR_FILE_ACCESS');
      assert.match(missing.message, /no-such\.arrow: cannot open it for reading: ENOENT/);
    });

    it('a stream with no rows is ERR_EMPTY_DATASET', async () => {
      const empty = new Table({ x: vectorFromArray([], new Int32()) });
      const e = await code(() => arrowSource(write(tableToIPC(empty, 'stream'))));
      assert.equal(e.code, 'ERR_EMPTY_DATASET');
      assert.match(e.message, /holds no rows/);
    });

    it('a schema that changes between record batches, and two streams concatenated, are refused', async () => {
      const a = numericBytes('stream', [2]);
      const other = tableToIPC(new Table({ y: vectorFromArray([1.5], new Float32()) }), 'stream');
      const changed = new Uint8Array([...a.subarray(0, a.length - 8), ...other]);
      const e = await code(() => arrowSource(write(changed)));
      assert.equal(e.code, 'ERR_BAD_FILE');
      assert.match(e.message, /a second schema message: the schema changes between record batches/);
      const twice = new Uint8Array([...a, ...a]);
      assert.match((await code(() => arrowSource(write(twice)))).message, /bytes follow the end-of-stream marker/);
    });

    it('a forged vector length in a record batch header is refused at once (apache-arrow would loop over it)', async () => {
      const valid = Uint8Array.from(numericBytes('stream', [3]));
      const dv = new DataView(valid.buffer);
      const schemaEnd = 8 + dv.getInt32(4, true);
      const metaLength = dv.getInt32(schemaEnd + 4, true);
      const meta = valid.subarray(schemaEnd + 8, schemaEnd + 8 + metaLength);
      assert.equal(Message.decode(meta).headerType, MessageHeader.RecordBatch);
      const bb = new ByteBuffer(meta);
      const rb = FbMessage.getRootAsMessage(bb).header(new FbRecordBatch()) as FbRecordBatch;
      const nodes = bb.__vector(rb.bb_pos + bb.__offset(rb.bb_pos, 6));
      new DataView(meta.buffer, meta.byteOffset).setInt32(nodes - 4, 0x7fffffff, true);
      // "At once" is pinned by the message (the count is checked against the header's bytes before
      // any loop), not by elapsed time; a loop over 2^31 nodes would trip the hang bound.
      const e = await within(HANG_MS, 'refusing the forged header', code(() => arrowSource(write(valid))));
      assert.equal(e.code, 'ERR_BAD_FILE');
      assert.match(e.message, /lists 2147483647 field nodes, more than its \d+ bytes can hold/);
    });

    it('a file rewritten with another size after open is refused at the next read', async () => {
      const path = write(numericBytes('stream', [3]));
      const source = arrowSource(path, { cacheBatches: 0 });
      source.getBatch([0]);
      writeFileSync(path, numericBytes('stream', [4]));
      const e = await code(() => source.getBatch([1]));
      assert.equal(e.code, 'ERR_BAD_FILE');
      assert.match(e.message, /changed size since it was indexed/);
    });
  });

  describe('fuzz', () => {
    const TARGETS = new URL('./arrow-targets.ts', import.meta.url).href;
    // Mutants can be well-formed files whose schema now holds a type Stoker does not read (Null),
    // a null, or zero rows: those are ERR_INVALID_DATASET / ERR_EMPTY_DATASET, naming the file.
    // The stream's target passes decoders for its binary columns: a mutant that renames them gets
    // ERR_INVALID_OPTION (a decoder for a column the file does not have), naming the file.
    const cases = [
      ['stream', 'readAllDecoded', { blobs: true }, ['ERR_INVALID_DATASET', 'ERR_EMPTY_DATASET', 'ERR_INVALID_OPTION']],
      ['file', 'readAllReopened', { lists: true }, ['ERR_INVALID_DATASET', 'ERR_EMPTY_DATASET']],
    ] as const;
    for (const [format, target, rows, allowCodes] of cases) {
      it(`2000 mutants of a small IPC ${format} are read or refused with a typed error, never a crash or a hang`, { timeout: TEST_MS }, async () => {
        const valid = numericBytes(format, [3, 2, 4], rows);
        const report = await fuzz({ valid, ext: '.arrow', module: TARGETS, target, cases: 2000, seed: 7, allowCodes });
        assertFuzzClean(report);
        assert.ok(report.ok > 0 && (report.refused.ERR_BAD_FILE ?? 0) > 0, JSON.stringify(report));
      });
    }
  });
});

describe("sources.arrow: image columns with decode: 'processes'", { timeout: SUITE_MS }, () => {
  const N = 13;
  let path: string;
  const jpg = (id: number) =>
    sharp(Uint8Array.from({ length: 30 * 40 * 3 }, (_, j) => (id * 31 + j * 5 + (j % 7) * 17) & 255), { raw: { width: 40, height: 30, channels: 3 } }).jpeg({ quality: 85 }).toBuffer();

  before(async () => {
    const jpgs = (await Promise.all(range(N).map(jpg))).map((b) => new Uint8Array(b));
    path = write(tableToIPC(hfTable(jpgs.slice(0, 6), 0).concat(hfTable(jpgs.slice(6), 6)), 'stream'));
  });

  it('a Hugging Face image table gives the same tensors as decode: \'threads\'; close() leaves no child', async () => {
    const image = { kind: 'image', size: [14, 10] } as const;
    const threads = arrowSource(path, { decoders: { image }, decode: 'threads' });
    const procs = arrowSource(path, { decoders: { image }, decode: 'processes', decodeProcesses: 2 });
    assert.equal(threads.decode, 'threads');
    assert.equal(procs.decode, 'processes');
    assert.equal(arrowSource(path, { columns: ['label'], decode: 'processes' }).decode, undefined, 'no image column, no decoding');
    assert.deepEqual(procs.decodePids, []);
    const ids = [12, 0, 7, 3, 5, 9, 1];
    const [a, b] = await Promise.all([threads.getBatch(ids), procs.getBatch(ids)]);
    assert.deepEqual(b.image!.shape, [ids.length, 3, 14, 10]);
    assert.deepEqual(b.image!.data, a.image!.data);
    assert.deepEqual(b.label!.data, a.label!.data);
    const pids = procs.decodePids;
    assert.ok(pids.length >= 1 && pids.length <= 2, `pids ${pids}`);
    await procs.close();
    for (const pid of pids) assert.ok(!alive(pid), `decode child ${pid} is alive after close()`);
    assert.deepEqual(procs.decodePids, []);
    await threads.close();
  });

  it('refuses a bad decode or decodeProcesses', async () => {
    assert.equal((await code(() => arrowSource(path, { decoders: { image: { kind: 'image', size: [4, 4] } }, decode: 'fork' as never }))).code, 'ERR_INVALID_OPTION');
    const e = await code(() => arrowSource(path, { decoders: { image: { kind: 'image', size: [4, 4] } }, decodeProcesses: 1.5 }));
    assert.equal(e.code, 'ERR_INVALID_OPTION');
    assert.match(e.message, /`decodeProcesses`/);
  });

  it('with 2 reader workers, every row arrives exactly once per epoch with the in-thread bytes, and closing ends every child', async () => {
    const before = decodeChildren();
    const image = { kind: 'image', size: [16, 16], layout: 'hwc' } as const;
    const want = (await arrowSource(path, { decoders: { image }, decode: 'threads' }).getBatch(range(N))).image!.data as Uint8Array;
    const ds = arrowSource(path, { decoders: { image }, decode: 'processes', decodeProcesses: 1 });
    const loader = await DataLoader.create(ds, { batchSize: 4, workers: 2, mode: 'streaming', dropLast: false, seed: 11 });
    let during: number[] = [];
    try {
      for (let e = 0; e < 2; e++) {
        const seen: number[] = [];
        for (const batch of await within(HANG_MS, `epoch ${e}`, collect(loader.epoch(e)))) {
          const img = batch.get('image') as Tensor;
          assert.deepEqual(img.shape, [batch.sampleIds.length, 16, 16, 3]);
          batch.sampleIds.forEach((id, r) => assert.deepEqual((img.data as Uint8Array).subarray(r * 768, (r + 1) * 768), want.subarray(id * 768, (id + 1) * 768), `row ${id}`));
          seen.push(...batch.sampleIds);
        }
        assert.deepEqual(sorted(seen), range(N));
      }
      during = decodeChildren().filter((pid) => !before.includes(pid));
      if (process.platform === 'linux') assert.ok(during.length >= 2, `the worker copies decode in children (got ${during})`);
    } finally {
      await within(HANG_MS, 'close', loader.close());
      await ds.close();
    }
    for (const pid of during) assert.ok(await gone(pid), `decode child ${pid} is alive after the loader and the source closed`);
  });
});
