// Internal: not exported from the package entry.
// What a GPU JPEG decode call is asked to produce, checked once per call, shared by the CUDA decoder,
// the sim decoder and the CPU fallback: the crop box of each image (and, for a center-crop view,
// the Pillow resize of the whole image it stands for), the batch output (where, layout, dtype,
// normalization, size) and the per-channel scale and bias. The rule: a box lies inside its image
// (source pixels, integers), a `pil` resize reads only the image; the output is always 3 channels
// (RGB, grey spread as PIL's convert('RGB')), row k of the batch at `ptr + k * rowBytes`.

import { invalidOption } from '../errors.js';
import type { CropBox } from './crop-box.js';

/** A crop of the source image (src/image/crop-box.ts: RandomResizedCrop's and the eval recipe's boxes). */
export type { CropBox };

/**
 * One axis of Pillow's `resize(…, BILINEAR, box)` of the whole image: the (fractional) source
 * interval [in0, in1) of the axis resized to `out` pixels, of which the outputs [first, first + the
 * output size) are kept. Its taps are clamped to the whole image, not to the interval
 * (NOTE [eval as torchvision computes it] in view-resample.ts).
 */
export interface PilAxis {
  readonly in0: number;
  readonly in1: number;
  readonly out: number;
  readonly first: number;
}

/**
 * A crop box; with `pil`, its rows are Pillow's resize of the whole image instead (a center-crop
 * view, `'eval'`: torchvision's Resize + CenterCrop), in Pillow's own arithmetic — the integer box
 * then only names the part of the image the view shows.
 */
export interface JpegBox extends CropBox {
  readonly pil?: { readonly x: PilAxis; readonly y: PilAxis };
}

/** The boxes: one per file, or computed from each file's size once the decoder has read its header. */
export type CropBoxes = readonly JpegBox[] | ((k: number, width: number, height: number) => JpegBox);

export type JpegOutputDtype = 'uint8' | 'float32' | 'float16' | 'bfloat16';

export interface JpegBatchOutput {
  /** Device address of row 0. */
  readonly ptr: bigint;
  /** Bytes from one row to the next (≥ 3 × height × width × dtype size). */
  readonly rowBytes: number;
  readonly layout: 'chw' | 'hwc';
  readonly dtype: JpegOutputDtype;
  /** Per-channel mean and std on the [0, 1] scale: v = (x / 255 − mean) / std. Float dtypes only; without them a float output is x / 255. */
  readonly mean?: readonly number[];
  readonly std?: readonly number[];
  /** [height, width] of each output image. */
  readonly size: readonly [number, number];
}

export const CHANNELS = 3;
const DTYPE_BYTES: Record<JpegOutputDtype, number> = { uint8: 1, float32: 4, float16: 2, bfloat16: 2 };
export const DTYPE_CODE: Record<JpegOutputDtype, number> = { uint8: 0, float32: 1, float16: 2, bfloat16: 3 };

export function dtypeBytes(dtype: JpegOutputDtype): number {
  return DTYPE_BYTES[dtype];
}

/** Checks `out` once per call; returns scale[0..3) then bias[0..3) (float32), as transforms/image.ts computes them. */
export function checkOutput(out: JpegBatchOutput): Float32Array {
  if (typeof out?.ptr !== 'bigint' || out.ptr < 0n) throw invalidOption('out.ptr', 'a device address (bigint)', out?.ptr);
  if (!(out.dtype in DTYPE_BYTES)) throw invalidOption('out.dtype', "'uint8', 'float32', 'float16' or 'bfloat16'", out.dtype);
  if (out.layout !== 'chw' && out.layout !== 'hwc') throw invalidOption('out.layout', "'chw' or 'hwc'", out.layout);
  const size = out.size as unknown;
  if (!Array.isArray(size) || size.length !== 2 || !size.every((d) => Number.isInteger(d) && d >= 1 && d <= 16384)) {
    throw invalidOption('out.size', '[height, width], integers in [1, 16384]', size);
  }
  const need = CHANNELS * out.size[0] * out.size[1] * DTYPE_BYTES[out.dtype];
  if (!Number.isSafeInteger(out.rowBytes) || out.rowBytes < need) throw invalidOption('out.rowBytes', `an integer ≥ ${need} (3 × ${out.size[0]} × ${out.size[1]} × ${DTYPE_BYTES[out.dtype]})`, out.rowBytes);
  const normalized = out.mean !== undefined || out.std !== undefined;
  if (normalized && out.dtype === 'uint8') throw invalidOption('out.mean/out.std', 'absent for a uint8 output (normalize needs a float dtype)', out.mean ?? out.std);
  const scaleBias = new Float32Array(2 * CHANNELS);
  for (let c = 0; c < CHANNELS; c++) {
    const mean = pick(out.mean, c, 0, 'out.mean');
    const std = pick(out.std, c, 1, 'out.std');
    if (!(std > 0)) throw invalidOption('out.std', 'numbers > 0', out.std);
    scaleBias[c] = out.dtype === 'uint8' ? 1 : 1 / (255 * std);
    scaleBias[CHANNELS + c] = out.dtype === 'uint8' ? 0 : -mean / std;
  }
  return scaleBias;
}

