// Internal: not exported from the package entry.
// How a decode-time view's box becomes pixels on the CPU: the region of the image to decode and the
// resample of that region (image-resample.ts, Pillow's BILINEAR) that gives the view's output. The
// rule: the region holds every pixel the resample reads, and the resample is the one torchvision
// does to a PIL image for that view, in that image's own coordinates — so given the same decoded
// pixels, the bytes are torchvision's.
//
// NOTE [eval as torchvision computes it] torchvision 0.14's eval recipe on a PIL image,
// `Resize(256)` then `CenterCrop(224)`, is one resample: Resize(256) is PIL's `resize((rw, rh),
// BILINEAR)` of the whole image (reducing_gap None: one pass of the antialiased triangle filter,
// rw × rh from `centerCropGeometry`), and CenterCrop then cuts whole pixels of that result from
// (left, top) = round((size − 224) / 2). Output pixel x of the crop is output left + x of the whole
// resize: its taps are centred at (left + x + ½) · W / rw in the source, reach ±max(W / rw, 1)
// around it — past the crop's own rectangle — and its weights are computed from the whole image's
// origin. So the decoder decodes the region that holds those taps (a pixel or a few beyond the
// box) and computes the coefficients of the whole resize for the outputs [left, left + 224) only
// (a `ResampleFrame`): Pillow's bytes, given the same decoded pixels.
// - Before: the box rounded to whole source pixels, cut, and resized to 224 moved the sampling grid
//   by up to half a source pixel — little when reducing, a lot at edges of an enlarged image: mean
//   |Δ| 2.43, max 130 against torchvision over 63 varied images (docs/images.md; issue 32: 1.97 and
//   93 over 75). Resizing the fractional rectangle instead came within rounding (issue 32: mean
//   0.0005, 33 of 75 byte-exact): Pillow's weights then come from another origin and round
//   differently now and then. Computed as here: byte for byte on all 63.
// - No shrink-on-load for this view: a JPEG decoded at ½–⅛ scale is not the image PIL resizes.
// - The GPU decode route computes the same resize (`centerCropResize`, carried by the box as `pil`)
//   in its kernel, on the whole decoded image (NOTE [eval on the GPU] in jpeg-resample.ts).
// - When `size` is not the crop (torchvision would resize a third time), the crop's fractional
//   rectangle is resized to `size` in one pass, as PIL's `resize(size, box=…)` of the whole image
//   (whose box edges Pillow holds as C floats: image-resample.ts rounds them so too).
// - Other views cut first: RandomResizedCrop is `resized_crop` (PIL's crop, then resize), so its
//   taps stay inside the box, and the box is the region.

import { type CropBox, type View, centerCropGeometry } from './crop-box.js';
import { lumaPil, premultiplyPil, unpremultiplyPil } from './image-reference.js';
import type { PilAxis } from './jpeg-plan.js';
import { type ResampleBox, resampleBilinear, tapSpan } from './image-resample.js';

/** A rectangle of whole source pixels inside the image. */
export interface Region {
  readonly left: number;
  readonly top: number;
  readonly width: number;
  readonly height: number;
}

/** What to decode (`region`) and how to resample it (`box`, in the region's pixels, with its frame when it has one) to the output. */
export interface ViewResample {
  readonly region: Region;
  readonly box: ResampleBox;
}

/** The region and resample of `view`'s `box` on a srcW × srcH image, for an outW × outH output (NOTE [eval as torchvision computes it]). */
export function viewResample(view: View, box: CropBox, srcW: number, srcH: number, outW: number, outH: number): ViewResample {
  if (view.kind !== 'center-crop') {
    return { region: { left: box.left, top: box.top, width: box.width, height: box.height }, box: { x0: 0, y0: 0, x1: box.width, y1: box.height } };
  }
  const p = centerCropResize(view, srcW, srcH, outW, outH);
  const [xlo, xhi] = tapSpan(srcW, p.x.in0, p.x.in1, p.x.out, p.x.first, outW);
  const [ylo, yhi] = tapSpan(srcH, p.y.in0, p.y.in1, p.y.out, p.y.first, outH);
  return {
    region: { left: xlo, top: ylo, width: xhi - xlo, height: yhi - ylo },
    box: {
      x0: p.x.in0, y0: p.y.in0, x1: p.x.in1, y1: p.y.in1,
      frame: { left: -xlo, top: -ylo, width: srcW, height: srcH, outWidth: p.x.out, outHeight: p.y.out, outLeft: p.x.first, outTop: p.y.first },
    },
  };
}

/**
 * The Pillow resize a center-crop view is, per axis, on a srcW × srcH image for an outW × outH
 * output: the whole image resized to torchvision's rw × rh, the crop's outputs kept, when the
 * output is the crop; else the crop's fractional rectangle resized to the output. The CPU decoder
 * (`viewResample`) and the GPU decoder (kernels/crop-resize.cu's `pil` jobs) compute the same one.
 */
export function centerCropResize(view: Extract<View, { kind: 'center-crop' }>, srcW: number, srcH: number, outW: number, outH: number): { x: PilAxis; y: PilAxis } {
  const g = centerCropGeometry(view.resize, view.crop, srcW, srcH);
  const exact = outW === view.crop && outH === view.crop;
  return { x: axis(srcW, g.rw, g.left, view.crop, outW, exact), y: axis(srcH, g.rh, g.top, view.crop, outH, exact) };
}

/** One axis: the whole resize to `resized` keeping [offset, offset + crop) when exact, else the crop's fractional rectangle resized to `out`. */
function axis(size: number, resized: number, offset: number, crop: number, out: number, exact: boolean): PilAxis {
  return exact ? { in0: 0, in1: size, out: resized, first: offset } : { in0: (offset * size) / resized, in1: ((offset + crop) * size) / resized, out, first: 0 };
}

/**
 * Resample `bands`-band pixels (srcW × srcH, rows `stride` bytes apart) by `box` to outW × outH
 * with `channels` bands out, in PIL's order of operations: RGB becomes luma before the resize (the
 * user's `convert('L')` comes first), RGBA is resized premultiplied (as PIL's `resize` of RGBA),
 * a grey image is spread to RGB after (convert('RGB') copies L, so resizing one band is the same).
 */
export function resampleAsPil(src: Uint8Array, srcW: number, srcH: number, bands: number, stride: number, box: ResampleBox, outW: number, outH: number, flip: boolean, channels: number): Uint8Array {
  if (bands === 3 && channels === 1) {
    const luma = new Uint8Array(srcW * srcH);
    for (let y = 0; y < srcH; y++) luma.set(lumaPil(src.subarray(y * stride, y * stride + srcW * 3), 3, srcW), y * srcW);
    return resampleBilinear(luma, srcW, srcH, 1, box, outW, outH, flip);
  }
  if (bands === 4) {
    const rgba = new Uint8Array(srcW * srcH * 4);
    for (let y = 0; y < srcH; y++) rgba.set(src.subarray(y * stride, y * stride + srcW * 4), y * srcW * 4);
    premultiplyPil(rgba, srcW * srcH);
    const out = resampleBilinear(rgba, srcW, srcH, 4, box, outW, outH, flip);
    unpremultiplyPil(out, outW * outH);
    return out;
  }
  const px = resampleBilinear(src, srcW, srcH, bands, box, outW, outH, flip, stride);
  if (bands === 1 && channels === 3) {
    const rgb = new Uint8Array(outW * outH * 3);
    for (let p = 0, o = 0; p < px.length; p++, o += 3) rgb[o] = rgb[o + 1] = rgb[o + 2] = px[p]!;
    return rgb;
  }
  return px;
}
