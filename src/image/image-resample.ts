// Internal: not exported from the package entry.
// The resize of a decode-time view's box: Pillow's antialiased bilinear resample (what torchvision's
// RandomResizedCrop and Resize do to a PIL image by default: `resize(size, BILINEAR, box)`),
// transcribed — a triangle filter widened by the downscale factor, coefficients normalized and held
// in 22-bit fixed point, the horizontal pass first into 8-bit rows (rounded and clipped), then the
// vertical pass — with the horizontal flip folded into the horizontal pass. The rule: for the same
// uint8 source and the same (possibly fractional) box, the bytes are Pillow's (test/formats/image-
// resample.test.ts checks them against bytes Pillow wrote).
//
// NOTE [why not libvips' resize] sharp's resize cost 3–5 ms for a box enlarged on either side (libvips
// enlarges through an affine transform with an interpolator, even with kernel 'nearest'; measured on
// the 2-core development machine: 250×220 → 224² 3.0–4.2 ms, 150² → 224² 2.5–2.7 ms), and most
// RandomResizedCrop boxes of an ImageNet-sized image are smaller than 224 on at least one side. This
// loop does any box → 224² in ~1–1.5 ms, is Pillow's filter (the reference users compare against),
// and leaves libvips only the decode of the box's rows.

import { wasmResampler } from './resample-wasm.js';

const PRECISION_BITS = 32 - 8 - 2;
const HALF = 1 << (PRECISION_BITS - 1);

/** Coefficients of one axis: for output i, taps [start[i], start[i] + count[i]) with weights at k[i * ksize …]. */
export interface Coeffs {
  readonly ksize: number;
  readonly start: Int32Array;
  readonly count: Int32Array;
  readonly k: Int32Array;
}

/**
 * Pillow's `precompute_coeffs` for the bilinear filter (support 1), then `normalize_coeffs_8bpc` (round
 * half away from zero): the box [in0, in1) of an axis of `inSize` pixels resized to `outSize`, for
 * the outputs [first, first + count) only, with the taps' indices moved by `at` (where that axis's
 * pixel 0 lies in the buffer read). The defaults are the whole resize of a buffer that is the axis.
 * The weights are computed in the axis's own coordinates, as Pillow does, so a part of a resize has
 * the bytes of the same part of the whole one (NOTE [eval as torchvision computes it] in view-resample.ts).
 */
