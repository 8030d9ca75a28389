// Internal: not exported from the package entry.
// One call of the built-in image transform (transforms.image) as plain numbers: the geometry, each
// row's crop offsets and flip, the per-channel scale and bias — and its CPU implementation. The
// rule: the CPU loop here, the sim device (which runs it) and kernels/image.cu do the same float32
// arithmetic (multiply, round, add, round) and the same round-to-nearest-even casts.

import { toBFloat16Bits, toFloat16Bits } from '../tensor/half.js';

export type ImageOutput = 'uint8' | 'float32' | 'float16' | 'bfloat16';

/** Geometry and arithmetic of one call, shared by the CPU loop, the sim and the CUDA kernel. */
export interface ImagePlan {
  readonly n: number;
  readonly c: number;
  readonly h: number;
  readonly w: number;
  readonly oh: number;
  readonly ow: number;
  readonly output: ImageOutput;
  /** [oy, ox, flip] per row. */
  readonly params: Int32Array;
  /** scale[0..C) then bias[0..C), float32. */
  readonly scaleBias: Float32Array;
}

/** The CPU implementation; also the sim device's. `out` receives N × C × OH × OW elements. */
export function runImagePlan(src: Uint8Array, plan: ImagePlan, out: Uint8Array | Float32Array | Uint16Array): void {
  const { n, c, h, w, oh, ow, output, params, scaleBias } = plan;
  if (output === 'uint8') return cropFlipBytes(src, plan, out as Uint8Array);
  let i = 0;
  for (let r = 0; r < n; r++) {
    const oy = params[3 * r]!;
    const ox = params[3 * r + 1]!;
    const flip = params[3 * r + 2] !== 0;
    for (let ch = 0; ch < c; ch++) {
      const scale = scaleBias[ch]!;
      const bias = scaleBias[c + ch]!;
      const base = (r * c + ch) * h * w;
      for (let y = 0; y < oh; y++) {
        const sy = y + oy;
        for (let x = 0; x < ow; x++, i++) {
          const sx = ox + (flip ? ow - 1 - x : x);
          const v = sy < 0 || sy >= h || sx < 0 || sx >= w ? 0 : src[base + sy * w + sx]!;
          const f = Math.fround(Math.fround(v * scale) + bias);
          out[i] = output === 'float32' ? f : output === 'float16' ? toFloat16Bits(f) : toBFloat16Bits(f);
        }
      }
    }
  }
}

/** The uint8 path (crop and flip only): whole row segments copied at once, zeros for the padding. */
function cropFlipBytes(src: Uint8Array, plan: ImagePlan, out: Uint8Array): void {
  const { n, c, h, w, oh, ow, params } = plan;
  let i = 0;
  for (let r = 0; r < n; r++) {
    const oy = params[3 * r]!;
    const ox = params[3 * r + 1]!;
    const flip = params[3 * r + 2] !== 0;
    // Output columns whose source column ox + x (or ox + ow − 1 − x when flipped) is inside the image.
    const lo = flip ? Math.max(0, ox + ow - w) : Math.max(0, -ox);
    const hi = flip ? Math.min(ow, ox + ow) : Math.min(ow, w - ox);
    for (let ch = 0; ch < c; ch++) {
      const base = (r * c + ch) * h * w;
      for (let y = 0; y < oh; y++, i += ow) {
        const sy = y + oy;
        if (sy < 0 || sy >= h || hi <= lo) {
          out.fill(0, i, i + ow);
          continue;
        }
        const srcRow = base + sy * w;
        if (lo > 0) out.fill(0, i, i + lo);
        if (hi < ow) out.fill(0, i + hi, i + ow);
        if (!flip) {
          out.set(src.subarray(srcRow + ox + lo, srcRow + ox + hi), i + lo);
        } else {
          for (let x = lo; x < hi; x++) out[i + x] = src[srcRow + ox + ow - 1 - x]!;
        }
      }
    }
  }
}
