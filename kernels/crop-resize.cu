// Crop, resize, flip, normalize and cast decoded JPEGs straight into a batch, in one pass: for each
// job (one image), read its box of RGB uint8 pixels (interleaved or planar), resample it to OH × OW with
// torchvision's antialiased bilinear filter (antialias=True: a triangle of support max(scale, 1)
// source pixels, so plain bilinear when upscaling), round to uint8 as torchvision's uint8 resize
// does, mirror when the job says flip, then v = q * scale[c] + bias[c] in float32 and the cast,
// written at dst + row * rowBytes in CHW or HWC. src/image/jpeg-resample.ts is the same
// arithmetic on the CPU, op for op (explicit _rn intrinsics: no fused multiply-add), so the two
// agree bit for bit on the same decoded pixels.
//
// A job with `pil` set (a center-crop view, 'eval') is Pillow's resize of the whole image instead,
// in Pillow's arithmetic: per axis the coefficients of output first + o of the resize of the
// fractional [in0, in1) (float, as Pillow holds its box) to `out`, taps clamped to the whole image
// (not the box), computed in float64 in Pillow's order and held in 22-bit fixed point; then, per tap row, the horizontal sum
// rounded and clipped to 8 bits (Pillow's intermediate image) and the vertical sum of those.
// Integers from there on, so the bytes are Pillow's for the same pixels (NOTE [eval on the GPU] in
// src/image/jpeg-resample.ts).
//
//   grid: (ceil(OH * OW / 256), jobs), block 256; one thread per output pixel, all three channels.

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstddef>

struct Job {
  unsigned long long src;  // uint8 RGB, `pitch` bytes a line
  int w, h, pitch;         // the decoded image
  int left, top, cw, ch;   // the crop box, inside the image
  int flip;                // mirror the output horizontally
  int row;                 // batch row written
  int xstride;             // bytes from one pixel to the next: 3 interleaved (RGBI), 1 planar (RGB)
  int cstride;             // bytes from one channel to the next: 1 interleaved, a plane planar
  int pil;                 // 1: Pillow's resize of the whole image by the fields below, not the box
  float x0, x1, y0, y1;    // pil: the fractional source interval of each axis (C floats, as Pillow takes its box)
  int xout, xfirst;        // pil: the x axis resized to xout, outputs [xfirst, xfirst + OW) kept
  int yout, yfirst;        // pil: likewise for y
  int pad[10];             // 128 bytes a job
};
// The layout src/image/jpeg-plan.ts's writeJob writes.
static_assert(sizeof(Job) == 128 && offsetof(Job, pil) == 52 && offsetof(Job, x0) == 56 && offsetof(Job, xout) == 72, "Job layout");

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

// Pillow's precompute_coeffs (bilinear, support 1) for output xx of the resize of [in0, in1) of an
// axis of n pixels to `out`, before normalize_coeffs_8bpc: taps [xmin, xmin + count), w(j) / ww.
struct PilAxis {
  double center, ss, ww;
  int xmin, count;
};

__device__ __forceinline__ double pil_filter(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? __dsub_rn(1.0, x) : 0.0;
}

__device__ __forceinline__ double pil_w(const PilAxis& a, int x) {
  return pil_filter(__dmul_rn(__dadd_rn(__dsub_rn((double)(x + a.xmin), a.center), 0.5), a.ss));
}

__device__ __forceinline__ PilAxis pil_axis(int xx, int n, float in0, float in1, int out) {
  PilAxis a;
  const double scale = __ddiv_rn((double)__fsub_rn(in1, in0), (double)out);
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = filterscale;  // the bilinear filter's support (1) times filterscale
  a.center = __dadd_rn((double)in0, __dmul_rn(__dadd_rn((double)xx, 0.5), scale));
  a.ss = __ddiv_rn(1.0, filterscale);
  int xmin = __double2int_rz(__dadd_rn(__dsub_rn(a.center, support), 0.5));
  if (xmin < 0) xmin = 0;
  int xmax = __double2int_rz(__dadd_rn(__dadd_rn(a.center, support), 0.5));
  if (xmax > n) xmax = n;
  a.xmin = xmin;
  a.count = xmax - xmin;
  double ww = 0.0;
  for (int x = 0; x < a.count; x++) ww = __dadd_rn(ww, pil_w(a, x));
  a.ww = ww;
  return a;
}

// normalize_coeffs_8bpc: the weight of tap x in 22-bit fixed point (the bilinear weights are ≥ 0).
__device__ __forceinline__ int pil_k(const PilAxis& a, int x) {
  double w = pil_w(a, x);
  if (a.ww != 0.0) w = __ddiv_rn(w, a.ww);
  return __double2int_rz(__dadd_rn(0.5, __dmul_rn(w, 4194304.0)));
}

