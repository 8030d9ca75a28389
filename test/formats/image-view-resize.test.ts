// How a decode-time view's box is resized (NOTE [views at decode] in image-decode.ts), against the
// reference — Pillow's BILINEAR resize of the decoded box (image-resample.ts, itself checked byte
// for byte against Pillow): a box enlarged on a side is that reference exactly (flipped: its
// mirror); a reduced box and a box at least 4× the output of a JPEG (decoded at ½–⅛ scale on load)
// are within the tolerance docs/images.md states, a box from 2× to 4× is that reference exactly, and a
// center-crop view of a large JPEG is the whole image's resize, cut; the sharp path cuts a large
// flipped box where it is. And the JPEG frame header read in place of libvips' metadata agrees
// with libvips.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import sharp, { type JpegOptions } from 'sharp';
import { decodeImage, jpegHeader, shrinkFor } from '../../src/image/image-decode.js';
import { resampleBilinear } from '../../src/image/image-resample.js';
import { setVipsDirect } from '../../src/image/vips-direct.js';
import { setTurboJpeg } from '../../src/image/turbo-jpeg.js';
import { PickKey } from '../../src/sampler/pick-key.js';
import { type View, boxFor, centerCropGeometry, viewFrom } from '../../src/image/crop-box.js';

/** A photo-like JPEG: a smooth random colour field with texture and noise (as bench/images.ts writes), and `rects` flat rectangles with hard edges. */
async function photo(w: number, h: number, seed: number, options: JpegOptions = {}, rects = 0): Promise<Buffer> {
  let s = seed * 2654435761 + 1;
  const rand = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const small = Buffer.alloc(12 * 10 * 3);
  for (let i = 0; i < small.length; i++) small[i] = Math.floor(rand() * 256);
  const field = await sharp(small, { raw: { width: 12, height: 10, channels: 3 } }).resize(w, h, { kernel: 'cubic' }).raw().toBuffer();
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const t = 30 * Math.sin(x / 5) * Math.cos(y / 7);
      for (let c = 0; c < 3; c++) {
        const i = (y * w + x) * 3 + c;
        field[i] = Math.max(0, Math.min(255, field[i]! + t + (rand() - 0.5) * 40));
      }
    }
  }
  for (let r = 0; r < rects; r++) {
    const x0 = Math.floor(rand() * w);
    const y0 = Math.floor(rand() * h);
    const x1 = Math.min(w, x0 + 1 + Math.floor((rand() * w) / 3));
    const y1 = Math.min(h, y0 + 1 + Math.floor((rand() * h) / 3));
    const colour = [rand() * 256, rand() * 256, rand() * 256].map(Math.floor);
    for (let y = y0; y < y1; y++) for (let x = x0; x < x1; x++) field.set(colour, (y * w + x) * 3);
  }
  return sharp(field, { raw: { width: w, height: h, channels: 3 } }).jpeg({ quality: 90, ...options }).toBuffer();
}

const SIZE = 224;

/** The reference: the box decoded at full size, resized by Pillow's BILINEAR, mirrored when flipped. */
async function reference(jpeg: Buffer, view: View, key: PickKey): Promise<Uint8Array> {
  const { width, height } = await sharp(jpeg).metadata();
  const box = boxFor(view, key, width, height);
  const { data, info } = await sharp(jpeg).extract({ left: box.left, top: box.top, width: box.width, height: box.height }).raw().toBuffer({ resolveWithObject: true });
  return resampleBilinear(data, info.width, info.height, 3, { x0: 0, y0: 0, x1: info.width, y1: info.height }, SIZE, SIZE, box.flip);
}

async function decoded(jpeg: Buffer, view: View, key: PickKey): Promise<Uint8Array> {
  const t = await decodeImage(jpeg, { size: [SIZE, SIZE], layout: 'hwc', source: 'test.jpg', view: { view, sample: key.sample, repeat: key.repeat, epoch: key.epoch, seed: key.seed } });
  return t.data;
}

function stats(a: Uint8Array, b: Uint8Array): { max: number; mean: number } {
  assert.equal(a.length, b.length);
  let max = 0;
  let sum = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    sum += d;
    if (d > max) max = d;
  }
  return { max, mean: sum / a.length };
}

/** The first keys (sample 0, 1, …) whose box under `view` on a w × h image satisfies `want`. */
function keysWhere(view: View, w: number, h: number, want: (box: ReturnType<typeof boxFor>) => boolean, n: number): PickKey[] {
  const keys: PickKey[] = [];
  for (let sample = 0; keys.length < n && sample < 10_000; sample++) {
    const key = new PickKey(sample, 0, 0, { hi: 0, lo: 7 });
    if (want(boxFor(view, key, w, h))) keys.push(key);
  }
  assert.equal(keys.length, n, 'no such boxes');
  return keys;
}

