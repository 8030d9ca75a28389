// sources.npy: files written here by the published NPY layout (and one byte string exactly as
// np.save writes it) read back in both load modes, through the loader with reader workers, and
// every malformed file refused with a typed error naming it; then a fuzz run over mutants.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ArraySource } from '../../src/dataset/arrays-source.js';
import { FileColumnsSource } from '../../src/dataset/formats/columns/columns-file.js';
import { npySource, openNpy, parseNpyBytes } from '../../src/dataset/formats/columns/npy.js';
import { kSourceSpec } from '../../src/dataset/source-spec.js';
import { DataLoader, type Tensor } from '../../src/index.js';
import type { DType } from '../../src/tensor/dtype.js';
import { HANG_MS, TEST_MS, collect, range, sorted, within } from '../fixtures.js';
import { assertFuzzClean, fuzz } from './fuzz.js';
import { compareAll } from './npy-targets.js';

const dir = mkdtempSync(join(tmpdir(), 'stoker-npy-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let fileNo = 0;

/** An NPY file by the published layout: magic, version, header length, padded dict, data. */
function npyBytes(descr: string, shape: readonly number[], data: Uint8Array, opts: { version?: 1 | 2 | 3; fortran?: boolean; align?: number; dict?: string } = {}): Uint8Array {
  const version = opts.version ?? 1;
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  const dict = opts.dict ?? `{'descr': '${descr}', 'fortran_order': ${opts.fortran ? 'True' : 'False'}, 'shape': ${shapeText}, }`;
  const pre = version === 1 ? 10 : 12;
  const align = opts.align ?? 64;
  const dictBytes = Buffer.from(dict, version === 3 ? 'utf8' : 'latin1');
  const pad = (align - ((pre + dictBytes.length + 1) % align)) % align;
  const header = Buffer.concat([dictBytes, Buffer.from(' '.repeat(pad) + '\n')]);
  const head = Buffer.alloc(pre);
  Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, version, 0]).copy(head);
  if (version === 1) head.writeUInt16LE(header.length, 8);
  else head.writeUInt32LE(header.length, 8);
  return Buffer.concat([head, header, data]);
}

function file(bytes: Uint8Array, name = `f${fileNo++}.npy`): string {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
}

/** Deterministic, varied content for each dtype (bool as 0/1, int64 beyond 2^32, floats fractional). */
function content(dtype: DType | 'bool', count: number, seed: number): Uint8Array | Int8Array | Int16Array | Uint16Array | Int32Array | Uint32Array | Float32Array | Float64Array | BigInt64Array {
  const v = (k: number) => (Math.imul(k + 1, 2654435761) + seed * 40503) >>> 0;
  switch (dtype) {
    case 'bool': return Uint8Array.from({ length: count }, (_, k) => v(k) & 1);
    case 'uint8': return Uint8Array.from({ length: count }, (_, k) => v(k));
    case 'int8': return Int8Array.from({ length: count }, (_, k) => v(k));
    case 'int16': return Int16Array.from({ length: count }, (_, k) => v(k));
    case 'uint16': case 'float16': case 'bfloat16': return Uint16Array.from({ length: count }, (_, k) => v(k));
    case 'int32': return Int32Array.from({ length: count }, (_, k) => v(k));
    case 'uint32': return Uint32Array.from({ length: count }, (_, k) => v(k));
    case 'float32': return Float32Array.from({ length: count }, (_, k) => v(k) / 1000 - 2e6);
    case 'float64': return Float64Array.from({ length: count }, (_, k) => v(k) / 7 - 1e8);
    case 'int64': return BigInt64Array.from({ length: count }, (_, k) => BigInt.asIntN(64, BigInt(v(k)) * 0x1_0000_0003n - 5n));
  }
}

const bytesOf = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

function swapped(a: ArrayBufferView, size: number): Uint8Array {
  const b = Uint8Array.from(bytesOf(a));
  for (let i = 0; i < b.length; i += size) b.subarray(i, i + size).reverse();
  return b;
}

const CASES: [string, DType | 'bool', DType][] = [
  ['|b1', 'bool', 'uint8'], ['|u1', 'uint8', 'uint8'], ['|i1', 'int8', 'int8'], ['<i2', 'int16', 'int16'], ['<u2', 'uint16', 'uint16'],
  ['<i4', 'int32', 'int32'], ['<u4', 'uint32', 'uint32'], ['<i8', 'int64', 'int64'], ['<f2', 'float16', 'float16'],
  ['<f4', 'float32', 'float32'], ['<f8', 'float64', 'float64'],
];

