// Internal: not exported from the package entry.
// The fast CPU route of a JPEG decode-time view (issue 17): libvips' C API called through koffi —
// the very libvips that sharp's addon loaded — for the decode of the box's rows (at ½, ¼ or ⅛ scale
// when the box is large enough: libjpeg's scaled IDCT), with none of sharp's per-call work (its
// pipeline object, option checks, a metadata open, a trip through libuv's thread pool). The rule:
// `decodeJpegBox` answers `undefined` for anything it does not cover (the library does not load, a
// libvips error, an unexpected band count or format) and the caller then runs the sharp path, which
// gives the typed errors; it never throws for bad input.
//
// NOTE [direct libvips] Measured on the 2-core development machine (ImageNet-like 500×375 JPEGs,
// one full decode): sharp 2.5 ms, this call sequence 1.5–1.9 ms, PIL 1.15 ms. libvips-cpp.so
// (8.18) does not export libjpeg-turbo's own API (no jpeg_* or tj3* symbols: `nm -D`), so the
// rows above the box and the columns beside it are still decoded (libjpeg-turbo's
// jpeg_crop_scanline / jpeg_skip_scanlines are out of reach); rows below the box are not (the
// load is sequential and stops when the box's last row is out).
// - Which library: the libvips-cpp the process already mapped (sharp's addon is loaded first, by
//   `loadImageDecoder()`, from the main thread: NOTE in image-decode.ts's header), found in
//   /proc/self/maps, else sharp's @img/sharp-libvips-<platform> package. dlopen of a mapped path
//   returns the same handle, so there is one libvips with sharp's settings (cache off, one thread).
// - The env switch `vipsDirect` (base/env.ts) set to off turns this route off (the sharp path then decodes every image).
// - Calls are synchronous (koffi cannot call variadic functions asynchronously) and the pixels are
//   computed on the calling thread (NOTE [pixels in the calling thread]): right for decode
//   processes, which answer one request at a time; a reader thread in decode: 'threads' decodes one
//   image at a time instead of several on libuv's pool (the sharp path got at most 2.4× there, NOTE
//   in image-decode.ts's header).
// Measured after the route (bench decode-scaling --rows a2, same 240 ImageNet-like files, rounds
// alternating, 2 shared and loaded cores): the whole recipe (RandomResizedCrop 224 + flip + normalize,
// bf16) 3.55–4.09 → 2.92–3.37 CPU ms per image, 1.13–1.41× the images/s; its stages: decode of an
// enlarged box 1.7 ms + JS resample 0.9 ms, a reduced box decoded and reduced by libvips 3.1 ms, the
// cast 0.24–0.37 ms. PIL on the same files:
// decode 1.15 ms, resize 0.55 ms: the decode and the resample are what is left of the gap.
// With the pixels computed on the calling thread (same bench, 2026-12-03): 4.53 → 3.66 CPU ms an
// image (PIL's recipe 2.57–2.74), the box's decode 2.13 → 1.28 ms wall.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { readSwitch } from '../base/env.js';

/** The koffi functions used; `unknown` is an opaque pointer. */
interface Vips {
  readonly jpegloadBuffer: (buf: Uint8Array, len: number, out: unknown[], ...opts: unknown[]) => number;
  readonly extractArea: (img: unknown, out: unknown[], left: number, top: number, width: number, height: number, ...opts: unknown[]) => number;
  readonly reduce: (img: unknown, out: unknown[], hshrink: number, vshrink: number, ...opts: unknown[]) => number;
  readonly flip: (img: unknown, out: unknown[], direction: number, ...opts: unknown[]) => number;
  readonly regionNew: (img: unknown) => unknown;
  readonly regionFetch: (region: unknown, left: number, top: number, width: number, height: number, size: number[]) => unknown;
  readonly width: (img: unknown) => number;
  readonly height: (img: unknown) => number;
  readonly bands: (img: unknown) => number;
  readonly format: (img: unknown) => number;
  readonly unref: (obj: unknown) => void;
  readonly free: (ptr: unknown) => void;
  readonly view: (ptr: unknown, len: number) => ArrayBuffer;
}

