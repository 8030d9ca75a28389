// WebDataset tar shards: shards written here by node-tar's own writer (and GNU tar when present),
// indexed, read back byte for byte, cached and invalidated, read through reader workers, refused
// when damaged, and fuzzed.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { create } from 'tar';
import { DataLoader, type LoaderError } from '../../src/index.js';
import { decodeImage } from '../../src/image/image-decode.js';
import { besideIndexPath, cacheIndexPath, indexBuilds, stampOf, tempIndexPath } from '../../src/dataset/formats/tar/tar-index.js';
import { type TarShardsOptions, type TarShardsSource, braceExpand, tarShardsSource } from '../../src/dataset/formats/tar/tar-shards.js';
import type { Tensor } from '../../src/tensor/tensor.js';
import { CHILD_MS, HANG_MS, SUITE_MS, collect, range, sorted, within } from '../fixtures.js';
import { assertFuzzClean, fuzz } from './fuzz.js';
import { referenceEntries } from './tar-targets.js';
import { alive, decodeChildren, gone } from './processes.js';

const TARGETS = new URL('./tar-targets.ts', import.meta.url).href;
let root: string;
/** This file's XDG_CACHE_HOME: the index cache goes here, never to the user's own cache. */
let cacheHome: string;
const savedCacheHome = process.env.XDG_CACHE_HOME;

before(() => {
  root = mkdtempSync(join(tmpdir(), 'stoker-tar-'));
  cacheHome = mkdtempSync(join(tmpdir(), 'stoker-tar-cache-'));
  process.env.XDG_CACHE_HOME = cacheHome;
});
after(() => {
  if (savedCacheHome === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = savedCacheHome;
  chmodTree(root);
  rmSync(root, { recursive: true, force: true });
  rmSync(cacheHome, { recursive: true, force: true });
});

function chmodTree(dir: string) {
  try {
    chmodSync(dir, 0o755);
    spawnSync('chmod', ['-R', 'u+rwX', dir]);
  } catch {
    // already gone
  }
}

type Files = Record<string, string | Uint8Array>;

/** The bytes of field `bin` of sample `id`: 16 bytes that name the sample. */
function binOf(id: number): Uint8Array {
  return Uint8Array.from({ length: 16 }, (_, j) => (id * 31 + j * 7) & 255);
}

/** Samples `from..from+n-1` as `{ key: files }`, cls = id and bin = binOf(id); `long` gives one a path over 100 characters. */
function samples(from: number, n: number, opts: { long?: number; prefix?: string } = {}): [string, Files][] {
  return range(n).map((k) => {
    const id = from + k;
    const name = String(id).padStart(6, '0');
    const key = id === opts.long ? `deep/${'d'.repeat(120)}/${'x'.repeat(110)}-${name}` : `${opts.prefix ?? ''}${name}`;
    return [key, { cls: String(id), bin: binOf(id) }];
  });
}

/**
 * Write the files of `entries` under a fresh source dir and pack them, in that order, into `shard`
 * with node-tar's `create` (pax headers for long paths). Returns the shard path.
 */
function writeShard(shard: string, entries: [string, Files][], opts: { gzip?: boolean } = {}): string {
  return pack(shard, entries.flatMap(([key, files]) => Object.entries(files).map(([field, content]): [string, string | Uint8Array] => [`${key}.${field}`, content])), opts);
}

/** Write `files` (relative path, content) under a fresh source dir and pack them in that order with node-tar. */
function pack(shard: string, files: [string, string | Uint8Array][], opts: { gzip?: boolean } = {}): string {
  const src = mkdtempSync(join(root, 'src-'));
  for (const [rel, content] of files) {
    mkdirSync(dirname(join(src, rel)), { recursive: true });
    writeFileSync(join(src, rel), content);
  }
  mkdirSync(dirname(shard), { recursive: true });
  create({ file: shard, cwd: src, sync: true, portable: true, gzip: opts.gzip ?? false }, files.map(([rel]) => rel));
  return shard;
}

/**
 * A tar archive written byte by byte (ustar headers, or GNU ././@LongLink entries for `gnuLong`),
 * so that names can hold any bytes: node-tar's writer only writes strings.
 */
function rawTar(entries: readonly [Uint8Array, string][], opts: { gnuLong?: boolean } = {}): Uint8Array {
  const blocks: Uint8Array[] = [];
  const header = (name: Uint8Array, size: number, type: string, gnu: boolean) => {
    const h = new Uint8Array(512);
    h.set(name.subarray(0, 100), 0);
    const octal = (v: number, at: number, len: number) => h.set(Buffer.from(`${v.toString(8).padStart(len - 1, '0')}\0`, 'latin1'), at);
    octal(0o644, 100, 8);
    octal(0, 108, 8);
    octal(0, 116, 8);
    octal(size, 124, 12);
    octal(0, 136, 12);
    h.fill(0x20, 148, 156);
    h[156] = type.charCodeAt(0);
    h.set(Buffer.from(gnu ? 'ustar  \0' : 'ustar\u000000', 'latin1'), 257);
    let sum = 0;
    for (const b of h) sum += b;
    h.set(Buffer.from(`${sum.toString(8).padStart(6, '0')}\0 `, 'latin1'), 148);
    return h;
  };
  const body = (data: Uint8Array) => {
    const out = new Uint8Array(Math.ceil(data.length / 512) * 512);
    out.set(data);
    return out;
  };
  for (const [name, content] of entries) {
    const data = Buffer.from(content);
    if (opts.gnuLong) {
      const longName = Buffer.concat([name, Buffer.of(0)]);
      blocks.push(header(Buffer.from('././@LongLink'), longName.length, 'L', true), body(longName));
    }
    blocks.push(header(name, data.length, '0', opts.gnuLong === true), body(data));
  }
  blocks.push(new Uint8Array(1024));
  return Buffer.concat(blocks);
}

function dir(name: string): string {
  const d = join(root, name);
  mkdirSync(d, { recursive: true });
  return d;
}

const RAW: TarShardsOptions = { decoders: { bin: 'raw' }, index: 'off' };

function read(ds: TarShardsSource, i: number): Record<string, Tensor> {
  const s = ds.get(i);
  assert.ok(!(s instanceof Promise), 'scalar and raw fields read synchronously');
  return s;
}

function checkSample(ds: TarShardsSource, i: number, id: number) {
  const s = read(ds, i);
  assert.deepEqual(Object.keys(s), ['cls', 'bin']);
  assert.equal(s.cls!.dtype, 'int32');
  assert.deepEqual(s.cls!.shape, []);
  assert.equal((s.cls!.data as Int32Array)[0], id);
  assert.equal(s.bin!.dtype, 'uint8');
  assert.deepEqual(s.bin!.bytes(), binOf(id));
}

/** An .npy file (format 1.0) by the published layout; `pad` shifts the data start by extra header spaces. */
function npyBytes(descr: string, shape: readonly number[], data: Uint8Array): Uint8Array {
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  const total = Math.ceil((10 + header.length + 1) / 64) * 64;
  header = header.padEnd(total - 11, ' ') + '\n';
  const out = new Uint8Array(total + data.length);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, header.length & 0xff, header.length >> 8]);
  out.set(new TextEncoder().encode(header), 10);
  out.set(data, total);
  return out;
}

