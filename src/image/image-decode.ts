// The shared image decoder of the built-in sources (image folders, image columns of Arrow files):
// encoded bytes in, a uint8 tensor of a fixed size out, through sharp (libvips). The rule: every
// failure — unknown format, corrupt or truncated data, an image over the pixel limit — is a typed
// `ERR_BAD_FILE` naming the source; the output always has exactly the requested shape.
//
// Threads. sharp is loaded lazily and synchronously on first use. On glibc Linux the thread that
// loads a native addon first should outlive every other user of it (sharp's advice for
// worker_threads), so sources call `loadImageDecoder()` from the main thread, in their main-thread
// factory, before reader workers start. libvips' operation cache is turned off (every image is
// decoded once per epoch: caching only costs memory) and libvips runs one thread per image:
// parallelism comes from many images decoding at once (reader workers, and the concurrent reads
// within a batch). Decodes run on libuv's thread pool (UV_THREADPOOL_SIZE, default 4), shared by
// the whole process. Measured (bench/sources.ts, 32 cores): concurrent sharp pipelines in one
// process contend inside libvips — 16 in flight give 2.4× one decode's throughput at 8 cores busy,
// whatever the worker count, pool size or allocator — while 16 processes give 15×; so one process
// decodes about as fast with 4 in flight as with 32.
//
// NOTE [pixels as PIL reads them] Users check a loader against `Image.open(f).convert(mode)` followed
// by torchvision's `Resize(n), CenterCrop(size)`, so without a resize the bytes are PIL's, and a resize
// keeps PIL's order (convert first). The arithmetic lives in image-reference.ts.
// - Alpha is dropped before any resize, so the colour under a transparent pixel survives (libvips alone
//   resizes alpha-weighted colour: black where alpha is 0). With channels 4 the resize is
//   alpha-weighted, as PIL resizes RGBA (a view: premultiplied with Pillow's own rounding).
// - channels 1 is PIL's `convert('L')` luma: a view takes it before the resize, as the user's
//   convert('L') comes first; a `fit` resize after (luma is linear, so that differs by rounding only).
// - CMYK converts by Pillow's formula, not through a profile; embedded ICC profiles are ignored
//   (PIL does not apply them).
// - EXIF orientation is not applied (PIL's Image.open does not; torchvision's decode_image defaults to
//   apply_exif_orientation=False).
// - 16-bit samples give their high byte, as torchvision's `to_dtype(uint8, scale=True)` (PIL clips
//   them to 255, which saturates nearly every real 16-bit image).
// Known differences: the resize kernel of `fit` is libvips' Lanczos 3, not PIL's antialiased bilinear
// (resized pixels are close, not equal; a `view` resizes as PIL's bilinear, and a center-crop view
// gives torchvision's Resize + CenterCrop bytes: NOTE [views at decode]),
// and libvips' GIF decoder gives black under transparent pixels where PIL keeps the palette colour.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type sharpModule from 'sharp';
import { badFile, invalidDatasetError, invalidOption } from '../errors.js';
import { Tensor } from '../tensor/tensor.js';
import { PickKey } from '../sampler/pick-key.js';
import type { U64 } from '../sampler/rng.js';
import { type CropBox, type View, boxFor } from './crop-box.js';
import { toBFloat16Bits, toFloat16Bits } from '../tensor/half.js';
import { cmykToRgbPil, coverPlan, lumaPil } from './image-reference.js';
import { resampleAsPil, viewResample } from './view-resample.js';
import { decodeJpegBox, decodeJpegReduced, vipsDirectAvailable } from './vips-direct.js';
import { decodeJpegRegion, turboJpegAvailable } from './turbo-jpeg.js';
import { wasmResampler } from './resample-wasm.js';

type Sharp = typeof sharpModule;

export type ImageLayout = 'chw' | 'hwc';
export type ImageFit = 'resize' | 'center-crop';
export type ImageChannels = 1 | 3 | 4;
/** The dtype an image source delivers: uint8 pixels, or x / 255 (normalized with `normalize`) as a float. */
export type ImageOutput = 'uint8' | 'float32' | 'float16' | 'bfloat16';
/**
 * Per-channel mean and std on the [0, 1] scale: v = (x / 255 − mean) / std. Each has one value per
 * channel, or one value for every channel (broadcast, as torchvision's Normalize broadcasts a list
 * of one); any other length is `ERR_INVALID_OPTION` naming `normalize.mean` or `normalize.std`.
 */
export interface ImageNormalize {
  readonly mean: readonly number[];
  readonly std: readonly number[];
}

/** sharp's own default: an image over 0x3FFF × 0x3FFF pixels (about 268 M) is refused before it is decoded. */
export const DEFAULT_MAX_INPUT_PIXELS = 0x3fff * 0x3fff;
/** The largest output side accepted (an output of 16384 × 16384 × 4 is already 1 GiB). */
export const MAX_OUTPUT_SIDE = 16384;

