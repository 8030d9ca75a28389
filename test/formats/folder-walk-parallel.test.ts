// The parallel walk (NOTE [parallel walk] in folder-listing.ts) gives the one-thread walk's listing
// byte for byte — names, ends, labels, the non-UTF-8 samples, classes and the walked directories'
// stamps — on a tree with nested folders, symbolic links (to a folder, to a file, dangling, a cycle),
// hidden entries, other extensions and names that are not UTF-8, over more chunks than threads; the
// same errors; the same cache (written by the async listing, read by the sync one); and
// `sources.imageFolderAsync` gives the dataset `sources.imageFolder` gives.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type FolderListing, type SyncWalkReport, folderCacheWritten, folderWalks, listFolder, listFolderAsync, walkFolder, walkFolderParallel, walkFolderParallelSync } from '../../src/dataset/formats/images/folder-listing.js';
import { DEFAULT_IMAGE_EXTENSIONS, imageFolderSource } from '../../src/dataset/formats/images/image-folder.js';
import { sources } from '../../src/index.js';
import { HANG_MS, SUITE_MS, within } from '../fixtures.js';

const EXT: ReadonlySet<string> = new Set(DEFAULT_IMAGE_EXTENSIONS);
const latin1 = (s: string) => Buffer.from(s, 'latin1');
/** A path from parts, some of them raw bytes. */
const bytesPath = (...parts: (string | Buffer)[]) => Buffer.concat(parts.flatMap((p, i) => [...(i > 0 ? [Buffer.from('/')] : []), typeof p === 'string' ? Buffer.from(p) : p]));

let root: string;
let tree: string;
let cache: string;
let savedXdg: string | undefined;

before(() => {
  root = mkdtempSync(join(tmpdir(), 'stoker-walk-parallel-'));
  tree = join(root, 'tree');
  cache = join(root, 'cache');
  mkdirSync(cache, { mode: 0o700 });
  savedXdg = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = cache;
  const file = (...parts: (string | Buffer)[]) => writeFileSync(bytesPath(tree, ...parts), 'x');
  // 26 plain classes of different sizes, some with nested folders: more chunks than threads.
  for (let c = 0; c < 26; c++) {
    const cls = `c${String.fromCharCode(97 + c)}`;
    mkdirSync(join(tree, cls, 'deep', 'deeper'), { recursive: true });
    for (let i = 0; i < 3 + ((c * 7) % 11); i++) file(cls, `${i}.jpg`);
    if (c % 3 === 0) file(cls, 'deep', 'x.PNG');
    if (c % 4 === 0) file(cls, 'deep', 'deeper', 'y.webp');
    file(cls, 'notes.txt');
    file(cls, '.hidden.jpg');
  }
  // Names that are not UTF-8: a class folder, a file, a nested folder; a U+FFFD in a valid name.
  mkdirSync(bytesPath(tree, latin1('caf\xe9'), latin1('sub\xff')), { recursive: true });
  file(latin1('caf\xe9'), 'b.jpg');
  file(latin1('caf\xe9'), latin1('\xe8.jpg'));
  file(latin1('caf\xe9'), latin1('sub\xff'), 'c.jpeg');
  mkdirSync(join(tree, 'ca', 'odd'));
  file('ca', 'odd', latin1('\xe9.png'));
  file('ca', 'odd', 'plain.png');
  file('ca', 'odd', 're\uFFFDal.png');
  // Links: a class that is a link to another class, a link to a folder inside a class, to a file,
  // a dangling one, a cycle (a link to the class's own folder), hidden folders.
  symlinkSync(join(tree, 'cb'), join(tree, 'linked'));
  symlinkSync(join(tree, 'cc', 'deep'), join(tree, 'cd', 'alias'));
  symlinkSync(join(tree, 'ce', '0.jpg'), join(tree, 'cf', 'link.jpg'));
  symlinkSync(join(tree, 'nowhere.jpg'), join(tree, 'cg', 'dangling.jpg'));
  symlinkSync(join(tree, 'ch'), join(tree, 'ch', 'deep', 'loop'));
  mkdirSync(join(tree, '.git', 'objects'), { recursive: true });
  file('.git', 'objects', 'a.jpg');
  mkdirSync(join(tree, 'ci', '.ipynb_checkpoints'));
  file('ci', '.ipynb_checkpoints', 'a.jpg');
  file('loose.jpg');
});

