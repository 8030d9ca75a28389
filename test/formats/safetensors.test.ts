// sources.safetensors: files written here by the published layout (u64 header size, JSON header,
// byte buffer) read back in both load modes and through the loader with reader workers; every
// malformed header refused with a typed error naming the file; then a fuzz run over mutants.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ArraySource } from '../../src/dataset/arrays-source.js';
import { FileColumnsSource } from '../../src/dataset/formats/columns/columns-file.js';
import { openSafetensors, safetensorsSource } from '../../src/dataset/formats/columns/safetensors.js';
import { kSourceSpec } from '../../src/dataset/source-spec.js';
import { DataLoader, type Tensor } from '../../src/index.js';
import { HANG_MS, TEST_MS, collect, range, sorted, within } from '../fixtures.js';
import { assertFuzzClean, fuzz } from './fuzz.js';
import { compareAll } from './npy-targets.js';

const dir = mkdtempSync(join(tmpdir(), 'stoker-safetensors-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let fileNo = 0;

interface Entry {
  readonly name: string;
  readonly dtype: string;
  readonly shape: readonly number[];
  readonly data: Uint8Array;
}

/**
 * A safetensors file by the published layout: tensors laid out in the given order, the JSON header
 * padded with spaces to a multiple of 8 (as the reference writer does). `edit` may rewrite the
 * header object before it is serialized; `header` replaces its text outright.
 */
function stBytes(entries: readonly Entry[], opts: { metadata?: Record<string, unknown>; edit?: (h: Record<string, any>) => void; header?: string; trailing?: Uint8Array } = {}): Uint8Array {
  const h: Record<string, any> = {};
  if (opts.metadata) h.__metadata__ = opts.metadata;
  let at = 0;
  for (const e of entries) {
    h[e.name] = { dtype: e.dtype, shape: e.shape, data_offsets: [at, at + e.data.length] };
    at += e.data.length;
  }
  opts.edit?.(h);
  let text = opts.header ?? JSON.stringify(h);
  text += ' '.repeat((8 - (Buffer.byteLength(text) % 8)) % 8);
  const size = Buffer.alloc(8);
  size.writeBigUInt64LE(BigInt(Buffer.byteLength(text)));
  return Buffer.concat([size, Buffer.from(text), ...entries.map((e) => e.data), opts.trailing ?? new Uint8Array(0)]);
}

function file(bytes: Uint8Array): string {
  const path = join(dir, `f${fileNo++}.safetensors`);
  writeFileSync(path, bytes);
  return path;
}

const bytesOf = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
const v = (k: number, seed: number) => (Math.imul(k + 1, 2654435761) + seed * 40503) >>> 0;

/** Every dtype Stoker reads: [file dtype, Stoker dtype, typed content for `count` elements]. */
function allDtypes(count: number): [string, string, ArrayBufferView][] {
  const f = <T>(make: (k: number) => T) => Array.from({ length: count }, (_, k) => make(k));
  return [
    ['F64', 'float64', Float64Array.from(f((k) => v(k, 1) / 7 - 1e8))],
    ['F32', 'float32', Float32Array.from(f((k) => v(k, 2) / 1000 - 2e6))],
    ['F16', 'float16', Uint16Array.from(f((k) => v(k, 3)))],
    ['BF16', 'bfloat16', Uint16Array.from(f((k) => v(k, 4)))],
    ['I64', 'int64', BigInt64Array.from(f((k) => BigInt.asIntN(64, BigInt(v(k, 5)) * 0x1_0000_0003n - 5n)))],
    ['I32', 'int32', Int32Array.from(f((k) => v(k, 6)))],
    ['I16', 'int16', Int16Array.from(f((k) => v(k, 7)))],
    ['I8', 'int8', Int8Array.from(f((k) => v(k, 8)))],
    ['U8', 'uint8', Uint8Array.from(f((k) => v(k, 9)))],
    ['BOOL', 'uint8', Uint8Array.from(f((k) => v(k, 10) & 1))],
    ['U16', 'uint16', Uint16Array.from(f((k) => v(k, 11)))],
    ['U32', 'uint32', Uint32Array.from(f((k) => v(k, 12)))],
  ];
}

function rowsOf(data: ArrayBufferView, rowBytes: number, ids: readonly number[]): Buffer {
  return Buffer.concat(ids.map((i) => bytesOf(data).subarray(i * rowBytes, (i + 1) * rowBytes)));
}

describe('sources.safetensors', () => {
  it('round-trips every supported dtype as named columns, in both load modes', () => {
    const types = allDtypes(4 * 3);
    const path = file(stBytes(types.map(([dtype, , data]) => ({ name: `t_${dtype}`, dtype, shape: [4, 3], data: bytesOf(data) })), { metadata: { format: 'pt' } }));
    for (const load of ['memory', 'positioned'] as const) {
      const ds = safetensorsSource(path, { load });
      assert.equal(ds instanceof ArraySource, load === 'memory');
      assert.equal(ds.length, 4);
      const batch = ds.getBatch([3, 1]) as Record<string, Tensor>;
      for (const [dtype, stoker, data] of types) {
        const t = batch[`t_${dtype}`]!;
        assert.equal(t.dtype, stoker, dtype);
        assert.deepEqual(t.shape, [2, 3]);
        assert.deepEqual(Buffer.from(t.bytes()), rowsOf(data, data.byteLength / 4, [3, 1]), `${dtype} ${load}`);
      }
    }
  });

  it('reads BOOL bytes other than 0 and 1 (arr.view(bool)) as 1, in both load modes', () => {
    const path = file(stBytes([{ name: 'mask', dtype: 'BOOL', shape: [3, 2], data: Uint8Array.of(0, 1, 255, 2, 128, 0) }]));
    for (const load of ['memory', 'positioned'] as const) {
      const t = (safetensorsSource(path, { load }).getBatch([0, 1, 2]) as Record<string, Tensor>).mask!;
      assert.deepEqual([...t.bytes()], [0, 1, 1, 1, 1, 0], load);
    }
  });

  it('orders columns by tensor name by default, and as `tensors` lists them when given', () => {
    const a = Float32Array.of(1, 2, 3);
    const b = Int32Array.of(4, 5, 6);
    const c = Uint8Array.of(7, 8, 9);
    const path = file(stBytes([{ name: 'c', dtype: 'U8', shape: [3], data: c }, { name: 'a', dtype: 'F32', shape: [3], data: bytesOf(a) }, { name: 'b', dtype: 'I32', shape: [3], data: bytesOf(b) }]));
    for (const load of ['memory', 'positioned'] as const) {
      assert.deepEqual(Object.keys(safetensorsSource(path, { load }).getBatch([0])), ['a', 'b', 'c']);
      const picked = safetensorsSource(path, { load, tensors: ['c', 'a'] }).getBatch([2, 0]) as Record<string, Tensor>;
      assert.deepEqual(Object.keys(picked), ['c', 'a']);
      assert.deepEqual(picked.c!.data, Uint8Array.of(9, 7));
      assert.deepEqual(picked.a!.data, Float32Array.of(3, 1));
    }
  });

  it('gives identical batches in memory and positioned modes, for runs, scattered and repeated ids', () => {
    const x = Float32Array.from({ length: 40 * 6 }, (_, k) => v(k, 1) / 100);
    const y = BigInt64Array.from({ length: 40 }, (_, k) => BigInt(v(k, 2)) << 20n);
    const path = file(stBytes([{ name: 'x', dtype: 'F32', shape: [40, 2, 3], data: bytesOf(x) }, { name: 'y', dtype: 'I64', shape: [40], data: bytesOf(y) }]));
    const memory = safetensorsSource(path, { load: 'memory' });
    const positioned = safetensorsSource(path, { load: 'positioned' });
    compareAll(memory, positioned);
    const ids = [0, 1, 2, 39, 38, 7, 7, 20, 21];
    assert.deepEqual(positioned.getBatch(ids), memory.getBatch(ids));
    assert.deepEqual((positioned.getBatch([5]) as Record<string, Tensor>).x!.shape, [1, 2, 3]);
  });

  it("load: 'auto' keeps the selected tensors under inMemoryBytes in memory, and workers reopen the rest positioned", () => {
    const path = file(stBytes([{ name: 'big', dtype: 'F32', shape: [10, 10], data: new Uint8Array(400) }, { name: 'small', dtype: 'U8', shape: [10], data: new Uint8Array(10) }]));
    assert.ok(safetensorsSource(path, { inMemoryBytes: 410 }) instanceof ArraySource);
    assert.ok(safetensorsSource(path, { inMemoryBytes: 409 }) instanceof FileColumnsSource);
    assert.ok(safetensorsSource(path, { inMemoryBytes: 10, tensors: ['small'] }) instanceof ArraySource);
    const ds = safetensorsSource(path, { inMemoryBytes: 0, tensors: ['small', 'big'] });
    assert.ok(ds instanceof FileColumnsSource);
    const spec = ds[kSourceSpec]();
    const again = openSafetensors(spec.options as Parameters<typeof openSafetensors>[0]);
    assert.ok(again instanceof FileColumnsSource);
    assert.deepEqual(Object.keys(again.getBatch([0])), ['small', 'big']);
  });

  for (const load of ['memory', 'positioned'] as const) {
    it(`delivers every sample exactly once per epoch with correct content through 2 reader workers (${load})`, { timeout: TEST_MS }, async () => {
      const n = 43;
      const image = Uint8Array.from({ length: n * 12 }, (_, k) => v(k, 3));
      const label = Int32Array.from(range(n), (i) => 1000 - i);
      const path = file(stBytes([{ name: 'label', dtype: 'I32', shape: [n], data: bytesOf(label) }, { name: 'image', dtype: 'U8', shape: [n, 3, 4], data: image }]));
      const loader = await DataLoader.create(safetensorsSource(path, { load }), { batchSize: 5, workers: 2, mode: 'streaming', dropLast: false, seed: 9 });
      try {
        assert.equal(loader.stats().workers, 2);
        for (let epoch = 0; epoch < 2; epoch++) {
          const batches = await within(HANG_MS, `epoch ${epoch}`, collect(loader.epoch(epoch)));
          assert.deepEqual(sorted(batches.flatMap((b) => Array.from(b.sampleIds))), range(n));
          for (const b of batches) {
            const im = b.get('image');
            assert.deepEqual(im.shape, [b.rows, 3, 4]);
            b.sampleIds.forEach((id, r) => {
              assert.deepEqual((im.data as Uint8Array).subarray(r * 12, r * 12 + 12), image.subarray(id * 12, id * 12 + 12));
              assert.equal((b.get('label').data as Int32Array)[r], label[id]);
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
    const n = 17;
    const x = Float64Array.from({ length: n * 2 }, (_, k) => k / 3);
    const path = file(stBytes([{ name: 'x', dtype: 'F64', shape: [n, 2], data: bytesOf(x) }]));
    for (const load of ['memory', 'positioned'] as const) {
      const loader = await DataLoader.create(safetensorsSource(path, { load }), { batchSize: 4, mode: 'resident', dropLast: false, seed: 1 });
      assert.equal(loader.isResident, true);
      const batches = await collect(loader.epoch(0));
      assert.deepEqual(sorted(batches.flatMap((b) => Array.from(b.sampleIds))), range(n));
      for (const b of batches) {
        const bx = b.get('x').data as Float64Array;
        b.sampleIds.forEach((id, r) => assert.deepEqual([bx[2 * r], bx[2 * r + 1]], [x[2 * id], x[2 * id + 1]]));
      }
      await loader.close();
    }
  });

  describe('refuses with a typed error naming the file', () => {
    const x: Entry = { name: 'x', dtype: 'F32', shape: [2, 2], data: bytesOf(Float32Array.of(1, 2, 3, 4)) };
    const y: Entry = { name: 'y', dtype: 'I64', shape: [2], data: bytesOf(BigInt64Array.of(5n, 6n)) };
    const refuses = (bytes: Uint8Array, code: string, message: RegExp, options: { tensors?: string[] } = {}) => {
      const path = file(bytes);
      for (const load of ['memory', 'positioned'] as const) {
        assert.throws(() => safetensorsSource(path, { ...options, load }), (e: Error & { code?: string }) => {
          assert.equal(e.name, 'LoaderError');
          assert.equal(e.code, code);
          assert.ok(e.message.includes(path), e.message);
          assert.match(e.message, message);
          return true;
        });
      }
    };

    it('a header that is not JSON, at byte 8', () => {
      refuses(stBytes([x], { header: '{"x": {"dtype": "F32",' }), 'ERR_BAD_FILE', /at byte 8: the header is not a valid JSON object/);
      refuses(stBytes([x], { header: '[1, 2]' }), 'ERR_BAD_FILE', /at byte 8: the header is not a valid JSON object/);
      refuses(stBytes([], { header: '{"__metadata__": {"a": 1}}' }), 'ERR_BAD_FILE', /__metadata__ must be an object of string values/);
    });
    it('a huge header size (over the 100 MB limit) and one beyond the end of the file', () => {
      const huge = Uint8Array.from(stBytes([x]));
      new DataView(huge.buffer).setBigUint64(0, 100_000_001n, true);
      refuses(huge, 'ERR_BAD_FILE', /at byte 0: the header size is 100000001 bytes, more than the format's limit/);
      new DataView(huge.buffer).setBigUint64(0, 2n ** 64n - 1n, true);
      refuses(huge, 'ERR_BAD_FILE', /header size is 18446744073709551615/);
      new DataView(huge.buffer).setBigUint64(0, BigInt(huge.length), true);
      refuses(huge, 'ERR_BAD_FILE', /only \d+ follow the size field/);
      refuses(Uint8Array.of(1, 2, 3), 'ERR_BAD_FILE', /too few for the 8-byte header size/);
    });
    it('overlapping offsets, naming both tensors', () => {
      // y claims bytes 8..24 of a 32-byte buffer; z fills 24..32, x 0..16: x and y overlap.
      const z: Entry = { name: 'z', dtype: 'U8', shape: [8], data: new Uint8Array(8) };
      refuses(stBytes([x, y, z], { edit: (h) => { h.y.data_offsets = [8, 24]; h.z.data_offsets = [24, 32]; } }), 'ERR_BAD_FILE', /tensors "x" and "y" overlap/);
    });
    it('offsets beyond the buffer', () => refuses(stBytes([x, y], { edit: (h) => (h.y.data_offsets = [16, 40]) }), 'ERR_BAD_FILE', /"y" ends at buffer byte 40 but the buffer holds 32/));
    it('a hole in the buffer and bytes after the last tensor', () => {
      refuses(stBytes([x], { edit: (h) => (h.x.data_offsets = [4, 20]), trailing: new Uint8Array(4) }), 'ERR_BAD_FILE', /buffer bytes \[0, 4\) belong to no tensor/);
      refuses(stBytes([x], { trailing: new Uint8Array(3) }), 'ERR_BAD_FILE', /3 bytes after the last tensor/);
    });
    it('offsets that disagree with shape × item size', () => refuses(stBytes([x], { edit: (h) => (h.x.shape = [2, 3]) }), 'ERR_BAD_FILE', /shape \[2,3\] of F32 needs 24 bytes but data_offsets span 16/));
    it('bad shapes, offsets and dtypes in an entry', () => {
      refuses(stBytes([x], { edit: (h) => (h.x.shape = [-2, -2]) }), 'ERR_BAD_FILE', /shape must be an array of integers ≥ 0/);
      refuses(stBytes([x], { edit: (h) => (h.x.shape = [2.5, 2]) }), 'ERR_BAD_FILE', /shape must be an array of integers ≥ 0/);
      refuses(stBytes([x], { edit: (h) => (h.x.data_offsets = [16, 0]) }), 'ERR_BAD_FILE', /data_offsets must be \[begin, end\]/);
      refuses(stBytes([x], { edit: (h) => (h.x.dtype = 'F128') }), 'ERR_BAD_FILE', /unknown dtype "F128"/);
    });
    it('a selected tensor of a dtype Stoker has no storage for (and reads the file without it)', () => {
      const u: Entry = { name: 'u', dtype: 'U64', shape: [2], data: new Uint8Array(16) };
      refuses(stBytes([x, u]), 'ERR_INVALID_DATASET', /"u" has dtype U64.*tensors: \[\.\.\.\]/);
      assert.deepEqual(Object.keys(safetensorsSource(file(stBytes([x, u])), { tensors: ['x'] }).getBatch([0])), ['x']);
    });
    it('tensors whose first dimensions differ, suggesting a `tensors` selection', () => {
      const w: Entry = { name: 'w', dtype: 'U8', shape: [3], data: new Uint8Array(3) };
      refuses(stBytes([x, y, w]), 'ERR_INVALID_DATASET', /tensors "w" \(first dimension 3\) and "x" \(first dimension 2\) differ.*tensors: \["x","y"\]/);
    });
    it('a scalar tensor and a file with no tensors', () => {
      refuses(stBytes([x, { name: 's', dtype: 'F32', shape: [], data: new Uint8Array(4) }]), 'ERR_INVALID_DATASET', /"s" is a scalar.*tensors: \["x"\]/);
      refuses(stBytes([], { metadata: { a: 'b' } }), 'ERR_INVALID_DATASET', /no tensors/);
    });
    it('a missing file (ERR_FILE_ACCESS) and bad options naming the knob', () => {
      const path = join(dir, 'missing.safetensors');
      assert.throws(() => safetensorsSource(path), { code: 'ERR_FILE_ACCESS', message: new RegExp(`${path}.*ENOENT`) });
      const ok = file(stBytes([x, y]));
      assert.throws(() => safetensorsSource(ok, { tensors: ['x', 'nope'] }), { code: 'ERR_INVALID_OPTION', message: /`tensors`.*Not found: "nope".*"x", "y"/ });
      assert.throws(() => safetensorsSource(ok, { tensors: [] }), { code: 'ERR_INVALID_OPTION', message: /`tensors`/ });
      assert.throws(() => safetensorsSource(ok, { tensors: ['x', 'x'] }), { code: 'ERR_INVALID_OPTION', message: /without repeats/ });
      assert.throws(() => safetensorsSource(ok, { load: 'lazy' as never }), { code: 'ERR_INVALID_OPTION', message: /`load`/ });
    });
  });

  it('survives 2500 mutants: every one read in both modes or refused with a typed error naming it', { timeout: TEST_MS }, async () => {
    const valid = stBytes([
      { name: 'image', dtype: 'U8', shape: [4, 2, 3], data: Uint8Array.from({ length: 24 }, (_, k) => k * 9) },
      { name: 'label', dtype: 'I64', shape: [4], data: bytesOf(BigInt64Array.of(3n, 1n, 4n, 1n)) },
      { name: 'weight', dtype: 'F16', shape: [4, 1], data: bytesOf(Uint16Array.of(0x3c00, 0x4000, 0x4200, 0x4400)) },
    ], { metadata: { format: 'pt' } });
    const report = await fuzz({ valid, ext: '.safetensors', module: new URL('./safetensors-targets.ts', import.meta.url).href, target: 'readBothModes', cases: 2500, seed: 11, allowCodes: ['ERR_INVALID_DATASET'] });
    assertFuzzClean(report);
    assert.ok(report.ok > 0 && (report.refused.ERR_BAD_FILE ?? 0) > 0, JSON.stringify(report));
  });
});
