// Pillow's antialiased bilinear resample of 8-bit pixels (what torchvision's RandomResizedCrop and
// Resize do to a PIL image), and the cast of its bytes to float32 / bfloat16 / float16 planes,
// compiled to WebAssembly with 128-bit SIMD (scripts/build-wasm.sh → kernels/resample.wasm, committed;
// src/image/resample-wasm.ts loads it). The coefficients are computed in JavaScript
// (image-resample.ts's `coeffs`: Pillow's precompute_coeffs + normalize_coeffs_8bpc, 22-bit fixed
// point), so this file holds only the two passes and the cast: the same integer sums as Pillow's
// ImagingResampleHorizontal_8bpc / ImagingResampleVertical_8bpc, hence the same bytes.
//
// Memory: no allocator; the caller lays out every buffer in linear memory above __heap_base, with
// 16 bytes of slack after each pixel buffer (the SIMD loads and stores run up to 15 bytes past a
// row's end; a store past the end of row r is overwritten by row r + 1, and the last row's lands in
// the slack).

#include <stdint.h>
#include <wasm_simd128.h>

#define PRECISION_BITS (32 - 8 - 2)
#define HALF (1 << (PRECISION_BITS - 1))

static inline uint8_t clip8(int32_t v) {
  int32_t s = v >> PRECISION_BITS;
  return s < 0 ? 0 : s > 255 ? 255 : (uint8_t)s;
}

// The horizontal pass over `rows` source rows from `rowFirst` (row stride `stride` bytes) into `mid`
// (outW × channels bytes a row), output xx mirrored to outW − 1 − xx when `flip`. Output xx reads
// taps [start[xx], start[xx] + count[xx]) with weights k[xx * ksize …].
__attribute__((export_name("resample_h")))
void resample_h(const uint8_t *src, int stride, int rowFirst, int rows, uint8_t *mid, int outW, int channels,
                const int32_t *start, const int32_t *count, const int32_t *k, int ksize, int flip) {
  const int midRow = outW * channels;
  if (channels == 3) {
    const v128_t half = wasm_i32x4_splat(HALF);
    int y = 0;
    // Four rows at a time: each output pixel's taps and weights are the same on every row, so a
    // weight is splatted once for four rows and the loop's overhead is shared (the same sums, in the
    // same order, as the one-row loop below: the same bytes).
    for (; y + 4 <= rows; y += 4) {
      const uint8_t *s0 = src + (y + rowFirst) * stride;
      uint8_t *m0 = mid + y * midRow;
      for (int xx = 0; xx < outW; xx++) {
        const int n = count[xx];
        const int32_t *kk = k + xx * ksize;
        const uint8_t *s = s0 + start[xx] * 3;
        v128_t a0 = half, a1 = half, a2 = half, a3 = half;
        for (int x = 0; x < n; x++, s += 3) {
          const v128_t w = wasm_i32x4_splat(kk[x]);
          a0 = wasm_i32x4_add(a0, wasm_i32x4_mul(wasm_u32x4_extend_low_u16x8(wasm_u16x8_extend_low_u8x16(wasm_v128_load32_zero(s))), w));
          a1 = wasm_i32x4_add(a1, wasm_i32x4_mul(wasm_u32x4_extend_low_u16x8(wasm_u16x8_extend_low_u8x16(wasm_v128_load32_zero(s + stride))), w));
          a2 = wasm_i32x4_add(a2, wasm_i32x4_mul(wasm_u32x4_extend_low_u16x8(wasm_u16x8_extend_low_u8x16(wasm_v128_load32_zero(s + 2 * stride))), w));
          a3 = wasm_i32x4_add(a3, wasm_i32x4_mul(wasm_u32x4_extend_low_u16x8(wasm_u16x8_extend_low_u8x16(wasm_v128_load32_zero(s + 3 * stride))), w));
        }
        // Rows 0 and 1 in one narrow, 2 and 3 in another: pixel r's bytes are lanes 0–2 of its i32 group.
        const v128_t n01 = wasm_i16x8_narrow_i32x4(wasm_i32x4_shr(a0, PRECISION_BITS), wasm_i32x4_shr(a1, PRECISION_BITS));
        const v128_t n23 = wasm_i16x8_narrow_i32x4(wasm_i32x4_shr(a2, PRECISION_BITS), wasm_i32x4_shr(a3, PRECISION_BITS));
        const v128_t b = wasm_u8x16_narrow_i16x8(n01, n23);
        uint8_t *o = m0 + (flip ? outW - 1 - xx : xx) * 3;
        const uint32_t w0 = wasm_i32x4_extract_lane(b, 0), w1 = wasm_i32x4_extract_lane(b, 1);
        const uint32_t w2 = wasm_i32x4_extract_lane(b, 2), w3 = wasm_i32x4_extract_lane(b, 3);
        o[0] = (uint8_t)w0; o[1] = (uint8_t)(w0 >> 8); o[2] = (uint8_t)(w0 >> 16);
        o += midRow;
        o[0] = (uint8_t)w1; o[1] = (uint8_t)(w1 >> 8); o[2] = (uint8_t)(w1 >> 16);
        o += midRow;
        o[0] = (uint8_t)w2; o[1] = (uint8_t)(w2 >> 8); o[2] = (uint8_t)(w2 >> 16);
        o += midRow;
        o[0] = (uint8_t)w3; o[1] = (uint8_t)(w3 >> 8); o[2] = (uint8_t)(w3 >> 16);
      }
    }
    for (; y < rows; y++) {
      const uint8_t *srow = src + (y + rowFirst) * stride;
      uint8_t *mrow = mid + y * midRow;
      for (int xx = 0; xx < outW; xx++) {
        const int n = count[xx];
        const int32_t *kk = k + xx * ksize;
        const uint8_t *s = srow + start[xx] * 3;
        v128_t acc = half;
        for (int x = 0; x < n; x++, s += 3) {
          // r, g, b (and the next pixel's first byte, weighted but never stored) as four i32 lanes.
          v128_t p = wasm_u32x4_extend_low_u16x8(wasm_u16x8_extend_low_u8x16(wasm_v128_load32_zero(s)));
          acc = wasm_i32x4_add(acc, wasm_i32x4_mul(p, wasm_i32x4_splat(kk[x])));
        }
        acc = wasm_i32x4_shr(acc, PRECISION_BITS);
        v128_t b = wasm_u8x16_narrow_i16x8(wasm_i16x8_narrow_i32x4(acc, acc), wasm_i16x8_splat(0));
        uint8_t *o = mrow + (flip ? outW - 1 - xx : xx) * 3;
        uint32_t w = wasm_i32x4_extract_lane(b, 0);
        o[0] = (uint8_t)w;
        o[1] = (uint8_t)(w >> 8);
        o[2] = (uint8_t)(w >> 16);
      }
    }
    return;
  }
  for (int y = 0; y < rows; y++) {
    const uint8_t *srow = src + (y + rowFirst) * stride;
    uint8_t *mrow = mid + y * midRow;
    for (int xx = 0; xx < outW; xx++) {
      const int n = count[xx];
      const int32_t *kk = k + xx * ksize;
      uint8_t *o = mrow + (flip ? outW - 1 - xx : xx) * channels;
      for (int c = 0; c < channels; c++) {
        const uint8_t *s = srow + start[xx] * channels + c;
        int32_t ss = HALF;
        for (int x = 0; x < n; x++, s += channels) ss += *s * kk[x];
        o[c] = clip8(ss);
      }
    }
  }
}

