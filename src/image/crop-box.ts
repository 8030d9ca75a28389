// Decode-time views of an image: the crop box (source pixels) that an image source's decoder cuts
// and resizes to the output size, then mirrors when `flip`. torchvision's RandomResizedCrop
// (`get_params`, transcribed line for line), the eval recipe Resize(resize) + CenterCrop(crop) as one
// box in source pixels (its geometry, `centerCropGeometry`, is what the CPU decoder resamples
// exactly: view-resample.ts), and a horizontal flip with p = ½. The rule: a box takes its randomness
// only from `key.rng()`, in one fixed draw order (NOTE [crop-box draw order]), so it is a pure
// function of (seed, epoch, sample, repeat, image width, image height) — the CPU decoder and the
// GPU decoder cut the same box for the same pick.

import { invalidOption, unknownOption } from '../errors.js';
import type { PickKey } from '../sampler/pick-key.js';

/** A crop of the source image in source pixels (integers, inside the image), resized to the output size, then mirrored when `flip`. */
export interface CropBox {
  readonly left: number;
  readonly top: number;
  readonly width: number;
  readonly height: number;
  readonly flip: boolean;
}

/** A view as the user writes it (the `view` option of image sources). */
export type ViewOption =
  /** RandomResizedCrop with torchvision's defaults (scale [0.08, 1], ratio [3/4, 4/3]) and a random flip: the ImageNet training recipe. */
  | 'train'
  /** Resize(256) + CenterCrop(224), no flip: the ImageNet evaluation recipe (torchvision's bytes on the CPU, within 1 level on the GPU decode route: NOTE [eval as torchvision computes it]). */
  | 'eval'
  | {
      /** torchvision's RandomResizedCrop box; `true` for its defaults. */
      readonly randomResizedCrop?: true | { readonly scale?: readonly [number, number]; readonly ratio?: readonly [number, number] };
      /** Resize the short side to `resize` (default 256), then take the central `crop` × `crop` (default 224), in one resample. */
      readonly centerCrop?: true | { readonly resize?: number; readonly crop?: number };
      /** Mirror horizontally with probability ½. Default false. */
      readonly flip?: boolean;
    };

/** A checked view (see `viewFrom`). Without a crop, the box is the whole image. */
export type View =
  | { readonly kind: 'random-resized-crop'; readonly scale: readonly [number, number]; readonly ratio: readonly [number, number]; readonly flip: boolean }
  | { readonly kind: 'center-crop'; readonly resize: number; readonly crop: number; readonly flip: boolean }
  | { readonly kind: 'whole'; readonly flip: boolean };

/** The random draws a box needs; `Rng` is one (tests pass a recorder). */
export interface BoxDraws {
  /** Uniform in [0, 1). */
  f64(): number;
  /** Uniform integer in [0, n). */
  below(n: number): number;
}

export const DEFAULT_SCALE: readonly [number, number] = [0.08, 1];
export const DEFAULT_RATIO: readonly [number, number] = [3 / 4, 4 / 3];
export const DEFAULT_RESIZE = 256;
export const DEFAULT_CROP = 224;
/** torchvision's number of tries before the central fallback. */
const TRIES = 10;

