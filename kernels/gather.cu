// Row gather: dst row r = src row ids[r], for r in [0, rows). Rows are opaque bytes.
// The one rule: every ids[r] must be a valid row of src. An out-of-range id is an illegal address,
// which is a sticky error that poisons the whole CUDA context, so ids are checked on the host
// before they are uploaded. For a window of a permutation, offset the ids pointer on the host
// (ids + start is always 4-byte aligned), so no separate "offset" kernel is needed.
//
// Built to PTX by scripts/build-kernels.sh; the PTX is committed and JIT-compiled at load.
//
// Design (the host side, src/device/cuda/gather.ts, mirrors BLOCK, UNROLL and FLAT_MAX_UNITS to size
// the grid; only speed depends on that, never correctness):
// - Vector width W: 16, 8, 4 or 1 bytes, the widest that divides rowBytes and both base pointers.
//   The host picks W and launches stoker_gather_rows_w{W}; stoker_gather_rows picks it on the
//   device (uniform for the whole grid) for users who launch it themselves.
// - Small rows (at most FLAT_MAX_UNITS units of W bytes): a flat grid-stride loop over every unit
//   of the batch, so 4-byte labels use every thread and the stores stay coalesced.
// - Big rows: tiles of blockDim.x * UNROLL units of one row per block iteration, grid-stride over
//   (row, tile) pairs, so a batch of a few huge rows still spreads over every SM.
// - Every path is grid-stride and reads blockDim.x at run time: any grid and any block size up to
//   BLOCK is correct.
// - UNROLL independent loads are issued before their stores, for memory-level parallelism.

#include <stdint.h>

#define BLOCK 256
#define UNROLL 4
#define FLAT_MAX_UNITS 256

template <typename V>
__device__ __forceinline__ void gather_flat(V *__restrict__ dst, const V *__restrict__ src,
                                            const uint32_t *__restrict__ ids, uint32_t upr,
                                            uint64_t total) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x * UNROLL;
  for (uint64_t base = (uint64_t)blockIdx.x * blockDim.x * UNROLL + threadIdx.x; base < total;
       base += stride) {
    V v[UNROLL];
#pragma unroll
    for (int j = 0; j < UNROLL; j++) {
      const uint64_t u = base + (uint64_t)j * blockDim.x;
      if (u < total) {
        const uint64_t r = u / upr;
        const uint64_t k = u - r * upr;
        v[j] = src[(uint64_t)__ldg(ids + r) * upr + k];
      }
    }
#pragma unroll
    for (int j = 0; j < UNROLL; j++) {
      const uint64_t u = base + (uint64_t)j * blockDim.x;
      if (u < total) dst[u] = v[j];
    }
  }
}

// 32-bit index math when every index the loop forms fits in 32 bits (the common case): a 32-bit
// division is several times cheaper than a 64-bit one, and the flat path divides once per unit.
// The caller guarantees total + stride <= 2^32 - 1, so neither base nor u can wrap.
template <typename V>
__device__ __forceinline__ void gather_flat32(V *__restrict__ dst, const V *__restrict__ src,
                                              const uint32_t *__restrict__ ids, uint32_t upr,
                                              uint32_t total) {
  const uint32_t stride = gridDim.x * blockDim.x * UNROLL;
  for (uint32_t base = blockIdx.x * blockDim.x * UNROLL + threadIdx.x; base < total;
       base += stride) {
    V v[UNROLL];
#pragma unroll
    for (int j = 0; j < UNROLL; j++) {
      const uint32_t u = base + j * blockDim.x;
      if (u < total) {
        const uint32_t r = u / upr;
        const uint32_t k = u - r * upr;
        v[j] = src[(uint64_t)__ldg(ids + r) * upr + k];
      }
    }
#pragma unroll
    for (int j = 0; j < UNROLL; j++) {
      const uint32_t u = base + j * blockDim.x;
      if (u < total) dst[u] = v[j];
    }
  }
}

