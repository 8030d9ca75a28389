// Internal: the arithmetic that makes `decodeImage`'s pixels the ones a PyTorch user gets — torchvision's
// Resize + CenterCrop geometry and PIL's colour conversions, transcribed exactly (integer rounding
// included), because users compare our tensors with theirs byte for byte. The rule: change nothing here
// without re-checking against the reference it names (torchvision 0.26, Pillow 9–12).

/** Where `fit: 'center-crop'` resizes to ([rh, rw]) and where it then cuts the output out (top, left). */
export interface CoverPlan {
  readonly rh: number;
  readonly rw: number;
  readonly top: number;
  readonly left: number;
}

/** Python's round() of a multiple of 0.5: ties go to the even neighbour (round(2.5) = 2, round(3.5) = 4). */
export function pyRoundHalf(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d < 0.5) return f;
  if (d > 0.5) return f + 1;
  return f % 2 === 0 ? f : f + 1;
}

/**
 * torchvision's `Resize(n)` (the short side to n, the long side to `int(n * long / short)`, truncated:
 * `_compute_resized_output_size`) then `CenterCrop((h, w))` (`crop_top = int(round((rh - h) / 2.0))`,
 * likewise the left: `_center_crop_compute_crop_anchor`), for an input of srcH × srcW. n is the
 * smallest short side whose resize covers h × w: for a square output it is the side, as in the usual
 * `Resize(224), CenterCrop(224)`.
 */
export function coverPlan(srcH: number, srcW: number, h: number, w: number): CoverPlan {
  // torchvision: short, long = (w, h) if w <= h else (h, w); the short side's target must cover its
  // own output side and make the long side (truncated) cover the other.
  let rh: number;
  let rw: number;
  if (srcW <= srcH) {
    const n = Math.max(w, Math.ceil((h * srcW) / srcH));
    rw = n;
    rh = Math.trunc((n * srcH) / srcW);
  } else {
    const n = Math.max(h, Math.ceil((w * srcH) / srcW));
    rh = n;
    rw = Math.trunc((n * srcW) / srcH);
  }
  return { rh, rw, top: pyRoundHalf((rh - h) / 2), left: pyRoundHalf((rw - w) / 2) };
}

/**
 * PIL's `convert('L')` of interleaved RGB (`stride` bytes a pixel, RGB first): ITU-R 601-2 luma in
 * Pillow's fixed point, L = (19595 R + 38470 G + 7471 B + 2^15) >> 16 — the documented
 * R·299/1000 + G·587/1000 + B·114/1000, rounded to nearest.
 */
export function lumaPil(src: Uint8Array, stride: number, pixels: number): Uint8Array {
  const out = new Uint8Array(pixels);
  for (let p = 0, s = 0; p < pixels; p++, s += stride) out[p] = (src[s]! * 19595 + src[s + 1]! * 38470 + src[s + 2]! * 7471 + 0x8000) >>> 16;
  return out;
}

/**
 * PIL's `convert('RGB')` of CMYK (`stride` bytes a pixel, CMYK first), no colour profile: with
 * k' = 255 − K, R = k' − C·k'/255 (rounded), likewise G from M and B from Y (Pillow's cmyk2rgb).
 */
export function cmykToRgbPil(src: Uint8Array, stride: number, pixels: number): Uint8Array {
  const out = new Uint8Array(pixels * 3);
  for (let p = 0, s = 0, o = 0; p < pixels; p++, s += stride) {
    const nk = 255 - src[s + 3]!;
    for (let c = 0; c < 3; c++, o++) {
      const t = src[s + c]! * nk + 128; // MULDIV255: a·b/255 rounded, in integers
      out[o] = nk - (((t >>> 8) + t) >>> 8);
    }
  }
  return out;
}

/**
 * Pillow's `convert('RGBa')` of interleaved RGBA, in place: each colour times alpha / 255, rounded
 * (MULDIV255, as Pillow's rgbA2rgba). PIL resizes an RGBA image premultiplied (Image.resize converts
 * to RGBa, resizes, converts back), so the colour under a transparent pixel does not bleed.
 */
export function premultiplyPil(px: Uint8Array, pixels: number): void {
  for (let p = 0, s = 0; p < pixels; p++, s += 4) {
    const a = px[s + 3]!;
    for (let c = 0; c < 3; c++) {
      const t = px[s + c]! * a + 128;
      px[s + c] = ((t >>> 8) + t) >>> 8;
    }
  }
}

/** Pillow's `convert('RGBA')` of RGBa, in place: each colour times 255 / alpha, truncated and clipped; alpha 0 and 255 leave it (rgba2rgbA). */
export function unpremultiplyPil(px: Uint8Array, pixels: number): void {
  for (let p = 0, s = 0; p < pixels; p++, s += 4) {
    const a = px[s + 3]!;
    if (a === 0 || a === 255) continue;
    for (let c = 0; c < 3; c++) px[s + c] = Math.min(255, Math.trunc((255 * px[s + c]!) / a));
  }
}