function columns(batch: ReturnType<ArraySource['getBatch']>): Tensor[] {
  return Object.values(batch) as Tensor[];
}

describe('sources.npy', () => {
  it('reads the exact bytes np.save writes for np.arange(6, dtype="<i4").reshape(2, 3)', () => {
    const dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
    const saved = Buffer.concat([
      Buffer.from('\x93NUMPY\x01\x00v\x00', 'latin1'),
      Buffer.from(dict + ' '.repeat(118 - dict.length - 1) + '\n', 'latin1'),
      Buffer.from(Int32Array.of(0, 1, 2, 3, 4, 5).buffer),
    ]);
    assert.equal(saved.length, 128 + 24);
    assert.deepEqual(Buffer.from(npyBytes('<i4', [2, 3], bytesOf(Int32Array.of(0, 1, 2, 3, 4, 5)))), saved, 'the test writer matches numpy');
    const path = file(saved);
    for (const load of ['memory', 'positioned'] as const) {
      const ds = npySource(path, { load });
      assert.equal(ds.length, 2);
      const [t] = columns(ds.getBatch([0, 1]));
      assert.equal(t!.dtype, 'int32');
      assert.deepEqual(t!.toArray(), [[0, 1, 2], [3, 4, 5]]);
    }
  });

  it('round-trips every supported dtype in both load modes', () => {
    for (const [descr, kind, dtype] of CASES) {
      const data = content(kind, 5 * 3 * 2, descr.length + descr.charCodeAt(2));
      const path = file(npyBytes(descr, [5, 3, 2], bytesOf(data)));
      for (const load of ['memory', 'positioned'] as const) {
        const ds = npySource(path, { load });
        assert.equal(ds instanceof ArraySource, load === 'memory');
        const [t] = columns(ds.getBatch([4, 0, 2]));
        assert.equal(t!.dtype, dtype, descr);
        assert.deepEqual(t!.shape, [3, 3, 2]);
        const row = 6 * data.BYTES_PER_ELEMENT;
        const want = Buffer.concat([4, 0, 2].map((i) => bytesOf(data).subarray(i * row, (i + 1) * row)));
        assert.deepEqual(Buffer.from(t!.bytes()), want, `${descr} ${load}`);
      }
    }
  });

  it('reads boolean bytes other than 0 and 1 (arr.view(bool)) as 1, as NumPy does, in both load modes and as a tar field', () => {
    const raw = Uint8Array.of(0, 1, 255, 2, 128, 0);
    const path = file(npyBytes('|b1', [3, 2], raw));
    for (const load of ['memory', 'positioned'] as const) {
      const [t] = columns(npySource(path, { load }).getBatch([0, 1, 2]));
      assert.deepEqual([...t!.bytes()], [0, 1, 1, 1, 1, 0], load);
    }
    assert.deepEqual([...parseNpyBytes(npyBytes('|b1', [3], Uint8Array.of(7, 0, 200)), 'field').bytes()], [1, 0, 1]);
  });

  it('reads big-endian files, byte-swapped into the host order', () => {
    for (const [descr, kind] of [['>i2', 'int16'], ['>u4', 'uint32'], ['>f4', 'float32'], ['>f8', 'float64'], ['>i8', 'int64'], ['>f2', 'float16'], ['>u1', 'uint8']] as const) {
      const data = content(kind, 12, 3);
      const path = file(npyBytes(descr, [4, 3], swapped(data, data.BYTES_PER_ELEMENT)));
      for (const load of ['memory', 'positioned'] as const) {
        const [t] = columns(npySource(path, { load }).getBatch(range(4)));
        assert.deepEqual(Buffer.from(t!.bytes()), Buffer.from(bytesOf(data)), `${descr} ${load}`);
      }
    }
  });

  it('reads format versions 2.0 and 3.0 (u32 header length; UTF-8 header)', () => {
    const data = content('float32', 8, 1);
    for (const version of [2, 3] as const) {
      const path = file(npyBytes('<f4', [8], bytesOf(data), { version }));
      const [t] = columns(npySource(path).getBatch(range(8)));
      assert.deepEqual(t!.data, data);
      assert.deepEqual(t!.shape, [8]);
    }
  });

  it('reads data that starts at an offset not aligned to its element size', () => {
    const data = content('float64', 10, 2);
    const bytes = npyBytes('<f8', [5, 2], bytesOf(data), { align: 1 });
    assert.notEqual((bytes.length - 80) % 8, 0, 'the data offset is unaligned');
    const path = file(bytes);
    for (const load of ['memory', 'positioned'] as const) {
      const [t] = columns(npySource(path, { load }).getBatch([3, 4, 0]));
      assert.deepEqual(Array.from(t!.data as Float64Array), [...data.subarray(6, 10), ...data.subarray(0, 2)]);
    }
  });

  it('accepts Fortran order for 1-d arrays (the same bytes as C order) and the Python 2 "3L" integers', () => {
    const data = content('int32', 3, 4);
    const path = file(npyBytes('<i4', [3], bytesOf(data), { dict: "{'descr': '<i4', 'fortran_order': True, 'shape': (3L,)}" }));
    assert.deepEqual(columns(npySource(path).getBatch([0, 1, 2]))[0]!.data, data);
  });

  it('names the column of a lone file after its stem (data/x.npy: x), in both load modes and through a loader', async () => {
    const x = Int32Array.from(range(8));
    const path = file(npyBytes('<i4', [4, 2], bytesOf(x)), 'images.npy');
    for (const load of ['memory', 'positioned'] as const) {
      const batch = npySource(path, { load }).getBatch([3, 0]) as Record<string, Tensor>;
      assert.deepEqual(Object.keys(batch), ['images'], load);
      assert.deepEqual(batch.images!.toArray(), [[6, 7], [0, 1]]);
    }
    assert.deepEqual((npySource(file(npyBytes('<i4', [4, 2], bytesOf(x)), 'noext')).getBatch([0]) as Record<string, Tensor>).noext!.toArray(), [[0, 1]]);
    const loader = await DataLoader.create(npySource(path, { load: 'positioned' }), { batchSize: 2, shuffle: false, workers: 1 });
    try {
      assert.deepEqual(loader.names, ['images']);
      const [b] = await collect(loader.epoch(0));
      assert.deepEqual(b!.get('images').toArray(), [[0, 1], [2, 3]]);
      assert.deepEqual(b!.at(0).toArray(), [[0, 1], [2, 3]], 'positional access too');
    } finally {
      await loader.close();
    }
  });

  it('zips an array of files into positional columns and a record into named columns', () => {
    const x = content('float32', 6 * 4, 5);
    const y = content('int64', 6, 6) as BigInt64Array;
    const px = file(npyBytes('<f4', [6, 4], bytesOf(x)));
    const py = file(npyBytes('<i8', [6], bytesOf(y)));
    for (const load of ['memory', 'positioned'] as const) {
      const list = npySource([px, py], { load });
      const batch = list.getBatch([5, 1]);
      assert.ok(Array.isArray(batch));
      assert.deepEqual(Array.from((batch[0] as Tensor).data as Float32Array), [...x.subarray(20, 24), ...x.subarray(4, 8)]);
      assert.deepEqual(Array.from((batch[1] as Tensor).data as BigInt64Array), [y[5], y[1]]);
      const named = npySource({ label: py, image: px }, { load }).getBatch([2]) as Record<string, Tensor>;
      assert.deepEqual(Object.keys(named), ['label', 'image']);
      assert.deepEqual(named.label!.data, BigInt64Array.of(y[2]!));
      assert.deepEqual(named.image!.shape, [1, 4]);
    }
  });

  it('gives identical batches in memory and positioned modes, for runs, scattered and repeated ids', () => {
    const px = file(npyBytes('<f4', [50, 7], bytesOf(content('float32', 350, 8))));
    const py = file(npyBytes('|u1', [50, 3], bytesOf(content('uint8', 150, 9))));
    const memory = npySource({ x: px, y: py }, { load: 'memory' });
    const positioned = npySource({ x: px, y: py }, { load: 'positioned' });
    compareAll(memory, positioned);
    const ids = [3, 4, 5, 6, 40, 2, 2, 49, 0, 1, 17];
    assert.deepEqual(positioned.getBatch(ids), memory.getBatch(ids));
  });

  it("load: 'auto' keeps data under inMemoryBytes in memory and reads larger data per batch", () => {
    const path = file(npyBytes('<f4', [10, 4], bytesOf(content('float32', 40, 1))));
    assert.ok(npySource(path) instanceof ArraySource);
    assert.ok(npySource(path, { inMemoryBytes: 160 }) instanceof ArraySource);
    const big = npySource(path, { inMemoryBytes: 159 });
    assert.ok(big instanceof FileColumnsSource);
    const spec = big[kSourceSpec]();
    assert.equal(spec.export, 'openNpy');
    assert.ok(openNpy(spec.options as Parameters<typeof openNpy>[0]) instanceof FileColumnsSource, 'workers reopen it positioned');
  });

  it('positioned mode reads rows from the file at each batch; memory mode reads the file once, at open', () => {
    const data = Int32Array.from(range(12));
    const bytes = npyBytes('<i4', [6, 2], bytesOf(data));
    const path = file(bytes);
    const memory = npySource(path, { load: 'memory' });
    const positioned = npySource(path, { load: 'positioned' });
    const rewritten = Uint8Array.from(bytes);
    new DataView(rewritten.buffer).setInt32(rewritten.length - 8, -7, true);
    writeFileSync(path, rewritten);
    assert.deepEqual(columns(positioned.getBatch([5]))[0]!.toArray(), [[-7, 11]]);
    assert.deepEqual(columns(memory.getBatch([5]))[0]!.toArray(), [[10, 11]]);
  });

  for (const load of ['memory', 'positioned'] as const) {
    it(`delivers every sample exactly once per epoch with correct content through 2 reader workers (${load})`, { timeout: TEST_MS }, async () => {
      const n = 37;
      const x = content('float32', n * 5, 11);
      const y = Int32Array.from(range(n), (i) => i * 3 + 1);
      const ds = npySource({ x: file(npyBytes('<f4', [n, 5], bytesOf(x))), y: file(npyBytes('<i4', [n], bytesOf(y))) }, { load });
      const loader = await DataLoader.create(ds, { batchSize: 4, workers: 2, mode: 'streaming', dropLast: false, seed: 5 });
      try {
        assert.equal(loader.stats().workers, 2);
        for (let epoch = 0; epoch < 2; epoch++) {
          const batches = await within(HANG_MS, `epoch ${epoch}`, collect(loader.epoch(epoch)));
          const ids = batches.flatMap((b) => Array.from(b.sampleIds));
          assert.deepEqual(sorted(ids), range(n));
          for (const b of batches) {
            const bx = b.get('x').data as Float32Array;
            const by = b.get('y').data as Int32Array;
            b.sampleIds.forEach((id, r) => {
              assert.deepEqual(bx.subarray(r * 5, r * 5 + 5), x.subarray(id * 5, id * 5 + 5));
              assert.equal(by[r], y[id]);
            });
            b.release();
          }
        }
      } finally {
        await loader.close();
      }
    });
  }

  it('serves resident mode on the main thread with the same content', async () => {
    const n = 21;
    const x = content('int16', n * 2, 12);
    for (const load of ['memory', 'positioned'] as const) {
      const loader = await DataLoader.create(npySource([file(npyBytes('<i2', [n, 2], bytesOf(x)))], { load }), { batchSize: 5, mode: 'resident', dropLast: false, seed: 2 });
      assert.equal(loader.isResident, true);
      const batches = await collect(loader.epoch(0));
      assert.deepEqual(sorted(batches.flatMap((b) => Array.from(b.sampleIds))), range(n));
      for (const b of batches) {
        const bx = b.at(0).data as Int16Array;
        b.sampleIds.forEach((id, r) => assert.deepEqual([bx[2 * r], bx[2 * r + 1]], [x[2 * id], x[2 * id + 1]]));
      }
      await loader.close();
    }
  });

  describe('refuses with a typed error naming the file', () => {
    const data = bytesOf(content('float32', 6, 1));
    const refuses = (bytes: Uint8Array, code: string, message: RegExp) => {
      const path = file(bytes);
      for (const load of ['memory', 'positioned'] as const) {
        assert.throws(() => npySource(path, { load }), (e: Error & { code?: string }) => {
          assert.equal(e.name, 'LoaderError');
          assert.equal(e.code, code);
          assert.ok(e.message.includes(path), e.message);
          assert.match(e.message, message);
          return true;
        });
      }
    };

    it('Fortran order, with np.ascontiguousarray as the fix', () => refuses(npyBytes('<f4', [2, 3], data, { fortran: true }), 'ERR_BAD_FILE', /Fortran.*np\.ascontiguousarray/));
    it('object arrays', () => refuses(npyBytes('|O', [2], new Uint8Array(16)), 'ERR_BAD_FILE', /"\|O".*Object arrays/));
    it('structured dtypes', () => refuses(npyBytes('', [2], new Uint8Array(8), { dict: "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }" }), 'ERR_BAD_FILE', /structured dtype/));
    it('uint64, with the int64 fix', () => refuses(npyBytes('<u8', [3], new Uint8Array(24)), 'ERR_BAD_FILE', /astype\('<i8'\)/));
    it('a bad magic string, recognizing .npz archives', () => {
      refuses(Buffer.from('not an npy file at all'), 'ERR_BAD_FILE', /at byte 0: not an NPY file/);
      refuses(Buffer.from('PK\x03\x04 zip archive.....'), 'ERR_BAD_FILE', /npz/);
    });
    it('an unknown format version', () => {
      const b = Uint8Array.from(npyBytes('<f4', [2, 3], data));
      b[6] = 4;
      refuses(b, 'ERR_BAD_FILE', /at byte 6: NPY format version 4\.0/);
    });
    it('truncated data (the header promises more bytes than the file holds)', () => refuses(npyBytes('<f4', [2, 3], data.subarray(0, 20)), 'ERR_BAD_FILE', /needs 24 data bytes but the file holds 20.*truncated/));
    it('a header shape that does not match the data (trailing bytes)', () => refuses(npyBytes('<f4', [2, 2], data), 'ERR_BAD_FILE', /shape \(2, 2\) of <f4 needs 16 data bytes but the file holds 24/));
    it('a header length beyond the end of the file', () => {
      const b = Uint8Array.from(npyBytes('<f4', [2, 3], data));
      b[8] = 0xff;
      b[9] = 0xff;
      refuses(b.subarray(0, 100), 'ERR_BAD_FILE', /the NPY header needs 65535 bytes/);
    });
    it('a header dict with an unknown key, a missing key or junk after it', () => {
      refuses(npyBytes('', [], data, { dict: "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}" }), 'ERR_BAD_FILE', /unexpected key "extra"/);
      refuses(npyBytes('', [], data, { dict: "{'descr': '<f4', 'shape': (6,)}" }), 'ERR_BAD_FILE', /no "fortran_order" key/);
      refuses(npyBytes('', [], data, { dict: "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x" }), 'ERR_BAD_FILE', /after the header dict/);
      refuses(npyBytes('', [], data, { dict: "{'descr': '<f4', 'fortran_order': False, 'shape': (6)}" }), 'ERR_BAD_FILE', /not a tuple/);
      refuses(npyBytes('', [], data, { dict: "{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}" }), 'ERR_BAD_FILE', /shape\[0\] is -6/);
    });
    it('a 0-d array (no first dimension to count rows)', () => refuses(npyBytes('<f4', [], data.subarray(0, 4), { dict: "{'descr': '<f4', 'fortran_order': False, 'shape': (), }" }), 'ERR_INVALID_DATASET', /0-d array/));
    it('a missing file (ERR_FILE_ACCESS)', () => {
      const path = join(dir, 'missing.npy');
      assert.throws(() => npySource(path), { code: 'ERR_FILE_ACCESS', message: new RegExp(`${path}.*ENOENT`) });
    });
    it('columns whose row counts differ, naming both files', () => {
      const a = file(npyBytes('<f4', [6], data));
      const b = file(npyBytes('<f4', [3, 2], data));
      assert.throws(() => npySource({ a, b }), (e: Error & { code?: string }) => e.code === 'ERR_INVALID_DATASET' && e.message.includes(a) && e.message.includes(b) && /3 rows/.test(e.message));
    });
    it('a file that changed size after a positioned source opened it', () => {
      const path = file(npyBytes('<f4', [2, 3], data));
      const ds = npySource(path, { load: 'positioned' });
      appendFileSync(path, Buffer.alloc(4));
      assert.throws(() => ds.getBatch([0]), { code: 'ERR_BAD_FILE', message: /changed size/ });
    });
    it('bad options, naming the knob', () => {
      const path = file(npyBytes('<f4', [2, 3], data));
      assert.throws(() => npySource(path, { load: 'mmap' as never }), { code: 'ERR_INVALID_OPTION', message: /`load`/ });
      assert.throws(() => npySource(path, { inMemoryBytes: -1 }), { code: 'ERR_INVALID_OPTION', message: /`inMemoryBytes`/ });
      assert.throws(() => npySource([]), { code: 'ERR_INVALID_DATASET' });
      assert.throws(() => npySource(path).getBatch([2]), { code: 'ERR_INVALID_DATASET', message: /out of range/ });
    });
  });

  it('survives 2500 mutants: every one read in both modes or refused with ERR_BAD_FILE', { timeout: TEST_MS }, async () => {
    const valid = npyBytes('<f4', [6, 5], bytesOf(content('float32', 30, 13)));
    const report = await fuzz({ valid, ext: '.npy', module: new URL('./npy-targets.ts', import.meta.url).href, target: 'readBothModes', cases: 2500, seed: 7, allowCodes: ['ERR_INVALID_DATASET'] });
    assertFuzzClean(report);
    assert.ok(report.ok > 0 && (report.refused.ERR_BAD_FILE ?? 0) > 0, JSON.stringify(report));
  });
});
