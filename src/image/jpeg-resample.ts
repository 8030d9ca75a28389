// Internal: not exported from the package entry.
// kernels/crop-resize.cu on the CPU, op for op: crop a box of interleaved RGB pixels, resample it with
// torchvision's antialiased bilinear filter (a triangle of support max(scale, 1)), round to uint8,
// mirror, normalize and cast into one batch row. The rule: every float operation is a float32 one
// (Math.fround after each, in the kernel's order), so on the same decoded pixels this and the kernel
// agree bit for bit; the sim decoder and the CPU fallback use it, and the GPU test checks the kernel
// against it.

import { toBFloat16Bits, toFloat16Bits } from '../tensor/half.js';
import { CHANNELS, type CropBox, type JpegBatchOutput, type PixelLayout, dtypeBytes } from './jpeg-plan.js';

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

/** The resampled, mirrored box as uint8 HWC (outH × outW × 3), from RGB `src` laid out as `pixels` (a number: interleaved, that pitch). */
export function cropResize(src: Uint8Array, pixels: PixelLayout | number, box: CropBox, outH: number, outW: number): Uint8Array {
  const { pitch, xstride, cstride } = typeof pixels === 'number' ? { pitch: pixels, xstride: 3, cstride: 1 } : pixels;
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