export function resampleCoeffs(inSize: number, in0: number, in1: number, outSize: number, first = 0, count = outSize - first, at = 0): Coeffs {
  const [b0, scale] = pillowBox(in0, in1, outSize);
  const filterscale = Math.max(scale, 1);
  const support = filterscale;
  const ksize = Math.ceil(support) * 2 + 1;
  const start = new Int32Array(count);
  const counts = new Int32Array(count);
  const k = new Int32Array(count * ksize);
  const w = new Float64Array(ksize);
  const ss = 1 / filterscale;
  for (let i = 0; i < count; i++) {
    const xx = first + i;
    const center = b0 + (xx + 0.5) * scale;
    // Pillow truncates toward zero (a C cast); center − support + 0.5 can be negative only near 0, where max() wins.
    let xmin = Math.trunc(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    let xmax = Math.trunc(center + support + 0.5);
    if (xmax > inSize) xmax = inSize;
    xmax -= xmin;
    let ww = 0;
    for (let x = 0; x < xmax; x++) {
      const t = Math.abs((x + xmin - center + 0.5) * ss);
      const v = t < 1 ? 1 - t : 0;
      w[x] = v;
      ww += v;
    }
    for (let x = 0; x < xmax; x++) {
      const v = ww === 0 ? 0 : (w[x]! / ww) * (1 << PRECISION_BITS);
      k[i * ksize + x] = v < 0 ? Math.trunc(v - 0.5) : Math.trunc(v + 0.5);
    }
    // Taps of weight 0 at either end read a pixel for nothing (an enlarged axis has one in three): drop them.
    let lo = 0;
    let hi = xmax;
    while (lo < hi && k[i * ksize + lo] === 0) lo++;
    while (hi > lo && k[i * ksize + hi - 1] === 0) hi--;
    if (lo > 0) k.copyWithin(i * ksize, i * ksize + lo, i * ksize + hi);
    start[i] = xmin + lo + at;
    counts[i] = hi - lo;
  }
  return { ksize, start, count: counts, k };
}

/** The taps Pillow's filter may read for outputs [first, first + count) of that resize (before zero weights are dropped): [lo, hi). */
export function tapSpan(inSize: number, in0: number, in1: number, outSize: number, first: number, count: number): [number, number] {
  const [b0, scale] = pillowBox(in0, in1, outSize);
  const support = Math.max(scale, 1);
  const lo = Math.max(0, Math.trunc(b0 + (first + 0.5) * scale - support + 0.5));
  const hi = Math.min(inSize, Math.trunc(b0 + (first + count - 1 + 0.5) * scale + support + 0.5));
  return [lo, hi];
}

/**
 * An axis's box as Pillow holds it: C floats (`_resize` parses the box with "(ffff)", and
 * `precompute_coeffs` takes float in0, in1), subtracted in float, the scale then in double. So a
 * box edge that float32 does not hold (a center crop scaled to another size: (left · W) / rw) is
 * rounded as Pillow rounds it. Returns [in0, scale].
 */
function pillowBox(in0: number, in1: number, outSize: number): [number, number] {
  const f0 = Math.fround(in0);
  return [f0, Math.fround(Math.fround(in1) - f0) / outSize];
}

/**
 * The coefficients of both axes of a resample of `box` to outW × outH over a srcW × srcH buffer,
 * checked to read only the buffer (a frame whose taps leave it is a caller's error).
 */
export function boxCoeffs(box: ResampleBox, srcW: number, srcH: number, outW: number, outH: number): [Coeffs, Coeffs] {
  const f = box.frame;
  const h = f === undefined ? resampleCoeffs(srcW, box.x0, box.x1, outW) : resampleCoeffs(f.width, box.x0, box.x1, f.outWidth, f.outLeft, outW, f.left);
  const v = f === undefined ? resampleCoeffs(srcH, box.y0, box.y1, outH) : resampleCoeffs(f.height, box.y0, box.y1, f.outHeight, f.outTop, outH, f.top);
  if (f !== undefined) {
    for (const [c, size] of [[h, srcW], [v, srcH]] as const) {
      for (let i = 0; i < c.start.length; i++) {
        if (c.count[i]! > 0 && (c.start[i]! < 0 || c.start[i]! + c.count[i]! > size)) throw new RangeError(`resample frame ${JSON.stringify(f)}: output ${i} reads outside the ${srcW}×${srcH} buffer`);
      }
    }
  }
  return [h, v];
}

function clip8(v: number): number {
  const s = v >> PRECISION_BITS;
  return s < 0 ? 0 : s > 255 ? 255 : s;
}

/** The horizontal pass for three channels: the three sums of a pixel in one loop over its taps. */
function horizontal3(src: Uint8Array, rowFirst: number, rows: number, rowBytes: number, mid: Uint8Array, outW: number, h: Coeffs, flip: boolean): void {
  const { start, count, k: hk, ksize } = h;
  const midRow = outW * 3;
  for (let y = 0; y < rows; y++) {
    const srow = (y + rowFirst) * rowBytes;
    const mrow = y * midRow;
    for (let xx = 0; xx < outW; xx++) {
      const n = count[xx]!;
      const kb = xx * ksize;
      let r = HALF;
      let g = HALF;
      let b = HALF;
      for (let x = 0, s = srow + start[xx]! * 3; x < n; x++, s += 3) {
        const k = hk[kb + x]!;
        r += src[s]! * k;
        g += src[s + 1]! * k;
        b += src[s + 2]! * k;
      }
      const o = mrow + (flip ? outW - 1 - xx : xx) * 3;
      mid[o] = clip8(r);
      mid[o + 1] = clip8(g);
      mid[o + 2] = clip8(b);
    }
  }
}

/**
 * An axis whose outputs read at most three taps (every enlarged axis, and reductions up to 1.5×) as
 * three fixed taps each — two where every output reads at most two (an enlarged axis: the triangle
 * of support 1 reaches two pixels) — the first tap moved back where they would run past the end, the
 * weights padded with zeros. The sums are the same integers (adding k · 0 changes nothing), so the
 * bytes are too. Measured (2 cores): 150×180 → 224² 1.21 ms with the general loops, 0.80 with three
 * fixed taps, 0.67 with two.
 */
interface Taps3 {
  readonly first: Int32Array;
  readonly k0: Int32Array;
  readonly k1: Int32Array;
  readonly k2: Int32Array;
}

function taps3(c: Coeffs, inSize: number, taps = 3): Taps3 | undefined {
  const n = c.start.length;
  if (inSize < taps) return undefined;
  const first = new Int32Array(n);
  const k0 = new Int32Array(n);
  const k1 = new Int32Array(n);
  const k2 = new Int32Array(n);
  const w = [0, 0, 0];
  for (let i = 0; i < n; i++) {
    const count = c.count[i]!;
    if (count > taps) return undefined;
    let f = c.start[i]!;
    const shift = Math.max(0, f + taps - inSize);
    f -= shift;
    w[0] = w[1] = w[2] = 0;
    for (let t = 0; t < count; t++) w[t + shift] = c.k[i * c.ksize + t]!;
    first[i] = f;
    k0[i] = w[0]!;
    k1[i] = w[1]!;
    k2[i] = w[2]!;
  }
  return { first, k0, k1, k2 };
}

/** horizontal3 with three fixed taps (see Taps3). */
function horizontal3Taps3(src: Uint8Array, rowFirst: number, rows: number, rowBytes: number, mid: Uint8Array, outW: number, t: Taps3, flip: boolean): void {
  const { first, k0, k1, k2 } = t;
  const midRow = outW * 3;
  for (let y = 0; y < rows; y++) {
    const srow = (y + rowFirst) * rowBytes;
    const mrow = y * midRow;
    for (let xx = 0; xx < outW; xx++) {
      const s = srow + first[xx]! * 3;
      const a = k0[xx]!;
      const b = k1[xx]!;
      const c = k2[xx]!;
      const r = (HALF + src[s]! * a + src[s + 3]! * b + src[s + 6]! * c) >> PRECISION_BITS;
      const g = (HALF + src[s + 1]! * a + src[s + 4]! * b + src[s + 7]! * c) >> PRECISION_BITS;
      const bl = (HALF + src[s + 2]! * a + src[s + 5]! * b + src[s + 8]! * c) >> PRECISION_BITS;
      const o = mrow + (flip ? outW - 1 - xx : xx) * 3;
      mid[o] = r < 0 ? 0 : r > 255 ? 255 : r;
      mid[o + 1] = g < 0 ? 0 : g > 255 ? 255 : g;
      mid[o + 2] = bl < 0 ? 0 : bl > 255 ? 255 : bl;
    }
  }
}

/** horizontal3Taps3 with two fixed taps (every enlarged axis: the triangle of support 1 reaches two pixels). */
function horizontal3Taps2(src: Uint8Array, rowFirst: number, rows: number, rowBytes: number, mid: Uint8Array, outW: number, t: Taps3, flip: boolean): void {
  const { first, k0, k1 } = t;
  const midRow = outW * 3;
  for (let y = 0; y < rows; y++) {
    const srow = (y + rowFirst) * rowBytes;
    const mrow = y * midRow;
    for (let xx = 0; xx < outW; xx++) {
      const s = srow + first[xx]! * 3;
      const a = k0[xx]!;
      const b = k1[xx]!;
      const r = (HALF + src[s]! * a + src[s + 3]! * b) >> PRECISION_BITS;
      const g = (HALF + src[s + 1]! * a + src[s + 4]! * b) >> PRECISION_BITS;
      const bl = (HALF + src[s + 2]! * a + src[s + 5]! * b) >> PRECISION_BITS;
      const o = mrow + (flip ? outW - 1 - xx : xx) * 3;
      mid[o] = r < 0 ? 0 : r > 255 ? 255 : r;
      mid[o + 1] = g < 0 ? 0 : g > 255 ? 255 : g;
      mid[o + 2] = bl < 0 ? 0 : bl > 255 ? 255 : bl;
    }
  }
}

/** vertical3Taps with two fixed taps. */
function vertical2Taps(mid: Uint8Array, midRow: number, out: Uint8Array, outH: number, t: Taps3, rowFirst: number): void {
  const { first, k0, k1 } = t;
  for (let yy = 0; yy < outH; yy++) {
    const m0 = (first[yy]! - rowFirst) * midRow;
    const m1 = m0 + midRow;
    const a = k0[yy]!;
    const b = k1[yy]!;
    const orow = yy * midRow;
    for (let i = 0; i < midRow; i++) {
      const v = (HALF + mid[m0 + i]! * a + mid[m1 + i]! * b) >> PRECISION_BITS;
      out[orow + i] = v < 0 ? 0 : v > 255 ? 255 : v;
    }
  }
}

/** The vertical pass with three fixed taps (see Taps3), rows relative to the first row the pass reads. */
function vertical3Taps(mid: Uint8Array, midRow: number, out: Uint8Array, outH: number, t: Taps3, rowFirst: number): void {
  const { first, k0, k1, k2 } = t;
  for (let yy = 0; yy < outH; yy++) {
    const m0 = (first[yy]! - rowFirst) * midRow;
    const m1 = m0 + midRow;
    const m2 = m1 + midRow;
    const a = k0[yy]!;
    const b = k1[yy]!;
    const c = k2[yy]!;
    const orow = yy * midRow;
    for (let i = 0; i < midRow; i++) {
      const v = (HALF + mid[m0 + i]! * a + mid[m1 + i]! * b + mid[m2 + i]! * c) >> PRECISION_BITS;
      out[orow + i] = v < 0 ? 0 : v > 255 ? 255 : v;
    }
  }
}

/**
 * A box in source pixels; fractional edges are allowed (Pillow's `box`), x1 > x0, y1 > y0, inside the
 * image. Without `frame` the image is the buffer resampled and all of the resize is kept.
 */
export interface ResampleBox {
  readonly x0: number;
  readonly y0: number;
  readonly x1: number;
  readonly y1: number;
  readonly frame?: ResampleFrame;
}

/**
 * The image Pillow resizes, when the buffer holds only a part of it: `width` × `height` pixels
 * whose pixel (0, 0) is the buffer's (left, top) (negative where the buffer starts inside it; the
 * box is in the image's pixels), resized to `outWidth` × `outHeight`, of which the outW × outH
 * outputs from (outLeft, outTop) are kept. The buffer must hold every tap those outputs read.
 */
export interface ResampleFrame {
  readonly left: number;
  readonly top: number;
  readonly width: number;
  readonly height: number;
  readonly outWidth: number;
  readonly outHeight: number;
  readonly outLeft: number;
  readonly outTop: number;
}

/**
 * Resize `box` of the interleaved `src` (srcW × srcH × channels, uint8, rows `stride` bytes apart) to
 * outW × outH interleaved uint8 pixels, Pillow's BILINEAR (antialiased), mirrored left–right when
 * `flip`: in WebAssembly where it instantiates (NOTE [resample in WebAssembly] in resample-wasm.ts),
 * else these loops.
 */
export function resampleBilinear(src: Uint8Array, srcW: number, srcH: number, channels: number, box: ResampleBox, outW: number, outH: number, flip: boolean, stride = srcW * channels): Uint8Array {
  const wasm = wasmResampler();
  if (wasm !== undefined) return wasm.resample(src, srcW, srcH, channels, box, outW, outH, flip, undefined, stride);
  return resampleBilinearJs(src, srcW, srcH, channels, box, outW, outH, flip, stride);
}

/** `resampleBilinear` in JavaScript (the same bytes): for a Node without WebAssembly, and the reference of resample-wasm.ts. */
export function resampleBilinearJs(src: Uint8Array, srcW: number, srcH: number, channels: number, box: ResampleBox, outW: number, outH: number, flip: boolean, stride = srcW * channels): Uint8Array {
  const [h, v] = boxCoeffs(box, srcW, srcH, outW, outH);
  const h2 = channels === 3 ? taps3(h, srcW, 2) : undefined;
  const h3 = channels === 3 && h2 === undefined ? taps3(h, srcW) : undefined;
  const v2 = taps3(v, srcH, 2);
  const v3 = v2 ?? taps3(v, srcH);
  const vTaps = v2 !== undefined ? 2 : 3;
  // Only the source rows the vertical pass reads (Pillow's ybox; with three fixed taps, the rows they reach).
  const rowFirst = v3 !== undefined ? Math.min(v.start[0]!, v3.first[0]!) : v.start[0]!;
  const rowEnd = v3 !== undefined ? Math.max(v.start[outH - 1]! + v.count[outH - 1]!, v3.first[outH - 1]! + vTaps) : v.start[outH - 1]! + v.count[outH - 1]!;
  const rows = rowEnd - rowFirst;
  const mid = new Uint8Array(rows * outW * channels);
  const hk = h.k;
  const hks = h.ksize;
  const rowBytes = stride;
  const midRow = outW * channels;
  if (h2 !== undefined) horizontal3Taps2(src, rowFirst, rows, rowBytes, mid, outW, h2, flip);
  else if (h3 !== undefined) horizontal3Taps3(src, rowFirst, rows, rowBytes, mid, outW, h3, flip);
  else if (channels === 3) horizontal3(src, rowFirst, rows, rowBytes, mid, outW, h, flip);
  else {
    for (let y = 0; y < rows; y++) {
      const srow = (y + rowFirst) * rowBytes;
      const mrow = y * midRow;
      for (let xx = 0; xx < outW; xx++) {
        const xmin = h.start[xx]!;
        const n = h.count[xx]!;
        const kb = xx * hks;
        const o = mrow + (flip ? outW - 1 - xx : xx) * channels;
        for (let c = 0; c < channels; c++) {
          let ss = HALF;
          for (let x = 0, s = srow + xmin * channels + c; x < n; x++, s += channels) ss += src[s]! * hk[kb + x]!;
          mid[o + c] = clip8(ss);
        }
      }
    }
  }
  // Vertical: one output row at a time, its taps' rows accumulated whole (sequential reads; the sums
  // stay below 2^31: 255 · ~2^22 + 2^21).
  const out = new Uint8Array(outH * midRow);
  if (v2 !== undefined) {
    vertical2Taps(mid, midRow, out, outH, v2, rowFirst);
    return out;
  }
  if (v3 !== undefined) {
    vertical3Taps(mid, midRow, out, outH, v3, rowFirst);
    return out;
  }
  const acc = new Int32Array(midRow);
  const vk = v.k;
  const vks = v.ksize;
  for (let yy = 0; yy < outH; yy++) {
    const ymin = v.start[yy]! - rowFirst;
    const n = v.count[yy]!;
    const kb = yy * vks;
    acc.fill(HALF);
    for (let y = 0; y < n; y++) {
      const k = vk[kb + y]!;
      if (k === 0) continue;
      const base = (ymin + y) * midRow;
      for (let i = 0; i < midRow; i++) acc[i] = acc[i]! + mid[base + i]! * k;
    }
    const orow = yy * midRow;
    for (let i = 0; i < midRow; i++) {
      const s = acc[i]! >> PRECISION_BITS;
      out[orow + i] = s < 0 ? 0 : s > 255 ? 255 : s;
    }
  }
  return out;
}
