// decodeImage's pixels against the references a PyTorch user compares them with: torchvision's
// Resize + CenterCrop geometry (truncated long side, banker's-rounded crop anchor), PIL's convert('RGB')
// (alpha dropped before any resize, CMYK by Pillow's formula, no ICC profile, no EXIF rotation),
// PIL's convert('L') luma, and torchvision's 16-bit to 8-bit rule (the high byte).
// Fixtures are made in memory by sharp or by the small PNG writer below; expected values come from the
// reference's formula written out here, or from Pillow 9.4 (Debian 12's python3-pil) with the command
// quoted beside them.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { crc32, deflateSync } from 'node:zlib';
import sharp from 'sharp';
import { decodeImage } from '../../src/image/image-decode.js';
import { coverPlan } from '../../src/image/image-reference.js';

/** A PNG written by hand (sharp cannot write chosen 16-bit samples): `samples` row-major, big-endian when 16-bit. */
function png(width: number, height: number, colourType: 0 | 2, depth: 8 | 16, samples: readonly number[]): Buffer {
  const perPixel = colourType === 0 ? 1 : 3;
  const bytesPer = depth / 8;
  const rows = Buffer.alloc(height * (1 + width * perPixel * bytesPer));
  let o = 0;
  let s = 0;
  for (let y = 0; y < height; y++) {
    rows[o++] = 0; // filter: none
    for (let k = 0; k < width * perPixel; k++, s++) {
      if (depth === 16) {
        rows.writeUInt16BE(samples[s]!, o);
        o += 2;
      } else rows[o++] = samples[s]!;
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([depth, colourType, 0, 0, 0], 8);
  return Buffer.concat([Buffer.from('\x89PNG\r\n\x1a\n', 'latin1'), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(rows)), chunk('IEND', Buffer.alloc(0))]);
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/** The chunks of a PNG, whole (length, type, data, CRC), after the signature. */
function chunks(file: Buffer): { type: string; bytes: Buffer }[] {
  const out: { type: string; bytes: Buffer }[] = [];
  for (let o = 8; o < file.length; ) {
    const end = o + 12 + file.readUInt32BE(o);
    out.push({ type: file.toString('latin1', o + 4, o + 8), bytes: file.subarray(o, end) });
    o = end;
  }
  return out;
}

/** An 8-bit RGB PNG whose pixel (x, y) is fn(x, y). */
function rgbPng(width: number, height: number, fn: (x: number, y: number) => readonly [number, number, number]): Buffer {
  const samples: number[] = [];
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) samples.push(...fn(x, y));
  return png(width, height, 2, 8, samples);
}

/** Python's round() of a multiple of 0.5, as torchvision calls it (ties to even), written independently of the source. */
function pythonRound(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** torchvision 0.26, transcribed: Resize(n) (_compute_resized_output_size) then CenterCrop((h, w)) (_center_crop_compute_crop_anchor). */
function torchvision(srcH: number, srcW: number, n: number, h: number, w: number) {
  const [short, long] = srcW <= srcH ? [srcW, srcH] : [srcH, srcW];
  const [newShort, newLong] = [n, Math.trunc((n * long) / short)];
  const [rw, rh] = srcW <= srcH ? [newShort, newLong] : [newLong, newShort];
  return { rh, rw, top: pythonRound((rh - h) / 2), left: pythonRound((rw - w) / 2) };
}

const hwc = (bytes: Uint8Array, size: [number, number], more: Partial<Parameters<typeof decodeImage>[1]> & { output?: 'uint8'; normalize?: undefined } = {}) =>
  decodeImage(bytes, { size, layout: 'hwc', source: 'test.png', ...more });

describe("fit 'center-crop' is torchvision's Resize + CenterCrop", () => {
  it('the resize and the crop anchor match torchvision over many input and output sizes', () => {
    for (let srcH = 1; srcH <= 70; srcH += 3) {
      for (let srcW = 1; srcW <= 70; srcW += 2) {
        for (const [h, w] of [[16, 16], [7, 7], [12, 20], [20, 12], [1, 9]] as const) {
          const plan = coverPlan(srcH, srcW, h, w);
          // The short side's target is the smallest that covers the output; torchvision's arithmetic from there.
          const n = srcW <= srcH ? plan.rw : plan.rh;
          assert.deepEqual(plan, torchvision(srcH, srcW, n, h, w), `${srcH}×${srcW} → ${h}×${w}`);
          assert.ok(plan.rh >= h && plan.rw >= w, `${srcH}×${srcW} → ${h}×${w}: the resize covers the output`);
          const smaller = torchvision(srcH, srcW, n - 1, h, w);
          assert.ok(n - 1 < 1 || smaller.rh < h || smaller.rw < w, `${srcH}×${srcW} → ${h}×${w}: no smaller short side covers`);
          if (h === w) assert.equal(n, h, 'a square output resizes the short side to its side, as Resize(224) + CenterCrop(224)');
        }
      }
    }
  });

  it('the crop starts where torchvision puts it, for every excess, odd or even (no resize: exact pixels)', async () => {
    // Pixel (x, y) holds (x, y, 7): the output's first pixel says where the crop began.
    for (const [h, w] of [[16, 16], [12, 16]] as const) {
      for (let extra = 0; extra <= 9; extra++) {
        const wide = await hwc(rgbPng(w + extra, h, (x, y) => [x, y, 7]), [h, w]);
        const tall = await hwc(rgbPng(w, h + extra, (x, y) => [x, y, 7]), [h, w]);
        // Either way the resize is the identity (the short side already covers), so CenterCrop cuts at round(extra / 2).
        assert.deepEqual(Array.from(wide.data.subarray(0, 3)), [pythonRound(extra / 2), 0, 7], `${h}×${w + extra} → ${h}×${w}: left = round(${extra} / 2)`);
        assert.deepEqual(Array.from(tall.data.subarray(0, 3)), [0, pythonRound(extra / 2), 7], `${h + extra}×${w} → ${h}×${w}: top = round(${extra} / 2)`);
      }
    }
  });

  it('the long side is truncated as torchvision does, not rounded (30×41 → 16: resized to 16×21, crop from column 2)', async () => {
    // R = 6x across 41 columns. torchvision: long side int(16 · 41 / 30) = 21 (not 22), left = round(2.5) = 2.
    const image = await hwc(rgbPng(41, 30, (x) => [6 * x, 0, 0]), [16, 16]);
    const plan = torchvision(30, 41, 16, 16, 16);
    assert.deepEqual(plan, { rh: 16, rw: 21, top: 0, left: 2 });
    for (let j = 3; j <= 12; j++) {
      const sourceX = ((plan.left + j + 0.5) * 41) / plan.rw - 0.5; // the input column under output column j
      const got = image.data[(8 * 16 + j) * 3]!;
      assert.ok(Math.abs(got - 6 * sourceX) <= 3, `column ${j}: R ${got}, expected about ${(6 * sourceX).toFixed(1)} (input column ${sourceX.toFixed(2)})`);
    }
  });
});

describe("colour as PIL's convert() gives it", () => {
  /** 8×8 RGBA: the left half opaque red, the right half fully transparent green. */
  const halfTransparent = () => {
    const px = Buffer.alloc(8 * 8 * 4);
    for (let p = 0; p < 64; p++) px.set(p % 8 < 4 ? [255, 0, 0, 255] : [0, 255, 0, 0], p * 4);
    return sharp(px, { raw: { width: 8, height: 8, channels: 4 } }).png().toBuffer();
  };

  it('dropping alpha keeps the colour under transparent pixels, with or without a resize', async () => {
    const file = await halfTransparent();
    // Pillow: Image.open(f).convert('RGB').resize((4, 4)) keeps green on the right: convert() runs before the resize.
    for (const size of [[8, 8], [4, 4]] as [number, number][]) {
      const rgb = await hwc(file, size, { fit: 'resize' });
      const last = (size[1] - 1) * 3;
      assert.deepEqual(Array.from(rgb.data.subarray(0, 3)), [255, 0, 0], `${size}: left`);
      assert.deepEqual(Array.from(rgb.data.subarray(last, last + 3)), [0, 255, 0], `${size}: right, the colour under alpha 0, not black`);
      const grey = await hwc(file, size, { fit: 'resize', channels: 1 });
      assert.deepEqual([grey.data[0], grey.data[size[1] - 1]], [76, 150], `${size}: luma of red and of green`);
    }
  });

  it('channels 4 keeps alpha and resizes alpha-weighted, as PIL resizes RGBA (transparent stays transparent)', async () => {
    const rgba = await hwc(await halfTransparent(), [4, 4], { fit: 'resize', channels: 4 });
    assert.deepEqual(Array.from(rgba.data.subarray(0, 4)), [255, 0, 0, 255]);
    assert.equal(rgba.data[3 * 4 + 3], 0, 'the right edge is transparent');
  });

  it('channels 1 is PIL\'s convert("L") luma, exactly', async () => {
    // python3 -c "from PIL import Image; im=Image.new('RGB',(8,1)); im.putdata([(255,0,0),(0,255,0),(0,0,255),(1,2,3),(200,100,50),(17,201,99),(128,128,128),(255,255,255)]); print(list(im.convert('L').getdata()))"
    const pixels = [[255, 0, 0], [0, 255, 0], [0, 0, 255], [1, 2, 3], [200, 100, 50], [17, 201, 99], [128, 128, 128], [255, 255, 255]] as const;
    const grey = await hwc(rgbPng(8, 1, (x) => pixels[x]!), [1, 8], { channels: 1, fit: 'resize' });
    assert.deepEqual(Array.from(grey.data), [76, 150, 29, 2, 124, 134, 128, 255]);
    // And on many pixels: Pillow's fixed point, (19595 R + 38470 G + 7471 B + 2^15) >> 16.
    const at = (x: number, y: number) => [(x * 37 + y * 11) & 255, (x * 5 + y * 101) & 255, (x * 73 + y * 29) & 255] as const;
    const many = await hwc(rgbPng(64, 16, at), [16, 64], { channels: 1, fit: 'resize' });
    for (let y = 0; y < 16; y++) {
      for (let x = 0; x < 64; x++) {
        const [r, g, b] = at(x, y);
        assert.equal(many.data[y * 64 + x], (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16, `pixel (${x}, ${y}) = ${[r, g, b]}`);
      }
    }
  });

  it('an embedded ICC profile is ignored: the stored values come out, as PIL gives them', async () => {
    const stored = [100, 150, 200] as const;
    const plain = rgbPng(4, 4, () => stored);
    // Splice sharp's Display P3 profile into the plain file, so that the stored bytes stay known.
    const tagged = chunks(await sharp(plain).withIccProfile('p3').png().toBuffer()).find((c) => c.type === 'iCCP');
    assert.ok(tagged !== undefined, 'sharp wrote an iCCP chunk');
    const parts = chunks(plain);
    const file = Buffer.concat([plain.subarray(0, 8), parts[0]!.bytes, tagged.bytes, ...parts.slice(1).map((c) => c.bytes)]);
    assert.equal((await sharp(file).metadata()).hasProfile, true, 'the fixture carries the profile');
    const applied = await sharp(file).removeAlpha().raw().toBuffer();
    assert.notDeepEqual(Array.from(applied.subarray(0, 3)), Array.from(stored), 'applying the profile would change the pixels');
    const rgb = await hwc(file, [4, 4]);
    assert.deepEqual(Array.from(rgb.data.subarray(0, 3)), Array.from(stored));
  });

  it("a CMYK JPEG without a profile converts by Pillow's formula, as PIL's convert('RGB')", async () => {
    // python3 -c "import numpy as np; from PIL import Image; c=np.zeros((16,16,4),np.uint8);
    //   [c.__setitem__((slice(None),slice(4*i,4*i+4)),v) for i,v in enumerate([(0,0,0,0),(255,0,0,0),(0,128,255,0),(40,80,120,60)])];
    //   Image.fromarray(c,'CMYK').save('cmyk.jpg',quality=100,subsampling=0)"  (Pillow writes an Adobe marker, inverted CMYK)
    // then Image.open('cmyk.jpg').convert('RGB') holds, per 4-column block: (255,255,255) (0,255,255) (255,127,0) (164,134,103).
    const jpeg = Buffer.from(CMYK_JPEG, 'base64');
    const meta = await sharp(jpeg).metadata();
    assert.deepEqual([meta.space, meta.hasProfile], ['cmyk', false], 'the fixture is CMYK without a profile');
    const rgb = await hwc(jpeg, [16, 16]);
    const blocks = [[255, 255, 255], [0, 255, 255], [255, 127, 0], [164, 134, 103]];
    for (let y = 0; y < 16; y++) {
      for (let x = 0; x < 16; x++) assert.deepEqual(Array.from(rgb.data.subarray((y * 16 + x) * 3, (y * 16 + x) * 3 + 3)), blocks[x >> 2], `pixel (${x}, ${y})`);
    }
  });

  it('16-bit PNGs give the high byte of each sample, in every channel count (torchvision: to_dtype(uint8, scale=True))', async () => {
    const samples = [0x12ff, 0x1280, 0x00ff, 0xffff, 0x0100, 0x00fe, 0x8000, 0x7fff];
    const high = samples.map((v) => v >> 8);
    const grey = png(8, 1, 0, 16, samples);
    assert.deepEqual(Array.from((await hwc(grey, [1, 8], { channels: 1, fit: 'resize' })).data), high, 'grey, channels 1');
    const spread = (await hwc(grey, [1, 8], { fit: 'resize' })).data;
    assert.deepEqual(Array.from(spread.filter((_, i) => i % 3 === 0)), high, 'grey, channels 3');
    const rgb = png(8, 1, 2, 16, samples.flatMap((v) => [v, 0x0000, 0xffff]));
    assert.deepEqual(Array.from((await hwc(rgb, [1, 8], { fit: 'resize' })).data), high.flatMap((v) => [v, 0, 255]), 'RGB, channels 3');
  });

  it('EXIF orientation is not applied (PIL.Image.open and torchvision decode_image do not by default)', async () => {
    // 40 wide, 20 high: red on the left, blue on the right; tagged "rotate 90° clockwise to view".
    const px = Buffer.alloc(40 * 20 * 3);
    for (let p = 0; p < 800; p++) px.set(p % 40 < 20 ? [255, 0, 0] : [0, 0, 255], p * 3);
    const jpeg = await sharp(px, { raw: { width: 40, height: 20, channels: 3 } }).jpeg({ quality: 95 }).withMetadata({ orientation: 6 }).toBuffer();
    assert.equal((await sharp(jpeg).metadata()).orientation, 6, 'the fixture carries the tag');
    const image = await hwc(jpeg, [20, 40], { fit: 'resize' });
    assert.deepEqual(image.shape, [20, 40, 3]);
    const near = (at: number, want: readonly number[]) => want.every((v, c) => Math.abs(image.data[at * 3 + c]! - v) <= 8);
    assert.ok(near(10 * 40 + 5, [255, 0, 0]) && near(10 * 40 + 35, [0, 0, 255]), 'red stays left and blue right: the stored pixels, unrotated');
  });
});

/** The CMYK JPEG made by the Pillow command quoted in its test (16 × 16, 513 bytes). */
const CMYK_JPEG =
  '/9j/7gAOQWRvYmUAZAAAAAAA/9sAQwABAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEB/8AAFAgAEAAQBEMRAE0RAFkRAEsRAP/EAB8AAAEFAQEBAQEBAAAAAAAAAAABAgMEBQYHCAkKC//EALUQAAIBAwMCBAMFBQQEAAABfQECAwAEEQUSITFBBhNRYQcicRQygZGhCCNCscEVUtHwJDNicoIJChYXGBkaJSYnKCkqNDU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6g4SFhoeIiYqSk5SVlpeYmZqio6Slpqeoqaqys7S1tre4ubrCw8TFxsfIycrS09TV1tfY2drh4uPk5ebn6Onq8fLz9PX29/j5+v/aAA4EQwBNAFkASwAAPwCP/g+c/wCcXX/d7P8A76PX9/Ff38V/fxX9rn7SP/Mmf9zF/wC4Kv4v/wBlH/mff+5W/wDdjr/Ij/4ILf8AN1n/AHQz/wB7DXwf+21/zTP/ALnP/wB1Sv4o/wDg+c/5xdf93s/++j1/aBX+u5X3hX9rn7SP/Mmf9zF/7gq/i/8A2Uf+Z9/7lb/3Y6/yI/8Aggt/zdZ/3Qz/AN7DXwf+21/zTP8A7nP/AN1Sv//Z';