// A tile is UNROLL units per thread of one row: blockDim.x * UNROLL units, whatever the block size.
template <typename V>
__device__ __forceinline__ void gather_tiled(V *__restrict__ dst, const V *__restrict__ src,
                                             const uint32_t *__restrict__ ids, uint64_t upr,
                                             uint32_t rows) {
  const uint64_t tile = (uint64_t)blockDim.x * UNROLL;
  const uint64_t tiles_per_row = (upr + tile - 1) / tile;
  const uint64_t work = tiles_per_row * rows;
  for (uint64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const uint64_t r = w / tiles_per_row;
    const uint64_t t = w - r * tiles_per_row;
    const V *__restrict__ s = src + (uint64_t)__ldg(ids + r) * upr;
    V *__restrict__ d = dst + r * upr;
    const uint64_t k0 = t * tile + threadIdx.x;
    V v[UNROLL];
#pragma unroll
    for (int j = 0; j < UNROLL; j++) {
      const uint64_t k = k0 + (uint64_t)j * blockDim.x;
      if (k < upr) v[j] = s[k];
    }
#pragma unroll
    for (int j = 0; j < UNROLL; j++) {
      const uint64_t k = k0 + (uint64_t)j * blockDim.x;
      if (k < upr) d[k] = v[j];
    }
  }
}

template <typename V>
__device__ __forceinline__ void gather(void *dst, const void *src, const uint32_t *ids,
                                       uint64_t row_bytes, uint32_t rows) {
  const uint64_t upr = row_bytes / sizeof(V);
  V *d = (V *)dst;
  const V *s = (const V *)src;
  if (upr == 0 || rows == 0) return;
  if (upr <= FLAT_MAX_UNITS) {
    const uint64_t total = upr * rows;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x * UNROLL;
    if (total + stride <= 0xFFFFFFFFull)
      gather_flat32<V>(d, s, ids, (uint32_t)upr, (uint32_t)total);
    else
      gather_flat<V>(d, s, ids, (uint32_t)upr, total);
  } else {
    gather_tiled<V>(d, s, ids, upr, rows);
  }
}

// Specialized by width; 16 bytes is one 128-bit load/store (uint4), the widest a thread can issue.
extern "C" __global__ void __launch_bounds__(BLOCK)
    stoker_gather_rows_w16(void *dst, const void *src, const uint32_t *ids, uint64_t row_bytes,
                           uint32_t rows) {
  gather<uint4>(dst, src, ids, row_bytes, rows);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
    stoker_gather_rows_w8(void *dst, const void *src, const uint32_t *ids, uint64_t row_bytes,
                          uint32_t rows) {
  gather<uint2>(dst, src, ids, row_bytes, rows);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
    stoker_gather_rows_w4(void *dst, const void *src, const uint32_t *ids, uint64_t row_bytes,
                          uint32_t rows) {
  gather<uint32_t>(dst, src, ids, row_bytes, rows);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
    stoker_gather_rows_w1(void *dst, const void *src, const uint32_t *ids, uint64_t row_bytes,
                          uint32_t rows) {
  gather<uint8_t>(dst, src, ids, row_bytes, rows);
}

// Self-dispatching entry for users who launch the gather themselves: any grid, any block size up to
// BLOCK. The width test is uniform across the grid, so no warp diverges on it. It costs more
// registers than the specialized kernels (every path is compiled in), hence those for Stoker's own use.
extern "C" __global__ void __launch_bounds__(BLOCK)
    stoker_gather_rows(void *dst, const void *src, const uint32_t *ids, uint64_t row_bytes,
                       uint32_t rows) {
  const uint64_t bits = (uint64_t)(uintptr_t)dst | (uint64_t)(uintptr_t)src | row_bytes;
  if ((bits & 15) == 0)
    gather<uint4>(dst, src, ids, row_bytes, rows);
  else if ((bits & 7) == 0)
    gather<uint2>(dst, src, ids, row_bytes, rows);
  else if ((bits & 3) == 0)
    gather<uint32_t>(dst, src, ids, row_bytes, rows);
  else
    gather<uint8_t>(dst, src, ids, row_bytes, rows);
}