describe('tar shards: .npy fields', () => {
  it("decodes .npy fields by default (dtype and shape from the header, big-endian swapped), and refuses a corrupt one naming shard and sample", async () => {
    const entries: [string, Files][] = range(6).map((id) => {
      const v = Float32Array.from({ length: 6 }, (_, j) => id + j / 8);
      const be = new Uint8Array(12);
      const view = new DataView(be.buffer);
      for (let j = 0; j < 3; j++) view.setInt32(j * 4, id * 1000 + j, false);
      return [String(id).padStart(4, '0'), { cls: String(id), npy: npyBytes('<f4', [2, 3], new Uint8Array(v.buffer)), 'be.npy': npyBytes('>i4', [3], be) }];
    });
    const shard = writeShard(join(dir('npy'), 'a.tar'), entries);
    const ds = await tarShardsSource(shard, { decoders: { 'be.npy': 'npy' }, index: 'off' });
    for (let id = 0; id < 6; id++) {
      const s = read(ds, id);
      assert.equal(s.npy!.dtype, 'float32');
      assert.deepEqual(s.npy!.shape, [2, 3]);
      assert.deepEqual(Array.from(s.npy!.data as Float32Array), Array.from({ length: 6 }, (_, j) => id + j / 8));
      assert.equal(s['be.npy']!.dtype, 'int32');
      assert.deepEqual(Array.from(s['be.npy']!.data as Int32Array), [id * 1000, id * 1000 + 1, id * 1000 + 2]);
    }
    const loader = await DataLoader.create(ds, { batchSize: 2, mode: 'streaming', workers: 2, names: ['cls', 'npy', 'be'] });
    const seen: number[] = [];
    for await (const b of loader.epoch(0)) {
      const cls = b.get('cls').data as Int32Array;
      const x = b.get('npy').data as Float32Array;
      cls.forEach((id, r) => assert.equal(x[r * 6 + 5], id + 5 / 8));
      seen.push(...cls);
    }
    assert.deepEqual(sorted(seen), range(6));
    await loader.close();
    await ds.close();

    const bad = writeShard(join(dir('npy-bad'), 'b.tar'), [['0000', { cls: '0', npy: npyBytes('<f4', [2, 3], new Uint8Array(20)) }]]);
    const badDs = await tarShardsSource(bad, { index: 'off' });
    assert.throws(() => badDs.get(0), (e: unknown) => (e as LoaderError).code === 'ERR_BAD_FILE' && /b\.tar.*0000.*needs 24 data bytes but the file holds 20/.test((e as Error).message));
    await badDs.close();
  });
});