/** Checks a `view` option once (at create); `knob` names it in errors. */
export function viewFrom(option: ViewOption, knob = 'view'): View {
  if (option === 'train') return { kind: 'random-resized-crop', scale: DEFAULT_SCALE, ratio: DEFAULT_RATIO, flip: true };
  if (option === 'eval') return { kind: 'center-crop', resize: DEFAULT_RESIZE, crop: DEFAULT_CROP, flip: false };
  if (typeof option !== 'object' || option === null || Array.isArray(option)) {
    throw invalidOption(knob, "'train', 'eval' or { randomResizedCrop?, centerCrop?, flip? }", option);
  }
  for (const key of Object.keys(option)) {
    if (!['randomResizedCrop', 'centerCrop', 'flip'].includes(key)) throw unknownOption(knob, key, ['randomResizedCrop', 'centerCrop', 'flip']);
  }
  const flip = option.flip ?? false;
  if (typeof flip !== 'boolean') throw invalidOption(`${knob}.flip`, 'a boolean', flip);
  const { randomResizedCrop: rrc, centerCrop: cc } = option;
  if (rrc !== undefined && cc !== undefined) {
    throw invalidOption(knob, 'one of randomResizedCrop or centerCrop', option, "Use randomResizedCrop for training and centerCrop (or view: 'eval') for evaluation");
  }
  if (rrc !== undefined) {
    if (rrc !== true && (typeof rrc !== 'object' || rrc === null)) throw invalidOption(`${knob}.randomResizedCrop`, 'true or { scale?, ratio? }', rrc);
    const spec = rrc === true ? {} : rrc;
    for (const key of Object.keys(spec)) if (key !== 'scale' && key !== 'ratio') throw unknownOption(`${knob}.randomResizedCrop`, key, ['scale', 'ratio']);
    const scale = range(spec.scale ?? DEFAULT_SCALE, `${knob}.randomResizedCrop.scale`, 'fractions of the image area, 0 < min ≤ max ≤ 1', 1);
    const ratio = range(spec.ratio ?? DEFAULT_RATIO, `${knob}.randomResizedCrop.ratio`, 'width / height ratios, 0 < min ≤ max', Infinity);
    return { kind: 'random-resized-crop', scale, ratio, flip };
  }
  if (cc !== undefined) {
    if (cc !== true && (typeof cc !== 'object' || cc === null)) throw invalidOption(`${knob}.centerCrop`, 'true or { resize?, crop? }', cc);
    const spec = cc === true ? {} : cc;
    for (const key of Object.keys(spec)) if (key !== 'resize' && key !== 'crop') throw unknownOption(`${knob}.centerCrop`, key, ['resize', 'crop']);
    const resize = spec.resize ?? DEFAULT_RESIZE;
    const crop = spec.crop ?? DEFAULT_CROP;
    if (!Number.isInteger(resize) || resize < 1) throw invalidOption(`${knob}.centerCrop.resize`, 'an integer ≥ 1 (the short side after Resize)', resize);
    if (!Number.isInteger(crop) || crop < 1 || crop > resize) throw invalidOption(`${knob}.centerCrop.crop`, `an integer in [1, resize = ${resize}]`, crop);
    return { kind: 'center-crop', resize, crop, flip };
  }
  return { kind: 'whole', flip };
}

function range(value: unknown, knob: string, what: string, max: number): readonly [number, number] {
  const ok = Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === 'number' && Number.isFinite(v)) && value[0] > 0 && value[0] <= value[1] && value[1] <= max;
  if (!ok) throw invalidOption(knob, `[min, max]: ${what}`, value);
  return [value[0], value[1]];
}

/** The box of `view` for the pick `key` on a `width` × `height` image. */
export function boxFor(view: View, key: PickKey, width: number, height: number): CropBox {
  return boxFromDraws(view, key.rng(), width, height);
}

/**
 * NOTE [crop-box draw order]
 * The draws, in this order: the flip first (one f64, `< ½` flips; only when `view.flip`), then
 * RandomResizedCrop's tries, each two f64 (area fraction, then log-ratio), and for the accepted
 * try `below(height − h + 1)` (top) then `below(width − w + 1)` (left), as torchvision draws them.
 * The flip comes first so that it does not depend on the image size (a GPU decoder knows it
 * before reading a header). torchvision draws its uniforms in float32; here they are float64 —
 * the same distribution, and the boxes agree with a float64 transcription of `get_params` draw for
 * draw (crop-box.test.ts checks it against numpy).
 */
