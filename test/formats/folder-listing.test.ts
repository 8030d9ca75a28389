// The shared image-folder listing: walked once, cached on disk while every directory's mtime is
// unchanged, walked again when an entry is added or removed anywhere in the tree, shared with reader
// workers as shared memory; on a generated folder of many small files (hard links to one PNG).

import assert from 'node:assert/strict';
import { linkSync, mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { DataLoader } from '../../src/index.js';
import { folderWalks } from '../../src/dataset/formats/images/folder-listing.js';
import { imageFolderSource } from '../../src/dataset/formats/images/image-folder.js';
import { kSourceSpec } from '../../src/dataset/source-spec.js';
import { HANG_MS, SUITE_MS, collect, range, sorted, within } from '../fixtures.js';

const CLASSES = 40;
const PER_CLASS = 250;

let root: string;
let cache: string;
let savedXdg: string | undefined;

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'stoker-listing-'));
  cache = join(root, 'cache');
  mkdirSync(cache, { mode: 0o700 });
  // The cache goes to this test's own folder, not the user's.
  savedXdg = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = cache;
  const png = await sharp({ create: { width: 4, height: 4, channels: 3, background: { r: 10, g: 20, b: 30 } } }).png().toBuffer();
  const one = join(root, 'one.png');
  writeFileSync(one, png);
  for (let c = 0; c < CLASSES; c++) {
    const d = join(root, 'big', `c${String(c).padStart(3, '0')}`);
    mkdirSync(d, { recursive: true });
    for (let i = 0; i < PER_CLASS; i++) linkSync(one, join(d, `${String(i).padStart(5, '0')}.png`));
  }
  for (const cls of ['a', 'b']) {
    mkdirSync(join(root, 'small', cls, 'deep'), { recursive: true });
    writeFileSync(join(root, 'small', cls, '1.png'), png);
    writeFileSync(join(root, 'small', cls, 'deep', '2.png'), png);
  }
});

after(() => {
  if (savedXdg === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = savedXdg;
  rmSync(root, { recursive: true, force: true });
});

describe('the shared folder listing', { timeout: SUITE_MS }, () => {
  it('a second source over an unchanged folder reads the cached listing: the same files and labels, no walk', () => {
    const dir = join(root, 'big');
    const first = imageFolderSource(dir, { size: 4, decode: 'threads' });
    const walks = folderWalks();
    const second = imageFolderSource(dir, { size: 4, decode: 'threads' });
    assert.equal(first.listing, 'walked');
    assert.equal(second.listing, 'cached');
    assert.equal(folderWalks(), walks, 'the second source walked the folder');
    assert.equal(second.length, CLASSES * PER_CLASS);
    assert.deepEqual(second.files, first.files);
    assert.deepEqual(Array.from(second.labels), Array.from(first.labels));
    assert.deepEqual(second.classes, first.classes);
    assert.equal(second.files[PER_CLASS + 3], 'c001/00003.png');
    assert.equal(second.labels[PER_CLASS + 3], 1);
  });

  it('adding or removing a file anywhere in the tree (a nested folder too) makes the next source walk again', () => {
    const dir = join(root, 'small');
    imageFolderSource(dir, { size: 4, decode: 'threads' });
    assert.equal(imageFolderSource(dir, { size: 4, decode: 'threads' }).listing, 'cached');
    const added = join(dir, 'b', 'deep', '3.png');
    writeFileSync(added, Buffer.alloc(0));
    const after1 = imageFolderSource(dir, { size: 4, decode: 'threads' });
    assert.equal(after1.listing, 'walked');
    assert.deepEqual(after1.files, ['a/1.png', 'a/deep/2.png', 'b/1.png', 'b/deep/2.png', 'b/deep/3.png']);
    unlinkSync(added);
    const after2 = imageFolderSource(dir, { size: 4, decode: 'threads' });
    assert.equal(after2.listing, 'walked');
    assert.deepEqual(after2.files, ['a/1.png', 'a/deep/2.png', 'b/1.png', 'b/deep/2.png']);
    // Other extensions are another listing.
    assert.equal(imageFolderSource(dir, { size: 4, decode: 'threads', extensions: ['.png', '.gif'] }).listing, 'walked');
  });

  it("index: 'off' walks every time", () => {
    const dir = join(root, 'small');
    const walks = folderWalks();
    imageFolderSource(dir, { size: 4, decode: 'threads', index: 'off' });
    imageFolderSource(dir, { size: 4, decode: 'threads', index: 'off' });
    assert.equal(folderWalks(), walks + 2);
  });

  it('reader workers get the listing as shared memory and deliver every file exactly once', async () => {
    const source = imageFolderSource(join(root, 'big'), { size: 4, decode: 'threads' });
    const listing = (source[kSourceSpec]().options as { listing: { names: Uint8Array; ends: Uint32Array; labels: Int32Array } }).listing;
    for (const a of [listing.names, listing.ends, listing.labels]) assert.ok(a.buffer instanceof SharedArrayBuffer, 'the listing would be copied into every worker');
    const loader = await DataLoader.create(source, { batchSize: 500, workers: 2, shuffle: true });
    try {
      const batches = await within(HANG_MS, 'epoch', collect(loader.epoch(0)));
      assert.deepEqual(sorted(batches.flatMap((b) => [...b.sampleIds])), range(CLASSES * PER_CLASS));
      for (const b of batches) {
        const labels = b.get('label').data as Int32Array;
        for (let r = 0; r < b.rows; r++) assert.equal(labels[r], Math.floor(b.sampleIds[r]! / PER_CLASS));
      }
    } finally {
      await loader.close();
      await source.close();
    }
  });
});
