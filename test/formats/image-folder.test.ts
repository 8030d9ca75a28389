// Image folders and the shared image decoder: the listing follows torchvision (sorted classes as
// labels, loose and hidden entries ignored), decoded pixels are checked after resize and crop, every
// layout and channel count, typed errors for missing and empty folders and for files that do not
// decode, exactly-once delivery through reader workers, and fuzzed JPEG/PNG bytes through the decoder.
// Fixtures are written by sharp into a temporary folder: each class is a solid colour, so a decoded
// pixel tells which class it came from.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { type Batch, BatchError, DataLoader } from '../../src/index.js';
import { decodeImage, hwcToChw } from '../../src/image/image-decode.js';
import { type ImageFolder, compareCodePoints, imageFolderSource } from '../../src/dataset/formats/images/image-folder.js';
import { PROCESS_DECODE_PREFETCH } from '../../src/image/processes/image-decoding.js';
import { CHILD_MS, HANG_MS, SUITE_MS, collect, range, sorted, within } from '../fixtures.js';
import { assertFuzzClean, fuzz } from './fuzz.js';

type RGB = readonly [number, number, number];

/** Class colours, far apart so that JPEG error never confuses them. */
const COLOURS: Record<string, RGB> = { ant: [220, 30, 40], Bee: [20, 200, 60], zebra: [30, 60, 230] };

function solid(width: number, height: number, [r, g, b]: RGB, alpha?: number): ReturnType<typeof sharp> {
  return sharp({ create: { width, height, channels: alpha === undefined ? 3 : 4, background: { r, g, b, alpha: alpha ?? 1 } } });
}

/** width × height, left and right quarters `edge`, the middle half `mid` (lossless PNG). */
async function banded(width: number, height: number, edge: RGB, mid: RGB): Promise<Buffer> {
  const px = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) px.set(x < width / 4 || x >= (3 * width) / 4 ? edge : mid, (y * width + x) * 3);
  }
  return sharp(px, { raw: { width, height, channels: 3 } }).png().toBuffer();
}

function near(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: number, what: string): void {
  for (let i = 0; i < expected.length; i++) {
    assert.ok(Math.abs(actual[i]! - expected[i]!) <= tol, `${what}: got [${Array.from(actual)}], expected [${Array.from(expected)}] ± ${tol}`);
  }
}

/** The [C, H, W] pixel at (y, x). */
function pixelChw(data: Uint8Array, c: number, h: number, w: number, y: number, x: number): number[] {
  return range(c).map((k) => data[k * h * w + y * w + x]!);
}

let root: string;
let dir: string;
/** Expected files in listing order, with their class. */
let expected: { file: string; cls: string }[];

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'stoker-images-'));
  dir = join(root, 'train');
  // Made in a scrambled order; the listing must sort. Sizes differ, formats mix, one extension is upper case.
  const plan: [string, string, number, number, 'jpeg' | 'png' | 'webp'][] = [
    ['zebra', 'z2.png', 50, 30, 'png'],
    ['zebra', 'z1.JPG', 40, 60, 'jpeg'],
    ['ant', 'b.webp', 33, 33, 'webp'],
    ['ant', 'a.jpg', 64, 48, 'jpeg'],
    ['ant', 'sub/c.png', 20, 70, 'png'],
    ['ant', 'x.jpeg', 48, 64, 'jpeg'],
    ['Bee', 'x.png', 90, 25, 'png'],
    ['Bee', 'y.jpg', 25, 90, 'jpeg'],
  ];
  for (const [cls, file, w, h, fmt] of plan) {
    mkdirSync(join(dir, cls, 'sub'), { recursive: true });
    const img = solid(w, h, COLOURS[cls]!);
    writeFileSync(join(dir, cls, file), await (fmt === 'jpeg' ? img.jpeg({ quality: 95 }) : fmt === 'png' ? img.png() : img.webp({ quality: 95 })).toBuffer());
  }
  // Ignored: a loose image at the top, a hidden folder, a hidden file and a text file in a class.
  writeFileSync(join(dir, 'loose.png'), await solid(8, 8, [0, 0, 0]).png().toBuffer());
  mkdirSync(join(dir, '.ipynb_checkpoints'));
  writeFileSync(join(dir, '.ipynb_checkpoints', 'old.png'), await solid(8, 8, [0, 0, 0]).png().toBuffer());
  writeFileSync(join(dir, 'ant', '.hidden.png'), await solid(8, 8, [0, 0, 0]).png().toBuffer());
  writeFileSync(join(dir, 'ant', 'notes.txt'), 'not an image');
  // torchvision's order: the class folder's own files (sorted), then its sub-folders'.
  expected = [
    { file: 'Bee/x.png', cls: 'Bee' }, { file: 'Bee/y.jpg', cls: 'Bee' },
    { file: 'ant/a.jpg', cls: 'ant' }, { file: 'ant/b.webp', cls: 'ant' }, { file: 'ant/x.jpeg', cls: 'ant' }, { file: 'ant/sub/c.png', cls: 'ant' },
    { file: 'zebra/z1.JPG', cls: 'zebra' }, { file: 'zebra/z2.png', cls: 'zebra' },
  ];
});