export interface DecodeImageOptions {
  /** Output size as [height, width]. */
  readonly size: readonly [number, number];
  /**
   * 1 (grayscale), 3 (RGB) or 4 (RGBA). Default 3. Inputs are converted as PIL's `convert()`
   * (NOTE [pixels as PIL reads them]): grayscale is spread to RGB, alpha is dropped before any
   * resize (not composited) or added as opaque, RGB becomes grey by PIL's luma.
   */
  readonly channels?: ImageChannels;
  /** 'chw' (default: composes with `transforms.image`, which takes [N, C, H, W]) or 'hwc'. */
  readonly layout?: ImageLayout;
  /**
   * 'center-crop' (default): torchvision's `Resize(n)` + `CenterCrop(size)` with its rounding
   * (long side truncated, crop anchor rounded half to even), n the smallest short side that covers
   * the output (its side when square), so the aspect ratio is kept. 'resize': stretch to the output
   * size, ignoring the aspect ratio.
   */
  readonly fit?: ImageFit;
  /**
   * Refuse images with more input pixels than this before decoding them (decompression bombs).
   * Default 0x3FFF² ≈ 268 M, sharp's own limit.
   */
  readonly maxInputPixels?: number;
  /** Where the bytes came from, for messages: a file path or "column x row y". */
  readonly source: string;
  /**
   * A decode-time view of one pick (src/image/crop-box.ts): its box, in source pixels, is cut
   * and resized to `size` (stretched: the box already has the aspect ratio it should), then
   * mirrored when `flip`. The box is computed here, from the image's size read from its header
   * and the pick's key; plain data, so it crosses to decode processes as JSON. Overrides `fit`.
   */
  readonly view?: KeyedView;
  /** Normalize per channel (needs a float `output`), as `transforms.image` does, in the decoder. */
  readonly normalize?: ImageNormalize;
  /** Output dtype. Default 'uint8' ('float32' with normalize). */
  readonly output?: ImageOutput;
}

/** A view and the key of the pick it is cut for. */
export interface KeyedView {
  readonly view: View;
  readonly sample: number;
  readonly repeat: number;
  readonly epoch: number;
  readonly seed: U64;
}

/** The output dtype of a decode. */
export function outputOf(o: { readonly output?: ImageOutput; readonly normalize?: ImageNormalize }): ImageOutput {
  return o.output ?? (o.normalize !== undefined ? 'float32' : 'uint8');
}

const require = createRequire(import.meta.url);
let sharpLib: Sharp | undefined;

/**
 * Load sharp in this thread (once) and set it up for many concurrent decodes. Call it from the main
 * thread before reader workers that decode images start (see the header).
 */
export function loadImageDecoder(): Sharp {
  if (sharpLib !== undefined) return sharpLib;
  let lib: Sharp;
  try {
    lib = require('sharp') as Sharp;
  } catch (cause) {
    throw invalidDatasetError(
      `image decoding needs the package "sharp", which failed to load: ${(cause as Error)?.message ?? String(cause)}. Reinstall it with npm install sharp`,
      cause,
    );
  }
  lib.cache(false);
  lib.concurrency(1);
  sharpLib = lib;
  return lib;
}

/** The formats accepted, by their first bytes. Anything else (SVG, PDF, …) is refused before libvips sees it. */
const SUPPORTED = 'JPEG, PNG, WebP, GIF, TIFF or AVIF';

function sniff(b: Uint8Array): string | undefined {
  const at = (i: number, s: string) => {
    for (let k = 0; k < s.length; k++) if (b[i + k] !== s.charCodeAt(k)) return false;
    return true;
  };
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (b.length >= 8 && at(0, '\x89PNG\r\n\x1a\n')) return 'png';
  if (b.length >= 12 && at(0, 'RIFF') && at(8, 'WEBP')) return 'webp';
  if (b.length >= 6 && (at(0, 'GIF87a') || at(0, 'GIF89a'))) return 'gif';
  if (b.length >= 4 && (at(0, 'II*\x00') || at(0, 'MM\x00*'))) return 'tiff';
  if (b.length >= 12 && at(4, 'ftyp')) return 'heif';
  return undefined;
}

