// Internal: not exported from the package entry.
// float32 → float16 / bfloat16 bit patterns, round to nearest even, as CUDA's __float2half_rn and
// __float2bfloat16_rn do, so CPU and GPU transforms produce identical bits.

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function toBFloat16Bits(x: number): number {
  f32[0] = x;
  const bits = u32[0]!;
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 0x40) & 0xffff; // NaN stays NaN (quiet)
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

export function toFloat16Bits(x: number): number {
  f32[0] = x;
  const bits = u32[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  let mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0); // Inf / NaN
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow → Inf
  if (e <= 0) {
    // Subnormal half (or zero): shift the implicit-1 mantissa right, rounding to nearest even.
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mant & ((1 << shift) - 1);
    let m = mant >>> shift;
    if (rest > half || (rest === half && (m & 1) === 1)) m++;
    return sign | m;
  }
  const rest = mant & 0x1fff;
  let m = mant >>> 13;
  if (rest > 0x1000 || (rest === 0x1000 && (m & 1) === 1)) {
    m++;
    if (m === 0x400) {
      m = 0;
      e++;
      if (e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | m;
}

export function fromFloat16Bits(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 0x1f) return m ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

export function fromBFloat16Bits(b: number): number {
  u32[0] = (b & 0xffff) << 16;
  return f32[0]!;
}