describe('tar shards: index and random access', () => {
  it('reads every sample back byte for byte, including a key over 100 characters (pax header) and one in the ustar prefix', async () => {
    const entries = [...samples(0, 3), ...samples(3, 1, { long: 3 }), [`a/${'b'.repeat(120)}/000004`, { cls: '4', bin: binOf(4) }] as [string, Files], ...samples(5, 2)];
    const shard = writeShard(join(dir('basic'), 'one.tar'), entries);
    const ds = await tarShardsSource(shard, RAW);
    assert.equal(ds.length, 7);
    assert.deepEqual(ds.fields, ['cls', 'bin']);
    assert.deepEqual(range(7).map((i) => ds.key(i)), entries.map(([k]) => k));
    assert.ok(ds.key(3).length > 200, 'the long key survived');
    for (const i of [6, 0, 3, 4, 2, 5, 1]) checkSample(ds, i, i);
    // node-tar's own Parser sees the same entries with the same bytes.
    const ref = referenceEntries(shard);
    assert.deepEqual(ref.warnings, []);
    for (let i = 0; i < 7; i++) {
      assert.deepEqual(new Uint8Array(ref.files.get(`${ds.key(i)}.bin`)!), read(ds, i).bin!.bytes());
    }
    ds.close();
  });

  it('numbers samples across shards in shard order: a brace range, a list and a * glob name the same shards', async () => {
    const d = dir('multi');
    const counts = [4, 3, 5];
    let next = 0;
    const shards = counts.map((n, k) => {
      const shard = writeShard(join(d, `train-${String(k).padStart(6, '0')}.tar`), samples(next, n));
      next += n;
      return shard;
    });
    writeFileSync(join(d, 'notes.txt'), 'not a shard');
    const byRange = await tarShardsSource(join(d, 'train-{000000..000002}.tar'), RAW);
    const byList = await tarShardsSource(shards, RAW);
    const byGlob = await tarShardsSource(join(d, 'train-*.tar'), RAW);
    for (const ds of [byRange, byList, byGlob]) {
      assert.deepEqual(ds.shards, shards);
      assert.equal(ds.length, 12);
      for (let i = 0; i < 12; i++) checkSample(ds, i, i);
      assert.equal(ds.shardOf(3), shards[0]);
      assert.equal(ds.shardOf(4), shards[1]);
      assert.equal(ds.shardOf(11), shards[2]);
      assert.deepEqual(Array.from(ds.partStarts()), [0, 4, 7], 'each shard\'s first sample: the block shuffle\'s blocks');
      ds.close();
    }
    // A list is used in the order given.
    const reversed = await tarShardsSource([...shards].reverse(), RAW);
    assert.deepEqual(range(12).map((i) => (read(reversed, i).cls!.data as Int32Array)[0]), [7, 8, 9, 10, 11, 4, 5, 6, 0, 1, 2, 3]);
  });

  it("a block shuffle's blocks are the shards: shard-only delivers each shard whole, in its own order", async () => {
    const d = dir('blocks');
    const counts = [4, 3, 5, 2];
    let next = 0;
    const shards = counts.map((n, k) => {
      const shard = writeShard(join(d, `train-${k}.tar`), samples(next, n));
      next += n;
      return shard;
    });
    const ds = await tarShardsSource(shards, RAW);
    const loader = await DataLoader.create(ds, { batchSize: 1, dropLast: false, shuffle: { within: false }, seed: 3, workers: 0 });
    const got: number[] = [];
    for await (const b of loader.epoch(0)) got.push(...(b.get('cls').data as Int32Array));
    await loader.close();
    const runs: number[][] = [];
    for (let i = 0; i < got.length; ) {
      const k = [0, 4, 7, 12].findLastIndex((s) => s <= got[i]!);
      runs.push(got.slice(i, i + counts[k]!));
      i += counts[k]!;
    }
    assert.deepEqual(sorted(got), range(14));
    for (const run of runs) assert.deepEqual(run, range(run.length).map((j) => run[0]! + j), `shard whole and in order: ${run}`);
    ds.close();
  });

  it('brace expansion follows bash and WebDataset: zero padding, steps, alternatives, nesting, literal braces', () => {
    assert.deepEqual(braceExpand('s-{000..003}.tar'), ['s-000.tar', 's-001.tar', 's-002.tar', 's-003.tar']);
    assert.deepEqual(braceExpand('s-{8..11}'), ['s-8', 's-9', 's-10', 's-11']);
    assert.deepEqual(braceExpand('s-{0..10..5}'), ['s-0', 's-5', 's-10']);
    assert.deepEqual(braceExpand('s-{3..1}'), ['s-3', 's-2', 's-1']);
    assert.deepEqual(braceExpand('{train,val}-{0..1}'), ['train-0', 'train-1', 'val-0', 'val-1']);
    assert.deepEqual(braceExpand('{a,b{1..2}}.tar'), ['a.tar', 'b1.tar', 'b2.tar']);
    assert.deepEqual(braceExpand('x{y}.tar'), ['x{y}.tar']);
    assert.throws(() => braceExpand('{0..99999999}'), { code: 'ERR_INVALID_OPTION' });
  });

  it('skips directory entries and accepts empty shards among others; all-empty shards are an empty dataset', async () => {
    const d = dir('dirs');
    const src = mkdtempSync(join(root, 'src-'));
    mkdirSync(join(src, 'part'), { recursive: true });
    writeFileSync(join(src, 'part', '000000.cls'), '7');
    writeFileSync(join(src, 'part', '000000.bin'), binOf(7));
    create({ file: join(d, 'withdir.tar'), cwd: src, sync: true, portable: true }, ['part']); // a directory entry, then its files
    mkdirSync(join(src, 'empty'));
    create({ file: join(d, 'empty.tar'), cwd: src, sync: true, portable: true }, ['empty']); // only a directory entry
    const ds = await tarShardsSource([join(d, 'empty.tar'), join(d, 'withdir.tar')], { ...RAW, fields: ['cls', 'bin'] });
    assert.equal(ds.length, 1);
    assert.equal(ds.key(0), 'part/000000');
    checkSample(ds, 0, 7);
    await assert.rejects(tarShardsSource(join(d, 'empty.tar'), RAW), { code: 'ERR_EMPTY_DATASET', message: /empty\.tar/ });
  });

  it('reads GNU-format shards (GNU long-name entries) written by GNU tar', { skip: !hasGnuTar() && 'GNU tar is not installed' }, async () => {
    const src = mkdtempSync(join(root, 'src-'));
    const key = `${'g'.repeat(150)}/${'h'.repeat(120)}`;
    mkdirSync(join(src, dirname(key)), { recursive: true });
    writeFileSync(join(src, `${key}.cls`), '12\n');
    writeFileSync(join(src, `${key}.bin`), binOf(12));
    writeFileSync(join(src, 'short.cls'), ' 13 ');
    writeFileSync(join(src, 'short.bin'), binOf(13));
    const shard = join(dir('gnu'), 'gnu.tar');
    const r = spawnSync('tar', ['--format=gnu', '-cf', shard, '-C', src, `${key}.cls`, `${key}.bin`, 'short.cls', 'short.bin']);
    assert.equal(r.status, 0, r.stderr.toString());
    assert.match(readFileSync(shard).toString('latin1'), /@LongLink/, 'GNU tar wrote long-name entries');
    const ds = await tarShardsSource(shard, RAW);
    assert.deepEqual([ds.key(0), ds.key(1)], [key, 'short']);
    checkSample(ds, 0, 12);
    checkSample(ds, 1, 13);
  });

  it('decodes images, floats and JSON numbers; upper-case extensions are lower-cased fields', async () => {
    const pixels = (id: number) => Uint8Array.from({ length: 6 * 5 * 3 }, (_, j) => (id * 40 + j * 3) & 255);
    const pngs = await Promise.all(range(3).map((id) => sharp(pixels(id), { raw: { width: 5, height: 6, channels: 3 } }).png().toBuffer()));
    const entries: [string, Files][] = range(3).map((id) => [`s${id}`, { PNG: pngs[id]!, score: `${id}.5`, 'meta.json': `${id * 2}e0`, cls: `${id}` }]);
    const shard = writeShard(join(dir('img'), 'img.tar'), entries);
    const ds = await tarShardsSource(shard, { index: 'off', image: { size: [6, 5] }, decoders: { score: 'float', 'meta.json': 'json-number' } });
    assert.deepEqual(ds.fields, ['png', 'score', 'meta.json', 'cls']);
    for (let id = 0; id < 3; id++) {
      const p = ds.get(id);
      assert.ok(p instanceof Promise, 'image fields decode asynchronously');
      const s = await p;
      const want = await decodeImage(pngs[id]!, { size: [6, 5], source: 'test' });
      assert.deepEqual(s.png!.shape, [3, 6, 5]);
      assert.deepEqual(s.png!.data, want.data);
      assert.equal((s.score!.data as Float32Array)[0], id + 0.5);
      assert.equal(s.score!.dtype, 'float32');
      assert.equal((s['meta.json']!.data as Float64Array)[0], id * 2);
      assert.equal((s.cls!.data as Int32Array)[0], id);
    }
    // Per-field image options.
    const small = await tarShardsSource(shard, { index: 'off', fields: ['png'], decoders: { png: { image: { size: [2, 2], channels: 1, layout: 'hwc' } } } });
    assert.deepEqual((await small.get(0)).png!.shape, [2, 2, 1]);
  });
});