/** Check decode options once (sources call it at open, so that a bad knob fails before any read). */
export function checkDecodeOptions(o: Omit<DecodeImageOptions, 'source' | 'view'>, knob = 'size'): void {
  const size = o.size as unknown;
  if (
    !Array.isArray(size) ||
    size.length !== 2 ||
    !size.every((d) => Number.isInteger(d) && (d as number) >= 1 && (d as number) <= MAX_OUTPUT_SIDE)
  ) {
    throw invalidOption(knob, `[height, width], integers in [1, ${MAX_OUTPUT_SIDE}]`, size, 'Pass e.g. size: [224, 224]');
  }
  if (o.channels !== undefined && o.channels !== 1 && o.channels !== 3 && o.channels !== 4) throw invalidOption('channels', '1, 3 or 4', o.channels);
  if (o.layout !== undefined && o.layout !== 'chw' && o.layout !== 'hwc') throw invalidOption('layout', "'chw' or 'hwc'", o.layout);
  if (o.fit !== undefined && o.fit !== 'resize' && o.fit !== 'center-crop') throw invalidOption('fit', "'resize' or 'center-crop'", o.fit);
  const max = o.maxInputPixels;
  if (max !== undefined && !(Number.isSafeInteger(max) && max >= 1)) throw invalidOption('maxInputPixels', 'a positive integer', max);
  if (o.output !== undefined && !['uint8', 'float32', 'float16', 'bfloat16'].includes(o.output)) throw invalidOption('output', "'uint8', 'float32', 'float16' or 'bfloat16'", o.output);
  if (o.normalize !== undefined) {
    if (outputOf(o) === 'uint8') throw invalidOption('normalize', "left out for output 'uint8'", o.normalize, "Pass output: 'float32', 'float16' or 'bfloat16' to normalize");
    const c = o.channels ?? 3;
    for (const k of ['mean', 'std'] as const) {
      const v = (o.normalize as unknown as Record<string, unknown> | null)?.[k];
      if (!Array.isArray(v) || (v.length !== 1 && v.length !== c) || !v.every((x) => typeof x === 'number' && Number.isFinite(x) && (k === 'mean' || x > 0))) {
        throw invalidOption(`normalize.${k}`, `1 or ${c} finite numbers${k === 'std' ? ' > 0' : ''} (one per channel, on the [0, 1] scale)`, v, 'Pass e.g. normalize: { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] }');
      }
    }
  }
}

/** sharp's message on one line: its warnings come one per line, often repeated. */
function oneLine(message: string): string {
  const lines = [...new Set(message.split('\n').map((l) => l.trim()).filter((l) => l.length > 0))];
  const text = lines.join('; ');
  return text.length > 400 ? `${text.slice(0, 400)}…` : text;
}

/**
 * Decode an encoded image (JPEG, PNG, WebP, GIF, TIFF, AVIF) to a uint8 tensor of shape
 * [C, H, W] (layout 'chw', the default) or [H, W, C], resized per `fit`.
 * Throws `ERR_BAD_FILE` naming `options.source` when the bytes are not a readable image.
 */
export function decodeImage(bytes: Uint8Array, options: DecodeImageOptions & { readonly output?: 'uint8'; readonly normalize?: undefined }, transient?: boolean, into?: Uint8Array, borrowed?: boolean): Promise<Tensor<'uint8'>>;
export function decodeImage(bytes: Uint8Array, options: DecodeImageOptions, transient?: boolean, into?: Uint8Array, borrowed?: boolean): Promise<Tensor>;
/**
 * `transient` (internal: decode-child.ts): the tensor may view scratch memory of this thread that the
 * next decode overwrites — for a caller that copies it out at once (NOTE [transient pixels]).
 * `into` (internal: image-decoding.ts): the memory the pixels are for (a staging row: NOTE [pixels
 * into their row]); where the route makes them in scratch memory they are copied there before this
 * returns its promise, and the tensor views `into`. Memory of another length or alignment is not used.
 * `borrowed` (internal: image-decoding.ts): `bytes` are the caller's scratch, rewritten once this has
 * returned its promise; whatever reads them later (sharp, in another thread) gets a copy.
 */