export function boxFromDraws(view: View, draws: BoxDraws, width: number, height: number): CropBox {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) {
    throw invalidOption('image size', 'integers width, height ≥ 1', [width, height]);
  }
  const flip = view.flip ? draws.f64() < 0.5 : false;
  if (view.kind === 'whole') return { left: 0, top: 0, width, height, flip };
  if (view.kind === 'center-crop') return { ...centerCropBox(view.resize, view.crop, width, height), flip };
  return { ...randomResizedCropBox(view.scale, view.ratio, draws, width, height), flip };
}

/** torchvision's `RandomResizedCrop.get_params`, with (i, j, h, w) as (top, left, height, width). */
function randomResizedCropBox(scale: readonly [number, number], ratio: readonly [number, number], draws: BoxDraws, width: number, height: number): Omit<CropBox, 'flip'> {
  const area = height * width;
  const logLo = Math.log(ratio[0]);
  const logHi = Math.log(ratio[1]);
  for (let t = 0; t < TRIES; t++) {
    const targetArea = area * (scale[0] + (scale[1] - scale[0]) * draws.f64());
    const aspectRatio = Math.exp(logLo + (logHi - logLo) * draws.f64());
    const w = roundHalfEven(Math.sqrt(targetArea * aspectRatio));
    const h = roundHalfEven(Math.sqrt(targetArea / aspectRatio));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const top = draws.below(height - h + 1);
      const left = draws.below(width - w + 1);
      return { left, top, width: w, height: h };
    }
  }
  // Fallback to central crop, clamped to the ratio range.
  const inRatio = width / height;
  let w: number;
  let h: number;
  if (inRatio < ratio[0]) {
    w = width;
    h = roundHalfEven(w / ratio[0]);
  } else if (inRatio > ratio[1]) {
    h = height;
    w = roundHalfEven(h * ratio[1]);
  } else {
    w = width;
    h = height;
  }
  return { left: Math.floor((width - w) / 2), top: Math.floor((height - h) / 2), width: w, height: h };
}

/** torchvision's Resize(resize) + CenterCrop(crop) on a width × height image: the resized size and where the crop starts in it. */
export interface CenterCropGeometry {
  /** The resized image: the short side `resize`, the long side int(resize · long / short). */
  readonly rw: number;
  readonly rh: number;
  /** The crop's offsets in the resized image: int(round((size − crop) / 2)). */
  readonly left: number;
  readonly top: number;
}

/** torchvision 0.14's `_compute_resized_output_size` (size an int, no max_size) and `center_crop`'s anchor. */
export function centerCropGeometry(resize: number, crop: number, width: number, height: number): CenterCropGeometry {
  const wShort = width <= height;
  const short = wShort ? width : height;
  const long = wShort ? height : width;
  const newLong = Math.trunc((resize * long) / short);
  const rw = wShort ? resize : newLong;
  const rh = wShort ? newLong : resize;
  return { rw, rh, left: roundHalfEven((rw - crop) / 2), top: roundHalfEven((rh - crop) / 2) };
}

/**
 * Resize(resize) then CenterCrop(crop) as one box in source pixels: torchvision's resized size and
 * crop offsets (centerCropGeometry) mapped back to the source and rounded to whole pixels. This is
 * the box that decides what to decode; the CPU decoder and the GPU route resize the exact
 * (fractional) rectangle instead, with torchvision's taps (NOTE [eval as torchvision computes it] in
 * view-resample.ts, NOTE [eval on the GPU] in jpeg-resample.ts).
 */
function centerCropBox(resize: number, crop: number, width: number, height: number): Omit<CropBox, 'flip'> {
  const { rw, rh, left, top } = centerCropGeometry(resize, crop, width, height);
  const sx = width / rw;
  const sy = height / rh;
  const bw = Math.min(width, Math.max(1, roundHalfEven(crop * sx)));
  const bh = Math.min(height, Math.max(1, roundHalfEven(crop * sy)));
  return {
    left: Math.min(width - bw, Math.max(0, roundHalfEven(left * sx))),
    top: Math.min(height - bh, Math.max(0, roundHalfEven(top * sy))),
    width: bw,
    height: bh,
  };
}

/** Python's round(): to the nearest integer, ties to even. */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}