describe('tar shards: the index cache', () => {
  it('shards whose file names are not valid UTF-8 are matched by a glob and read by their bytes, also by reader workers', async () => {
    const d = dir('latin1-shards');
    const odd = Buffer.concat([Buffer.from(d + '/'), Buffer.from('a\xe9.tar', 'latin1')]);
    renameSync(writeShard(join(d, 'tmp.tar'), samples(0, 3)), odd);
    writeShard(join(d, 'b.tar'), samples(3, 2));
    const ds = await tarShardsSource(join(d, '*.tar'), { decoders: { bin: 'raw' } });
    assert.deepEqual(ds.shards, [join(d, 'a\uFFFD.tar'), join(d, 'b.tar')], 'shown with U+FFFD, sorted by bytes');
    for (let i = 0; i < 5; i++) checkSample(ds, i, i);
    assert.ok(existsSync(cacheIndexPath(ds.shards[0]!, stampOf(ds.shards[0]!, odd), odd)), 'its index is cached under its bytes');
    const loader = await DataLoader.create(ds, { batchSize: 5, workers: 1, mode: 'streaming', shuffle: false, dropLast: false });
    try {
      const [batch] = await within(HANG_MS, 'epoch 0', collect(loader.epoch(0)));
      assert.deepEqual(Array.from(batch!.get('cls').data as Int32Array), [0, 1, 2, 3, 4]);
    } finally {
      await loader.close();
    }
  });

  it('is written to the per-user cache dir (never into the shards\' folder), reused without re-indexing, and rebuilt when the shard changes', async () => {
    const folder = dir('cache');
    const shard = writeShard(join(folder, 'c.tar'), samples(0, 4));
    const cached = () => cacheIndexPath(shard, stampOf(shard));
    assert.ok(cached().startsWith(join(cacheHome, 'stoker', 'tar-index')), cached());
    assert.ok(!existsSync(cached()));
    const builds0 = indexBuilds();
    const a = await tarShardsSource(shard, { decoders: { bin: 'raw' } });
    assert.equal(indexBuilds(), builds0 + 1);
    assert.ok(existsSync(cached()), 'index written to the cache dir');
    assert.deepEqual(readdirSync(folder), ['c.tar'], 'nothing written beside the shard');
    assert.equal(statSync(dirname(cached())).mode & 0o777, 0o700, 'the cache dir is private');
    const ino = statSync(cached()).ino;
    const b = await tarShardsSource(shard, { decoders: { bin: 'raw' } });
    assert.equal(indexBuilds(), builds0 + 1, 'second open used the cache');
    assert.equal(statSync(cached()).ino, ino, 'the cache was not rewritten');
    for (let i = 0; i < 4; i++) {
      checkSample(a, i, i);
      checkSample(b, i, i);
    }
    // Rewritten with other content: size and mtime change; the index is rebuilt.
    writeShard(shard, samples(10, 5));
    const c = await tarShardsSource(shard, { decoders: { bin: 'raw' } });
    assert.equal(indexBuilds(), builds0 + 2);
    assert.equal(c.length, 5);
    for (let i = 0; i < 5; i++) checkSample(c, i, 10 + i);
    // The old instance refuses to read the changed shard instead of reading at stale offsets.
    b.close();
    assert.throws(() => b.get(0), { code: 'ERR_BAD_FILE', message: /changed since it was indexed/ });
    // Same size, new mtime only: still rebuilt.
    const later = new Date(Date.now() + 5000);
    utimesSync(shard, later, later);
    await tarShardsSource(shard, { decoders: { bin: 'raw' } });
    assert.equal(indexBuilds(), builds0 + 3);
    // index: 'off' neither reads nor writes the cache.
    await tarShardsSource(shard, { decoders: { bin: 'raw' }, index: 'off' });
    assert.equal(indexBuilds(), builds0 + 4);
    assert.deepEqual(readdirSync(folder), ['c.tar']);
  });

  it("is written beside the shard only with index: 'beside', hidden from shard globs, and reused from there", async () => {
    const shard = writeShard(join(dir('beside'), 'c.tar'), samples(0, 3));
    const builds0 = indexBuilds();
    await tarShardsSource(shard, { decoders: { bin: 'raw' }, index: 'beside' });
    assert.ok(existsSync(besideIndexPath(shard)));
    assert.ok(!existsSync(cacheIndexPath(shard, stampOf(shard))), "'beside' writes nowhere else");
    checkSample(await tarShardsSource(shard, { decoders: { bin: 'raw' }, index: 'beside' }), 2, 2);
    assert.equal(indexBuilds(), builds0 + 1);
    assert.equal((await tarShardsSource(join(dirname(shard), '*'), { decoders: { bin: 'raw' }, index: 'beside' })).shards.length, 1);
  });

  it('a corrupt or mismatched cache is rebuilt, not trusted', async () => {
    const shard = writeShard(join(dir('corrupt'), 'c.tar'), samples(0, 3));
    await tarShardsSource(shard, { decoders: { bin: 'raw' } });
    const cached = cacheIndexPath(shard, stampOf(shard));
    const good = JSON.parse(readFileSync(cached, 'utf8')) as { table: number[]; keys: string[] };
    const bad = [
      '{"format": "stoker-tar-index", "vers', // bad JSON
      JSON.stringify({ ...good, table: good.table.slice(1) }), // wrong length
      JSON.stringify({ ...good, table: good.table.map((v, i) => (i === 1 ? 1e12 : v)) }), // a range past the end
      JSON.stringify({ ...good, keys: ['a', 'a', 'b'] }), // duplicate keys
      JSON.stringify({ ...good, table: good.table.map(() => 'x') }),
      'null',
    ];
    for (const text of bad) {
      writeFileSync(cached, text);
      const before = indexBuilds();
      const ds = await tarShardsSource(shard, { decoders: { bin: 'raw' } });
      assert.equal(indexBuilds(), before + 1, `rebuilt after ${text.slice(0, 40)}`);
      for (let i = 0; i < 3; i++) checkSample(ds, i, i);
      assert.deepEqual(JSON.parse(readFileSync(cached, 'utf8')), JSON.parse(JSON.stringify(good)), 'and rewritten');
    }
  });

  it("falls back to the temp dir when the cache dir cannot be made ('auto'); 'cache' then fails, naming the dir and the fix", async () => {
    const shard = writeShard(join(dir('blocked'), 'c.tar'), samples(0, 2));
    const saved = process.env.XDG_CACHE_HOME;
    // A file where the cache dir would go: no mkdir can pass through it, even as root.
    const blocker = join(root, 'not-a-dir');
    writeFileSync(blocker, 'x');
    process.env.XDG_CACHE_HOME = blocker;
    const temp = tempIndexPath(shard, stampOf(shard));
    rmSync(temp, { force: true });
    try {
      const before = indexBuilds();
      checkSample(await tarShardsSource(shard, { decoders: { bin: 'raw' } }), 1, 1);
      assert.ok(existsSync(temp), 'the index went to the temp dir');
      await tarShardsSource(shard, { decoders: { bin: 'raw' } });
      assert.equal(indexBuilds(), before + 1, 'and is reused from there');
      await assert.rejects(tarShardsSource(shard, { decoders: { bin: 'raw' }, index: 'cache' }), { code: 'ERR_FILE_ACCESS', message: /not-a-dir\/stoker\/tar-index.*XDG_CACHE_HOME/ });
    } finally {
      process.env.XDG_CACHE_HOME = saved;
      rmSync(temp, { force: true });
    }
  });

  it('a cache dir that others can write to is neither read nor written (an index planted there would steer reads)', async () => {
    const shard = writeShard(join(dir('shared-cache'), 'c.tar'), samples(0, 2));
    await tarShardsSource(shard, { decoders: { bin: 'raw' } });
    const cached = cacheIndexPath(shard, stampOf(shard));
    const temp = tempIndexPath(shard, stampOf(shard));
    rmSync(temp, { force: true });
    chmodSync(dirname(cached), 0o777);
    try {
      const before = indexBuilds();
      await tarShardsSource(shard, { decoders: { bin: 'raw' } });
      assert.equal(indexBuilds(), before + 1, 'the index in the group/other-writable dir was not trusted');
      assert.ok(existsSync(temp), 'the new index went to the private temp dir');
      await assert.rejects(tarShardsSource(shard, { decoders: { bin: 'raw' }, index: 'cache' }), { code: 'ERR_FILE_ACCESS', message: /not private to this user/ });
    } finally {
      chmodSync(dirname(cached), 0o700);
      rmSync(temp, { force: true });
    }
  });
});