const VIPS_ACCESS_SEQUENTIAL = 1;
/** sharp's failOn 'warning' (VIPS_FAIL_ON_WARNING): a truncated or damaged JPEG is an error, as in the sharp path. */
const VIPS_FAIL_ON_WARNING = 3;
const VIPS_FORMAT_UCHAR = 0;
const VIPS_KERNEL_LINEAR = 1;
const VIPS_DIRECTION_HORIZONTAL = 0;

let vips: Vips | null | undefined;
let enabled = readSwitch('vipsDirect');

/** Turn the direct route on or off in this thread (benchmarks compare both in one process). */
export function setVipsDirect(on: boolean): void {
  enabled = on;
}

/** Whether the direct route is on and its library loads (call after sharp is loaded). */
export function vipsDirectAvailable(): boolean {
  return enabled && load() !== null;
}

function libraryPath(): string | undefined {
  try {
    const maps = readFileSync('/proc/self/maps', 'utf8');
    const m = /\s(\/\S*libvips-cpp\.so[.\d]*)\s*$/m.exec(maps);
    if (m !== null) return m[1];
  } catch {
    // no /proc: ask the package
  }
  try {
    const require = createRequire(createRequire(import.meta.url).resolve('sharp'));
    return require.resolve(`@img/sharp-libvips-${process.platform}-${process.arch}/binary`);
  } catch {
    return undefined;
  }
}

function load(): Vips | null {
  if (vips !== undefined) return vips;
  vips = null;
  if (process.platform !== 'linux') return vips;
  const path = libraryPath();
  if (path === undefined) return vips;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as {
      load(name: string): { func(signature: string): (...args: unknown[]) => unknown };
      out(t: unknown): unknown;
      pointer(name: string, t: unknown): unknown;
      opaque(name: string): unknown;
      view(ptr: unknown, len: number): ArrayBuffer;
    };
    const lib = koffi.load(path);
    const f = (s: string) => lib.func(s);
    vips = {
      jpegloadBuffer: f('int vips_jpegload_buffer(void *buf, size_t len, _Out_ void **out, ...)') as Vips['jpegloadBuffer'],
      extractArea: f('int vips_extract_area(void *in, _Out_ void **out, int left, int top, int width, int height, ...)') as Vips['extractArea'],
      reduce: f('int vips_reduce(void *in, _Out_ void **out, double hshrink, double vshrink, ...)') as Vips['reduce'],
      flip: f('int vips_flip(void *in, _Out_ void **out, int direction, ...)') as Vips['flip'],
      regionNew: f('void *vips_region_new(void *img)') as Vips['regionNew'],
      regionFetch: f('void *vips_region_fetch(void *region, int left, int top, int width, int height, _Out_ size_t *size)') as Vips['regionFetch'],
      width: f('int vips_image_get_width(void *img)') as Vips['width'],
      height: f('int vips_image_get_height(void *img)') as Vips['height'],
      bands: f('int vips_image_get_bands(void *img)') as Vips['bands'],
      format: f('int vips_image_get_format(void *img)') as Vips['format'],
      unref: f('void g_object_unref(void *obj)') as Vips['unref'],
      free: f('void g_free(void *ptr)') as Vips['free'],
      view: (p, len) => koffi.view(p, len),
    };
  } catch {
    vips = null;
  }
  return vips;
}

/** The decoded pixels of a box of a JPEG, interleaved, `bands` a pixel, and where the asked box lies in them (fractional). */
export interface DecodedBox {
  /** The cut's first pixel, rows `stride` bytes apart; `width` × `height` pixels of `bands` bytes. */
  readonly data: Uint8Array;
  readonly width: number;
  readonly height: number;
  readonly stride: number;
  readonly bands: number;
  /** The box in these pixels' coordinates (after the shrink on load, relative to the cut; fractional when shrunk). */
  readonly x0: number;
  readonly y0: number;
  readonly x1: number;
  readonly y1: number;
  /** Give the pixels back to the library that made them (they must not be read after); absent when they are the caller's memory. */
  readonly release?: () => void;
}

