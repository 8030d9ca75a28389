// Internal: not exported from the package entry.
// The crop decode of a JPEG view's box (issue 17): libjpeg-turbo's TurboJPEG 3 API called through
// koffi, with a cropping region, so that only the box is decoded — the rows above it are entropy-
// decoded and skipped (jpeg_skip_scanlines: no IDCT, no colour conversion), the columns beside it are
// not transformed (jpeg_crop_scanline), and nothing below it is read. The rule, as vips-direct.ts's:
// `decodeJpegRegion` answers `undefined` for anything it does not cover (no library here, a warning
// or an error from libjpeg-turbo, a band count other than the header's) and the caller then takes the
// libvips route, which decodes it or gives the typed error; it never throws for bad input.
//
// NOTE [crop decode] Measured on the 2-core development machine (1 000 random boxes of ImageNet-like
// 4:2:0 JPEGs, ~400×350): the whole image 1.0 ms, a box 0.63–0.66 ms; libvips' decode of the box's
// rows (its jpegload and region machinery over the same libjpeg-turbo) 1.3–1.7 ms.
// - Exactness: a crop is decoded with a margin (one pixel each side, the left edge then down to the
//   iMCU boundary the API requires), and only the box's pixels are used: at the region's own edges
//   libjpeg-turbo's fancy chroma upsampling replicates the edge sample, where a whole decode would
//   use the neighbour. With the margin the box's pixels are those of a whole decode, byte for byte
//   (turbo-jpeg.test.ts checks random boxes against whole decodes, 4:2:0, 4:2:2, 4:4:4, grey,
//   progressive, and at 1/2, 1/4, 1/8 scale).
// - Which library: the `libturbojpeg.so.0` that the optional dependency @julusian/jpeg-turbo ships
//   prebuilt for Linux (libjpeg-turbo 3.1, with its AVX2/NEON SIMD; it needs only libc), or the
//   path in the env switch `turboJpeg` (base/env.ts; any libjpeg-turbo ≥ 3.0: tj3SetCroppingRegion); off there
//   turns the route off. Elsewhere (macOS and Windows ship no separate library) the libvips route runs.
// - One TurboJPEG handle per thread (module state is per isolate; a handle is not thread-safe),
//   made on first use and kept. Calls are synchronous, on the calling thread, like vips-direct.ts's.
// - Settings: stop on warnings (a truncated or damaged file then goes to the libvips route, whose
//   fail_on 'warning' gives the typed error — the same outcome as before), accurate IDCT and smooth
//   upsampling (the library's defaults, as PIL's and libvips').

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { type DecodedBox, cutOf } from './vips-direct.js';
import { readSwitch } from '../base/env.js';

interface Turbo {
  readonly handle: unknown;
  readonly header: (h: unknown, buf: Uint8Array, len: number) => number;
  readonly get: (h: unknown, param: number) => number;
  readonly set: (h: unknown, param: number, value: number) => number;
  readonly scale: (h: unknown, factor: { num: number; denom: number }) => number;
  readonly crop: (h: unknown, region: { x: number; y: number; w: number; h: number }) => number;
  readonly decompress: (h: unknown, buf: Uint8Array, len: number, dst: Uint8Array, pitch: number, format: number) => number;
}

// TurboJPEG 3's enums (turbojpeg.h; the TURBOJPEG_3 symbol version keeps them).
const TJINIT_DECOMPRESS = 1;
const TJPARAM_STOPONWARNING = 0;
const TJPARAM_SUBSAMP = 4;
const TJPARAM_JPEGWIDTH = 5;
const TJPARAM_JPEGHEIGHT = 6;
const TJPARAM_PRECISION = 7;
const TJPARAM_COLORSPACE = 8;
const TJPARAM_LOSSLESS = 15;
const TJCS_RGB = 0;
const TJCS_YCbCr = 1;
const TJCS_GRAY = 2;
const TJPF_RGB = 0;
const TJPF_GRAY = 6;
/** iMCU width by TJSAMP (444, 422, 420, gray, 440, 411, 441). */
const MCU_WIDTH = [8, 16, 16, 8, 8, 32, 8];

let turbo: Turbo | null | undefined;
const setting = readSwitch('turboJpeg');
let enabled = setting !== false;

/** Turn the crop decode on or off in this thread (benchmarks and tests compare both routes). */
export function setTurboJpeg(on: boolean): void {
  enabled = on;
}

/** Whether the crop decode is on and its library loads in this thread. */
export function turboJpegAvailable(): boolean {
  return enabled && load() !== null;
}

/** The library's path: the env switch `turboJpeg`, else the prebuilt one of @julusian/jpeg-turbo for this platform; undefined when off. */
export function turboJpegPath(): string | undefined {
  if (setting === false) return undefined;
  if (setting !== undefined) return setting;
  if (process.platform !== 'linux') return undefined;
  try {
    const pkg = createRequire(import.meta.url).resolve('@julusian/jpeg-turbo/package.json');
    const glibc = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header?.glibcVersionRuntime !== undefined;
    const path = join(dirname(pkg), 'prebuilds', `jpeg-turbo-linux-${process.arch}${glibc ? '' : '-musl'}`, 'libturbojpeg.so.0');
    return existsSync(path) ? path : undefined;
  } catch {
    return undefined;
  }
}

