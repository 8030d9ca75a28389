// The built-in image transform on the device, in one pass: random crop (zero padding), horizontal
// flip, per-channel normalize and a cast, from uint8 [N, C, H, W] to [N, C, OH, OW] of the output
// dtype. Per-row parameters (crop offset, flip) are drawn on the host from each row's PickKey, so the
// CPU implementation (src/transforms/image.ts) produces the same values: the arithmetic uses explicit
// __fmul_rn / __fadd_rn, so no fused multiply-add changes the rounding.
//
//   params: int32 [N, 3] = (oy, ox, flip); out[n][c][y][x] = in[n][c][y + oy][ox + (flip ? OW-1-x : x)]
//   (0 outside the image), then v = v * scale[c] + bias[c] in float32, then the cast.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

__device__ __forceinline__ float pixel(const unsigned char* __restrict__ src, const int* __restrict__ params,
                                       unsigned int n, unsigned int c, unsigned int y, unsigned int x,
                                       unsigned int C, unsigned int H, unsigned int W, unsigned int OW) {
  const int oy = params[3 * n], ox = params[3 * n + 1], flip = params[3 * n + 2];
  const int sy = (int)y + oy;
  const int sx = ox + (flip ? (int)(OW - 1 - x) : (int)x);
  if (sy < 0 || sy >= (int)H || sx < 0 || sx >= (int)W) return 0.0f;
  return (float)src[(((size_t)n * C + c) * H + sy) * W + sx];
}

#define IMAGE_KERNEL(NAME, OUT_T, CONVERT)                                                                    \
  extern "C" __global__ void NAME(const unsigned char* __restrict__ src, OUT_T* __restrict__ dst,               \
                                  const int* __restrict__ params, const float* __restrict__ scaleBias,           \
                                  unsigned int N, unsigned int C, unsigned int H, unsigned int W,                 \
                                  unsigned int OH, unsigned int OW) {                                             \
    const size_t total = (size_t)N * C * OH * OW;                                                                 \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) { \
      const unsigned int x = i % OW;                                                                              \
      const unsigned int y = (i / OW) % OH;                                                                       \
      const unsigned int c = (i / ((size_t)OW * OH)) % C;                                                         \
      const unsigned int n = i / ((size_t)OW * OH * C);                                                           \
      const float v = pixel(src, params, n, c, y, x, C, H, W, OW);                                                \
      const float f = __fadd_rn(__fmul_rn(v, scaleBias[c]), scaleBias[C + c]);                                    \
      dst[i] = CONVERT;                                                                                           \
    }                                                                                                             \
  }

IMAGE_KERNEL(stoker_image_u8, unsigned char, (unsigned char)v)
IMAGE_KERNEL(stoker_image_f32, float, f)
IMAGE_KERNEL(stoker_image_f16, __half, __float2half_rn(f))
IMAGE_KERNEL(stoker_image_bf16, __nv_bfloat16, __float2bfloat16_rn(f))
