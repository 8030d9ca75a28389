// What a view decodes and how it resamples it (view-resample.ts): a center-crop view's outputs are
// those of the whole image's resize, cut after (torchvision's Resize then CenterCrop), computed from
// only the region it names; other views resample their box alone (crop, then resize). Checked
// against image-resample.ts's whole resize — itself Pillow's bytes (test/formats/image-resample.test.ts);
// test/formats/image-torchvision.test.ts compares decodes with torchvision itself.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PickKey } from '../sampler/pick-key.js';
import { boxFor, centerCropGeometry, viewFrom } from './crop-box.js';
import { resampleBilinearJs, resampleCoeffs } from './image-resample.js';
import { resampleAsPil, viewResample } from './view-resample.js';
import { lumaPil } from './image-reference.js';

let seed = 99;
const rand = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32;

function noise(n: number): Uint8Array {
  const px = new Uint8Array(n);
  for (let i = 0; i < n; i++) px[i] = (rand() * 256) | 0;
  return px;
}

/** Rows [top, top + h) and columns [left, left + w) of interleaved pixels `w0` wide. */
function cut(px: Uint8Array, w0: number, channels: number, left: number, top: number, w: number, h: number): Uint8Array {
  const out = new Uint8Array(w * h * channels);
  for (let y = 0; y < h; y++) out.set(px.subarray(((top + y) * w0 + left) * channels, ((top + y) * w0 + left + w) * channels), y * w * channels);
  return out;
}

describe('view resample', () => {
  it('the coefficients of a part of a resize are that part of the whole resize’s, its taps moved by `at`', () => {
    for (let t = 0; t < 200; t++) {
      const inSize = 1 + Math.floor(rand() * 400);
      const outSize = 1 + Math.floor(rand() * 400);
      const first = Math.floor(rand() * outSize);
      const count = 1 + Math.floor(rand() * (outSize - first));
      const at = Math.floor(rand() * 7) - 3;
      const whole = resampleCoeffs(inSize, 0, inSize, outSize);
      const part = resampleCoeffs(inSize, 0, inSize, outSize, first, count, at);
      for (let i = 0; i < count; i++) {
        assert.equal(part.start[i], whole.start[first + i]! + at);
        assert.equal(part.count[i], whole.count[first + i]);
        assert.deepEqual(part.k.subarray(i * part.ksize, i * part.ksize + part.count[i]!), whole.k.subarray((first + i) * whole.ksize, (first + i) * whole.ksize + whole.count[first + i]!));
      }
    }
  });

  it('a center crop is the crop of the whole image’s resize, computed from the region it names (1, 3, 4 bands); one channel out of RGB is luma first', () => {
    const sizes: [number, number][] = [[60, 45], [45, 60], [32, 32], [31, 33], [20, 14], [7, 5], [150, 4], [4, 150], [97, 61], [1, 1]];
    for (const [w, h] of sizes) {
      for (const [resize, crop] of [[32, 28], [24, 24], [40, 17]] as const) {
        const view = viewFrom({ centerCrop: { resize, crop } });
        const box = boxFor(view, new PickKey(0, 0, 0, 0), w, h);
        const plan = viewResample(view, box, w, h, crop, crop);
        const r = plan.region;
        assert.ok(r.left >= 0 && r.top >= 0 && r.left + r.width <= w && r.top + r.height <= h, `${w}×${h}: the region ${JSON.stringify(r)} lies inside the image`);
        const g = centerCropGeometry(resize, crop, w, h);
        for (const channels of [1, 3, 4]) {
          const px = noise(w * h * channels);
          const whole = resampleBilinearJs(px, w, h, channels, { x0: 0, y0: 0, x1: w, y1: h }, g.rw, g.rh, false);
          const want = cut(whole, g.rw, channels, g.left, g.top, crop, crop);
          const region = cut(px, w, channels, r.left, r.top, r.width, r.height);
          const what = `${w}×${h}, Resize(${resize}) + CenterCrop(${crop}), ${channels} bands`;
          assert.deepEqual(resampleBilinearJs(region, r.width, r.height, channels, plan.box, crop, crop, false), want, what);
          if (channels === 3) {
            // channels 1 out of RGB: PIL's convert('L') first, then the resize.
            const luma = resampleBilinearJs(lumaPil(px, 3, w * h), w, h, 1, { x0: 0, y0: 0, x1: w, y1: h }, g.rw, g.rh, false);
            assert.deepEqual(resampleAsPil(region, r.width, r.height, 3, r.width * 3, plan.box, crop, crop, false, 1), cut(luma, g.rw, 1, g.left, g.top, crop, crop), `${what} to luma`);
          }
        }
      }
    }
  });

  it('a RandomResizedCrop box is cut first: the region is the box and its resize reads nothing beside it', () => {
    const view = viewFrom('train');
    for (let s = 0; s < 50; s++) {
      const box = boxFor(view, new PickKey(s, 0, 0, 3), 300, 200);
      const plan = viewResample(view, box, 300, 200, 64, 64);
      assert.deepEqual(plan.region, { left: box.left, top: box.top, width: box.width, height: box.height });
      assert.deepEqual(plan.box, { x0: 0, y0: 0, x1: box.width, y1: box.height });
    }
  });
});
