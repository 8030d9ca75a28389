// Internal: not exported from the package entry.
// The seeded random stream behind shuffling and random transforms: bit-compatible with Rust rand
// 0.10 `SmallRng::seed_from_u64` (xoshiro256++ seeded through SplitMix64) and with rand's
// `SliceRandom::shuffle`, so a permutation computed here equals the one a Rust trainer computes
// from the same seed. The rule: an Rng is a stream, and every value depends on every call made
// before it; the same seed and the same calls in the same order give the same values, so never
// share one Rng between consumers whose call order can vary (give each its own seed instead).
//
// 64-bit words are kept as two uint32 halves (hi, lo); BigInt appears only in the convenience
// APIs (`nextU64`, bigint seeds), never on the hot paths (seeding, drawing, shuffling).

/** A 64-bit unsigned integer as two uint32 halves. */
export interface U64 {
  readonly hi: number;
  readonly lo: number;
}

const TWO_32 = 4294967296;
const U32_MAX = 0xffffffff;
const TWO_NEG_24 = 1 / 16777216;
const TWO_NEG_53 = 1 / 9007199254740992;
const MASK_64 = (1n << 64n) - 1n;

// Hot-path arithmetic works on int32 bit patterns (`| 0`), which V8 keeps in registers; a value
// is turned into a non-negative number (`>>> 0`) only where it leaves the module or is compared.

/** Carry out of the 32-bit addition a + b = sum (all int32 bit patterns): 0 or 1. */
function carry32(a: number, b: number, sum: number): number {
  return ((a & b) | ((a | b) & ~sum)) >>> 31;
}

/** High 32 bits (int32 bit pattern) of the exact 64-bit product of a and b read as uint32. */
function mulHi32(a: number, b: number): number {
  const ah = a >>> 16;
  const al = a & 0xffff;
  const bh = b >>> 16;
  const bl = b & 0xffff;
  const m1 = Math.imul(ah, bl);
  const m2 = Math.imul(al, bh);
  const c = ((Math.imul(al, bl) >>> 16) + (m1 & 0xffff) + (m2 & 0xffff)) >>> 16;
  return (Math.imul(ah, bh) + (m1 >>> 16) + (m2 >>> 16) + c) | 0;
}

/**
 * Normalize a seed: non-negative safe integer number, or bigint (taken mod 2^64; negative bigint →
 * RangeError). Throws RangeError for a non-integer, negative or unsafe number.
 */
export function toU64(x: number | bigint): U64 {
  if (typeof x === 'bigint') {
    if (x < 0n) throw new RangeError(`a 64-bit seed must be non-negative, got ${x}n`);
    const v = x & MASK_64;
    return { hi: Number(v >> 32n), lo: Number(v & 0xffffffffn) };
  }
  if (typeof x !== 'number' || !Number.isSafeInteger(x) || x < 0) {
    throw new RangeError(
      `a 64-bit seed must be a non-negative safe integer number or a bigint, got ${String(x)}` +
        (typeof x === 'number' && Number.isInteger(x) && x > 0 ? ' (pass seeds of 2^53 and above as a bigint)' : ''),
    );
  }
  return { hi: Math.floor(x / TWO_32), lo: x >>> 0 };
}

/** Accepts a U64 (halves must be integers in [0, 2^32)), a number or a bigint. */
function asU64(x: U64 | number | bigint): U64 {
  if (typeof x === 'number' || typeof x === 'bigint') return toU64(x);
  const { hi, lo } = x;
  if (!isU32(hi) || !isU32(lo)) {
    throw new RangeError(`a U64 needs integer halves in [0, 2^32), got { hi: ${String(hi)}, lo: ${String(lo)} }`);
  }
  return x;
}

function isU32(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= U32_MAX;
}

export function u64ToBigInt(x: U64): bigint {
  return (BigInt(x.hi >>> 0) << 32n) | BigInt(x.lo >>> 0);
}