after(() => rmSync(root, { recursive: true, force: true }));

describe('sources.imageFolder: listing', () => {
  it('labels follow class names sorted by code point; files are sorted within a class, sub-folders included', () => {
    const ds = imageFolderSource(dir, { size: 16 });
    assert.deepEqual(ds.classes, ['Bee', 'ant', 'zebra']);
    assert.deepEqual(ds.files, expected.map((e) => e.file));
    assert.deepEqual(Array.from(ds.labels), expected.map((e) => ds.classes.indexOf(e.cls)));
    assert.deepEqual(ds.counts, [2, 4, 2]);
    assert.equal(ds.length, 8);
  });

  it('ignores loose files at the top, hidden entries and other extensions; extensions are case-insensitive and configurable', () => {
    const ds = imageFolderSource(dir, { size: 16 });
    assert.ok(!ds.files.some((f) => f.includes('loose') || f.includes('.hidden') || f.includes('notes') || f.includes('ipynb')));
    const pngOnly = imageFolderSource(dir, { size: 16, extensions: ['PNG'] });
    assert.deepEqual(pngOnly.files, ['Bee/x.png', 'ant/sub/c.png', 'zebra/z2.png']);
  });

  it('follows a symbolic link to a class folder', () => {
    const linked = join(root, 'linked');
    mkdirSync(linked);
    symlinkSync(join(dir, 'zebra'), join(linked, 'zebra'));
    const ds = imageFolderSource(linked, { size: 8 });
    assert.deepEqual(ds.classes, ['zebra']);
    assert.deepEqual(ds.files, ['zebra/z1.JPG', 'zebra/z2.png']);
  });

  it('sorts as Python does, by code point, not by UTF-16 unit', () => {
    const names = ['\u{1F600}', '\uFB01', 'a'];
    assert.deepEqual([...names].sort(compareCodePoints), ['a', '\uFB01', '\u{1F600}']);
    assert.deepEqual([...names].sort(), ['a', '\u{1F600}', '\uFB01'], 'the default sort differs, which is why it is not used');
  });

  it('a missing folder is ERR_FILE_ACCESS naming it', () => {
    const missing = join(root, 'nope');
    assert.throws(() => imageFolderSource(missing, { size: 8 }), (e: Error & { code?: string }) => e.code === 'ERR_FILE_ACCESS' && e.message.includes(missing) && /ENOENT/.test(e.message));
  });

  it('a folder without class folders, or a class without images, is refused naming the folder and the extensions', () => {
    const flat = join(root, 'flat');
    mkdirSync(flat);
    writeFileSync(join(flat, 'a.jpg'), 'x');
    assert.throws(() => imageFolderSource(flat, { size: 8 }), (e: Error & { code?: string }) => e.code === 'ERR_INVALID_DATASET' && e.message.includes(flat) && /no class folders/.test(e.message));
    const empty = join(root, 'empty');
    mkdirSync(join(empty, 'cats'), { recursive: true });
    writeFileSync(join(empty, 'cats', 'a.gif'), 'x');
    assert.throws(() => imageFolderSource(empty, { size: 8 }), (e: Error & { code?: string }) =>
      e.code === 'ERR_INVALID_DATASET' && e.message.includes(empty) && /"cats" holds no image/.test(e.message) && e.message.includes('.jpg .jpeg .png .webp'));
  });

  it('reading the whole folder at once stays within a small file-descriptor limit (reads are gated per dataset)', () => {
    const many = join(root, 'many');
    mkdirSync(join(many, 'only'), { recursive: true });
    const png = readFileSync(join(dir, 'zebra', 'z2.png'));
    for (let k = 0; k < 300; k++) writeFileSync(join(many, 'only', `${k}.png`), png);
    const module = new URL('../../src/dataset/formats/images/image-folder.ts', import.meta.url).href;
    const script = `import { imageFolderSource } from ${JSON.stringify(module)};
      const ds = imageFolderSource(${JSON.stringify(many)}, { size: 4 });
      const all = await Promise.all(Array.from({ length: ds.length }, (_, i) => ds.get(i)));
      console.log('read', all.length);`;
    // 300 concurrent opens would exceed 160 descriptors; 64 in flight plus Node's own fit.
    const run = spawnSync('bash', ['-c', 'ulimit -n 160 && exec "$0" --import tsx --input-type=module -e "$1"', process.execPath, script], { encoding: 'utf8', timeout: CHILD_MS });
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /read 300/);
  });

  it('bad options are ERR_INVALID_OPTION naming the knob', () => {
    for (const [opts, knob] of [
      [{ size: 0 }, 'size'], [{ size: [10] }, 'size'], [{ size: 2.5 }, 'size'], [{ size: 8, channels: 2 }, 'channels'],
      [{ size: 8, layout: 'nchw' }, 'layout'], [{ size: 8, fit: 'cover' }, 'fit'], [{ size: 8, extensions: [] }, 'extensions'],
      [{ size: 8, maxInputPixels: -1 }, 'maxInputPixels'], [{ size: 8, decode: 'fork' }, 'decode'], [{ size: 8, decodeProcesses: 0 }, 'decodeProcesses'],
      [{ size: 8, decodeProcesses: 1.5 }, 'decodeProcesses'],
    ] as const) {
      assert.throws(() => imageFolderSource(dir, opts as never), (e: Error & { code?: string }) => e.code === 'ERR_INVALID_OPTION' && e.message.includes(`\`${knob}\``), JSON.stringify(opts));
    }
  });
});

