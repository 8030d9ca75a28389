// inspectPath: each format is recognised (by extension, by magic bytes, a folder by its contents)
// and described as the loader sees it.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Binary, Field, FixedSizeList, Float32, Int64, Struct, Table, Utf8, tableToIPC, vectorFromArray } from 'apache-arrow';
import sharp from 'sharp';
import { create as tarCreate } from 'tar';
import { LoaderError } from '../../src/index.js';
import { detectFormat, inspectPath } from '../../src/dataset/open-path.js';

const dir = mkdtempSync(join(tmpdir(), 'stoker-inspect-'));
// Tar indexes go to the user's cache dir: this file's own.
const savedCacheHome = process.env.XDG_CACHE_HOME;
process.env.XDG_CACHE_HOME = join(dir, 'cache');
after(() => {
  if (savedCacheHome === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = savedCacheHome;
  rmSync(dir, { recursive: true, force: true });
});

function npy(shape: number[], descr: string, data: Uint8Array): Uint8Array {
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  const total = Math.ceil((10 + header.length + 1) / 64) * 64;
  header = header.padEnd(total - 10 - 1, ' ') + '\n';
  const out = new Uint8Array(total + data.length);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, header.length & 0xff, header.length >> 8]);
  out.set(new TextEncoder().encode(header), 10);
  out.set(data, total);
  return out;
}