/** The box at 1/`shrink` scale in a `w` × `h` image (fractional), and the whole-pixel cut that covers it; undefined when it is empty or outside. */
export function cutOf(box: { left: number; top: number; width: number; height: number }, shrink: number, w: number, h: number): { x0: number; y0: number; x1: number; y1: number; cl: number; ct: number; cw: number; ch: number } | undefined {
  const x0 = box.left / shrink;
  const y0 = box.top / shrink;
  const x1 = Math.min(w, (box.left + box.width) / shrink);
  const y1 = Math.min(h, (box.top + box.height) / shrink);
  const cl = Math.floor(x0);
  const ct = Math.floor(y0);
  const cw = Math.ceil(x1) - cl;
  const ch = Math.ceil(y1) - ct;
  return cw >= 1 && ch >= 1 && cl + cw <= w && ct + ch <= h ? { x0, y0, x1, y1, cl, ct, cw, ch } : undefined;
}

/**
 * Decode the box (left, top, width, height, in source pixels) of a JPEG at 1/`shrink` scale (1, 2,
 * 4 or 8): the pixels of the whole-pixel region that covers the box. `bands` is what the caller
 * expects (the header's components: 1 or 3); anything else answers undefined.
 */
export function decodeJpegBox(bytes: Uint8Array, box: { left: number; top: number; width: number; height: number }, shrink: number, bands: number): DecodedBox | undefined {
  if (!enabled) return undefined;
  const v = load();
  if (v === null) return undefined;
  const img: unknown[] = [null];
  // SAFETY: libvips reads `bytes` (an off-heap ArrayBuffer store, which the GC never moves) until the
  // image is unreffed below; `bytes` stays referenced by this frame until then.
  if (v.jpegloadBuffer(bytes, bytes.length, img, 'str', 'access', 'int', VIPS_ACCESS_SEQUENTIAL, 'str', 'fail_on', 'int', VIPS_FAIL_ON_WARNING, 'str', 'shrink', 'int', shrink, 'str', null) !== 0) return undefined;
  const full = img[0];
  try {
    const w = v.width(full);
    const h = v.height(full);
    if (v.bands(full) !== bands || v.format(full) !== VIPS_FORMAT_UCHAR) return undefined;
    const cut = cutOf(box, shrink, w, h);
    if (cut === undefined) return undefined;
    const { x0, y0, x1, y1, cl, ct, cw, ch } = cut;
    const ptr = fetchPixels(v, full, cl, ct, cw, ch, bands);
    if (ptr === null) return undefined;
    // SAFETY: the view is of libvips' buffer, valid until `release()` frees it; callers read it
    // synchronously and release it before returning (decodeImage's direct route).
    const data = new Uint8Array(v.view(ptr, cw * ch * bands));
    let freed = false;
    const release = () => {
      if (!freed) v.free(ptr);
      freed = true;
    };
    return { data, width: cw, height: ch, stride: cw * bands, bands, x0: x0 - cl, y0: y0 - ct, x1: x1 - cl, y1: y1 - ct, release };
  } finally {
    v.unref(full);
  }
}

/**
 * The pixels of (left, top, width, height) of `img`, computed in this thread, in a fresh g_malloc'd
 * buffer of width × height × bands bytes (free with `v.free`), or null.
 *
 * NOTE [pixels in the calling thread] `vips_image_write_to_memory` runs the pipeline on libvips'
 * thread pool, strip by strip: even with one worker, each strip is a hand-off through a mutex and a
 * condition (a futex wake each way) and fresh buffers, and the calling thread waits. A region
 * prepared here (`vips_region_fetch`, as pyvips' `fetch`) pulls the same strips through the same
 * operations on this thread. Measured on the 2-core development machine, 240 ImageNet-like 500×375
 * JPEGs decoded whole: 3.05–3.20 ms of CPU an image (0.9 on this thread + 2.0–2.2 on the libvips
 * worker, 0.5–0.6 of it in the kernel) → 1.87–1.93 ms, all on this thread (PIL: 1.16).
 */