__device__ __forceinline__ int pil_clip8(int v) {
  return min(max(v >> 22, 0), 255);
}

// Horizontal weights kept per thread up to this many taps (a reduction up to ~15×), recomputed beyond.
#define PIL_TAPS 32

// The pixel (sx, oy) of a pil job, Pillow's bytes: q[3]. Not inlined: one copy for the four kernels.
__device__ __noinline__ void pil_pixel(const Job* __restrict__ jp, int sx, int oy, int* q) {
  const Job job = *jp;
  const PilAxis ax = pil_axis(job.xfirst + sx, job.w, job.x0, job.x1, job.xout);
  const PilAxis ay = pil_axis(job.yfirst + oy, job.h, job.y0, job.y1, job.yout);
  int kx[PIL_TAPS];
  const bool kept = ax.count <= PIL_TAPS;
  if (kept)
    for (int j = 0; j < ax.count; j++) kx[j] = pil_k(ax, j);
  const unsigned char* src = (const unsigned char*)job.src;
  int acc[3] = {1 << 21, 1 << 21, 1 << 21};
  for (int i = 0; i < ay.count; i++) {
    const int ky = pil_k(ay, i);
    const unsigned char* line = src + (size_t)(ay.xmin + i) * job.pitch + (size_t)ax.xmin * job.xstride;
    int racc[3] = {1 << 21, 1 << 21, 1 << 21};
    for (int j = 0; j < ax.count; j++) {
      const int k = kept ? kx[j] : pil_k(ax, j);
      for (int c = 0; c < 3; c++) racc[c] += k * (int)line[(size_t)job.xstride * j + (size_t)job.cstride * c];
    }
    for (int c = 0; c < 3; c++) acc[c] += pil_clip8(racc[c]) * ky;
  }
  for (int c = 0; c < 3; c++) q[c] = pil_clip8(acc[c]);
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
    int q[3];                                                                                                      \
    if (job.pil) {                                                                                                 \
      pil_pixel(jobs + blockIdx.y, sx, oy, q);                                                                     \
    } else {                                                                                                       \
      const Axis ax = axis(sx, job.cw, OW);                                                                        \
      const Axis ay = axis(oy, job.ch, OH);                                                                        \
      const unsigned char* src = (const unsigned char*)job.src;                                                    \
      float acc[3] = {0.0f, 0.0f, 0.0f};                                                                           \
      for (int i = 0; i < ay.count; i++) {                                                                         \
        const float wy = weight(ay, i);                                                                            \
        const unsigned char* line = src + (size_t)(job.top + ay.first + i) * job.pitch + (size_t)(job.left + ax.first) * job.xstride; \
        float racc[3] = {0.0f, 0.0f, 0.0f};                                                                        \
        for (int j = 0; j < ax.count; j++) {                                                                       \
          const float wx = weight(ax, j);                                                                          \
          for (int c = 0; c < 3; c++) racc[c] = __fadd_rn(racc[c], __fmul_rn(wx, (float)line[(size_t)job.xstride * j + (size_t)job.cstride * c])); \
        }                                                                                                          \
        for (int c = 0; c < 3; c++) acc[c] = __fadd_rn(acc[c], __fmul_rn(wy, racc[c]));                            \
      }                                                                                                            \
      const float norm = __fmul_rn(ax.total, ay.total);                                                            \
      for (int c = 0; c < 3; c++) q[c] = min(max(__float2int_rn(__fdiv_rn(acc[c], norm)), 0), 255);                \
    }                                                                                                              \
    const float scale[3] = {s0, s1, s2}, bias[3] = {b0, b1, b2};                                                   \
    OUT_T* out = (OUT_T*)(dst + (size_t)job.row * rowBytes);                                                       \
    for (int c = 0; c < 3; c++) {                                                                                  \
      const float f = __fadd_rn(__fmul_rn((float)q[c], scale[c]), bias[c]);                                        \
      const size_t at = hwc ? (size_t)p * 3 + c : (size_t)c * OH * OW + p;                                         \
      out[at] = CONVERT;                                                                                           \
    }                                                                                                              \
  }

CROP_RESIZE_KERNEL(stoker_crop_resize_u8, unsigned char, (unsigned char)q[c])
CROP_RESIZE_KERNEL(stoker_crop_resize_f32, float, f)
CROP_RESIZE_KERNEL(stoker_crop_resize_f16, __half, __float2half_rn(f))
CROP_RESIZE_KERNEL(stoker_crop_resize_bf16, __nv_bfloat16, __float2bfloat16_rn(f))
