// Crop, resize, flip, normalize and cast decoded JPEGs straight into a batch, in one pass: for each
// job (one image), read its box of RGB uint8 pixels (interleaved or planar), resample it to OH × OW with
// torchvision's antialiased bilinear filter (antialias=True: a triangle of support max(scale, 1)
// source pixels, so plain bilinear when upscaling), round to uint8 as torchvision's uint8 resize
// does, mirror when the job says flip, then v = q * scale[c] + bias[c] in float32 and the cast,
// written at dst + row * rowBytes in CHW or HWC. src/image/jpeg-resample.ts is the same
// arithmetic on the CPU, op for op (explicit _rn intrinsics: no fused multiply-add), so the two
// agree bit for bit on the same decoded pixels.
//
//   grid: (ceil(OH * OW / 256), jobs), block 256; one thread per output pixel, all three channels.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

struct Job {
  unsigned long long src;  // uint8 RGB, `pitch` bytes a line
  int w, h, pitch;         // the decoded image
  int left, top, cw, ch;   // the crop box, inside the image
  int flip;                // mirror the output horizontally
  int row;                 // batch row written
  int xstride;             // bytes from one pixel to the next: 3 interleaved (RGBI), 1 planar (RGB)
  int cstride;             // bytes from one channel to the next: 1 interleaved, a plane planar
  int pad[3];              // 64 bytes a job
};

__device__ __forceinline__ float tri(float x) {
  x = fabsf(x);
  return x < 1.0f ? __fsub_rn(1.0f, x) : 0.0f;
}

// One axis: the taps [first, first + count) of the crop (size n) for output coordinate o of m.
struct Axis {
  float center, invscale, total;
  int first, count;
};

__device__ __forceinline__ Axis axis(int o, int n, int m) {
  Axis a;
  const float scale = __fdiv_rn((float)n, (float)m);
  const float support = scale >= 1.0f ? scale : 1.0f;
  a.invscale = scale >= 1.0f ? __fdiv_rn(1.0f, scale) : 1.0f;
  a.center = __fmul_rn(scale, __fadd_rn((float)o, 0.5f));
  const int lo = max((int)__fadd_rn(__fsub_rn(a.center, support), 0.5f), 0);
  const int hi = min((int)__fadd_rn(__fadd_rn(a.center, support), 0.5f), n);
  a.first = lo;
  a.count = hi - lo;
  float total = 0.0f;
  for (int j = 0; j < a.count; j++) total = __fadd_rn(total, tri(__fmul_rn(__fadd_rn(__fsub_rn((float)(lo + j), a.center), 0.5f), a.invscale)));
  a.total = total;
  return a;
}

__device__ __forceinline__ float weight(const Axis& a, int j) {
  return tri(__fmul_rn(__fadd_rn(__fsub_rn((float)(a.first + j), a.center), 0.5f), a.invscale));
}

#define CROP_RESIZE_KERNEL(NAME, OUT_T, CONVERT)                                                                   \
  extern "C" __global__ void NAME(const Job* __restrict__ jobs, unsigned char* __restrict__ dst,                    \
                                  unsigned long long rowBytes, unsigned int OH, unsigned int OW, unsigned int hwc,  \
                                  float s0, float s1, float s2, float b0, float b1, float b2) {                     \
    const Job job = jobs[blockIdx.y];                                                                              \
    const unsigned int p = blockIdx.x * blockDim.x + threadIdx.x;                                                  \
    if (p >= OH * OW) return;                                                                                      \
    const int oy = p / OW, ox = p % OW;                                                                            \
    const int sx = job.flip ? (int)OW - 1 - ox : ox;                                                               \
    const Axis ax = axis(sx, job.cw, OW);                                                                          \
    const Axis ay = axis(oy, job.ch, OH);                                                                          \
    const unsigned char* src = (const unsigned char*)job.src;                                                      \
    float acc[3] = {0.0f, 0.0f, 0.0f};                                                                             \
    for (int i = 0; i < ay.count; i++) {                                                                           \
      const float wy = weight(ay, i);                                                                              \
      const unsigned char* line = src + (size_t)(job.top + ay.first + i) * job.pitch + (size_t)(job.left + ax.first) * job.xstride; \
      float racc[3] = {0.0f, 0.0f, 0.0f};                                                                          \
      for (int j = 0; j < ax.count; j++) {                                                                         \
        const float wx = weight(ax, j);                                                                            \
        for (int c = 0; c < 3; c++) racc[c] = __fadd_rn(racc[c], __fmul_rn(wx, (float)line[(size_t)job.xstride * j + (size_t)job.cstride * c])); \
      }                                                                                                            \
      for (int c = 0; c < 3; c++) acc[c] = __fadd_rn(acc[c], __fmul_rn(wy, racc[c]));                              \
    }                                                                                                              \
    const float norm = __fmul_rn(ax.total, ay.total);                                                              \
    const float scale[3] = {s0, s1, s2}, bias[3] = {b0, b1, b2};                                                   \
    OUT_T* out = (OUT_T*)(dst + (size_t)job.row * rowBytes);                                                       \
    for (int c = 0; c < 3; c++) {                                                                                  \
      const int q = min(max(__float2int_rn(__fdiv_rn(acc[c], norm)), 0), 255);                                     \
      const float f = __fadd_rn(__fmul_rn((float)q, scale[c]), bias[c]);                                           \
      const size_t at = hwc ? (size_t)p * 3 + c : (size_t)c * OH * OW + p;                                         \
      out[at] = CONVERT;                                                                                           \
    }                                                                                                              \
  }

CROP_RESIZE_KERNEL(stoker_crop_resize_u8, unsigned char, (unsigned char)q)
CROP_RESIZE_KERNEL(stoker_crop_resize_f32, float, f)
CROP_RESIZE_KERNEL(stoker_crop_resize_f16, __half, __float2half_rn(f))
CROP_RESIZE_KERNEL(stoker_crop_resize_bf16, __nv_bfloat16, __float2bfloat16_rn(f))