/** (a + b) mod 2^64 */
export function addU64(a: U64, b: U64): U64 {
  const lo = (a.lo + b.lo) | 0;
  return { hi: (a.hi + b.hi + carry32(a.lo, b.lo, lo)) >>> 0, lo: lo >>> 0 };
}

/** (a * b) mod 2^64 */
export function mulU64(a: U64, b: U64): U64 {
  const hi = mulHi32(a.lo, b.lo) + Math.imul(a.hi, b.lo) + Math.imul(a.lo, b.hi);
  return { hi: hi >>> 0, lo: Math.imul(a.lo, b.lo) >>> 0 };
}

export function xorU64(a: U64, b: U64): U64 {
  return { hi: (a.hi ^ b.hi) >>> 0, lo: (a.lo ^ b.lo) >>> 0 };
}

/** logical right shift by 0..63 */
export function shrU64(a: U64, k: number): U64 {
  if (!Number.isInteger(k) || k < 0 || k > 63) throw new RangeError(`shift must be an integer in [0, 63], got ${k}`);
  if (k === 0) return { hi: a.hi >>> 0, lo: a.lo >>> 0 };
  if (k >= 32) return { hi: 0, lo: a.hi >>> (k - 32) };
  return { hi: a.hi >>> k, lo: ((a.lo >>> k) | (a.hi << (32 - k))) >>> 0 };
}

// SplitMix64 constants as int32 bit patterns of their (hi, lo) halves.
const PHI_HI = 0x9e3779b9 | 0;
const PHI_LO = 0x7f4a7c15 | 0;
const M1_HI = 0xbf58476d | 0;
const M1_LO = 0x1ce4e5b9 | 0;
const M2_HI = 0x94d049bb | 0;
const M2_LO = 0x133111eb | 0;

/** The four SplitMix64 outputs of a seed, as (hi, lo) int32 pairs; scratch for the constructor. */
const SEED_WORDS = new Int32Array(8);

function splitMix64(seedHi: number, seedLo: number): void {
  let sh = seedHi | 0;
  let sl = seedLo | 0;
  for (let w = 0; w < 8; w += 2) {
    // state += PHI
    const nl = (sl + PHI_LO) | 0;
    sh = (sh + PHI_HI + carry32(sl, PHI_LO, nl)) | 0;
    sl = nl;
    // z = (z ^ z >> 30) * M1
    let zl = sl ^ ((sl >>> 30) | (sh << 2));
    let zh = sh ^ (sh >>> 30);
    zh = (mulHi32(zl, M1_LO) + Math.imul(zh, M1_LO) + Math.imul(zl, M1_HI)) | 0;
    zl = Math.imul(zl, M1_LO);
    // z = (z ^ z >> 27) * M2
    zl ^= (zl >>> 27) | (zh << 5);
    zh ^= zh >>> 27;
    zh = (mulHi32(zl, M2_LO) + Math.imul(zh, M2_LO) + Math.imul(zl, M2_HI)) | 0;
    zl = Math.imul(zl, M2_LO);
    // z ^= z >> 31
    SEED_WORDS[w + 1] = zl ^ ((zl >>> 31) | (zh << 1));
    SEED_WORDS[w] = zh ^ (zh >>> 31);
  }
}

/**
 * Fisher–Yates positions are processed in blocks: first their j's, then the swaps. Odd on
 * purpose: rand's two-factor chunks (positions 1626 … 65534) then straddle block boundaries, so
 * every long shuffle exercises the IncreasingUniform state carried from block to block.
 */
const BLOCK = 4095;
/** A free j buffer, taken (set to null) while a shuffle runs, so a re-entrant shuffle gets its own. */
let spareJs: Uint32Array | null = null;

/** Where rand's IncreasingUniform stands between blocks of one shuffle. */
interface IncreasingUniformState {
  chunk: number;
  remaining: number;
}