export async function decodeImage(bytes: Uint8Array, options: DecodeImageOptions, transient = false, into?: Uint8Array, borrowed = false): Promise<Tensor> {
  checkDecodeOptions(options);
  const { source } = options;
  const [height, width] = options.size;
  const channels = options.channels ?? 3;
  const maxPixels = options.maxInputPixels ?? DEFAULT_MAX_INPUT_PIXELS;
  const format = sniff(bytes);
  if (format === undefined) {
    const head = Array.from(bytes.subarray(0, 8), (x) => x.toString(16).padStart(2, '0')).join(' ');
    throw badFile(source, 0, `cannot decode the image: not a ${SUPPORTED} file (${bytes.length === 0 ? 'it is empty' : `it starts with ${head}`})`);
  }
  const sharp = loadImageDecoder();
  // sharp reads the bytes in another thread: give it memory nobody else writes (a shared buffer may
  // be; borrowed bytes are). Made at the first open, which comes before this function's first await.
  const shared = bytes.buffer instanceof SharedArrayBuffer;
  let copy: Uint8Array | undefined;
  const sharpInput = () => (shared || borrowed ? (copy ??= Uint8Array.from(bytes)) : bytes);
  // See NOTE [pixels as PIL reads them]: no ICC profile, no EXIF rotation.
  const open = () => sharp(sharpInput(), { limitInputPixels: maxPixels, failOn: 'warning', pages: 1, ignoreIcc: true });
  let data: Buffer;
  let info: { width: number; height: number; channels: number; size: number };
  try {
    // NOTE [JPEG header]: a plain 8-bit JPEG's size and bands come from its frame header, without a
    // second libvips open for metadata (~0.35 ms of a ~4 ms decode).
    const header = format === 'jpeg' ? jpegHeader(bytes) : undefined;
    const meta = header ?? (await open().metadata());
    const srcW = meta.width;
    const srcH = meta.pageHeight ?? meta.height;
    if (srcW * srcH > maxPixels) throw new Error(`Input image exceeds pixel limit (${srcW}×${srcH})`);
    // NOTE [direct libvips]: a plain JPEG's view, straight through libvips' C API; undefined sends it on to sharp.
    const direct = header !== undefined && options.view !== undefined && channels !== 4 ? directView(shared ? sharpInput() : bytes, header.channels, options.view, srcW, srcH, width, height, channels, source, options, transient, into) : undefined;
    if (direct instanceof Tensor) return direct;
    if (direct !== undefined) return finish(direct, height, width, channels, options);
    const cmyk = meta.space === 'cmyk';
    const converted = cmyk || (meta.hasAlpha && channels !== 4);
    let pipeline: ReturnType<Sharp>;
    if (converted) pipeline = sharp(...(await convertFirst(open(), cmyk)));
    else pipeline = open();
    // An 8-bit grey input stays one band (libvips' grey to b-w is the identity); anything else becomes
    // sRGB (16-bit samples: their high byte), and channels 1 is then PIL's luma of it.
    const grey = channels === 1 && !cmyk && !meta.hasAlpha && meta.channels === 1 && meta.depth === 'uchar';
    const bands = (p: ReturnType<Sharp>) => (channels === 4 ? p.ensureAlpha().toColourspace('srgb') : grey ? p.toColourspace('b-w') : p.removeAlpha().toColourspace('srgb'));
    if (options.view !== undefined) {
      const v = options.view;
      const box = boxFor(v.view, new PickKey(v.sample, v.repeat, v.epoch, v.seed), srcW, srcH);
      checkBox(box, srcW, srcH, source);
      ({ data, info } = await cutView(bands(pipeline), v.view, box, srcW, srcH, width, height, channels));
    } else {
      if (options.fit === 'resize') pipeline = pipeline.resize(width, height, { fit: 'fill' });
      else {
        const plan = coverPlan(srcH, srcW, height, width);
        pipeline = pipeline.resize(plan.rw, plan.rh, { fit: 'fill' }).extract({ left: plan.left, top: plan.top, width, height });
      }
      ({ data, info } = await bands(pipeline).raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true }));
    }
    if (channels === 1 && info.channels === 3) {
      const luma = lumaPil(data, 3, info.width * info.height);
      data = Buffer.from(luma.buffer, luma.byteOffset, luma.length);
      info = { ...info, channels: 1, size: data.length };
    }
  } catch (cause) {
    const message = oneLine((cause as Error)?.message ?? String(cause));
    if (/pixel limit/i.test(message)) {
      throw badFile(source, 0, `cannot decode the image: it has more than ${maxPixels} pixels (${message})`, 'Raise maxInputPixels if the image is trusted');
    }
    throw badFile(source, 0, `cannot decode the image (${format}): ${message}`);
  }
  if (info.width !== width || info.height !== height || info.channels !== channels || data.length !== width * height * channels) {
    throw badFile(source, 0, `cannot decode the image (${format}): the decoder gave ${info.height}×${info.width}×${info.channels} bytes where ${height}×${width}×${channels} were asked for`);
  }
  return finish(new Uint8Array(data.buffer, data.byteOffset, data.length), height, width, channels, options);
}

/** Interleaved pixels of the output size to the tensor asked for (layout, dtype, normalize). */
function finish(hwc: Uint8Array, height: number, width: number, channels: number, options: DecodeImageOptions): Tensor {
  const output = outputOf(options);
  const shape = options.layout === 'hwc' ? [height, width, channels] : [channels, height, width];
  if (output !== 'uint8') return new Tensor(toFloats(hwc, height * width, channels, options.layout === 'hwc', output, options.normalize), shape, output);
  if (options.layout === 'hwc') return new Tensor(hwc, shape, 'uint8');
  return new Tensor(hwcToChw(hwc, height * width, channels), shape, 'uint8');
}

/**
 * NOTE [views at decode] How a view's box becomes `width` × `height` pixels (`bands` already converts
 * to the output's bands, or to RGB for channels 1): libvips decodes and cuts the region
 * `viewResample` names (view-resample.ts: the box, or for a center-crop view the box and the taps
 * beyond it), and image-resample.ts resizes it as PIL would (`resampleAsPil`: luma first for
 * channels 1, premultiplied for RGBA), then mirrors it when `flip` — torchvision's bytes, given the
 * same decoded pixels (NOTE [eval as torchvision computes it]), and cheaper than libvips' resize
 * (NOTE [why not libvips' resize]; in WebAssembly, a third of libvips' reduction's CPU: NOTE
 * [resample in WebAssembly]). One exception, for speed where WebAssembly does not run (the
 * JavaScript loop costs 2× libvips' reduction): a box at least the output on both sides, of a view
 * other than a center crop, without alpha, is cut and reduced by libvips' linear kernel (a triangle
 * widened by the reduction, as Pillow's BILINEAR; on hard-edged images up to 10 levels from it for
 * reductions to 2×, 22 from 2× to 4×: docs/images.md). This path has no
 * shrink-on-load: it used to reduce the whole JPEG so that the box landed on the output, which
 * rounded the box's edges to whole output pixels and, for a flipped box, cut the mirrored region
 * (sharp flops before its post-resize extract). A plain JPEG takes the direct route first
 * (`directView`, NOTE [direct libvips]), which may decode a large box shrunk (NOTE [shrink margin]).
 */
