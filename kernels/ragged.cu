// Ragged collates on the device: one piece table (src/collate/pieces.ts) run over a batch's
// fixed-capacity rows. Piece j = (srcRow, srcStart, dstStart, length, segment), 5 int32 each, sorted
// by dstStart without overlap: it copies `length` positions (posBytes bytes each) from position
// srcStart of row srcRow to output position dstStart, tags them with `segment` and `srcStart + k` in
// the optional segment (int32, or a uint8 mask) and position (int32) outputs, and fills the gap after
// it (up to the next piece's dstStart, or `total`; piece 0 also the gap before it) with the fill
// value and zero tags. So every output byte is written exactly once, in one launch: no memset first.
//
// Grid: x = piece (1 block when there are none), y = chunk of `chunk` positions within the piece's
// span (a long piece or gap is split over several blocks). Data moves in the widest unit (16, 8, 4,
// 2, 1 bytes) that the source and destination addresses share modulo 16: pad with 16-byte rows and a
// 16-byte multiple L moves uint4s; pack of odd lengths falls to the element size. Fills are uint4
// stores of the 8-byte periodic pattern `fillRep` (the host replicates the element's bits), which
// is right wherever the output base is aligned to the element (the host checks it).
// Every table entry must have passed checkPieces on the host: a row out of range is an illegal address.
// One kernel rather than a memset then a copy: each byte is written once, and a gap costs no second
// pass over the output. ptxas (-O3): 34 registers on sm_80 (6 blocks of 256 per SM, 75 % occupancy),
// 26 on sm_90 (8 blocks, full occupancy), no spills, no shared memory.

struct __align__(4) Piece {
  int row, start, at, len, segment;
};

template <typename T>
__device__ __forceinline__ void copy_units(unsigned char* __restrict__ dst, const unsigned char* __restrict__ src, unsigned long long n) {
  // dst and src agree modulo sizeof(T): align dst with a byte head, then whole units, then a byte tail.
  unsigned long long head = (sizeof(T) - ((unsigned long long)dst & (sizeof(T) - 1))) & (sizeof(T) - 1);
  if (head > n) head = n;
  if (threadIdx.x < head) dst[threadIdx.x] = src[threadIdx.x];
  const unsigned long long body = (n - head) / sizeof(T);
  T* d = reinterpret_cast<T*>(dst + head);
  const T* s = reinterpret_cast<const T*>(src + head);
  for (unsigned long long i = threadIdx.x; i < body; i += blockDim.x) d[i] = s[i];
  const unsigned long long tail = head + body * sizeof(T);
  if (tail + threadIdx.x < n) dst[tail + threadIdx.x] = src[tail + threadIdx.x];
}

__device__ __forceinline__ void copy_bytes(unsigned char* dst, const unsigned char* src, unsigned long long n) {
  const unsigned int mis = (unsigned int)(((unsigned long long)dst ^ (unsigned long long)src) & 15);
  if (mis == 0) copy_units<uint4>(dst, src, n);
  else if ((mis & 7) == 0) copy_units<uint2>(dst, src, n);
  else if ((mis & 3) == 0) copy_units<unsigned int>(dst, src, n);
  else if ((mis & 1) == 0) copy_units<unsigned short>(dst, src, n);
  else copy_units<unsigned char>(dst, src, n);
}

__device__ __forceinline__ void fill_bytes(unsigned char* dst, unsigned long long n, unsigned long long rep) {
  unsigned long long head = (16 - ((unsigned long long)dst & 15)) & 15;
  if (head > n) head = n;
  if (threadIdx.x < head) {
    const unsigned long long a = (unsigned long long)dst + threadIdx.x;
    dst[threadIdx.x] = (unsigned char)(rep >> (8 * (a & 7)));
  }
  const unsigned long long body = (n - head) / 16;
  const uint4 pattern = make_uint4((unsigned int)rep, (unsigned int)(rep >> 32), (unsigned int)rep, (unsigned int)(rep >> 32));
  uint4* d = reinterpret_cast<uint4*>(dst + head);
  for (unsigned long long i = threadIdx.x; i < body; i += blockDim.x) d[i] = pattern;
  const unsigned long long tail = head + body * 16 + threadIdx.x;
  if (tail < n) {
    const unsigned long long a = (unsigned long long)dst + tail;
    dst[tail] = (unsigned char)(rep >> (8 * (a & 7)));
  }
}

extern "C" __global__ void stoker_pieces(const unsigned char* __restrict__ src, unsigned long long rowBytes,
                                         unsigned char* __restrict__ dst, unsigned long long posBytes, unsigned long long fillRep,
                                         unsigned char* __restrict__ segment, unsigned int segmentWidth, int* __restrict__ position,
                                         const Piece* __restrict__ table, unsigned int count, unsigned int total, unsigned int chunk) {
  const unsigned int j = blockIdx.x;
  Piece p = {0, 0, 0, 0, 0};
  unsigned long long from = 0, to = total;
  if (count > 0) {
    p = table[j];
    from = j == 0 ? 0 : (unsigned int)p.at;
    to = j + 1 < count ? (unsigned int)table[j + 1].at : total;
  }
  const unsigned long long a = from + (unsigned long long)blockIdx.y * chunk;
  if (a >= to) return;
  const unsigned long long b = min(to, a + chunk);
  const unsigned long long at = (unsigned int)p.at, end = at + (unsigned int)p.len;
  if (a < at) fill_bytes(dst + a * posBytes, (min(b, at) - a) * posBytes, fillRep);
  const unsigned long long ca = max(a, at), cb = min(b, end);
  if (ca < cb) copy_bytes(dst + ca * posBytes, src + (unsigned long long)(unsigned int)p.row * rowBytes + ((unsigned int)p.start + (ca - at)) * posBytes, (cb - ca) * posBytes);
  const unsigned long long fa = max(a, end);
  if (fa < b) fill_bytes(dst + fa * posBytes, (b - fa) * posBytes, fillRep);
  if (segment != nullptr || position != nullptr) {
    for (unsigned long long q = a + threadIdx.x; q < b; q += blockDim.x) {
      const bool in = q >= at && q < end;
      if (segment != nullptr) {
        if (segmentWidth == 4) reinterpret_cast<int*>(segment)[q] = in ? p.segment : 0;
        else segment[q] = in ? (unsigned char)p.segment : 0;
      }
      if (position != nullptr) position[q] = in ? p.start + (int)(q - at) : 0;
    }
  }
}