export class Rng {
  // xoshiro256++ state s[0..3], each word as (hi, lo) int32 bit patterns. The fields are `declare`d
  // so that no class-field definition (as undefined) precedes the constructor's int32 stores: V8
  // then keeps them as small integers, and a draw runs about twice as fast.
  private declare s0h: number;
  private declare s0l: number;
  private declare s1h: number;
  private declare s1l: number;
  private declare s2h: number;
  private declare s2l: number;
  private declare s3h: number;
  private declare s3l: number;
  /** Low half (int32 bit pattern) of the last output of `step()`. */
  private declare outLo: number;

  private constructor(seedHi: number, seedLo: number) {
    splitMix64(seedHi, seedLo);
    const w = SEED_WORDS;
    this.s0h = w[0]!;
    this.s0l = w[1]!;
    this.s1h = w[2]!;
    this.s1l = w[3]!;
    this.s2h = w[4]!;
    this.s2l = w[5]!;
    this.s3h = w[6]!;
    this.s3l = w[7]!;
    this.outLo = 0;
  }

  /** rand's SmallRng::seed_from_u64(seed). */
  static seed(seed: U64 | number | bigint): Rng {
    const s = asU64(seed);
    return new Rng(s.hi, s.lo);
  }

  /** One xoshiro256++ step: returns the high half of next_u64 and leaves the low half in outLo (int32 bit patterns). */
  private step(): number {
    const s0h = this.s0h;
    const s0l = this.s0l;
    const s1h = this.s1h;
    const s1l = this.s1l;
    const s3h = this.s3h;
    const s3l = this.s3l;
    // res = rotl(s0 + s3, 23) + s0
    const al = (s0l + s3l) | 0;
    const ah = (s0h + s3h + carry32(s0l, s3l, al)) | 0;
    const rh = (ah << 23) | (al >>> 9);
    const rl = (al << 23) | (ah >>> 9);
    const ol = (rl + s0l) | 0;
    const oh = (rh + s0h + carry32(rl, s0l, ol)) | 0;
    this.outLo = ol;
    // t = s1 << 17
    const th = (s1h << 17) | (s1l >>> 15);
    const tl = s1l << 17;
    // s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = rotl(s3, 45)
    const n2h = this.s2h ^ s0h;
    const n2l = this.s2l ^ s0l;
    const n3h = s3h ^ s1h;
    const n3l = s3l ^ s1l;
    this.s1h = s1h ^ n2h;
    this.s1l = s1l ^ n2l;
    this.s0h = s0h ^ n3h;
    this.s0l = s0l ^ n3l;
    this.s2h = n2h ^ th;
    this.s2l = n2l ^ tl;
    // rotl 45 = swap halves (rotl 32), then rotl 13
    this.s3h = (n3l << 13) | (n3h >>> 19);
    this.s3l = (n3h << 13) | (n3l >>> 19);
    return oh;
  }

  /** next_u64 as a bigint (convenience; slow). */
  nextU64(): bigint {
    const hi = this.step() >>> 0;
    return (BigInt(hi) << 32n) | BigInt(this.outLo >>> 0);
  }

  /** Writes [hi, lo] of the next u64 into out[0], out[1] (fast). */
  nextU64Into(out: Uint32Array): void {
    out[0] = this.step();
    out[1] = this.outLo;
  }

  /** next_u32: the high 32 bits of the next u64, as a non-negative number. */
  nextU32(): number {
    return this.step() >>> 0;
  }

  /** Uniform in [0, 1) with 53 random bits: (next_u64 >> 11) * 2^-53, as rand's StandardUniform f64. */
  f64(): number {
    const hi = this.step() >>> 0;
    return (hi * 2097152 + (this.outLo >>> 11)) * TWO_NEG_53;
  }

  /** Uniform in [0, 1) with 24 random bits: (next_u32 >> 8) * 2^-24, as rand's StandardUniform f32. */
  f32(): number {
    return (this.step() >>> 8) * TWO_NEG_24;
  }

