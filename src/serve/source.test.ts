// What `stoker serve` opens for a source (source.ts): `{path, ...options}` opens an image folder with
// its own options, as `sources.imageFolder` would (the Python client's way to ask for a view,
// normalize, an output dtype or GPU decode), and checks them the same way.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { closeDataset } from '../dataset/dataset.js';
import { type ImageFolder } from '../dataset/formats/images/image-folder.js';
import { openServeSource } from './source.js';

describe('openServeSource: {path, ...options}', { timeout: 60_000 }, () => {
  let dir: string;
  let folder: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'stoker-serve-source-'));
    folder = join(dir, 'train');
    for (const c of ['a', 'b']) {
      mkdirSync(join(folder, c), { recursive: true });
      for (let i = 0; i < 2; i++) {
        await sharp({ create: { width: 40 + i, height: 30, channels: 3, background: { r: 10 * i, g: 100, b: 200 } } }).jpeg().toFile(join(folder, c, `${i}.jpg`));
      }
    }
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('opens an image folder with its view, output and normalize, size defaulting to the first image', async () => {
    const { dataset, owned } = await openServeSource({ path: folder, size: 16, view: 'eval', output: 'float32', normalize: { mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25] } });
    assert.equal(owned, true);
    const ds = dataset as ImageFolder;
    assert.equal(ds.length, 4);
    const image = (await ds.get(0)).image.data;
    assert.ok(image instanceof Float32Array, 'output float32');
    assert.equal(image.length, 3 * 16 * 16);
    assert.ok(image.some((v) => v < 0), 'normalized: values below the mean are negative');
    await closeDataset(ds);
    const probed = (await openServeSource({ path: folder, output: 'float32' })).dataset as ImageFolder;
    const first = (await probed.get(0)).image.data;
    assert.equal(first.length, 3 * 30 * 40, 'no size: the first image\'s own');
    await closeDataset(probed);
  });

  it('refuses an option the image folder does not know, naming it and the nearest one', async () => {
    await assert.rejects(openServeSource({ path: folder, size: 16, chanels: 1 }), { code: 'ERR_INVALID_OPTION', message: /chanels.*channels/s });
  });

  it('refuses options beside the path of a format that takes none here, naming the fix', async () => {
    const npy = join(dir, 'x.npy');
    const header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    const pad = 64 - ((10 + header.length + 1) % 64);
    const h = header + ' '.repeat(pad) + '\n';
    const buf = Buffer.concat([Buffer.from('\x93NUMPY\x01\x00', 'latin1'), Buffer.from([h.length & 255, h.length >> 8]), Buffer.from(h, 'latin1'), Buffer.from(new Float32Array([1, 2]).buffer)]);
    (await import('node:fs')).writeFileSync(npy, buf);
    await assert.rejects(openServeSource({ path: npy, view: 'eval' }), { code: 'ERR_INVALID_DATASET', message: /npy, which takes no source options here.*module spec/s });
    // A record of names to .npy paths is named columns, even with a column called "path".
    const cols = await openServeSource({ path: npy, y: npy });
    assert.equal((cols.dataset as { length: number }).length, 2);
    await closeDataset(cols.dataset as never);
  });
});
