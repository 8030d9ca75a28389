// The resize of decode-time views (src/image/image-resample.ts) is Pillow's BILINEAR
// resample byte for byte: shrinking, enlarging, mixed, fractional boxes, the identity, and the flip
// (which mirrors the unflipped result). The reference bytes were written by Pillow
// (test/fixtures/pillow_resample.py → pillow-resample.json). Both implementations are checked: the
// WebAssembly one (kernels/resample.c, src/image/resample-wasm.ts), which decodes use where
// it instantiates, and the JavaScript loops; and the WebAssembly cast gives toFloats' JavaScript values.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { toFloats } from '../../src/image/image-decode.js';
import { type ResampleBox, resampleBilinear, resampleBilinearJs } from '../../src/image/image-resample.js';
import { setWasmResample, wasmResampler } from '../../src/image/resample-wasm.js';

type Resample = (src: Uint8Array, srcW: number, srcH: number, channels: number, box: ResampleBox, outW: number, outH: number, flip: boolean) => Uint8Array;
const wasm = wasmResampler();
const impls: [string, Resample][] = [['JavaScript', resampleBilinearJs]];
if (wasm !== undefined) impls.push(['WebAssembly', (...a) => wasm.resample(...a)]);

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

it('the WebAssembly resampler instantiates here, and resampleBilinear uses it', () => {
  assert.ok(wasm !== undefined, 'kernels/resample.wasm did not instantiate');
  const src = source();
  const box = { x0: 3.5, y0: 1.25, x1: 60, y1: 41 };
  assert.deepEqual(resampleBilinear(src, fixture.width, fixture.height, 3, box, 37, 29, true), wasm.resample(src, fixture.width, fixture.height, 3, box, 37, 29, true));
});