  /**
   * rand's `random_range(0..bound)` for u32 (Canon's method, biased variant, rand's default), for an
   * integer 1 ≤ bound ≤ 2^32 − 1; callers handle bound = 2^32 (rand's full u32 range) as next_u32.
   * Consumes one u64, or two when the first product's low half is above 2^32 − bound.
   */
  private uniformU32(bound: number): number {
    const x = this.step();
    let hi = mulHi32(x, bound) >>> 0;
    const lo = Math.imul(x, bound) >>> 0;
    if (lo > TWO_32 - bound) {
      const hi2 = mulHi32(this.step(), bound) >>> 0;
      if (lo + hi2 > U32_MAX) hi += 1;
    }
    return hi;
  }

  /** Uniform integer in [0, n) for an integer 1 ≤ n ≤ 2^32 (rand's u32 `random_range(0..n)`). */
  below(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > TWO_32) {
      throw new RangeError(`below(n) needs an integer n with 1 <= n <= 2^32, got n = ${String(n)}`);
    }
    if (n === TWO_32) return this.step() >>> 0;
    return this.uniformU32(n);
  }

  /**
   * Uniform integer in [lo, hi): safe integers, hi > lo, hi − lo ≤ 2^32. lo + below(hi − lo), which
   * is rand's `random_range(lo..hi)` for i32/u32 bounds (rand samples i64/u64 ranges differently).
   */
  int(lo: number, hi: number): number {
    if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi) || hi <= lo || hi - lo > TWO_32) {
      throw new RangeError(
        `int(lo, hi) needs safe integers with lo < hi and hi - lo <= 2^32, got lo = ${String(lo)}, hi = ${String(hi)}`,
      );
    }
    const range = hi - lo;
    return lo + (range === TWO_32 ? this.step() >>> 0 : this.uniformU32(range));
  }

  /** true with probability p: f64() < p. p must be in [0, 1] (0: never, 1: always). */
  bernoulli(p: number): boolean {
    if (!(p >= 0 && p <= 1)) throw new RangeError(`bernoulli(p) needs 0 <= p <= 1, got p = ${String(p)}`);
    return this.f64() < p;
  }

  /**
   * Normal(mean, std) by the basic (trigonometric) Box–Muller transform, cosine branch only:
   * u1 = 1 − f64() ∈ (0, 1] (so log never sees 0), u2 = f64(), z = sqrt(−2 ln u1) · cos(2π u2).
   * The sine twin is discarded, so every call consumes exactly two u64 draws (no hidden cache).
   */
  normal(mean = 0, std = 1): number {
    if (!Number.isFinite(mean) || !Number.isFinite(std) || std < 0) {
      throw new RangeError(`normal(mean, std) needs a finite mean and a finite std >= 0, got ${String(mean)}, ${String(std)}`);
    }
    const u1 = 1 - this.f64();
    const u2 = this.f64();
    return mean + std * Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }

  /**
   * In-place rand-compatible shuffle of any indexable array (typed arrays included): rand ≥ 0.9
   * `SliceRandom::shuffle` (forward Fisher–Yates; j for position i from rand's IncreasingUniform,
   * which packs several j's into one u32 sample). Length must be below 2^32 − 1.
   */
  shuffle<T>(a: { length: number; [i: number]: T }): void {
    const len = a.length;
    if (len <= 1) return;
    if (!(len < U32_MAX)) throw new RangeError(`shuffle supports lengths below 2^32 - 1, got ${len}`);
    const js = spareJs ?? new Uint32Array(BLOCK);
    spareJs = null;
    try {
      // IncreasingUniform starting at n = 0: chunk_remaining = 1, so position 0 draws nothing (j = 0).
      const st: IncreasingUniformState = { chunk: 0, remaining: 1 };
      const typed = a instanceof Uint32Array;
      for (let base = 0; base < len; base += BLOCK) {
        const count = Math.min(BLOCK, len - base);
        this.swapIndices(st, base, count, js);
        if (typed) swapBlockU32(a, base, count, js);
        else swapBlock(a, base, count, js);
      }
    } finally {
      spareJs = js;
    }
  }

  /**
   * rand's IncreasingUniform::next_index for Fisher–Yates positions base … base + count − 1: the
   * j ∈ [0, i] for position i goes to out[i − base]. With next_n = i + 1, a fresh chunk is a
   * uniform u32 below next_n · (next_n + 1) · … (as many factors as fit in a u32, at least one),
   * then read out as mixed-radix digits, the last one without a division.
   */
  private swapIndices(st: IncreasingUniformState, base: number, count: number, out: Uint32Array): void {
    let chunk = st.chunk;
    let remaining = st.remaining;
    for (let k = 0; k < count; k++) {
      const nextN = base + k + 1;
      if (remaining === 0) {
        let bound = nextN;
        let cur = nextN + 1;
        while (bound * cur <= U32_MAX) bound *= cur++;
        remaining = cur - nextN;
        chunk = this.uniformU32(bound);
      }
      remaining--;
      if (remaining === 0) {
        out[k] = chunk;
      } else {
        const r = chunk % nextN;
        out[k] = r;
        chunk = (chunk - r) / nextN;
      }
    }
    st.chunk = chunk;
    st.remaining = remaining;
  }
}

