// The resize of decode-time views (src/dataset/formats/image-resample.ts) is Pillow's BILINEAR
// resample byte for byte: shrinking, enlarging, mixed, fractional boxes, the identity, and the flip
// (which mirrors the unflipped result). The reference bytes were written by Pillow
// (test/fixtures/pillow_resample.py → pillow-resample.json).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { resampleBilinear } from '../../src/dataset/formats/image-resample.js';

interface Fixture {
  readonly width: number;
  readonly height: number;
  readonly cases: readonly { readonly box: [number, number, number, number]; readonly size: [number, number]; readonly pixels: string }[];
}

const fixture = JSON.parse(readFileSync(new URL('../fixtures/pillow-resample.json', import.meta.url), 'utf8')) as Fixture;

/** The same deterministic source image as the fixture's generator. */
function source(): Uint8Array {
  let s = 12345n;
  const out = new Uint8Array(fixture.width * fixture.height * 3);
  for (let i = 0; i < out.length; i++) {
    s = (s * 1103515245n + 12345n) % 2n ** 31n;
    out[i] = Number((s >> 16n) & 0xffn);
  }
  return out;
}

function mirror(px: Uint8Array, w: number, h: number): Uint8Array {
  const out = new Uint8Array(px.length);
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) out.set(px.subarray((y * w + x) * 3, (y * w + x) * 3 + 3), (y * w + (w - 1 - x)) * 3);
  return out;
}

describe('image resample (Pillow BILINEAR)', () => {
  const src = source();
  for (const c of fixture.cases) {
    const [x0, y0, x1, y1] = c.box;
    const [w, h] = c.size;
    it(`box ${c.box.join(',')} → ${w}×${h} gives Pillow's bytes, and its mirror when flipped`, () => {
      const want = new Uint8Array(Buffer.from(c.pixels, 'base64'));
      const got = resampleBilinear(src, fixture.width, fixture.height, 3, { x0, y0, x1, y1 }, w, h, false);
      assert.equal(got.length, want.length);
      const diff = got.findIndex((v, i) => v !== want[i]);
      assert.equal(diff, -1, `first differing byte ${diff}: ${got[diff]} vs Pillow's ${want[diff]}`);
      assert.deepEqual(resampleBilinear(src, fixture.width, fixture.height, 3, { x0, y0, x1, y1 }, w, h, true), mirror(want, w, h));
    });
  }

  it('one channel and four channels resample each channel alone', () => {
    const src3 = source();
    const [x0, y0, x1, y1] = fixture.cases[2]!.box;
    const [w, h] = fixture.cases[2]!.size;
    const rgb = resampleBilinear(src3, fixture.width, fixture.height, 3, { x0, y0, x1, y1 }, w, h, false);
    const n = fixture.width * fixture.height;
    const green = new Uint8Array(n);
    const rgba = new Uint8Array(n * 4);
    for (let p = 0; p < n; p++) {
      green[p] = src3[p * 3 + 1]!;
      rgba.set([src3[p * 3]!, src3[p * 3 + 1]!, src3[p * 3 + 2]!, 200], p * 4);
    }
    const g = resampleBilinear(green, fixture.width, fixture.height, 1, { x0, y0, x1, y1 }, w, h, false);
    const a = resampleBilinear(rgba, fixture.width, fixture.height, 4, { x0, y0, x1, y1 }, w, h, false);
    for (let p = 0; p < w * h; p++) {
      assert.equal(g[p], rgb[p * 3 + 1]);
      assert.deepEqual([...a.subarray(p * 4, p * 4 + 4)], [rgb[p * 3], rgb[p * 3 + 1], rgb[p * 3 + 2], 200]);
    }
  });
});
