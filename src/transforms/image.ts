// The built-in image pipeline as one keyed transform: random crop with zero padding, horizontal
// flip, per-channel normalize and a cast (uint8 → float32 / float16 / bfloat16), on uint8 images of
// shape [N, C, H, W]. The rule: each row's randomness comes from its PickKey, drawn on the host in
// one order (crop row offset, crop column offset, flip), so a (seed, epoch, sample, repeat) gives
// the same view on the CPU and on the GPU — the GPU runs kernels/image.cu with the same float32
// arithmetic (multiply, round, add, round) and the same round-to-nearest-even casts.

import type { AnyTensor } from '../device/device-tensor.js';
import { DeviceTensor } from '../device/device-tensor.js';
import { invalidOptionError, show } from '../errors.js';
import type { Transform } from './transform.js';
import type { PickKey } from '../sampler/pick-key.js';
import { allocStorage } from '../tensor/dtype.js';
import { Tensor } from '../tensor/tensor.js';
import { type ImageOutput, type ImagePlan, runImagePlan } from '../image/image-plan.js';

export type { ImageOutput, ImagePlan };

export interface ImageTransformOptions {
  /** Position of the image field among the batch's fields. Default 0. */
  field?: number;
  /** Random crop to `size` ([height, width], default the input size) from the image padded by `padding` zeros on every side. */
  crop?: { size?: readonly [number, number]; padding?: number };
  /** Flip each row horizontally with probability 1/2. */
  flip?: boolean;
  /**
   * Per-channel mean and std, on the [0, 1] scale: v = (x / 255 − mean) / std. One value per
   * channel, or one value for every channel (as torchvision's Normalize broadcasts a list of one);
   * any other length is refused when the batch's channel count is known.
   */
  normalize?: { mean: readonly number[]; std: readonly number[] };
  /** Output dtype. Default 'float32' with `normalize`, else 'uint8' (crop and flip only). 'float*' without normalize gives x / 255. */
  output?: ImageOutput;
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
  for (const k of ['mean', 'std'] as const) {
    const v = (options.normalize as Record<string, unknown> | undefined)?.[k];
    if (options.normalize !== undefined && (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === 'number' && Number.isFinite(x)))) {
      throw invalidOptionError(`transforms.image: normalize.${k} must be an array of finite numbers (one per channel, or one for all), got ${show(v)}`);
    }
  }
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
  for (const k of ['mean', 'std'] as const) {
    const n = options.normalize?.[k].length ?? 1;
    if (n !== 1 && n !== c) throw invalidOptionError(`transforms.image: normalize.${k} has ${n} values for images of ${c} channels: give ${c}, one per channel, or 1 for all`);
  }
  for (let ch = 0; ch < c; ch++) {
    const mean = options.normalize?.mean[options.normalize.mean.length === 1 ? 0 : ch] ?? 0;
    const std = options.normalize?.std[options.normalize.std.length === 1 ? 0 : ch] ?? 1;
    if (!(std > 0)) throw invalidOptionError(`transforms.image: normalize.std must be > 0, got ${show(std)}`);
    scaleBias[ch] = output === 'uint8' ? 1 : 1 / (255 * std);
    scaleBias[c + ch] = output === 'uint8' ? 0 : -mean / std;
  }
  return { n, c, h, w, oh, ow, output, params, scaleBias };
}

function applyImageCpu(src: Uint8Array, plan: ImagePlan): Tensor {
  const dtype = plan.output;
  const data = allocStorage(dtype, plan.n * plan.c * plan.oh * plan.ow);
  runImagePlan(src, plan, data as Uint8Array | Float32Array | Uint16Array);
  return new Tensor(data as never, [plan.n, plan.c, plan.oh, plan.ow], dtype);
}