async function cutView(
  pipeline: ReturnType<Sharp>, view: View, box: CropBox, srcW: number, srcH: number, width: number, height: number, channels: number,
): Promise<{ data: Buffer; info: { width: number; height: number; channels: number; size: number } }> {
  if (view.kind !== 'center-crop' && box.width >= width && box.height >= height && channels !== 4 && wasmResampler() === undefined) {
    const whole = box.left === 0 && box.top === 0 && box.width === srcW && box.height === srcH;
    let p = (whole ? pipeline : pipeline.extract({ left: box.left, top: box.top, width: box.width, height: box.height })).resize(width, height, { fit: 'fill', kernel: 'linear' });
    if (box.flip) p = p.flop();
    return p.raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  }
  const plan = viewResample(view, box, srcW, srcH, width, height);
  const r = plan.region;
  const all = r.left === 0 && r.top === 0 && r.width === srcW && r.height === srcH;
  const { data, info } = await (all ? pipeline : pipeline.extract(r)).raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  const px = resampleAsPil(data, info.width, info.height, info.channels, info.width * info.channels, plan.box, width, height, box.flip, channels);
  const out = Buffer.from(px.buffer, px.byteOffset, px.length);
  return { data: out, info: { width, height, channels: px.length / (width * height), size: out.length } };
}

/**
 * NOTE [shrink margin] The direct route decodes a JPEG at 1/s scale (libjpeg's scaled IDCT, as
 * libvips' shrink-on-load: a fraction of the full decode's work) only when the box is at least
 * 2·s times the output on both sides, so that Pillow's filter still reduces the shrunk box 2× or
 * more and averages away most of where the scaled IDCT departs from the full decode PIL resizes
 * (its own low-pass, with ringing at hard edges, and 4:2:0 chroma taken without upsampling).
 * Measured against torchvision's `resized_crop` (RandomResizedCrop boxes of 24 photo-like JPEGs with
 * hard edges and noise, 640×480 to 3000×2000, 4:2:0, 4:4:4 and progressive): shrinking whenever the
 * shrunk box covered the output gave max |Δ| 45, mean 0.76–1.36 over 480 boxes; with the margin,
 * the 135 boxes still decoded shrunk give max 15, mean 0.34–0.46, and the others are decoded at full
 * scale (torchvision's bytes). A center-crop view is never shrunk.
 */
const SHRINK_MARGIN = 2;

/** The scale (1, 2, 4 or 8: decoded at 1/s) at which the direct route decodes `view`'s `box` for a width × height output (NOTE [shrink margin]). */
export function shrinkFor(view: View, box: CropBox, width: number, height: number): number {
  if (view.kind === 'center-crop') return 1;
  for (const s of [8, 4, 2]) if (box.width >= SHRINK_MARGIN * s * width && box.height >= SHRINK_MARGIN * s * height) return s;
  return 1;
}

/**
 * The direct route of a view (NOTE [direct libvips]): libvips decodes the box's region of the JPEG
 * — at 1/s scale, s the largest of 8, 4, 2 that leaves the box at least 2·s times the output on
 * both sides (NOTE [shrink margin]), except for a center-crop view, which is decoded at full scale.
 * Without WebAssembly, a box reduced without a shrink is reduced by libvips' linear kernel, in the
 * same call (as in the sharp path); any other box (enlarged on a side, or fractional after a
 * shrink), and every center-crop view, is resized by image-resample.ts
 * from the region `viewResample` names: PIL's bytes of the decoded pixels when s = 1 (NOTE [eval as
 * torchvision computes it]). A grey JPEG is resized as one band and spread to RGB after (PIL's
 * convert('RGB') copies L); channels 1 of an RGB JPEG is PIL's luma, taken before the resize, as
 * `convert('L')` is. Undefined when libvips cannot decode it here.
 */
