// How a decode-time view's box is resized (NOTE [views at decode] in image-decode.ts), against the
// reference — Pillow's BILINEAR resize of the decoded box (image-resample.ts, itself checked byte
// for byte against Pillow): a box enlarged on a side is that reference exactly (flipped: its
// mirror); a reduced box (libvips' linear reduction) and a box at least twice the output of a JPEG
// (decoded at ½–⅛ scale on load, cut after) are within the tolerance docs/images.md states. And the
// JPEG frame header read in place of libvips' metadata agrees with libvips.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import sharp, { type JpegOptions } from 'sharp';
import { decodeImage, jpegHeader } from '../../src/image/image-decode.js';
import { resampleBilinear } from '../../src/image/image-resample.js';
import { PickKey } from '../../src/sampler/pick-key.js';
import { type View, boxFor, viewFrom } from '../../src/image/crop-box.js';

/** A photo-like JPEG: a smooth random colour field with texture and noise (as bench/images.ts writes). */
async function photo(w: number, h: number, seed: number, options: JpegOptions = {}): Promise<Buffer> {
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

  it('a box at least twice the output of a JPEG (decoded shrunk on load) is within tolerance of the full decode', async () => {
    for (const [w, h, subsampling] of [[1200, 900, '4:2:0'], [1000, 1500, '4:4:4']] as const) {
      const jpeg = await photo(w, h, 3, { chromaSubsampling: subsampling });
      for (const view of [viewFrom('eval'), viewFrom({ centerCrop: { resize: 300, crop: 224 }, flip: true })]) {
        for (const key of keysWhere(view, w, h, () => true, 2)) {
          const box = boxFor(view, key, w, h);
          assert.ok(box.width >= 2 * SIZE && box.height >= 2 * SIZE);
          const d = stats(await decoded(jpeg, view, key), await reference(jpeg, view, key));
          assert.ok(d.max <= 16 && d.mean <= 2.5, `${w}×${h} box ${JSON.stringify(box)}: ${JSON.stringify(d)}`);
        }
      }
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