function pick(values: readonly number[] | undefined, c: number, fallback: number, knob: string): number {
  if (values === undefined) return fallback;
  if (!Array.isArray(values) || (values.length !== 1 && values.length !== CHANNELS) || !values.every((v) => typeof v === 'number' && Number.isFinite(v))) {
    throw invalidOption(knob, 'one or three finite numbers', values);
  }
  return values[values.length === 1 ? 0 : c]!;
}

/** The box of file k for an image of `width` × `height`, checked to lie inside it (and its `pil` resize to fit the image and the output's [height, width] `size`). */
export function boxFor(boxes: CropBoxes, k: number, width: number, height: number, size: readonly [number, number]): JpegBox {
  const box = typeof boxes === 'function' ? boxes(k, width, height) : boxes[k];
  const ok =
    box !== undefined &&
    [box.left, box.top, box.width, box.height].every(Number.isInteger) &&
    box.left >= 0 && box.top >= 0 && box.width >= 1 && box.height >= 1 &&
    box.left + box.width <= width && box.top + box.height <= height;
  if (!ok) {
    throw invalidOption(`boxes[${k}]`, `a crop box inside the ${width}×${height} image ({ left, top, width, height } integers, width and height ≥ 1)`, box, 'Compute boxes from the image size (pass a function (k, width, height) => box)');
  }
  const pil = box.pil;
  if (pil !== undefined && !(typeof pil === 'object' && pil !== null && pilAxisOk(pil.x, width, size[1]) && pilAxisOk(pil.y, height, size[0]))) {
    throw invalidOption(`boxes[${k}].pil`, `per axis { in0, in1, out, first }: 0 ≤ in0 < in1 ≤ the image's ${width}×${height}, out and first integers with first + the output's ${size[1]}×${size[0]} ≤ out`, box.pil);
  }
  return box;
}

function pilAxisOk(a: PilAxis | undefined, size: number, outputs: number): boolean {
  return (
    typeof a === 'object' && a !== null &&
    Number.isFinite(a.in0) && Number.isFinite(a.in1) && a.in0 >= 0 && a.in0 < a.in1 && a.in1 <= size &&
    Number.isInteger(a.out) && Number.isInteger(a.first) && a.out >= 1 && a.out <= 1 << 24 && a.first >= 0 && a.first + outputs <= a.out
  );
}

export function checkBoxCount(boxes: CropBoxes, files: number): void {
  if (typeof boxes !== 'function' && (!Array.isArray(boxes) || boxes.length !== files)) {
    throw invalidOption('boxes', `one crop box per file (${files}), or a function (k, width, height) => box`, Array.isArray(boxes) ? `${boxes.length} boxes` : boxes);
  }
}

/** Bytes of one job record of kernels/crop-resize.cu: u64 source address, 12 int32, 4 float32, 4 int32, padding. */
export const JOB_BYTES = 128;

/** Where a decoded image's bytes are: `pitch` bytes a line, `xstride` from pixel to pixel, `cstride` from channel to channel. */
export interface PixelLayout {
  readonly pitch: number;
  readonly xstride: number;
  readonly cstride: number;
}

/** Interleaved RGB (NVJPEG_OUTPUT_RGBI, sharp's raw output) or three planes (NVJPEG_OUTPUT_RGB). */
export function pixelLayout(width: number, height: number, planar: boolean): PixelLayout {
  return planar ? { pitch: width, xstride: 1, cstride: width * height } : { pitch: width * 3, xstride: 3, cstride: 1 };
}

/**
 * Writes job j: the source pixels of a `width` × `height` image at `src`, its box (and Pillow
 * resize), and the output row. The layout is kernels/crop-resize.cu's `Job`.
 */
export function writeJob(table: DataView, j: number, src: bigint, width: number, height: number, pixels: PixelLayout, box: JpegBox, row: number): void {
  const at = j * JOB_BYTES;
  table.setBigUint64(at, src, true);
  const p = box.pil;
  const ints = [width, height, pixels.pitch, box.left, box.top, box.width, box.height, box.flip ? 1 : 0, row, pixels.xstride, pixels.cstride, p !== undefined ? 1 : 0];
  for (let i = 0; i < ints.length; i++) table.setInt32(at + 8 + 4 * i, ints[i]!, true);
  // The box as Pillow holds it: C floats (setFloat32 rounds to nearest, as Pillow's "(ffff)" does).
  const edges = p !== undefined ? [p.x.in0, p.x.in1, p.y.in0, p.y.in1] : [0, 0, 0, 0];
  for (let i = 0; i < 4; i++) table.setFloat32(at + 56 + 4 * i, edges[i]!, true);
  const axes = p !== undefined ? [p.x.out, p.x.first, p.y.out, p.y.first] : [0, 0, 0, 0];
  for (let i = 0; i < 4; i++) table.setInt32(at + 72 + 4 * i, axes[i]!, true);
}