function directView(
  bytes: Uint8Array, components: number, v: KeyedView, srcW: number, srcH: number, width: number, height: number, channels: number, source: string,
  options: DecodeImageOptions, transient: boolean, into: Uint8Array | undefined,
): Uint8Array | Tensor | undefined {
  if (!vipsDirectAvailable() && !turboJpegAvailable()) return undefined;
  const box = boxFor(v.view, new PickKey(v.sample, v.repeat, v.epoch, v.seed), srcW, srcH);
  checkBox(box, srcW, srcH, source);
  const exact = v.view.kind === 'center-crop';
  const shrink = shrinkFor(v.view, box, width, height);
  // A box reduced without a shrink: Pillow's resample in WebAssembly (NOTE [resample in WebAssembly]:
  // a third of libvips' reduction's CPU, and Pillow's bytes); without WebAssembly, libvips' linear
  // reduction (as the sharp path; the JS loop costs 2× it there) — but not for a center-crop view,
  // whose pixels are torchvision's on every route. After a shrink libvips' reduction of the cut strays
  // (mean 7 levels on a 4:4:4 1000×1500 JPEG), so the fractional box goes to the resample loop (mean 1).
  const wasm = wasmResampler();
  if (!exact && shrink === 1 && box.width >= width && box.height >= height && wasm === undefined) {
    const px = decodeJpegReduced(bytes, box, 1, components, width, height, box.flip);
    if (px !== undefined) return spread(px, components, width, height, channels);
  }
  // What to decode: at full scale, the region the resample reads (the box, or for a center-crop view
  // the box and its taps beyond it); shrunk, the box, its edges fractional in the shrunk pixels.
  const plan = shrink === 1 ? viewResample(v.view, box, srcW, srcH, width, height) : undefined;
  const region = plan?.region ?? box;
  // The region's pixels: libjpeg-turbo's crop decode where it loads (NOTE [crop decode], straight into
  // the resampler's memory), else libvips' decode of the region's rows.
  const decoded = decodeJpegRegion(bytes, region, shrink, components, wasm !== undefined ? wasm.sourceArea : (n) => new Uint8Array(n)) ??
    decodeJpegBox(bytes, region, shrink, components);
  if (decoded === undefined) return undefined;
  const resampleBox = plan?.box ?? { x0: decoded.x0, y0: decoded.y0, x1: decoded.x1, y1: decoded.y1 };
  const output = outputOf(options);
  try {
    // NOTE [transient pixels] Resample and cast in one WebAssembly call when nothing comes between
    // them (no band change): the bytes never come out to JavaScript, and a transient caller (a decode
    // process, which writes the result to its slab at once) takes the floats as a view of the
    // module's memory — no array allocated per image, no garbage for the collector.
    if (wasm !== undefined && components === channels && output !== 'uint8') {
      // With `into` (NOTE [pixels into their row]) the module's memory is copied straight there: one copy, no array of its own.
      const size = output === 'float32' ? 4 : 2;
      const row = into !== undefined && into.byteLength === width * height * channels * size && into.byteOffset % size === 0 ? into : undefined;
      const data = wasm.resample(decoded.data, decoded.width, decoded.height, components, resampleBox, width, height, box.flip, { table: castTable(channels, output, options.normalize), interleaved: options.layout === 'hwc', transient: transient || row !== undefined }, decoded.stride);
      const shape = options.layout === 'hwc' ? [height, width, channels] : [channels, height, width];
      if (row === undefined) return new Tensor(data as never, shape, output);
      row.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      const view = output === 'float32' ? new Float32Array(row.buffer, row.byteOffset, data.length) : new Uint16Array(row.buffer, row.byteOffset, data.length);
      return new Tensor(view as never, shape, output);
    }
    return resampleAsPil(decoded.data, decoded.width, decoded.height, components, decoded.stride, resampleBox, width, height, box.flip, channels);
  } finally {
    decoded.release?.();
  }
}

/**
 * Whether a view of the image at `path` would take the direct route in this thread: a plain 8-bit
 * JPEG (its frame header), with libjpeg-turbo's crop decode and the WebAssembly resample loaded
 * (NOTE [decode: 'auto'] in image-decoding.ts). False when the file cannot be read.
 */
export function directRoute(path: string): boolean {
  if (!turboJpegAvailable() || wasmResampler() === undefined) return false;
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch {
    return false;
  }
  return sniff(bytes) === 'jpeg' && jpegHeader(bytes) !== undefined;
}

/** Pixels of `components` bands to the bands asked for: a grey JPEG spread to RGB, RGB to PIL's luma. */
function spread(px: Uint8Array, components: number, width: number, height: number, channels: number): Uint8Array {
  if (components === channels) return px;
  if (channels === 1) return lumaPil(px, 3, width * height);
  const rgb = new Uint8Array(width * height * 3);
  for (let p = 0, o = 0; p < px.length; p++, o += 3) rgb[o] = rgb[o + 1] = rgb[o + 2] = px[p]!;
  return rgb;
}

/**
 * NOTE [JPEG header] Width, height and bands of a baseline or progressive 8-bit JPEG with 1 (grey)
 * or 3 (YCbCr or RGB) components, read from its SOF marker; undefined for anything else (4
 * components, 12-bit samples, a height given later by a DNL marker, a damaged header), which goes
 * through libvips' metadata instead. libvips decodes these two kinds to 'b-w' and 'srgb' uchar.
 */
