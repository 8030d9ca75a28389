// Kernels of the GPU benchmark (bench/gpu.ts) only: the loader never loads this module.
// - stoker_bench_spin_ns / stoker_bench_spin: a consumer with a fixed GPU time per batch. One thread
//   busy-waits, on the wall-clock %globaltimer (nanoseconds) or, where that ticks too coarsely, on
//   the SM cycle counter (clock64, which the host calibrates). Launch <<<1, 1>>>.
// - stoker_bench_row_stamps: proof that a batch really arrived, read on the consumer's stream after
//   the batch's ready event. The bench stamps every row: its first 4 bytes hold the sample id and
//   its last 4 bytes the id XOR a mask. The kernel adds up both words of every row of the batch
//   into acc[0] and acc[1]; the host adds up what the sample ids say they must be.
//
// Built to PTX by scripts/build-kernels.sh with the loader's own kernels.

#include <stdint.h>

extern "C" __global__ void stoker_bench_spin_ns(unsigned long long ns) {
  unsigned long long start;
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - start < ns);
}

extern "C" __global__ void stoker_bench_spin(unsigned long long cycles) {
  const long long start = clock64();
  while ((unsigned long long)(clock64() - start) < cycles) {
  }
}

// rows of row_bytes bytes at data (row_bytes a multiple of 4, data 4-byte aligned).
extern "C" __global__ void stoker_bench_row_stamps(const uint8_t *data, unsigned long long row_bytes,
                                                   uint32_t rows, unsigned long long *acc) {
  unsigned long long first = 0;
  unsigned long long last = 0;
  for (uint32_t r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
    const uint8_t *row = data + (unsigned long long)r * row_bytes;
    first += *(const uint32_t *)row;
    last += *(const uint32_t *)(row + row_bytes - 4);
  }
  if (first != 0 || last != 0) {
    atomicAdd(acc, first);
    atomicAdd(acc + 1, last);
  }
}