function fetchPixels(v: Vips, img: unknown, left: number, top: number, width: number, height: number, bands: number): unknown {
  const region = v.regionNew(img);
  if (region === null) return null;
  try {
    const size = [0];
    const ptr = v.regionFetch(region, left, top, width, height, size);
    if (ptr === null) return null;
    if (size[0] !== width * height * bands) {
      v.free(ptr);
      return null;
    }
    return ptr;
  } finally {
    v.unref(region);
  }
}

/**
 * Decode the box of a JPEG at 1/`shrink` scale and reduce it to `outW` × `outH` with libvips' linear
 * kernel (Pillow's triangle widened by the reduction: the box must be at least the output on both
 * sides after the shrink), mirrored when `flip`: interleaved pixels in JS memory, or undefined.
 * The box is cut at whole pixels of the shrunk image (its edges move by less than one of them).
 */
export function decodeJpegReduced(bytes: Uint8Array, box: { left: number; top: number; width: number; height: number }, shrink: number, bands: number, outW: number, outH: number, flip: boolean): Uint8Array | undefined {
  if (!enabled) return undefined;
  const v = load();
  if (v === null) return undefined;
  const img: unknown[] = [null];
  // SAFETY: as in decodeJpegBox, `bytes` outlives every image made from it (all unreffed below).
  if (v.jpegloadBuffer(bytes, bytes.length, img, 'str', 'access', 'int', VIPS_ACCESS_SEQUENTIAL, 'str', 'fail_on', 'int', VIPS_FAIL_ON_WARNING, 'str', 'shrink', 'int', shrink, 'str', null) !== 0) return undefined;
  const made: unknown[] = [img[0]];
  const step = (ok: boolean, out: unknown[]) => {
    if (ok) made.push(out[0]);
    return ok;
  };
  try {
    const full = made[0];
    const w = v.width(full);
    const h = v.height(full);
    if (v.bands(full) !== bands || v.format(full) !== VIPS_FORMAT_UCHAR) return undefined;
    const cl = Math.min(w - 1, Math.round(box.left / shrink));
    const ct = Math.min(h - 1, Math.round(box.top / shrink));
    const cw = Math.min(w - cl, Math.round(box.width / shrink));
    const ch = Math.min(h - ct, Math.round(box.height / shrink));
    if (cw < outW || ch < outH) return undefined;
    const cut: unknown[] = [null];
    if (!step(v.extractArea(full, cut, cl, ct, cw, ch, 'str', null) === 0, cut)) return undefined;
    let last = cut[0];
    if (cw !== outW || ch !== outH) {
      const red: unknown[] = [null];
      if (!step(v.reduce(last, red, cw / outW, ch / outH, 'str', 'kernel', 'int', VIPS_KERNEL_LINEAR, 'str', null) === 0, red)) return undefined;
      last = red[0];
    }
    if (flip) {
      const fl: unknown[] = [null];
      if (!step(v.flip(last, fl, VIPS_DIRECTION_HORIZONTAL, 'str', null) === 0, fl)) return undefined;
      last = fl[0];
    }
    if (v.width(last) !== outW || v.height(last) !== outH) return undefined;
    const ptr = fetchPixels(v, last, 0, 0, outW, outH, bands);
    if (ptr === null) return undefined;
    try {
      // SAFETY: libvips' buffer is copied out before it is freed.
      return new Uint8Array(v.view(ptr, outW * outH * bands)).slice();
    } finally {
      v.free(ptr);
    }
  } finally {
    for (let k = made.length - 1; k >= 0; k--) v.unref(made[k]);
  }
}