function load(): Turbo | null {
  if (turbo !== undefined) return turbo;
  turbo = null;
  const path = turboJpegPath();
  if (path === undefined) return turbo;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as {
      load(name: string): { func(signature: string): (...args: unknown[]) => unknown };
      struct(name: string, fields: Record<string, string>): unknown;
    };
    const lib = koffi.load(path);
    koffi.struct('stoker_tjregion', { x: 'int', y: 'int', w: 'int', h: 'int' });
    koffi.struct('stoker_tjscalingfactor', { num: 'int', denom: 'int' });
    const f = (s: string) => lib.func(s);
    const init = f('void *tj3Init(int initType)') as (t: number) => unknown;
    const t: Omit<Turbo, 'handle'> = {
      header: f('int tj3DecompressHeader(void *handle, const uint8_t *jpegBuf, size_t jpegSize)') as Turbo['header'],
      get: f('int tj3Get(void *handle, int param)') as Turbo['get'],
      set: f('int tj3Set(void *handle, int param, int value)') as Turbo['set'],
      scale: f('int tj3SetScalingFactor(void *handle, stoker_tjscalingfactor scalingFactor)') as Turbo['scale'],
      crop: f('int tj3SetCroppingRegion(void *handle, stoker_tjregion croppingRegion)') as Turbo['crop'],
      decompress: f('int tj3Decompress8(void *handle, const uint8_t *jpegBuf, size_t jpegSize, uint8_t *dstBuf, int pitch, int pixelFormat)') as Turbo['decompress'],
    };
    const handle = init(TJINIT_DECOMPRESS);
    if (handle === null || t.set(handle, TJPARAM_STOPONWARNING, 1) !== 0) return turbo;
    turbo = { ...t, handle };
  } catch {
    turbo = null;
  }
  return turbo;
}

/**
 * Decode the box (in source pixels) of a JPEG at 1/`shrink` scale (1, 2, 4 or 8) into memory from
 * `memory(bytes)`: the pixels of the whole-pixel cut that covers the box, `bands` a pixel (the
 * header's components: 1 or 3). Undefined when this route does not cover the file (see the header).
 */
export function decodeJpegRegion(bytes: Uint8Array, box: { left: number; top: number; width: number; height: number }, shrink: number, bands: number, memory: (bytes: number) => Uint8Array): DecodedBox | undefined {
  if (!enabled) return undefined;
  const t = load();
  if (t === null) return undefined;
  const h = t.handle;
  // SAFETY: libjpeg-turbo reads `bytes` and writes `dst` only during the synchronous calls below.
  if (t.header(h, bytes, bytes.length) !== 0) return undefined;
  const colorspace = t.get(h, TJPARAM_COLORSPACE);
  const components = colorspace === TJCS_GRAY ? 1 : colorspace === TJCS_YCbCr || colorspace === TJCS_RGB ? 3 : 0;
  const subsamp = t.get(h, TJPARAM_SUBSAMP);
  if (components !== bands || t.get(h, TJPARAM_PRECISION) !== 8 || t.get(h, TJPARAM_LOSSLESS) === 1 || !(subsamp >= 0 && subsamp < MCU_WIDTH.length)) return undefined;
  if (t.scale(h, { num: 1, denom: shrink }) !== 0) return undefined;
  // The scaled image's size and iMCU width (TJSCALED: ceil(d / shrink)).
  const w = Math.ceil(t.get(h, TJPARAM_JPEGWIDTH) / shrink);
  const hgt = Math.ceil(t.get(h, TJPARAM_JPEGHEIGHT) / shrink);
  const mcu = Math.ceil(MCU_WIDTH[subsamp]! / shrink);
  const cut = cutOf(box, shrink, w, hgt);
  if (cut === undefined) return undefined;
  const { x0, y0, x1, y1, cl, ct, cw, ch } = cut;
  // NOTE [crop decode]: a pixel of margin each side (the left one down to an iMCU boundary).
  const rx = Math.max(0, Math.floor((cl - 1) / mcu) * mcu);
  const rw = Math.min(w, cl + cw + 1) - rx;
  const whole = rx === 0 && ct === 0 && rw === w && ch === hgt;
  if (t.crop(h, whole ? { x: 0, y: 0, w: 0, h: 0 } : { x: rx, y: ct, w: rw, h: ch }) !== 0) return undefined;
  const stride = rw * bands;
  const dst = memory(stride * ch);
  if (dst.length < stride * ch) return undefined;
  if (t.decompress(h, bytes, bytes.length, dst, stride, bands === 1 ? TJPF_GRAY : TJPF_RGB) !== 0) return undefined;
  const at = (cl - rx) * bands;
  return { data: dst.subarray(at, at + (ch - 1) * stride + cw * bands), width: cw, height: ch, stride, bands, x0: x0 - cl, y0: y0 - ct, x1: x1 - cl, y1: y1 - ct };
}