describe('tar shards: through the loader', { timeout: SUITE_MS }, () => {
  it('two reader workers deliver every sample exactly once per epoch, with its own content', async () => {
    const d = dir('loader');
    const counts = [9, 4, 11];
    let next = 0;
    for (const [k, n] of counts.entries()) {
      writeShard(join(d, `part-${k}.tar`), samples(next, n, { long: k === 1 ? next + 2 : undefined }));
      next += n;
    }
    const ds = await tarShardsSource(join(d, 'part-{0..2}.tar'), { decoders: { bin: 'raw' } });
    const loader = await DataLoader.create(ds, { batchSize: 5, workers: 2, mode: 'streaming', dropLast: false, seed: 7 });
    try {
      assert.equal(loader.stats().workers, 2);
      for (let e = 0; e < 2; e++) {
        const batches = await within(HANG_MS, 'epoch', collect(loader.epoch(e)));
        const ids: number[] = [];
        for (const b of batches) {
          const cls = b.get('cls').data as Int32Array;
          const bin = b.get('bin');
          assert.deepEqual(bin.shape, [cls.length, 16]);
          b.sampleIds.forEach((id, r) => {
            assert.equal(cls[r], id, 'sample ids follow archive order across shards');
            assert.deepEqual(bin.bytes().subarray(r * 16, r * 16 + 16), binOf(id));
          });
          ids.push(...cls);
          b.release();
        }
        assert.deepEqual(sorted(ids), range(24));
      }
    } finally {
      await loader.close();
    }
  });
});