describe('sources.imageFolder: decoded samples', () => {
  it('every sample is a uint8 [3, H, W] image of its class colour and an int32 scalar label', async () => {
    const ds = imageFolderSource(dir, { size: [12, 20] });
    for (let i = 0; i < ds.length; i++) {
      const { image, label } = await ds.get(i);
      assert.equal(image.dtype, 'uint8');
      assert.deepEqual(image.shape, [3, 12, 20]);
      assert.equal(label.dtype, 'int32');
      assert.deepEqual(label.shape, []);
      assert.equal(label.data[0], ds.labels[i]);
      const colour = COLOURS[ds.classes[label.data[0]!]!]!;
      for (const [y, x] of [[0, 0], [6, 10], [11, 19]] as const) near(pixelChw(image.data as Uint8Array, 3, 12, 20, y, x), colour, 6, `${ds.files[i]} at (${y}, ${x})`);
    }
  });

  it("layout 'hwc' holds the same pixels interleaved", async () => {
    const chw = imageFolderSource(dir, { size: 10 });
    const hwc = imageFolderSource(dir, { size: 10, layout: 'hwc' });
    for (const i of [0, 3, 7]) {
      const a = (await chw.get(i)).image;
      const b = (await hwc.get(i)).image;
      assert.deepEqual(b.shape, [10, 10, 3]);
      for (let p = 0; p < 100; p++) for (let c = 0; c < 3; c++) assert.equal(b.data[p * 3 + c], a.data[c * 100 + p]);
    }
  });

  it('interleaved to planar is exact for every channel count, pixel count and source alignment', () => {
    for (const channels of [1, 3, 4]) {
      for (const pixels of [1, 3, 4, 35, 64, 224 * 224]) {
        for (const offset of [0, 1, 4]) {
          const backing = new Uint8Array(offset + pixels * channels);
          for (let i = 0; i < backing.length; i++) backing[i] = (i * 131 + 7) & 255;
          const src = backing.subarray(offset);
          const want = new Uint8Array(pixels * channels);
          for (let p = 0; p < pixels; p++) for (let c = 0; c < channels; c++) want[c * pixels + p] = src[p * channels + c]!;
          assert.ok(Buffer.from(hwcToChw(src, pixels, channels)).equals(Buffer.from(want)), `${channels} channels, ${pixels} pixels, offset ${offset}`);
        }
      }
    }
  });

  it("fit 'center-crop' keeps the aspect ratio and crops the centre; 'resize' stretches", async () => {
    const red: RGB = [255, 0, 0];
    const blue: RGB = [0, 0, 255];
    const png = await banded(80, 40, red, blue);
    // Centre crop: 80×40 → 40×20 → the middle 20 columns, exactly the blue band (its edges blur a little).
    const crop = await decodeImage(png, { size: [20, 20], source: 'banded.png' });
    for (const x of [2, 10, 17]) near(pixelChw(crop.data, 3, 20, 20, 10, x), blue, 2, `crop x=${x}`);
    for (const x of [0, 19]) assert.ok(crop.data[10 * 20 + x]! < 60, `crop x=${x} is mostly blue, not red`);
    // Stretch: the outer quarters stay red.
    const fill = await decodeImage(png, { size: [20, 20], fit: 'resize', source: 'banded.png' });
    near(pixelChw(fill.data, 3, 20, 20, 10, 0), red, 2, 'stretch, left edge');
    near(pixelChw(fill.data, 3, 20, 20, 10, 19), red, 2, 'stretch, right edge');
    near(pixelChw(fill.data, 3, 20, 20, 10, 10), blue, 2, 'stretch, centre');
    // A tall image crops top and bottom: 20×80 with bands across rows.
    const tall = await sharp(png).rotate(90).png().toBuffer();
    const tallCrop = await decodeImage(tall, { size: [10, 10], layout: 'hwc', source: 'tall.png' });
    for (const y of [1, 5, 8]) near(Array.from(tallCrop.data.subarray((y * 10 + 5) * 3, (y * 10 + 5) * 3 + 3)), blue, 2, `tall crop y=${y}`);
  });

  it('grayscale inputs give 3 equal channels; channels 1 gives gray; channels 4 adds opaque alpha or keeps it', async () => {
    const gray = await sharp(Buffer.alloc(30 * 20, 77), { raw: { width: 30, height: 20, channels: 1 } }).toColourspace('b-w').png().toBuffer();
    assert.equal((await sharp(gray).metadata()).channels, 1, 'the fixture really is one-channel');
    const rgb = await decodeImage(gray, { size: [4, 4], source: 'gray.png' });
    assert.deepEqual(rgb.shape, [3, 4, 4]);
    assert.ok(Array.from(rgb.data).every((v) => v === 77));
    const one = await decodeImage(await solid(10, 10, [200, 200, 200]).png().toBuffer(), { size: [5, 5], channels: 1, source: 'light.png' });
    assert.deepEqual(one.shape, [1, 5, 5]);
    near(one.data, new Array(25).fill(200), 2, 'gray of a light image');
    const opaque = await decodeImage(gray, { size: [2, 2], channels: 4, layout: 'hwc', source: 'gray.png' });
    assert.deepEqual(Array.from(opaque.data.subarray(0, 4)), [77, 77, 77, 255]);
    const translucent = await solid(6, 6, [10, 20, 30], 0.5).png().toBuffer();
    const kept = await decodeImage(translucent, { size: [3, 3], channels: 4, layout: 'hwc', source: 'a.png' });
    near(kept.data.subarray(0, 4), [10, 20, 30, 128], 1, 'alpha kept');
    const dropped = await decodeImage(translucent, { size: [3, 3], layout: 'hwc', source: 'a.png' });
    near(dropped.data.subarray(0, 3), [10, 20, 30], 1, 'alpha dropped, not composited');
  });

  it('bytes that are not a supported image, truncated data and pixel bombs are ERR_BAD_FILE naming the source', async () => {
    const jpeg = await solid(64, 64, [1, 2, 3]).jpeg().toBuffer();
    const cases: [Uint8Array, RegExp, number?][] = [
      [new TextEncoder().encode('<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>'), /not a JPEG, PNG, WebP, GIF, TIFF or AVIF file \(it starts with 3c 73/],
      [new Uint8Array(0), /it is empty/],
      [jpeg.subarray(0, jpeg.length >> 1), /cannot decode the image \(jpeg\): .*premature end/],
      [jpeg, /more than 1000 pixels .*Raise maxInputPixels/, 1000],
    ];
    for (const [bytes, pattern, maxInputPixels] of cases) {
      await assert.rejects(decodeImage(bytes, { size: [8, 8], source: '/data/cls/img.jpg', maxInputPixels }), (e: Error & { code?: string }) => {
        assert.equal(e.code, 'ERR_BAD_FILE');
        assert.match(e.message, /^\/data\/cls\/img\.jpg: at byte 0: /);
        assert.match(e.message, pattern);
        assert.ok(!e.message.includes('\n'), 'one line');
        return true;
      });
    }
  });
});

describe('sources.imageFolder through the loader', { timeout: SUITE_MS }, () => {
  let big: string;
  let n: number;
  before(async () => {
    // 3 classes × 11 images, small and of mixed formats, one corrupt copy made per test when needed.
    big = join(root, 'big');
    n = 0;
    for (const cls of Object.keys(COLOURS)) {
      mkdirSync(join(big, cls), { recursive: true });
      for (let k = 0; k < 11; k++) {
        const img = solid(16 + k, 24 - k, COLOURS[cls]!);
        writeFileSync(join(big, cls, `${k}.${k % 2 ? 'png' : 'jpg'}`), await (k % 2 ? img.png() : img.jpeg({ quality: 95 })).toBuffer());
        n++;
      }
    }
  });

  /** Check a batch's rows: each image has its label's colour, each label is the listing's. */
  function checkRows(ds: ImageFolder, batch: Batch): void {
    const images = batch.get('image');
    const labels = batch.get('label').data as Int32Array;
    assert.deepEqual(images.shape.slice(1), [3, 8, 8]);
    assert.equal(labels.length, batch.sampleIds.length);
    batch.sampleIds.forEach((id, r) => {
      assert.equal(labels[r], ds.labels[id], `label of sample ${id}`);
      const data = (images.data as Uint8Array).subarray(r * 192, (r + 1) * 192);
      near(pixelChw(data, 3, 8, 8, 4, 4), COLOURS[ds.classes[labels[r]!]!]!, 8, `pixel of sample ${id} (${ds.files[id]})`);
    });
  }

  it('with 2 reader workers every sample arrives exactly once per epoch, with its label, from the listing made at open', async () => {
    const ds = imageFolderSource(big, { size: 8 });
    // A file that appears after the listing: workers must not list again (it would shift every
    // later index of its class onto another file, and its black pixels would show).
    const late = join(big, 'ant', '0-late.png');
    writeFileSync(late, await solid(10, 10, [0, 0, 0]).png().toBuffer());
    after(() => rmSync(late, { force: true }));
    const loader = await DataLoader.create(ds, { batchSize: 5, workers: 2, mode: 'streaming', dropLast: false, seed: 7 });
    assert.equal(loader.stats().workers, 2);
    assert.deepEqual(loader.names, ['image', 'label']);
    for (let e = 0; e < 2; e++) {
      const batches = await within(HANG_MS, `epoch ${e}`, collect(loader.epoch(e)));
      const ids = batches.flatMap((b) => [...b.sampleIds]);
      assert.deepEqual(sorted(ids), range(n));
      for (const b of batches) checkRows(ds, b);
    }
    await loader.close();
  });

  it('decoding in processes it asks the CPU loader for a window of PROCESS_DECODE_PREFETCH batches (threads: the double buffer; the loader\'s prefetch wins), and every sample arrives once', async () => {
    const procs = imageFolderSource(big, { size: 8, decode: 'processes', decodeProcesses: 1 });
    assert.equal(procs.prefetch, PROCESS_DECODE_PREFETCH);
    const loader = await DataLoader.create(procs, { batchSize: 2, workers: 1, mode: 'streaming', dropLast: false });
    const batches = await within(HANG_MS, 'epoch 0', collect(loader.epoch(0)));
    assert.deepEqual(sorted(batches.flatMap((b) => [...b.sampleIds])), range(n));
    for (const b of batches) checkRows(procs, b);
    assert.equal(loader.prefetchDepth, PROCESS_DECODE_PREFETCH);
    await loader.close();
    await procs.close();
    const threads = imageFolderSource(big, { size: 8, decode: 'threads' });
    assert.equal(threads.prefetch, undefined);
    const shallow = await DataLoader.create(threads, { batchSize: 2, workers: 1, mode: 'streaming', dropLast: false });
    await within(HANG_MS, 'epoch 0 (threads)', collect(shallow.epoch(0)));
    assert.equal(shallow.prefetchDepth, 2);
    await shallow.close();
    await threads.close();
    const asked = imageFolderSource(big, { size: 8, decode: 'processes', decodeProcesses: 1 });
    const pinned = await DataLoader.create(asked, { batchSize: 2, workers: 1, mode: 'streaming', prefetch: 3 });
    await within(HANG_MS, 'epoch 0 (prefetch 3)', collect(pinned.epoch(0)));
    assert.equal(pinned.prefetchDepth, 3);
    await pinned.close();
    await asked.close();
  });

  it('reads class folders and files whose names are not valid UTF-8 by their bytes, on the main thread and through reader workers with decode processes', async () => {
    const odd = mkdtempSync(join(root, 'latin1-'));
    const bytesPath = (...parts: (string | Buffer)[]) => Buffer.concat(parts.flatMap((p, i) => [...(i > 0 ? [Buffer.from('/')] : []), typeof p === 'string' ? Buffer.from(p) : p]));
    const cafe = Buffer.from('caf\xe9', 'latin1'); // a Latin-1 class folder name
    mkdirSync(bytesPath(odd, cafe));
    mkdirSync(join(odd, 'plain'));
    const colours: RGB[] = [[200, 20, 20], [20, 200, 20], [20, 20, 200]];
    const files: [Buffer, RGB][] = [
      [bytesPath(odd, cafe, Buffer.from('\xe8.png', 'latin1')), colours[0]!],
      [bytesPath(odd, cafe, 'b.png'), colours[1]!],
      [bytesPath(odd, 'plain', Buffer.from('\xe9.png', 'latin1')), colours[2]!],
    ];
    for (const [path, c] of files) writeFileSync(path, await solid(4, 4, c).png().toBuffer());
    const ds = imageFolderSource(odd, { size: 2, decode: 'threads' });
    assert.deepEqual(ds.classes, ['caf\uFFFD', 'plain'], 'shown with U+FFFD');
    assert.deepEqual(ds.files, ['caf\uFFFD/b.png', 'caf\uFFFD/\uFFFD.png', 'plain/\uFFFD.png'], 'sorted by bytes: b (0x62) before \xe8');
    assert.deepEqual(Array.from(ds.labels), [0, 0, 1]);
    const want = [colours[1]!, colours[0]!, colours[2]!];
    for (let i = 0; i < 3; i++) near(pixelChw((await ds.get(i)).image.data as Uint8Array, 3, 2, 2, 0, 0), want[i]!, 2, `sample ${i}`);
    const procs = imageFolderSource(odd, { size: 2, decode: 'processes', decodeProcesses: 1 });
    const loader = await DataLoader.create(procs, { batchSize: 3, workers: 1, mode: 'streaming', dropLast: false, shuffle: false });
    try {
      const [batch] = await within(HANG_MS, 'epoch 0', collect(loader.epoch(0)));
      const images = batch!.get('image').data as Uint8Array;
      for (let i = 0; i < 3; i++) near(pixelChw(images.subarray(i * 12, (i + 1) * 12), 3, 2, 2, 0, 0), want[i]!, 2, `worker sample ${i}`);
    } finally {
      await loader.close();
      await procs.close();
      await ds.close();
    }
  });

  it('a corrupt file fails its batch with a BatchError naming the file; other batches arrive, and errors: skip skips it', async () => {
    const broken = join(root, 'broken');
    rmSync(broken, { recursive: true, force: true });
    for (const cls of Object.keys(COLOURS)) {
      mkdirSync(join(broken, cls), { recursive: true });
      for (let k = 0; k < 4; k++) writeFileSync(join(broken, cls, `${k}.png`), await solid(12, 12, COLOURS[cls]!).png().toBuffer());
    }
    // Classes sort Bee, ant, zebra: ant/1.png is sample 5, in batch 1 of 3 (batches of 4, no shuffle).
    const bad = join(broken, 'ant', '1.png');
    writeFileSync(bad, (await solid(12, 12, [0, 0, 0]).png().toBuffer()).subarray(0, 60));
    const ds = imageFolderSource(broken, { size: 8 });
    assert.equal(ds.files[5], 'ant/1.png');

    const loader = await DataLoader.create(ds, { batchSize: 4, workers: 2, mode: 'streaming', shuffle: false });
    const seen: number[] = [];
    const error = await within(HANG_MS, 'epoch', (async () => {
      for await (const b of loader.epoch(0)) seen.push(...b.sampleIds);
    })()).catch((e: unknown) => e);
    assert.ok(error instanceof BatchError, String(error));
    assert.equal(error.batchIndex, 1);
    assert.deepEqual(error.sampleIds, [4, 5, 6, 7]);
    assert.ok(error.message.includes(bad), error.message);
    assert.match(error.message, /cannot decode the image/);
    assert.deepEqual(seen, [0, 1, 2, 3], 'the batch before it arrived');
    await loader.close();

    const skipping = await DataLoader.create(ds, { batchSize: 4, workers: 2, mode: 'streaming', shuffle: false, errors: 'skip' });
    for (let e = 0; e < 2; e++) {
      const batches = await within(HANG_MS, 'skipping epoch', collect(skipping.epoch(e)));
      assert.deepEqual(batches.flatMap((b) => [...b.sampleIds]), [0, 1, 2, 3, 8, 9, 10, 11]);
      for (const b of batches) checkRows(ds, b);
      assert.equal(skipping.stats().epochs[e]!.failedBatches, 1);
    }
    await skipping.close();
  });
});

describe('decodeImage under fuzzing', { timeout: SUITE_MS }, () => {
  const TARGETS = new URL('./image-targets.ts', import.meta.url).href;
  for (const [format, ext, target] of [['JPEG', '.jpg', 'decodeJpeg'], ['PNG', '.png', 'decodePng']] as const) {
    it(`1000 mutants of a small ${format} decode or fail with ERR_BAD_FILE naming the file`, async (t) => {
      // Gradients, so that the entropy-coded data is not trivially short.
      const px = Buffer.alloc(24 * 16 * 3);
      for (let i = 0; i < px.length; i++) px[i] = (i * 37) % 251;
      const img = sharp(px, { raw: { width: 24, height: 16, channels: 3 } });
      const valid = await (format === 'JPEG' ? img.jpeg({ quality: 80 }) : img.png()).toBuffer();
      const report = await fuzz({ valid, ext, module: TARGETS, target, cases: 1000, seed: 6 });
      assertFuzzClean(report);
      assert.ok(report.ok > 0 && (report.refused.ERR_BAD_FILE ?? 0) > 0, JSON.stringify({ ...report, failures: undefined }));
      // How long it took is a figure to read, not an assertion: it depends on the machine's load.
      t.diagnostic(`${format}: 1000 mutants in ${Math.round(report.ms)} ms`);
    });
  }
});