for (const [impl, resampleBilinear] of impls) describe(`image resample (Pillow BILINEAR), ${impl}`, () => {
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

describe('WebAssembly resample and cast against the JavaScript', { skip: wasm === undefined && 'WebAssembly did not instantiate' }, () => {
  let seed = 99;
  const rand = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32;

  it('gives the same bytes for random boxes, sizes, channels and flips (enlarged, reduced, mixed)', () => {
    const W = 203;
    const H = 151;
    for (const channels of [1, 3, 4]) {
      const src = new Uint8Array(W * H * channels);
      for (let i = 0; i < src.length; i++) src[i] = (rand() * 256) | 0;
      for (let t = 0; t < 120; t++) {
        const bw = 1 + rand() * (W - 1);
        const bh = 1 + rand() * (H - 1);
        const x0 = rand() * (W - bw);
        const y0 = rand() * (H - bh);
        const box = { x0, y0, x1: x0 + bw, y1: y0 + bh };
        const outW = 1 + Math.floor(rand() * 260);
        const outH = 1 + Math.floor(rand() * 260);
        const flip = rand() < 0.5;
        const js = resampleBilinearJs(src, W, H, channels, box, outW, outH, flip);
        const wa = wasm!.resample(src, W, H, channels, box, outW, outH, flip);
        const diff = wa.findIndex((v, i) => v !== js[i]);
        assert.equal(diff, -1, `channels ${channels} box ${JSON.stringify(box)} → ${outW}×${outH} flip ${flip}: byte ${diff}`);
      }
    }
  });

  it('a sub-rectangle of a wider image (rows `stride` apart), copied in or read in place from sourceArea, gives the bytes of its compact copy', () => {
    const W = 181;
    const H = 97;
    for (const channels of [1, 3]) {
      for (let t = 0; t < 40; t++) {
        // The cut: cw × ch pixels at (cx, cy) of a W × H image; the compact copy is the reference.
        const cw = 1 + Math.floor(rand() * (W - 1));
        const ch = 1 + Math.floor(rand() * (H - 1));
        const cx = Math.floor(rand() * (W - cw + 1));
        const cy = Math.floor(rand() * (H - ch + 1));
        const full = new Uint8Array(W * H * channels);
        for (let i = 0; i < full.length; i++) full[i] = (rand() * 256) | 0;
        const compact = new Uint8Array(cw * ch * channels);
        for (let y = 0; y < ch; y++) compact.set(full.subarray(((cy + y) * W + cx) * channels, ((cy + y) * W + cx + cw) * channels), y * cw * channels);
        const bw = 0.5 + rand() * (cw - 0.5);
        const bh = 0.5 + rand() * (ch - 0.5);
        const x0 = rand() * (cw - bw);
        const y0 = rand() * (ch - bh);
        const box = { x0, y0, x1: x0 + bw, y1: y0 + bh };
        const outW = 1 + Math.floor(rand() * 240);
        const outH = 1 + Math.floor(rand() * 240);
        const flip = rand() < 0.5;
        const want = resampleBilinearJs(compact, cw, ch, channels, box, outW, outH, flip);
        const view = full.subarray((cy * W + cx) * channels);
        const label = `channels ${channels} cut ${cw}×${ch} at ${cx},${cy} box ${JSON.stringify(box)} → ${outW}×${outH}`;
        assert.deepEqual(resampleBilinearJs(view, cw, ch, channels, box, outW, outH, flip, W * channels), want, `JavaScript, ${label}`);
        assert.deepEqual(wasm!.resample(view, cw, ch, channels, box, outW, outH, flip, undefined, W * channels), want, `WebAssembly copied in, ${label}`);
        const area = wasm!.sourceArea(full.length);
        area.set(full);
        const inPlace = area.subarray((cy * W + cx) * channels);
        assert.deepEqual(wasm!.resample(inPlace, cw, ch, channels, box, outW, outH, flip, undefined, W * channels), want, `WebAssembly in place, ${label}`);
      }
    }
  });

  it('resample and cast fused in one call give the JavaScript resample then cast; a transient result views the module memory', () => {
    const W = 120;
    const H = 90;
    const src = new Uint8Array(W * H * 3);
    for (let i = 0; i < src.length; i++) src[i] = (rand() * 256) | 0;
    const normalize = { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] };
    const box = { x0: 7.5, y0: 3.25, x1: 101, y1: 77 };
    try {
      for (const output of ['float32', 'bfloat16', 'float16'] as const) {
        for (const interleaved of [false, true]) {
          setWasmResample(false);
          const want = toFloats(resampleBilinearJs(src, W, H, 3, box, 64, 48, true), 64 * 48, 3, interleaved, output, normalize);
          // The table as toFloats makes it: cast a ramp of every byte value per channel through the JS loop.
          const ramp = new Uint8Array(256 * 3);
          for (let v = 0; v < 256; v++) ramp.fill(v, v * 3, v * 3 + 3);
          const planes = toFloats(ramp, 256, 3, false, output, normalize);
          setWasmResample(true);
          for (const transient of [false, true]) {
            const got = wasm!.resample(src, W, H, 3, box, 64, 48, true, { table: planes, interleaved, transient });
            assert.equal(got.constructor, want.constructor);
            assert.deepEqual(Array.from(got), Array.from(want), `${output} interleaved ${interleaved} transient ${transient}`);
            assert.equal(got.buffer.byteLength > got.byteLength, transient, 'a transient result is a view of the module memory, else its own array');
          }
        }
      }
    } finally {
      setWasmResample(true);
    }
  });

  it('casts to the same float32, bfloat16 and float16 values, planes and interleaved', () => {
    const px = new Uint8Array(57 * 31 * 3);
    for (let i = 0; i < px.length; i++) px[i] = (rand() * 256) | 0;
    const normalize = { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] };
    try {
      for (const output of ['float32', 'bfloat16', 'float16'] as const) {
        for (const interleaved of [false, true]) {
          setWasmResample(true);
          const wa = toFloats(px, 57 * 31, 3, interleaved, output, normalize);
          setWasmResample(false);
          const js = toFloats(px, 57 * 31, 3, interleaved, output, normalize);
          assert.equal(wa.constructor, js.constructor);
          assert.deepEqual(wa, js, `${output} interleaved ${interleaved}`);
        }
      }
    } finally {
      setWasmResample(true);
    }
  });
});