export function jpegHeader(b: Uint8Array): { width: number; height: number; channels: number; space: string; hasAlpha: false; depth: 'uchar'; pageHeight?: undefined } | undefined {
  let p = 2;
  while (p + 4 <= b.length) {
    if (b[p] !== 0xff) return undefined;
    const marker = b[p + 1]!;
    if (marker === 0xff) {
      p++;
      continue;
    }
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      p += 2;
      continue;
    }
    if (marker === 0xd9 || marker === 0xda) return undefined;
    const length = (b[p + 2]! << 8) | b[p + 3]!;
    if (length < 2) return undefined;
    const sof = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (sof) {
      if (p + 10 > b.length) return undefined;
      const precision = b[p + 4]!;
      const height = (b[p + 5]! << 8) | b[p + 6]!;
      const width = (b[p + 7]! << 8) | b[p + 8]!;
      const components = b[p + 9]!;
      if (precision !== 8 || height === 0 || width === 0 || (components !== 1 && components !== 3)) return undefined;
      return { width, height, channels: components, space: components === 1 ? 'b-w' : 'srgb', hasAlpha: false, depth: 'uchar' };
    }
    p += 2 + length;
  }
  return undefined;
}

function checkBox(box: CropBox, w: number, h: number, source: string): void {
  const ok = box !== null && typeof box === 'object' && [box.left, box.top, box.width, box.height].every(Number.isInteger) &&
    box.left >= 0 && box.top >= 0 && box.width >= 1 && box.height >= 1 && box.left + box.width <= w && box.top + box.height <= h;
  if (!ok) throw invalidOption('view', `a crop box inside the ${w}×${h} image of ${source}`, box);
}

/**
 * Pixels to floats, (x · scale) + bias in float32 as transforms/image.ts computes them (scale =
 * 1 / (255 · std), bias = −mean / std), cast with round-to-nearest-even; planes or interleaved.
 */
export function toFloats(hwc: Uint8Array, pixels: number, channels: number, interleaved: boolean, output: Exclude<ImageOutput, 'uint8'>, normalize: ImageNormalize | undefined): Float32Array | Uint16Array {
  const table = castTable(channels, output, normalize);
  // In WebAssembly where it instantiates (NOTE [resample in WebAssembly]), else one copy of the loops
  // per array type (V8 keeps each monomorphic), and RGB planes in one sequential pass over the pixels:
  // 224² × 3 to bf16 planes 0.24 ms instead of 0.40 (2-core development machine).
  const wasm = wasmResampler();
  if (wasm !== undefined) return wasm.cast(hwc, pixels, channels, interleaved, table);
  const out = output === 'float32' ? new Float32Array(pixels * channels) : new Uint16Array(pixels * channels);
  if (out instanceof Float32Array) castLoop(hwc, pixels, channels, interleaved, out, table as Float32Array);
  else castLoop16(hwc, pixels, channels, interleaved, out, table as Uint16Array);
  return out;
}

/** The last cast made and what it was made for (a copy of mean and std): a loader asks for the same one for every image. */
let lastCast: { channels: number; output: string; mean: readonly number[] | undefined; std: readonly number[] | undefined; table: Float32Array | Uint16Array } | undefined;

