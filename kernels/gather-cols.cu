// Resident batches in one launch: up to four columns gathered by the same ids, dst row r of column
// c = src row ids[r] of column c. One launch per batch instead of one per column: on a fast device
// the host's launch cost, not the copy, bounds small batches. Unused columns have rowBytes 0.
// Every address is a 256-byte aligned allocation plus a multiple of the row size, so the width a
// column is copied with (16, 4 or 1 bytes) follows from its row size alone. The host launches this
// kernel only when rows × (rowBytes / width) fits in 32 bits for every column.

__device__ __forceinline__ void gather_col(unsigned char* __restrict__ dst, const unsigned char* __restrict__ src,
                                           unsigned long long rowBytes, const unsigned int* __restrict__ ids,
                                           unsigned int rows) {
  if (rowBytes == 0) return;
  const unsigned int stride = gridDim.x * blockDim.x;
  const unsigned int first = blockIdx.x * blockDim.x + threadIdx.x;
  if (rowBytes % 16 == 0) {
    const unsigned int units = (unsigned int)(rowBytes / 16);
    const unsigned int total = units * rows;
    for (unsigned int i = first; i < total; i += stride) {
      const unsigned int r = i / units, u = i - r * units;
      reinterpret_cast<uint4*>(dst + (unsigned long long)r * rowBytes)[u] =
          reinterpret_cast<const uint4*>(src + (unsigned long long)ids[r] * rowBytes)[u];
    }
  } else if (rowBytes % 4 == 0) {
    const unsigned int units = (unsigned int)(rowBytes / 4);
    const unsigned int total = units * rows;
    for (unsigned int i = first; i < total; i += stride) {
      const unsigned int r = i / units, u = i - r * units;
      reinterpret_cast<unsigned int*>(dst + (unsigned long long)r * rowBytes)[u] =
          reinterpret_cast<const unsigned int*>(src + (unsigned long long)ids[r] * rowBytes)[u];
    }
  } else {
    const unsigned int units = (unsigned int)rowBytes;
    const unsigned int total = units * rows;
    for (unsigned int i = first; i < total; i += stride) {
      const unsigned int r = i / units, u = i - r * units;
      dst[(unsigned long long)r * rowBytes + u] = src[(unsigned long long)ids[r] * rowBytes + u];
    }
  }
}

extern "C" __global__ void stoker_gather_cols4(
    unsigned char* d0, const unsigned char* s0, unsigned long long b0,
    unsigned char* d1, const unsigned char* s1, unsigned long long b1,
    unsigned char* d2, const unsigned char* s2, unsigned long long b2,
    unsigned char* d3, const unsigned char* s3, unsigned long long b3,
    const unsigned int* ids, unsigned int rows) {
  gather_col(d0, s0, b0, ids, rows);
  gather_col(d1, s1, b1, ids, rows);
  gather_col(d2, s2, b2, ids, rows);
  gather_col(d3, s3, b3, ids, rows);
}