/** Swaps a[i] and a[js[i − base]] for i = base … base + count − 1, in order. Monomorphic for Uint32Array. */
function swapBlockU32(a: Uint32Array, base: number, count: number, js: Uint32Array): void {
  for (let k = 0; k < count; k++) {
    const i = base + k;
    const j = js[k]!;
    const t = a[i]!;
    a[i] = a[j]!;
    a[j] = t;
  }
}

/** Same as swapBlockU32 for any indexable array. */
function swapBlock<T>(a: { length: number; [i: number]: T }, base: number, count: number, js: Uint32Array): void {
  for (let k = 0; k < count; k++) {
    const i = base + k;
    const j = js[k]!;
    const t = a[i] as T;
    a[i] = a[j] as T;
    a[j] = t;
  }
}

const GOLDEN = { hi: 0x9e3779b9, lo: 0x7f4a7c15 };
const DERIVE_ADD = { hi: 0x632be59b, lo: 0xd9b4e019 };

/**
 * A seed for one stream of several drawn from one seed (a mixture's parts and windows, a block
 * shuffle's block order and windows): distinct per (seed, a, b, …), so each stream is its own Rng and
 * no stream's values depend on another's calls (the rule at the top of this file).
 */
export function deriveSeed(seed: U64, ...xs: number[]): U64 {
  let h = seed;
  for (const x of xs) h = addU64(mulU64(xorU64(h, toU64(x)), GOLDEN), DERIVE_ADD);
  return h;
}

/**
 * Pick order of one epoch: Rng.seed(seed + epoch, wrapping) shuffles [0, 1, …, n−1].
 * n: integer 0 ≤ n < 2^32 − 1. epoch: non-negative safe integer.
 */
export function epochPermutation(seed: U64 | number | bigint, epoch: number, n: number): Uint32Array {
  if (!Number.isInteger(n) || n < 0 || n >= U32_MAX) {
    throw new RangeError(`epochPermutation needs an integer n with 0 <= n < 2^32 - 1, got n = ${String(n)}`);
  }
  const out = new Uint32Array(n);
  epochPermutationInto(seed, epoch, out);
  return out;
}

/** epochPermutation written into `out` (its length is n): for memory shared with another thread. */
export function epochPermutationInto(seed: U64 | number | bigint, epoch: number, out: Uint32Array): void {
  const n = out.length;
  if (n >= U32_MAX) throw new RangeError(`epochPermutation needs n < 2^32 - 1, got n = ${n}`);
  if (!Number.isSafeInteger(epoch) || epoch < 0) {
    throw new RangeError(`epoch must be a non-negative safe integer, got ${String(epoch)}`);
  }
  const s = addU64(asU64(seed), toU64(epoch));
  for (let i = 0; i < n; i++) out[i] = i;
  Rng.seed(s).shuffle(out);
}