function sameValues(a: readonly number[] | undefined, b: readonly number[] | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

/**
 * toFloats' lookup table: 256 values a channel, so the per-pixel work is one load and one store. Read
 * only. (Computing v · scale + bias in WebAssembly SIMD instead, planes gathered by shuffles, measured
 * slower: 0.19 ms for 224² RGB to float32 planes against the table's 0.14.)
 */
function castTable(channels: number, output: Exclude<ImageOutput, 'uint8'>, normalize: ImageNormalize | undefined): Float32Array | Uint16Array {
  const last = lastCast;
  // Compared by value, without a key string per image.
  if (last !== undefined && last.channels === channels && last.output === output && sameValues(last.mean, normalize?.mean) && sameValues(last.std, normalize?.std)) return last.table;
  const table = output === 'float32' ? new Float32Array(256 * channels) : new Uint16Array(256 * channels);
  for (let c = 0; c < channels; c++) {
    const mean = normalize?.mean[normalize.mean.length === 1 ? 0 : c] ?? 0;
    const std = normalize?.std[normalize.std.length === 1 ? 0 : c] ?? 1;
    const scale = Math.fround(1 / (255 * std));
    const bias = Math.fround(-mean / std);
    for (let v = 0; v < 256; v++) {
      const f = Math.fround(Math.fround(v * scale) + bias);
      table[c * 256 + v] = output === 'float32' ? f : output === 'float16' ? toFloat16Bits(f) : toBFloat16Bits(f);
    }
  }
  lastCast = { channels, output, mean: normalize?.mean.slice(), std: normalize?.std.slice(), table };
  return table;
}

function castLoop(hwc: Uint8Array, pixels: number, channels: number, interleaved: boolean, out: Float32Array, table: Float32Array): void {
  if (interleaved) {
    for (let i = 0; i < pixels * channels; i++) out[i] = table[(i % channels) * 256 + hwc[i]!]!;
    return;
  }
  if (channels === 3) {
    for (let p = 0, s = 0, g = pixels, b = 2 * pixels; p < pixels; p++, s += 3) {
      out[p] = table[hwc[s]!]!;
      out[g + p] = table[256 + hwc[s + 1]!]!;
      out[b + p] = table[512 + hwc[s + 2]!]!;
    }
    return;
  }
  for (let c = 0; c < channels; c++) {
    const base = c * pixels;
    const t = c * 256;
    for (let p = 0, s = c; p < pixels; p++, s += channels) out[base + p] = table[t + hwc[s]!]!;
  }
}

function castLoop16(hwc: Uint8Array, pixels: number, channels: number, interleaved: boolean, out: Uint16Array, table: Uint16Array): void {
  if (interleaved) {
    for (let i = 0; i < pixels * channels; i++) out[i] = table[(i % channels) * 256 + hwc[i]!]!;
    return;
  }
  if (channels === 3) {
    // One sequential pass over the pixels, three plane writes each.
    for (let p = 0, s = 0, g = pixels, b = 2 * pixels; p < pixels; p++, s += 3) {
      out[p] = table[hwc[s]!]!;
      out[g + p] = table[256 + hwc[s + 1]!]!;
      out[b + p] = table[512 + hwc[s + 2]!]!;
    }
    return;
  }
  for (let c = 0; c < channels; c++) {
    const base = c * pixels;
    const t = c * 256;
    for (let p = 0, s = c; p < pixels; p++, s += channels) out[base + p] = table[t + hwc[s]!]!;
  }
}

/**
 * The image at full size as 8-bit RGB, converted before any resize as PIL's `convert('RGB')` is: alpha
 * dropped (libvips would resize alpha-weighted colour, black where transparent), CMYK by Pillow's
 * formula (libvips would apply a CMYK profile). Returns sharp's arguments for the raw pixels.
 */
async function convertFirst(image: ReturnType<Sharp>, cmyk: boolean): Promise<[Buffer, { raw: { width: number; height: number; channels: 3 } }]> {
  const decoded = cmyk ? image.pipelineColourspace('cmyk').toColourspace('cmyk') : image.removeAlpha().toColourspace('srgb');
  const { data, info } = await decoded.raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  const rgb = cmyk ? cmykToRgbPil(data, info.channels, info.width * info.height) : data;
  return [Buffer.from(rgb.buffer, rgb.byteOffset, rgb.length), { raw: { width: info.width, height: info.height, channels: 3 } }];
}

const LITTLE_ENDIAN = new Uint8Array(Uint16Array.of(1).buffer)[0] === 1;

/** Interleaved pixels to planes, in one pass over the output. */
export function hwcToChw(src: Uint8Array, pixels: number, channels: number): Uint8Array {
  const out = new Uint8Array(pixels * channels);
  if (channels === 1) {
    out.set(src);
    return out;
  }
  let done = 0;
  if (channels === 3 && LITTLE_ENDIAN && (src.byteOffset & 3) === 0 && (pixels & 3) === 0) done = rgbQuadsToPlanes(src, out, pixels);
  for (let c = 0; c < channels; c++) {
    const base = c * pixels;
    for (let p = done, s = done * channels + c; p < pixels; p++, s += channels) out[base + p] = src[s]!;
  }
  return out;
}

/**
 * Three channels, four pixels at a time: three 32-bit words in (r0 g0 b0 r1 | g1 b1 r2 g2 | b2 r3
 * g3 b3), one word out to each plane. About 3× the byte loop (a 224² image: 75 µs instead of 230),
 * which is ~6% of a JPEG decode. Needs little-endian words, an aligned source and planes (pixel
 * count a multiple of 4). Returns the pixels done.
 */
function rgbQuadsToPlanes(src: Uint8Array, out: Uint8Array, pixels: number): number {
  const quads = pixels >>> 2;
  const s32 = new Uint32Array(src.buffer, src.byteOffset, quads * 3);
  const r32 = new Uint32Array(out.buffer, out.byteOffset, quads);
  const g32 = new Uint32Array(out.buffer, out.byteOffset + pixels, quads);
  const b32 = new Uint32Array(out.buffer, out.byteOffset + 2 * pixels, quads);
  for (let q = 0, s = 0; q < quads; q++, s += 3) {
    const w0 = s32[s]!;
    const w1 = s32[s + 1]!;
    const w2 = s32[s + 2]!;
    r32[q] = (w0 & 0xff) | ((w0 >>> 16) & 0xff00) | (w1 & 0xff0000) | ((w2 << 16) & 0xff000000);
    g32[q] = ((w0 >>> 8) & 0xff) | ((w1 << 8) & 0xff00) | ((w1 >>> 8) & 0xff0000) | ((w2 << 8) & 0xff000000);
    b32[q] = ((w0 >>> 16) & 0xff) | (w1 & 0xff00) | ((w2 << 16) & 0xff0000) | (w2 & 0xff000000);
  }
  return quads * 4;
}