describe('decode-time view resize', () => {
  it('a box enlarged on a side is Pillow BILINEAR of the decoded box exactly, mirrored when flipped', async () => {
    const jpeg = await photo(400, 350, 1);
    const train = viewFrom('train');
    const keys = keysWhere(train, 400, 350, (b) => b.width < SIZE || b.height < SIZE, 6);
    let flips = 0;
    for (const key of keys) {
      flips += boxFor(train, key, 400, 350).flip ? 1 : 0;
      assert.deepEqual(await decoded(jpeg, train, key), await reference(jpeg, train, key), `sample ${key.sample}`);
    }
    assert.ok(flips > 0 && flips < keys.length, 'both flipped and unflipped boxes were checked');
  });

  it('a reduced box (libvips linear) is within tolerance of Pillow BILINEAR', async () => {
    const jpeg = await photo(400, 350, 2);
    const train = viewFrom('train');
    for (const key of keysWhere(train, 400, 350, (b) => b.width >= SIZE && b.height >= SIZE, 4)) {
      const d = stats(await decoded(jpeg, train, key), await reference(jpeg, train, key));
      assert.ok(d.max <= 3 && d.mean <= 0.5, `sample ${key.sample}: ${JSON.stringify(d)}`);
    }
  });

  it('a box at least 4× the output of a JPEG (decoded at ½ scale or less: NOTE [shrink margin]) is within tolerance of the full decode', async () => {
    const train = viewFrom('train');
    for (const [w, h, subsampling] of [[2000, 1500, '4:2:0'], [1500, 2000, '4:4:4']] as const) {
      const jpeg = await photo(w, h, 3, { chromaSubsampling: subsampling }, 12);
      for (const key of keysWhere(train, w, h, (b) => shrinkFor(train, b, SIZE, SIZE) >= 2, 4)) {
        const box = boxFor(train, key, w, h);
        const d = stats(await decoded(jpeg, train, key), await reference(jpeg, train, key));
        assert.ok(d.max <= 16 && d.mean <= 1, `${w}×${h} box ${JSON.stringify(box)}: ${JSON.stringify(d)}`);
      }
    }
  });

  it('a box from 2× to 4× the output, which the margin keeps at full scale, is Pillow BILINEAR of the decoded box exactly', async () => {
    const train = viewFrom('train');
    const jpeg = await photo(1200, 900, 5);
    const keys = keysWhere(train, 1200, 900, (b) => b.width >= 2 * SIZE && b.height >= 2 * SIZE && shrinkFor(train, b, SIZE, SIZE) === 1, 3);
    for (const key of keys) assert.deepEqual(await decoded(jpeg, train, key), await reference(jpeg, train, key), `sample ${key.sample}`);
  });

  it('the sharp path (no direct route) resizes a large box, flipped or not, from the box itself: Pillow BILINEAR of it exactly', async () => {
    const train = viewFrom('train');
    const jpeg = await photo(1200, 900, 7, {}, 6);
    const keys = keysWhere(train, 1200, 900, (b) => b.width >= 2 * SIZE && b.height >= 2 * SIZE, 4);
    assert.ok(keys.some((k) => boxFor(train, k, 1200, 900).flip) && keys.some((k) => !boxFor(train, k, 1200, 900).flip), 'flipped and unflipped boxes');
    setVipsDirect(false);
    setTurboJpeg(false);
    try {
      for (const key of keys) assert.deepEqual(await decoded(jpeg, train, key), await reference(jpeg, train, key), `sample ${key.sample} box ${JSON.stringify(boxFor(train, key, 1200, 900))}`);
    } finally {
      setVipsDirect(true);
      setTurboJpeg(true);
    }
  });

  it("a center-crop view of a large JPEG is not decoded shrunk: the whole image's resize, cut (torchvision's Resize + CenterCrop)", async () => {
    for (const [w, h, resize, crop] of [[1200, 900, 256, 224], [1000, 1500, 300, 224]] as const) {
      const jpeg = await photo(w, h, 6);
      const view = viewFrom({ centerCrop: { resize, crop } });
      const key = new PickKey(0, 0, 0, { hi: 0, lo: 0 });
      const box = boxFor(view, key, w, h);
      assert.ok(box.width >= 2 * SIZE && box.height >= 2 * SIZE, 'a box that a shrink-on-load could take');
      const { data } = await sharp(jpeg).raw().toBuffer({ resolveWithObject: true });
      const g = centerCropGeometry(resize, crop, w, h);
      const whole = resampleBilinear(data, w, h, 3, { x0: 0, y0: 0, x1: w, y1: h }, g.rw, g.rh, false);
      const want = new Uint8Array(SIZE * SIZE * 3);
      for (let y = 0; y < SIZE; y++) want.set(whole.subarray(((g.top + y) * g.rw + g.left) * 3, ((g.top + y) * g.rw + g.left + SIZE) * 3), y * SIZE * 3);
      assert.deepEqual(await decoded(jpeg, view, key), want, `${w}×${h} Resize(${resize}) + CenterCrop(${crop})`);
    }
  });

  it('the JPEG frame header gives what libvips reads (or nothing, for what it does not cover)', async () => {
    const rgb = await photo(123, 77, 4);
    const progressive = await photo(64, 99, 5, { progressive: true });
    const grey = await sharp(rgb).greyscale().jpeg().toBuffer();
    for (const jpeg of [rgb, progressive, grey, await sharp(rgb).withMetadata({ orientation: 6 }).jpeg().toBuffer()]) {
      const m = await sharp(jpeg).metadata();
      const h = jpegHeader(jpeg);
      assert.ok(h !== undefined);
      assert.deepEqual([h.width, h.height, h.channels, h.space, h.hasAlpha, h.depth], [m.width, m.height, m.channels, m.space, m.hasAlpha, m.depth]);
    }
    assert.equal(jpegHeader(await sharp(rgb).toColourspace('cmyk').jpeg().toBuffer()), undefined, 'CMYK goes through libvips');
    assert.equal(jpegHeader(rgb.subarray(0, 20)), undefined, 'a truncated header goes through libvips');
    assert.equal(jpegHeader(await sharp(rgb).png().toBuffer()), undefined);
  });
});