describe('inspect', () => {
  it('an .npy file, and the same bytes under an extension no format claims (magic)', async () => {
    const bytes = npy([5, 3, 4], '<f4', new Uint8Array(5 * 12 * 4));
    writeFileSync(join(dir, 'x.npy'), bytes);
    writeFileSync(join(dir, 'x.dat'), bytes);
    for (const p of ['x.npy', 'x.dat']) {
      const d = await inspectPath(join(dir, p));
      assert.equal(d.format, 'npy');
      assert.equal(d.length, 5);
      assert.deepEqual(d.columns, [{ name: 'x', dtype: 'float32', shape: [3, 4], bytesPerSample: 48 }], 'one file: a column named after its stem');
      assert.equal(d.bytesPerSample, 48);
    }
  });

  it('a safetensors file: one column per tensor', async () => {
    const header = JSON.stringify({ a: { dtype: 'I32', shape: [4, 2], data_offsets: [0, 32] }, b: { dtype: 'U8', shape: [4], data_offsets: [32, 36] } });
    const h = new TextEncoder().encode(header);
    const out = new Uint8Array(8 + h.length + 36);
    new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
    out.set(h, 8);
    writeFileSync(join(dir, 'm.safetensors'), out);
    const d = await inspectPath(join(dir, 'm.safetensors'));
    assert.equal(d.format, 'safetensors');
    assert.equal(d.length, 4);
    assert.deepEqual(d.columns.map((c) => [c.name, c.dtype, c.shape, c.bytesPerSample]), [['a', 'int32', [2], 8], ['b', 'uint8', [], 1]]);
  });

  it('an Arrow IPC stream as written by apache-arrow', async () => {
    const emb = vectorFromArray(Array.from({ length: 6 }, (_, i) => [i, i, i]), new FixedSizeList(3, new Field('item', new Float32())));
    const table = new Table({ label: vectorFromArray([1n, 2n, 3n, 4n, 5n, 6n], new Int64()), emb });
    writeFileSync(join(dir, 'data.arrow'), tableToIPC(table, 'stream'));
    const d = await inspectPath(join(dir, 'data.arrow'));
    assert.equal(d.format, 'arrow');
    assert.equal(d.length, 6);
    assert.deepEqual(d.columns.map((c) => [c.name, c.dtype, c.shape]), [['label', 'int64', []], ['emb', 'float32', [3]]]);
  });

  it('an image folder: classes, decoded at the first image’s size unless --size', async () => {
    const root = join(dir, 'images');
    for (const [c, colour] of [['cat', '#f00'], ['dog', '#00f']] as const) {
      mkdirSync(join(root, c), { recursive: true });
      for (let i = 0; i < 3; i++) await sharp({ create: { width: 12, height: 8, channels: 3, background: colour } }).png().toFile(join(root, c, `${i}.png`));
    }
    const d = await inspectPath(root);
    assert.equal(d.format, 'image-folder');
    assert.equal(d.length, 6);
    assert.deepEqual(d.columns.map((c) => [c.name, c.dtype, c.shape]), [['image', 'uint8', [3, 8, 12]], ['label', 'int32', []]]);
    assert.deepEqual(d.details.classNames, ['cat', 'dog']);
    const sized = await inspectPath(root, { size: [4, 4] });
    assert.deepEqual(sized.columns[0]!.shape, [3, 4, 4]);
  });

  it('a tar shard (and a folder of shards)', async () => {
    const src = join(dir, 'tarsrc');
    mkdirSync(src);
    for (let i = 0; i < 4; i++) {
      writeFileSync(join(src, `s${i}.cls`), String(i));
      await sharp({ create: { width: 5, height: 5, channels: 3, background: '#0f0' } }).png().toFile(join(src, `s${i}.png`));
    }
    const shards = join(dir, 'shards');
    mkdirSync(shards);
    const files = [0, 1, 2, 3].flatMap((i) => [`s${i}.cls`, `s${i}.png`]);
    await tarCreate({ file: join(shards, 'a.tar'), cwd: src, portable: true }, files.slice(0, 4));
    await tarCreate({ file: join(shards, 'b.tar'), cwd: src, portable: true }, files.slice(4));
    assert.equal(detectFormat(join(shards, 'a.tar')), 'tar-shards');
    const d = await inspectPath(shards);
    assert.equal(d.format, 'tar-shards');
    assert.equal(d.length, 4);
    assert.equal(d.details.shards, 2);
    assert.deepEqual(d.columns.map((c) => [c.name, c.dtype, c.shape]), [['cls', 'int32', []], ['png', 'uint8', [3, 5, 5]]], "the first image's own size");
    assert.equal(d.details.decodedTo, '5×5');
    const sized = await inspectPath(shards, { size: [4, 6] });
    assert.deepEqual(sized.columns[1]!.shape, [3, 4, 6]);
    // A shard pattern, as sources.tarShards takes it, is the same set of shards.
    for (const pattern of [join(shards, '*.tar'), join(shards, '{a,b}.tar')]) {
      assert.equal(detectFormat(pattern), 'tar-shards', pattern);
      const p = await inspectPath(pattern);
      assert.deepEqual([p.length, p.details.shards, p.readWith], [4, 2, `await sources.tarShards(${JSON.stringify(pattern)})`]);
    }
  });

  it("an Arrow file's image column (Hugging Face struct<bytes, path>) is decoded at row 0's own size unless --size, by bytes or by path", async () => {
    const png = await sharp({ create: { width: 9, height: 7, channels: 3, background: '#123' } }).png().toBuffer();
    writeFileSync(join(dir, 'row0.png'), png);
    const struct = new Struct([new Field('bytes', new Binary(), true), new Field('path', new Utf8(), true)]);
    for (const [name, rows] of [['bytes.arrow', [{ bytes: png, path: null }, { bytes: png, path: null }]], ['paths.arrow', [{ bytes: null, path: 'row0.png' }, { bytes: png, path: null }]]] as const) {
      const table = new Table({ image: vectorFromArray(rows, struct), label: vectorFromArray([0n, 1n], new Int64()) });
      writeFileSync(join(dir, name), tableToIPC(table, 'stream'));
      const d = await inspectPath(join(dir, name));
      assert.deepEqual(d.columns.map((c) => [c.name, c.dtype, c.shape]), [['image', 'uint8', [3, 7, 9]], ['label', 'int64', []]], name);
      assert.equal(d.details.decodedTo, '7×9');
      assert.deepEqual((await inspectPath(join(dir, name), { size: [4, 4] })).columns[0]!.shape, [3, 4, 4]);
    }
  });

  it('an image folder with hidden files and folders (.DS_Store, ._x.png, .ipynb_checkpoints) and a name that is not UTF-8 inspects as the loader lists it', async () => {
    const root = join(dir, 'odd-images');
    mkdirSync(join(root, 'cat'), { recursive: true });
    mkdirSync(join(root, '.ipynb_checkpoints'), { recursive: true });
    const small = await sharp({ create: { width: 6, height: 4, channels: 3, background: '#f00' } }).png().toBuffer();
    writeFileSync(join(root, '.ipynb_checkpoints', 'a.png'), 'not an image');
    writeFileSync(join(root, 'cat', '._0.png'), 'AppleDouble junk');
    writeFileSync(join(root, 'cat', '.DS_Store'), 'junk');
    writeFileSync(join(root, '.DS_Store'), 'junk');
    // caf\xe9.png in Latin-1: not valid UTF-8; it sorts first (byte 0x63 'c' < 0x7a 'z').
    writeFileSync(Buffer.concat([Buffer.from(join(root, 'cat') + '/'), Buffer.from('caf\xe9.png', 'latin1')]), small);
    writeFileSync(join(root, 'cat', 'z.png'), await sharp({ create: { width: 3, height: 3, channels: 3, background: '#00f' } }).png().toBuffer());
    const d = await inspectPath(root);
    assert.equal(d.length, 2);
    assert.deepEqual(d.details.classNames, ['cat']);
    assert.deepEqual(d.columns[0]!.shape, [3, 4, 6], 'the first image is the Latin-1 one, read by its bytes');
  });

  it('unknown formats and missing paths are typed one-line errors', async () => {
    writeFileSync(join(dir, 'notes.txt'), 'hello');
    await assert.rejects(inspectPath(join(dir, 'notes.txt')), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_DATASET' && /unknown format/.test(e.message));
    await assert.rejects(inspectPath(join(dir, 'missing.npy')), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_FILE_ACCESS' && /missing\.npy/.test(e.message));
  });
});
