// The built-in image pipeline as one keyed transform: random crop with zero padding, horizontal
// flip, per-channel normalize and a cast (uint8 → float32 / float16 / bfloat16), on uint8 images of
// shape [N, C, H, W]. The rule: each row's randomness comes from its PickKey, drawn on the host in
// one order (crop row offset, crop column offset, flip), so a (seed, epoch, sample, repeat) gives
// the same view on the CPU and on the GPU — the GPU runs kernels/image.cu with the same float32
// arithmetic (multiply, round, add, round) and the same round-to-nearest-even casts.

import type { AnyTensor } from '../device/device-tensor.js';
import { DeviceTensor } from '../device/device-tensor.js';
import { invalidOptionError, show } from '../errors.js';
import type { Transform } from '../options.js';
import type { PickKey } from '../sampler/pick-key.js';
import { allocStorage } from '../tensor/dtype.js';
import { Tensor } from '../tensor/tensor.js';
import { toBFloat16Bits, toFloat16Bits } from '../tensor/half.js';

export type ImageOutput = 'uint8' | 'float32' | 'float16' | 'bfloat16';

export interface ImageTransformOptions {
  /** Position of the image field among the batch's fields. Default 0. */
  field?: number;
  /** Random crop to `size` ([height, width], default the input size) from the image padded by `padding` zeros on every side. */
  crop?: { size?: readonly [number, number]; padding?: number };
  /** Flip each row horizontally with probability 1/2. */
  flip?: boolean;
  /** Per-channel mean and std, on the [0, 1] scale: v = (x / 255 − mean) / std. */
  normalize?: { mean: readonly number[]; std: readonly number[] };
  /** Output dtype. Default 'float32' with `normalize`, else 'uint8' (crop and flip only). 'float*' without normalize gives x / 255. */
  output?: ImageOutput;
}

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

/** Internal: lets device tensors run the transform on their device (see AcceleratorDevice). */
export interface ImageDeviceOp {
  (input: DeviceTensor, plan: ImagePlan): DeviceTensor;
}

/** The keyed image pipeline, usable on 'cpu', 'sim' and 'cuda'. */
export function imageTransform(options: ImageTransformOptions): Transform<Tensor> & Transform<DeviceTensor> & Transform<AnyTensor> {
  const field = options.field ?? 0;
  const padding = options.crop?.padding ?? 0;
  const output: ImageOutput = options.output ?? (options.normalize !== undefined ? 'float32' : 'uint8');
  if (!Number.isInteger(field) || field < 0) throw invalidOptionError(`transforms.image: field must be a field position ≥ 0, got ${show(field)}`);
  if (!Number.isInteger(padding) || padding < 0) throw invalidOptionError(`transforms.image: crop.padding must be an integer ≥ 0, got ${show(padding)}`);
  if (!['uint8', 'float32', 'float16', 'bfloat16'].includes(output)) throw invalidOptionError(`transforms.image: output must be 'uint8', 'float32', 'float16' or 'bfloat16', got ${show(output)}`);
  if (output === 'uint8' && options.normalize !== undefined) throw invalidOptionError('transforms.image: normalize needs a float output (output: \'float32\', \'float16\' or \'bfloat16\')');
  const transform: Transform<AnyTensor> = (rows, keys) => {
    const input = rows[field];
    if (input === undefined) throw invalidOptionError(`transforms.image: the batch has no field at position ${field}`);
    if (input.dtype !== 'uint8' || input.shape.length !== 4) {
      throw invalidOptionError(`transforms.image: field ${field} must be uint8 [N, C, H, W], got ${input.dtype} [${input.shape.join(', ')}]`);
    }
    const plan = planImage(input.shape as [number, number, number, number], options, padding, output, keys);
    const out = input instanceof DeviceTensor ? input.runImage(plan) : applyImageCpu(input.data as Uint8Array, plan);
    return rows.map((t, i) => (i === field ? out : t));
  };
  // One function serves host and device batches alike.
  return transform as Transform<Tensor> & Transform<DeviceTensor> & Transform<AnyTensor>;
}

function planImage(shape: readonly [number, number, number, number], options: ImageTransformOptions, padding: number, output: ImageOutput, keys: readonly PickKey[]): ImagePlan {
  const [n, c, h, w] = shape;
  const [oh, ow] = options.crop?.size ?? [h, w];
  if (!Number.isInteger(oh) || !Number.isInteger(ow) || oh < 1 || ow < 1 || oh > h + 2 * padding || ow > w + 2 * padding) {
    throw invalidOptionError(`transforms.image: crop.size ${show([oh, ow])} must fit the padded image ${h + 2 * padding}×${w + 2 * padding}`);
  }
  const params = new Int32Array(3 * n);
  keys.forEach((key, r) => {
    const rng = key.rng();
    if (options.crop !== undefined) {
      params[3 * r] = rng.below(h + 2 * padding - oh + 1) - padding;
      params[3 * r + 1] = rng.below(w + 2 * padding - ow + 1) - padding;
    }
    if (options.flip) params[3 * r + 2] = rng.bernoulli(0.5) ? 1 : 0;
  });
  const scaleBias = new Float32Array(2 * c);
  for (let ch = 0; ch < c; ch++) {
    const mean = options.normalize?.mean[ch % options.normalize.mean.length] ?? 0;
    const std = options.normalize?.std[ch % options.normalize.std.length] ?? 1;
    if (!(std > 0)) throw invalidOptionError(`transforms.image: normalize.std must be > 0, got ${show(std)}`);
    scaleBias[ch] = output === 'uint8' ? 1 : 1 / (255 * std);
    scaleBias[c + ch] = output === 'uint8' ? 0 : -mean / std;
  }
  return { n, c, h, w, oh, ow, output, params, scaleBias };
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

function applyImageCpu(src: Uint8Array, plan: ImagePlan): Tensor {
  const dtype = plan.output;
  const data = allocStorage(dtype, plan.n * plan.c * plan.oh * plan.ow);
  runImagePlan(src, plan, data as Uint8Array | Float32Array | Uint16Array);
  return new Tensor(data as never, [plan.n, plan.c, plan.oh, plan.ow], dtype);
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
