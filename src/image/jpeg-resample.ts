// Internal: not exported from the package entry.
// kernels/crop-resize.cu on the CPU, op for op: crop a box of interleaved RGB pixels, resample it with
// torchvision's antialiased bilinear filter (a triangle of support max(scale, 1)), round to uint8,
// mirror, normalize and cast into one batch row. The rule: every float operation is a float32 one
// (Math.fround after each, in the kernel's order), so on the same decoded pixels this and the kernel
// agree bit for bit; the sim decoder and the CPU fallback use it, and the GPU test checks the kernel
// against it.
//
// A box with `pil` (a center-crop view, 'eval') is Pillow's resize of the whole image instead, in
// Pillow's own arithmetic (NOTE [eval on the GPU]): its bytes are image-resample.ts's — Pillow's —
// for the same decoded pixels, here and in the kernel alike.

import { toBFloat16Bits, toFloat16Bits } from '../tensor/half.js';
import { CHANNELS, type JpegBatchOutput, type JpegBox, type PixelLayout, dtypeBytes } from './jpeg-plan.js';
import { resampleCoeffs } from './image-resample.js';

/**
 * NOTE [eval on the GPU] A center-crop view (`'eval'`: torchvision's Resize(256) + CenterCrop(224)
 * on a PIL image) is one Pillow resize of the whole image whose outputs [left, left + 224) are kept
 * (NOTE [eval as torchvision computes it] in view-resample.ts). The GPU route used to resize the
 * view's box rounded to whole source pixels, taps inside it, in torchvision's float arithmetic:
 * the sampling grid moved by up to half a source pixel (issue 32: mean |Δ| 1.97, max 93 against
 * torchvision over 75 images, worst where the image is enlarged). Now a job with `pil` computes
 * Pillow's resize itself, per output pixel, on the whole decoded image (nvJPEG decodes it whole):
 * - per axis Pillow's `precompute_coeffs` for output first + x of the resize of [in0, in1) (C
 *   floats, as Pillow holds its box) to `out` — the triangle of support max(scale, 1)
 *   (antialiased when reducing), centred at
 *   in0 + (first + x + ½) · scale, taps clamped to the image (not to the box), weights normalized
 *   in float64 and held in 22-bit fixed point (`normalize_coeffs_8bpc`);
 * - then Pillow's two passes for that pixel: each tap row's horizontal sum rounded and clipped to
 *   8 bits (Pillow's intermediate image), then the vertical sum of those, rounded and clipped.
 * The kernel computes the coefficients in float64 with `_rn` intrinsics in Pillow's order (no FMA),
 * the CPU twin with image-resample.ts's transcription, so both are Pillow's integers and the sums
 * are exact: the same bytes as Pillow for the same decoded pixels, and within 1 level of torchvision
 * for pixels within 1 level of libjpeg-turbo's (nvJPEG's, docs/gpu-decode.md), each pass being a
 * weighted mean. The train view (RandomResizedCrop: crop, then resize) keeps the float path.
 */
const PRECISION_BITS = 22;
const HALF = 1 << (PRECISION_BITS - 1);

const f = Math.fround;

function tri(x: number): number {
  const a = Math.abs(x);
  return a < 1 ? f(1 - a) : 0;
}

interface Axis {
  center: number;
  invscale: number;
  total: number;
  first: number;
  count: number;
}

function axis(o: number, n: number, m: number): Axis {
  const scale = f(n / m);
  const support = scale >= 1 ? scale : 1;
  const invscale = scale >= 1 ? f(1 / scale) : 1;
  const center = f(scale * f(o + 0.5));
  const first = Math.max(Math.trunc(f(f(center - support) + 0.5)), 0);
  const last = Math.min(Math.trunc(f(f(center + support) + 0.5)), n);
  const a: Axis = { center, invscale, total: 0, first, count: last - first };
  let total = 0;
  for (let j = 0; j < a.count; j++) total = f(total + weight(a, j));
  a.total = total;
  return a;
}

function weight(a: Axis, j: number): number {
  return tri(f(f(f(a.first + j - a.center) + 0.5) * a.invscale));
}

