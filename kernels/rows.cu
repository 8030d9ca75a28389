// Row copies through pointer tables: dst row r = src row r, where the rows live anywhere in device
// memory (pool slabs, an upload buffer, a batch). One launch assembles a whole batch column in exact
// caller order, or captures a batch's fresh rows into the VRAM pool — never one launch per row.
//
//   dst, src: device arrays of `rows` row addresses (u64); unitsPerRow: row bytes / sizeof(T).
// The host picks T (16, 8, 4 or 1 bytes) from the row size: every row address is a 256-byte
// aligned allocation plus a multiple of the row size, so T divides every address when it divides
// the row size.

template <typename T>
__device__ __forceinline__ void copy_rows(const unsigned long long* __restrict__ dst, const unsigned long long* __restrict__ src,
                                          unsigned long long unitsPerRow, unsigned int rows) {
  const unsigned long long total = unitsPerRow * rows;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    const unsigned long long r = i / unitsPerRow;
    const unsigned long long u = i - r * unitsPerRow;
    reinterpret_cast<T*>(dst[r])[u] = reinterpret_cast<const T*>(src[r])[u];
  }
}

extern "C" __global__ void stoker_copy_rows_w16(const unsigned long long* dst, const unsigned long long* src, unsigned long long unitsPerRow, unsigned int rows) {
  copy_rows<uint4>(dst, src, unitsPerRow, rows);
}
extern "C" __global__ void stoker_copy_rows_w8(const unsigned long long* dst, const unsigned long long* src, unsigned long long unitsPerRow, unsigned int rows) {
  copy_rows<unsigned long long>(dst, src, unitsPerRow, rows);
}
extern "C" __global__ void stoker_copy_rows_w4(const unsigned long long* dst, const unsigned long long* src, unsigned long long unitsPerRow, unsigned int rows) {
  copy_rows<unsigned int>(dst, src, unitsPerRow, rows);
}
extern "C" __global__ void stoker_copy_rows_w1(const unsigned long long* dst, const unsigned long long* src, unsigned long long unitsPerRow, unsigned int rows) {
  copy_rows<unsigned char>(dst, src, unitsPerRow, rows);
}