after(() => {
  if (savedXdg === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = savedXdg;
  rmSync(root, { recursive: true, force: true });
});

function assertSame(got: FolderListing, want: FolderListing, what: string): void {
  assert.deepEqual(got.classes, want.classes, `${what}: classes`);
  assert.ok(Buffer.from(got.names).equals(Buffer.from(want.names)), `${what}: names`);
  assert.deepEqual(Array.from(got.ends), Array.from(want.ends), `${what}: ends`);
  assert.deepEqual(Array.from(got.labels), Array.from(want.labels), `${what}: labels`);
  assert.deepEqual([...got.raw], [...want.raw], `${what}: raw`);
  for (const a of [got.names, got.ends, got.labels]) assert.ok(a.buffer instanceof SharedArrayBuffer, `${what}: shared`);
}

describe('the parallel folder walk', { timeout: SUITE_MS }, () => {
  it('gives the one-thread walk\u2019s listing and stamps byte for byte, for 2, 3 and 8 threads', async () => {
    const one = walkFolder(tree, EXT);
    assert.ok(one.listing.raw.length >= 3, 'the tree has names that are not UTF-8');
    assert.ok(one.listing.classes.includes('linked') && one.listing.classes.includes('caf\uFFFD'));
    // inThisThread false: every chunk walked by a worker (this thread would otherwise take most
    // of them while the workers start).
    for (const [threads, here] of [[2, false], [3, false], [8, false], [3, true]] as const) {
      const what = `${threads} threads${here ? ', this one too' : ''}`;
      const walks = folderWalks();
      const par = await within(HANG_MS, `walk on ${what}`, walkFolderParallel(tree, EXT, threads, here));
      assert.equal(folderWalks(), walks + 1, 'one walk');
      assertSame(par.listing, one.listing, what);
      assert.deepEqual(par.dirs.map((d) => [d.rel.toString('hex'), d.mtimeNs]), one.dirs.map((d) => [d.rel.toString('hex'), d.mtimeNs]), `${what}: stamps`);
    }
  });

  it('throws the one-thread walk\u2019s errors: a class with no image, a missing folder, no class folders', async () => {
    const bad = join(root, 'bad');
    for (const c of ['a', 'b', 'c', 'd']) mkdirSync(join(bad, c), { recursive: true });
    for (const c of ['a', 'b', 'd']) writeFileSync(join(bad, c, '1.jpg'), 'x');
    writeFileSync(join(bad, 'c', 'readme.txt'), 'x');
    const message = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return `${(e as { code?: string }).code}: ${(e as Error).message}`;
      }
      return 'no error';
    };
    const rejection = async (p: Promise<unknown>) => p.then(() => 'no error', (e: Error & { code?: string }) => `${e.code}: ${e.message}`);
    for (const dir of [bad, join(root, 'missing'), join(tree, 'ca', 'odd')]) {
      const want = message(() => walkFolder(dir, EXT));
      assert.notEqual(want, 'no error', dir);
      for (const here of [false, true]) assert.equal(await within(HANG_MS, 'walk', rejection(walkFolderParallel(dir, EXT, 3, here))), want, `${dir}, this thread too: ${here}`);
    }
    assert.match(message(() => walkFolder(bad, EXT)), /^ERR_INVALID_DATASET: .*class folder "c" holds no image/);
  });

  it('the blocking walk, its workers silent: this thread walks every chunk, to the same listing and errors', () => {
    // Workers that never answer (a worker that failed or never started looks the same): no hang,
    // the one-thread listing. That workers do walk while this thread blocks is checked from the
    // package (test/package.test.ts): under tsx a worker's imports wait for this thread.
    const silent = new URL('../fixtures/silent-walk-worker.ts', import.meta.url);
    const one = walkFolder(tree, EXT);
    for (const here of [false, true]) {
      const report: SyncWalkReport = { byWorkers: -1, rewalked: -1 };
      const par = walkFolderParallelSync(tree, EXT, 3, { inThisThread: here, stallMs: 20, workerEntry: silent, report });
      assertSame(par.listing, one.listing, `this thread too: ${here}`);
      assert.equal(report.byWorkers, 0);
      assert.equal(report.rewalked, 0, 'silent workers claim no chunk, so none is walked twice');
    }
    const bad = join(root, 'bad-sync');
    for (const c of ['a', 'b']) mkdirSync(join(bad, c), { recursive: true });
    writeFileSync(join(bad, 'a', '1.jpg'), 'x');
    assert.throws(() => walkFolderParallelSync(bad, EXT, 3, { stallMs: 20, workerEntry: silent }), /class folder "b" holds no image/);
  });

  it('the async listing writes the cache the sync one reads, and reads it back', async () => {
    const walked = await within(HANG_MS, 'list', listFolderAsync(tree, EXT, 'auto', 3));
    assert.equal(walked.origin, 'walked');
    await folderCacheWritten(tree, EXT);
    const cached = listFolder(tree, EXT);
    assert.equal(cached.origin, 'cached');
    assertSame(cached.listing, walked.listing, 'sync read of the async cache');
    const again = await within(HANG_MS, 'list', listFolderAsync(tree, EXT, 'auto', 3));
    assert.equal(again.origin, 'cached');
    assertSame(again.listing, walkFolder(tree, EXT).listing, 'async read');
    const walks = folderWalks();
    assert.equal((await listFolderAsync(tree, EXT, 'off', 3)).origin, 'walked');
    assert.equal(folderWalks(), walks + 1);
  });

  it('sources.imageFolderAsync gives the dataset sources.imageFolder gives, and checks its options the same way', async () => {
    const sync = imageFolderSource(tree, { size: 4, decode: 'threads', index: 'off' });
    const async_ = await within(HANG_MS, 'open', sources.imageFolderAsync(tree, { size: 4, decode: 'threads', index: 'off' }));
    try {
      assert.equal(async_.listing, 'walked');
      assert.deepEqual(async_.classes, sync.classes);
      assert.deepEqual(async_.files, sync.files);
      assert.deepEqual(Array.from(async_.labels), Array.from(sync.labels));
      for (let i = 0; i < sync.length; i++) assert.deepEqual(async_.pathOf(i), sync.pathOf(i));
      await assert.rejects(sources.imageFolderAsync(tree, { size: 4, index: 'no' as never }), (e: Error & { code?: string }) => e.code === 'ERR_INVALID_OPTION');
    } finally {
      await async_.close();
      await sync.close();
    }
  });
});