/** Round half to even, as CUDA's __float2int_rn. */
function roundEven(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * The resampled, mirrored box as uint8 HWC (outH × outW × 3), from RGB `src` laid out as `pixels` (a
 * number: interleaved, that pitch). A box with `pil` needs `image`, the decoded image's size: its
 * taps reach the whole image.
 */
export function cropResize(src: Uint8Array, pixels: PixelLayout | number, box: JpegBox, outH: number, outW: number, image?: { readonly width: number; readonly height: number }): Uint8Array {
  const { pitch, xstride, cstride } = typeof pixels === 'number' ? { pitch: pixels, xstride: 3, cstride: 1 } : pixels;
  if (box.pil !== undefined) {
    if (image === undefined) throw new Error('internal: a pil box is resampled on its whole image, whose size is missing');
    return pilResize(src, pitch, xstride, cstride, box, outH, outW, image.width, image.height);
  }
  const q = new Uint8Array(outH * outW * CHANNELS);
  const xs = Array.from({ length: outW }, (_, ox) => axis(box.flip ? outW - 1 - ox : ox, box.width, outW));
  for (let oy = 0; oy < outH; oy++) {
    const ay = axis(oy, box.height, outH);
    for (let ox = 0; ox < outW; ox++) {
      const ax = xs[ox]!;
      let a0 = 0, a1 = 0, a2 = 0;
      for (let i = 0; i < ay.count; i++) {
        const wy = weight(ay, i);
        let line = (box.top + ay.first + i) * pitch + (box.left + ax.first) * xstride;
        let r0 = 0, r1 = 0, r2 = 0;
        for (let j = 0; j < ax.count; j++, line += xstride) {
          const wx = weight(ax, j);
          r0 = f(r0 + f(wx * src[line]!));
          r1 = f(r1 + f(wx * src[line + cstride]!));
          r2 = f(r2 + f(wx * src[line + 2 * cstride]!));
        }
        a0 = f(a0 + f(wy * r0));
        a1 = f(a1 + f(wy * r1));
        a2 = f(a2 + f(wy * r2));
      }
      const norm = f(ax.total * ay.total);
      const at = (oy * outW + ox) * 3;
      q[at] = Math.min(Math.max(roundEven(f(a0 / norm)), 0), 255);
      q[at + 1] = Math.min(Math.max(roundEven(f(a1 / norm)), 0), 255);
      q[at + 2] = Math.min(Math.max(roundEven(f(a2 / norm)), 0), 255);
    }
  }
  return q;
}

function clip8(v: number): number {
  const s = v >> PRECISION_BITS;
  return s < 0 ? 0 : s > 255 ? 255 : s;
}

/** The `pil` job of kernels/crop-resize.cu (NOTE [eval on the GPU]): Pillow's resize of the whole width × height image, one output pixel at a time. */
function pilResize(src: Uint8Array, pitch: number, xstride: number, cstride: number, box: JpegBox, outH: number, outW: number, width: number, height: number): Uint8Array {
  const { x, y } = box.pil!;
  const h = resampleCoeffs(width, x.in0, x.in1, x.out, x.first, outW);
  const v = resampleCoeffs(height, y.in0, y.in1, y.out, y.first, outH);
  const q = new Uint8Array(outH * outW * CHANNELS);
  for (let oy = 0; oy < outH; oy++) {
    const y0 = v.start[oy]!;
    const yn = v.count[oy]!;
    for (let ox = 0; ox < outW; ox++) {
      const sx = box.flip ? outW - 1 - ox : ox;
      const x0 = h.start[sx]!;
      const xn = h.count[sx]!;
      let a0 = HALF, a1 = HALF, a2 = HALF;
      for (let i = 0; i < yn; i++) {
        const ky = v.k[oy * v.ksize + i]!;
        let line = (y0 + i) * pitch + x0 * xstride;
        let r0 = HALF, r1 = HALF, r2 = HALF;
        for (let j = 0; j < xn; j++, line += xstride) {
          const kx = h.k[sx * h.ksize + j]!;
          r0 += src[line]! * kx;
          r1 += src[line + cstride]! * kx;
          r2 += src[line + 2 * cstride]! * kx;
        }
        a0 += clip8(r0) * ky;
        a1 += clip8(r1) * ky;
        a2 += clip8(r2) * ky;
      }
      const at = (oy * outW + ox) * 3;
      q[at] = clip8(a0);
      q[at + 1] = clip8(a1);
      q[at + 2] = clip8(a2);
    }
  }
  return q;
}

/** One batch row's bytes (3 × H × W values of `out.dtype`, `out.layout`) from cropResize's uint8 HWC. */
export function encodeRow(q: Uint8Array, out: Pick<JpegBatchOutput, 'layout' | 'dtype' | 'size'>, scaleBias: Float32Array): Uint8Array {
  const [h, w] = out.size;
  const pixels = h * w;
  const bytes = new Uint8Array(pixels * CHANNELS * dtypeBytes(out.dtype));
  const view = new DataView(bytes.buffer);
  for (let p = 0; p < pixels; p++) {
    for (let c = 0; c < CHANNELS; c++) {
      const v = q[p * 3 + c]!;
      const at = out.layout === 'hwc' ? p * 3 + c : c * pixels + p;
      if (out.dtype === 'uint8') {
        bytes[at] = v;
        continue;
      }
      const x = f(f(v * scaleBias[c]!) + scaleBias[CHANNELS + c]!);
      if (out.dtype === 'float32') view.setFloat32(at * 4, x, true);
      else view.setUint16(at * 2, out.dtype === 'float16' ? toFloat16Bits(x) : toBFloat16Bits(x), true);
    }
  }
  return bytes;
}
