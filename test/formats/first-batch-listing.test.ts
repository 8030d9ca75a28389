// The listing of a large image folder (20 000 hard links, 100 classes) is made once and shared: the
// main thread walks it once; another process on the host (a rank, a second job) reads the cached
// listing without walking; reader workers never list the folder — after the folder changes under a
// running source, every delivered sample is still the file the listing named for it (its pixels
// say which file was read), exactly once per epoch (of a sampler over class 0 and every 7th file). Behaviour only: bench/first-batch.ts times it.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { DataLoader } from '../../src/index.js';
import { folderWalks } from '../../src/dataset/formats/images/folder-listing.js';
import { imageFolderSource } from '../../src/dataset/formats/images/image-folder.js';
import { CHILD_MS, SUITE_MS, TEST_MS, collect, range, sorted, within } from '../fixtures.js';

const CLASSES = 100;
const PER_CLASS = 200;
const COLOURS = 5;
const red = (j: number) => 20 + j * 50;

let root: string;
let dir: string;
let cache: string;
let savedXdg: string | undefined;

const cls = (c: number) => `n${String(c).padStart(4, '0')}`;

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'stoker-first-batch-'));
  dir = join(root, 'train');
  cache = join(root, 'cache');
  savedXdg = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = cache;
  const originals: string[] = [];
  for (let j = 0; j < COLOURS; j++) {
    originals.push(join(root, `colour-${j}.jpg`));
    await sharp({ create: { width: 8, height: 8, channels: 3, background: { r: red(j), g: 128, b: 64 } } }).jpeg({ quality: 95 }).toFile(originals[j]!);
  }
  // Sample i (class ⌊i / PER_CLASS⌋, the (i mod PER_CLASS)-th name in it) is a link to colour i mod COLOURS.
  for (let c = 0; c < CLASSES; c++) {
    mkdirSync(join(dir, cls(c)), { recursive: true });
    for (let k = 0; k < PER_CLASS; k++) {
      const i = c * PER_CLASS + k;
      linkSync(originals[i % COLOURS]!, join(dir, cls(c), `img_${String(k).padStart(5, '0')}.JPEG`));
    }
  }
});

after(() => {
  if (savedXdg === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = savedXdg;
  rmSync(root, { recursive: true, force: true });
});

describe('the listing of a 20 000-file folder, made once and shared', { timeout: SUITE_MS }, () => {
  it('is walked once by the main thread, read from the cache by another process, and never listed by reader workers', async () => {
    const walks = folderWalks();
    const source = imageFolderSource(dir, { size: 4, decode: 'threads' });
    assert.equal(source.length, CLASSES * PER_CLASS);
    assert.equal(source.listing, 'walked');
    assert.equal(folderWalks(), walks + 1);

    // Another process on the host (what a second rank does): the cached listing, no walk.
    const script = [
      `const { imageFolderSource } = await import(${JSON.stringify(new URL('../../src/dataset/formats/images/image-folder.ts', import.meta.url).href)});`,
      `const { folderWalks } = await import(${JSON.stringify(new URL('../../src/dataset/formats/images/folder-listing.ts', import.meta.url).href)});`,
      `const s = imageFolderSource(${JSON.stringify(dir)}, { size: 4, decode: 'threads' });`,
      'console.log(JSON.stringify({ listing: s.listing, walks: folderWalks(), length: s.length, last: s.pathOf(s.length - 1) }));',
      'await s.close();',
    ].join('\n');
    const rank = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: CHILD_MS, env: { ...process.env, XDG_CACHE_HOME: cache } });
    assert.equal(rank.status, 0, rank.stderr);
    assert.deepEqual(JSON.parse(rank.stdout.trim().split('\n').pop()!), { listing: 'cached', walks: 0, length: CLASSES * PER_CLASS, last: source.pathOf(CLASSES * PER_CLASS - 1) });

    // The folder changes under the running source: a file sorted first in class 0, a new class.
    // A worker that listed the folder again would see every class-0 index shifted, and more samples.
    writeFileSync(join(dir, cls(0), 'aaa_extra.JPEG'), await sharp({ create: { width: 8, height: 8, channels: 3, background: { r: 255, g: 0, b: 0 } } }).jpeg().toBuffer());
    mkdirSync(join(dir, 'zzz'));
    linkSync(join(root, 'colour-0.jpg'), join(dir, 'zzz', 'late.JPEG'));

    // The reads: all of class 0 (where a second walk would shift every index) and every 7th sample
    // of the rest, shuffled by the sampler — decoding all 20 000 would only make the test slow.
    const picked = range(CLASSES * PER_CLASS).filter((i) => i < PER_CLASS || i % 7 === 0);
    const sampler = { length: picked.length, indices: (epoch: number) => [...picked].sort((a, b) => ((a * 2654435761 + epoch) >>> 0) - ((b * 2654435761 + epoch) >>> 0)) };
    const loader = await DataLoader.create(source, { batchSize: 250, dropLast: false, workers: 2, sampler });
    try {
      assert.equal(loader.stats().workers, 2);
      // 3 029 decodes: the test budget, not the hang bound (a loaded 2-core machine).
      const batches = await within(TEST_MS, 'epoch', collect(loader.epoch(0)));
      const ids = sorted(batches.flatMap((b) => [...b.sampleIds]));
      assert.deepEqual(ids, picked, 'every picked sample exactly once, no other');
      for (const b of batches) {
        const labels = b.get('label').data as Int32Array;
        const images = b.get('image').data as Uint8Array;
        for (let r = 0; r < b.rows; r++) {
          const id = b.sampleIds[r]!;
          assert.equal(labels[r], Math.floor(id / PER_CLASS));
          // [3, 4, 4] per row: its red plane says which of the colours (which file) was read.
          const got = images[r * 48]!;
          assert.ok(Math.abs(got - red(id % COLOURS)) <= 8, `sample ${id}: red ${got}, its file is colour ${id % COLOURS} (red ${red(id % COLOURS)})`);
        }
      }
    } finally {
      await loader.close();
      await source.close();
    }
    assert.equal(folderWalks(), walks + 1, 'this thread walked the folder once in all');
  });
});