// The vertical pass: output row yy sums mid rows [start[yy] − rowFirst, … + count[yy]) with weights
// k[yy * ksize …], 16 bytes at a time (the sums of 4 × 4 i32 lanes, shifted, then narrowed with
// saturation: Pillow's clip8).
__attribute__((export_name("resample_v")))
void resample_v(const uint8_t *mid, int midRow, int rowFirst, uint8_t *out, int outH,
                const int32_t *start, const int32_t *count, const int32_t *k, int ksize) {
  const v128_t half = wasm_i32x4_splat(HALF);
  for (int yy = 0; yy < outH; yy++) {
    const int n = count[yy];
    const int32_t *kk = k + yy * ksize;
    const uint8_t *m = mid + (start[yy] - rowFirst) * midRow;
    uint8_t *o = out + yy * midRow;
    for (int i = 0; i < midRow; i += 16) {
      v128_t a0 = half, a1 = half, a2 = half, a3 = half;
      const uint8_t *p = m + i;
      for (int y = 0; y < n; y++, p += midRow) {
        const v128_t w = wasm_i32x4_splat(kk[y]);
        const v128_t v = wasm_v128_load(p);
        const v128_t lo = wasm_u16x8_extend_low_u8x16(v);
        const v128_t hi = wasm_u16x8_extend_high_u8x16(v);
        a0 = wasm_i32x4_add(a0, wasm_i32x4_mul(wasm_u32x4_extend_low_u16x8(lo), w));
        a1 = wasm_i32x4_add(a1, wasm_i32x4_mul(wasm_u32x4_extend_high_u16x8(lo), w));
        a2 = wasm_i32x4_add(a2, wasm_i32x4_mul(wasm_u32x4_extend_low_u16x8(hi), w));
        a3 = wasm_i32x4_add(a3, wasm_i32x4_mul(wasm_u32x4_extend_high_u16x8(hi), w));
      }
      const v128_t s01 = wasm_i16x8_narrow_i32x4(wasm_i32x4_shr(a0, PRECISION_BITS), wasm_i32x4_shr(a1, PRECISION_BITS));
      const v128_t s23 = wasm_i16x8_narrow_i32x4(wasm_i32x4_shr(a2, PRECISION_BITS), wasm_i32x4_shr(a3, PRECISION_BITS));
      wasm_v128_store(o + i, wasm_u8x16_narrow_i16x8(s01, s23));
    }
  }
}

// Bytes to values through a table of 256 per channel ((v · scale) + bias, made in JavaScript, as
// float32 or as bfloat16 / float16 bits): planes (CHW) unless `interleaved`.
#define CAST(NAME, T)                                                                               \
  __attribute__((export_name(#NAME)))                                                              \
  void NAME(const uint8_t *px, int pixels, int channels, int interleaved, T *out, const T *table) { \
    if (interleaved) {                                                                             \
      for (int p = 0, i = 0; p < pixels; p++)                                                      \
        for (int c = 0; c < channels; c++, i++) out[i] = table[c * 256 + px[i]];                   \
      return;                                                                                      \
    }                                                                                              \
    for (int c = 0; c < channels; c++) {                                                           \
      T *o = out + c * pixels;                                                                     \
      const T *t = table + c * 256;                                                                \
      const uint8_t *s = px + c;                                                                   \
      for (int p = 0; p < pixels; p++, s += channels) o[p] = t[*s];                                \
    }                                                                                              \
  }

CAST(cast_u16, uint16_t)
CAST(cast_f32, float)