describe('tar shards: refused with a typed error', () => {
  it('a member name that is not valid UTF-8 (ustar, or a GNU long name) is refused, so k\xe9.cls and k\xe8.idx never merge into one sample', async () => {
    const ustar = rawTar([[Buffer.from('k\xe9.cls', 'latin1'), '1'], [Buffer.from('k\xe8.idx', 'latin1'), '2']]);
    const shard = join(dir('latin1'), 'a.tar');
    writeFileSync(shard, ustar);
    await assert.rejects(tarShardsSource(shard, { index: 'off' }), { code: 'ERR_BAD_FILE', message: /a\.tar: at byte 0: tar entry "k\uFFFD\.cls".*not valid UTF-8.*UTF-8 file names/ });
    const long = join(dirname(shard), 'long.tar');
    writeFileSync(long, rawTar([[Buffer.concat([Buffer.from('d'.repeat(120)), Buffer.from('/k\xe9.cls', 'latin1')]), '1']], { gnuLong: true }));
    await assert.rejects(tarShardsSource(long, { index: 'off' }), { code: 'ERR_BAD_FILE', message: /long\.tar: at byte 0: tar entry "d+\/k\uFFFD\.cls".*not valid UTF-8/ });
    // Valid UTF-8 names, written the same way, are read (the check is on the bytes, not on U+FFFD).
    const ok = join(dirname(shard), 'ok.tar');
    writeFileSync(ok, rawTar([[Buffer.from('ké.cls'), '1'], [Buffer.from('k\uFFFD.cls'), '2']]));
    assert.deepEqual((await tarShardsSource(ok, { index: 'off' })).length, 2);
  });

  it('a truncated shard names the shard, the offset and the entry', async () => {
    const shard = writeShard(join(dir('trunc'), 't.tar'), samples(0, 3));
    truncateSync(shard, 512 * 7 + 8); // inside the data of the fourth entry, 000001.bin
    await assert.rejects(tarShardsSource(shard, RAW), (e: Error & { code?: string }) => {
      assert.equal(e.code, 'ERR_BAD_FILE');
      assert.ok(e.message.includes(shard));
      assert.match(e.message, /at byte 3584: the data of tar entry "000001\.bin" needs 16 bytes but the file ends after 8/);
      return true;
    });
    truncateSync(shard, 512 * 6); // at an entry boundary: no end-of-archive marker
    await assert.rejects(tarShardsSource(shard, RAW), { code: 'ERR_BAD_FILE', message: /ends without its end-of-archive marker/ });
    truncateSync(shard, 0);
    await assert.rejects(tarShardsSource(shard, RAW), { code: 'ERR_BAD_FILE', message: /file is empty/ });
  });

  it('a sample missing a field names the shard, the key and the fields', async () => {
    const entries = samples(0, 3);
    delete entries[1]![1].bin;
    const shard = writeShard(join(dir('missing'), 'm.tar'), entries);
    await assert.rejects(tarShardsSource(shard, RAW), (e: Error & { code?: string }) => {
      assert.equal(e.code, 'ERR_BAD_FILE');
      assert.ok(e.message.includes(shard));
      assert.match(e.message, /sample "000001" has fields \["cls"\] but sample "000000" .* has \["cls","bin"\].*fields: \[/);
      return true;
    });
    // Choosing the fields every sample has reads the shard.
    const ds = await tarShardsSource(shard, { ...RAW, fields: ['cls'] });
    assert.deepEqual(range(3).map((i) => (read(ds, i).cls!.data as Int32Array)[0]), [0, 1, 2]);
    await assert.rejects(tarShardsSource(shard, { ...RAW, fields: ['bin'] }), { code: 'ERR_BAD_FILE', message: /sample "000001" has no field "bin"/ });
    await assert.rejects(tarShardsSource(shard, { ...RAW, fields: ['nope'] }), { code: 'ERR_INVALID_OPTION', message: /`fields`.*No shard has "nope"/ });
  });

  it('a garbage cls fails its read, naming the shard and the key; through the loader it fails its batch only', async () => {
    const entries = samples(0, 4);
    entries[2]![1].cls = '3x';
    const shard = writeShard(join(dir('garbage'), 'g.tar'), entries);
    const ds = await tarShardsSource(shard, RAW);
    checkSample(ds, 1, 1);
    assert.throws(() => ds.get(2), (e: Error & { code?: string }) => {
      assert.equal(e.code, 'ERR_BAD_FILE');
      assert.ok(e.message.includes(shard));
      assert.match(e.message, /sample "000002" field "cls" is "3x", not an int32 integer/);
      return true;
    });
    const loader = await DataLoader.create(ds, { batchSize: 2, workers: 1, mode: 'streaming', shuffle: false, errors: 'skip' });
    try {
      const batches = await within(HANG_MS, 'epoch', collect(loader.epoch(0)));
      assert.deepEqual(batches.flatMap((b) => [...b.sampleIds]), [0, 1]);
    } finally {
      await loader.close();
    }
    for (const [k, text] of ['', '1.5', '99999999999', '0x10', '１', '1 2'].entries()) {
      entries[2]![1].cls = text;
      const other = await tarShardsSource(writeShard(join(dir('garbage'), `g${k}.tar`), entries), RAW);
      assert.throws(() => other.get(2), { code: 'ERR_BAD_FILE', message: /sample "000002" field "cls"/ }, `cls ${JSON.stringify(text)}`);
    }
  });

  it('a missing shard, a pattern matching nothing, and bad options are refused before any read', async () => {
    const d = dir('absent');
    await assert.rejects(tarShardsSource(join(d, 'nope-{0..1}.tar')), { code: 'ERR_FILE_ACCESS', message: /nope-0\.tar.*ENOENT/ });
    await assert.rejects(tarShardsSource(join(d, 'nope-*.tar')), { code: 'ERR_INVALID_OPTION', message: /`shards`.*nope-\*\.tar.*No file in/ });
    await assert.rejects(tarShardsSource(join(root, 'no-such-dir', '*.tar')), { code: 'ERR_FILE_ACCESS' });
    await assert.rejects(tarShardsSource([]), { code: 'ERR_INVALID_OPTION' });
    const shard = writeShard(join(d, 'ok.tar'), samples(0, 2));
    await assert.rejects(tarShardsSource([shard, shard]), { code: 'ERR_INVALID_OPTION', message: /named twice/ });
    await assert.rejects(tarShardsSource(shard, { index: 'nowhere' as never }), { code: 'ERR_INVALID_OPTION', message: /`index`/ });
    await assert.rejects(tarShardsSource(shard, { index: 'off' }), { code: 'ERR_INVALID_OPTION', message: /`decoders\.bin`.*no default decoder/ });
    await assert.rejects(tarShardsSource(shard, { ...RAW, decoders: { bin: 'text' as never } }), { code: 'ERR_INVALID_OPTION', message: /`decoders\.bin`/ });
    const img = writeShard(join(d, 'img.tar'), [['a', { jpg: 'x' }]]);
    await assert.rejects(tarShardsSource(img, { index: 'off' }), { code: 'ERR_INVALID_OPTION', message: /`image`.*size/ });
    await assert.rejects(tarShardsSource(img, { index: 'off', image: { size: [0, 4] } }), { code: 'ERR_INVALID_OPTION', message: /`image\.size`/ });
  });

  it('keys out of order, duplicate fields, links, unnamed files, raw fields of varying size, gzip and trailing garbage', async () => {
    const d = dir('bad');
    const expectBad = async (shard: string, pattern: RegExp, options: TarShardsOptions = RAW) =>
      assert.rejects(tarShardsSource(shard, options), (e: Error & { code?: string }) => {
        assert.equal(e.code, 'ERR_BAD_FILE', e.message);
        assert.ok(e.message.includes(shard), e.message);
        assert.match(e.message, pattern);
        return true;
      });
    const s = samples(0, 3);
    await expectBad(writeShard(join(d, 'order.tar'), [s[0]!, s[1]!, [s[0]![0], { txt: 'again' }]]), /sample "000000" reappears at entry "000000\.txt"/);
    await expectBad(writeShard(join(d, 'dup.tar'), [['k', { bin: binOf(0), BIN: binOf(1), cls: '1' }]]), /sample "k" has two "bin" entries/);
    await expectBad(pack(join(d, 'noext.tar'), [['000000.cls', '0'], ['README', 'hello']]), /tar entry "README" is not named <key>\.<field>/);
    await expectBad(pack(join(d, 'dotfile.tar'), [['000000.cls', '0'], ['dir/.hidden', 'x']]), /tar entry "dir\/\.hidden" is not named/);
    const src = mkdtempSync(join(root, 'src-'));
    writeFileSync(join(src, 'a.cls'), '1');
    writeFileSync(join(src, 'a.bin'), binOf(1));
    symlinkSync('a.bin', join(src, 'b.bin'));
    writeFileSync(join(src, 'b.cls'), '2');
    create({ file: join(d, 'link.tar'), cwd: src, sync: true, portable: true }, ['a.cls', 'a.bin', 'b.cls', 'b.bin']);
    await expectBad(join(d, 'link.tar'), /tar entry "b\.bin" is of type SymbolicLink/);
    await expectBad(writeShard(join(d, 'sizes.tar'), [s[0]!, ['000001', { cls: '1', bin: new Uint8Array(3) }]]), /field "bin" of sample "000001" holds 3 bytes but sample "000000" holds 16/);
    await expectBad(writeShard(join(d, 'z.tar.gz'), s, { gzip: true }), /gzip-compressed/);
    const tail = writeShard(join(d, 'tail.tar'), s);
    appendFileSync(tail, 'appended');
    await expectBad(tail, /non-zero bytes after the end-of-archive marker/);
    // A header byte flipped: the checksum catches it.
    const flipped = writeShard(join(d, 'flip.tar'), s);
    const bytes = readFileSync(flipped);
    bytes[1027] = bytes[1027]! ^ 1; // in the name field of the second header (000000.bin)
    writeFileSync(flipped, bytes);
    await expectBad(flipped, /at byte 1024: tar header checksum mismatch/);
  });
});

describe('tar shards: fuzz', { timeout: SUITE_MS }, () => {
  it('3000 mutants of a shard are read cleanly or refused with ERR_BAD_FILE, never misread', async () => {
    // The long key comes first, so that its pax header lies where most mutations land.
    const shard = writeShard(join(dir('fuzz'), 'f.tar'), [...samples(0, 1, { long: 0 }), ...samples(1, 4)]);
    const valid = new Uint8Array(readFileSync(shard));
    const report = await fuzz({ valid, ext: '.tar', module: TARGETS, target: 'indexAndRead', cases: 3000, seed: 11 });
    assertFuzzClean(report);
    assert.ok(report.ok > 0 && (report.refused.ERR_BAD_FILE ?? 0) > 0, JSON.stringify(report));
  });
});

function hasGnuTar(): boolean {
  const r = spawnSync('tar', ['--version'], { encoding: 'utf8' });
  return r.status === 0 && /GNU tar/.test(r.stdout);
}

describe("tar shards: decode: 'processes'", { timeout: SUITE_MS }, () => {
  const N = 14;
  let pattern: string;
  before(async () => {
    const d = dir('procs');
    const jpg = (id: number) =>
      sharp(Uint8Array.from({ length: 30 * 40 * 3 }, (_, j) => (id * 29 + j * 7 + (j % 11) * 13) & 255), { raw: { width: 40, height: 30, channels: 3 } }).jpeg({ quality: 85 }).toBuffer();
    const jpgs = await Promise.all(range(N).map(jpg));
    writeShard(join(d, 'p-0.tar'), range(8).map((id) => [`k${String(id).padStart(3, '0')}`, { jpg: jpgs[id]!, cls: `${id}` }]));
    writeShard(join(d, 'p-1.tar'), range(N - 8).map((j) => [`k${String(j + 8).padStart(3, '0')}`, { jpg: jpgs[j + 8]!, cls: `${j + 8}` }]));
    pattern = join(d, 'p-{0..1}.tar');
  });

  it("gives the same tensors as decode: 'threads' (JPEG, centre crop and resize, hwc); close() leaves no child", async () => {
    const image = { size: [16, 12] } as const;
    const decoders = { jpg: 'image', cls: 'int' } as const;
    const threads = await tarShardsSource(pattern, { index: 'off', image, decode: 'threads' });
    const procs = await tarShardsSource(pattern, { index: 'off', image, decode: 'processes', decodeProcesses: 2 });
    const hwc = await tarShardsSource(pattern, { index: 'off', decoders: { ...decoders, jpg: { image: { size: [7, 9], fit: 'resize', layout: 'hwc', channels: 1 } } }, decode: 'processes', decodeProcesses: 1 });
    const hwcThreads = await tarShardsSource(pattern, { index: 'off', decoders: { ...decoders, jpg: { image: { size: [7, 9], fit: 'resize', layout: 'hwc', channels: 1 } } }, decode: 'threads' });
    assert.equal(threads.decode, 'threads');
    assert.equal(procs.decode, 'processes');
    assert.deepEqual(procs.decodePids, [], 'the pool starts on the first image');
    for (let i = 0; i < N; i++) {
      const [a, b, c, d] = await Promise.all([threads.get(i), procs.get(i), hwc.get(i), hwcThreads.get(i)]);
      assert.deepEqual(b.jpg!.shape, [3, 16, 12]);
      assert.deepEqual(b.jpg!.data, a.jpg!.data, `sample ${i}`);
      assert.deepEqual(b.cls!.data, a.cls!.data);
      assert.deepEqual(c.jpg!.shape, [7, 9, 1]);
      assert.deepEqual(c.jpg!.data, d.jpg!.data, `sample ${i} (hwc)`);
    }
    const pids = [...procs.decodePids, ...hwc.decodePids];
    assert.ok(procs.decodePids.length >= 1 && procs.decodePids.length <= 2 && hwc.decodePids.length === 1, `pids ${procs.decodePids} / ${hwc.decodePids}`);
    await Promise.all([procs.close(), hwc.close(), threads.close(), hwcThreads.close()]);
    for (const pid of pids) assert.ok(!alive(pid), `decode child ${pid} is alive after close()`);
    assert.deepEqual(procs.decodePids, []);
    // A read after close() starts a new pool; close() again ends it.
    assert.deepEqual((await procs.get(3)).jpg!.data, (await threads.get(3)).jpg!.data);
    const again = procs.decodePids;
    assert.equal(again.length, 1);
    await procs.close();
    assert.ok(!alive(again[0]!));
  });

  it('a corrupt image fails with ERR_BAD_FILE naming the shard, sample and offset, as in-thread decoding does', async () => {
    const shard = writeShard(join(dir('procs-bad'), 'bad.tar'), [['k0', { jpg: new Uint8Array([0xff, 0xd8, 0xff, 1, 2, 3]), cls: '0' }]]);
    const procs = await tarShardsSource(shard, { index: 'off', image: { size: [8, 8] }, decode: 'processes', decodeProcesses: 1 });
    const threads = await tarShardsSource(shard, { index: 'off', image: { size: [8, 8] }, decode: 'threads' });
    try {
      const inThread = await Promise.resolve().then(() => threads.get(0)).then(() => undefined, (e: unknown) => e as LoaderError);
      assert.equal(inThread?.code, 'ERR_BAD_FILE');
      assert.ok(inThread.message.includes(shard) && inThread.message.includes('sample "k0" field "jpg"'), inThread.message);
      await assert.rejects(async () => procs.get(0), (e: LoaderError) => e.code === 'ERR_BAD_FILE' && e.message === inThread!.message);
    } finally {
      await procs.close();
    }
  });

  it('refuses a bad decode or decodeProcesses', async () => {
    await assert.rejects(tarShardsSource(pattern, { index: 'off', image: { size: [8, 8] }, decode: 'fork' as never }), { code: 'ERR_INVALID_OPTION', message: /`decode`.*'threads', 'processes' or 'auto'/ });
    await assert.rejects(tarShardsSource(pattern, { index: 'off', image: { size: [8, 8] }, decodeProcesses: 0 }), { code: 'ERR_INVALID_OPTION', message: /`decodeProcesses`/ });
  });

  it('with 2 reader workers, every sample arrives exactly once per epoch with the in-thread bytes, and closing ends every child', async () => {
    const before = decodeChildren();
    const threads = await tarShardsSource(pattern, { image: { size: [16, 16] }, decode: 'threads' });
    const want = await Promise.all(range(N).map(async (i) => (await threads.get(i)).jpg!.data as Uint8Array));
    const ds = await tarShardsSource(pattern, { image: { size: [16, 16] }, decode: 'processes', decodeProcesses: 1 });
    const loader = await DataLoader.create(ds, { batchSize: 4, workers: 2, mode: 'streaming', dropLast: false, seed: 3 });
    let during: number[] = [];
    try {
      assert.equal(loader.stats().workers, 2);
      for (let e = 0; e < 2; e++) {
        const ids: number[] = [];
        for (const b of await within(HANG_MS, `epoch ${e}`, collect(loader.epoch(e)))) {
          const img = b.get('jpg');
          assert.deepEqual(img.shape, [b.sampleIds.length, 3, 16, 16]);
          b.sampleIds.forEach((id, r) => {
            assert.equal((b.get('cls').data as Int32Array)[r], id);
            assert.deepEqual(img.bytes().subarray(r * 768, (r + 1) * 768), want[id], `sample ${id}`);
          });
          ids.push(...b.sampleIds);
          b.release();
        }
        assert.deepEqual(sorted(ids), range(N));
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
