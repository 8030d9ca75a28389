import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  Rng,
  addU64,
  epochPermutation,
  mulU64,
  shrU64,
  toU64,
  u64ToBigInt,
  xorU64,
  type U64,
} from './rng.js';

// ---------------------------------------------------------------------------------------------
// Straightforward BigInt reference of the spec (rand 0.10 SmallRng + SliceRandom::shuffle).
// Written independently of the 32-bit fast path so that a bug there cannot pass.
// ---------------------------------------------------------------------------------------------

const MASK = (1n << 64n) - 1n;
const U32 = 0xffffffffn;

const rotl = (x: bigint, k: bigint): bigint => ((x << k) | (x >> (64n - k))) & MASK;

class RefRng {
  private s: [bigint, bigint, bigint, bigint];

  constructor(seed: bigint) {
    let state = seed & MASK;
    const out: bigint[] = [];
    for (let i = 0; i < 4; i++) {
      state = (state + 0x9e3779b97f4a7c15n) & MASK;
      let z = state;
      z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
      z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
      z = z ^ (z >> 31n);
      out.push(z);
    }
    this.s = [out[0]!, out[1]!, out[2]!, out[3]!];
  }

  nextU64(): bigint {
    const s = this.s;
    const res = (rotl((s[0] + s[3]) & MASK, 23n) + s[0]) & MASK;
    const t = (s[1] << 17n) & MASK;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45n);
    return res;
  }

  nextU32(): bigint {
    return this.nextU64() >> 32n;
  }

  /** rand's u32 sample_single_inclusive(0, bound - 1), Canon's method, biased variant. */
  uniformU32(bound: bigint): bigint {
    const range = bound & U32; // 2^32 wraps to 0: full range
    if (range === 0n) return this.nextU32();
    const p = this.nextU32() * range;
    let result = p >> 32n;
    const lo = p & U32;
    if (lo > ((-range) & U32)) {
      const hi2 = (this.nextU32() * range) >> 32n;
      if (lo + hi2 > U32) result += 1n;
    }
    return result;
  }

  /** rand's SliceRandom::shuffle with IncreasingUniform, transcribed as literally as possible. */
  shuffle<T>(a: T[] | Uint32Array): void {
    const len = a.length;
    if (len <= 1) return;
    let n = 0n;
    let chunk = 0n;
    let chunkRemaining = 1n; // IncreasingUniform::new(rng, 0)
    for (let i = 0; i < len; i++) {
      const nextN = n + 1n;
      let nextChunkRemaining: bigint;
      if (chunkRemaining === 0n) {
        // calculate_bound_u32(next_n)
        let product = nextN;
        let current = nextN + 1n;
        while (product * current <= U32) {
          product *= current;
          current += 1n;
        }
        const count = current - nextN;
        chunk = this.uniformU32(product);
        nextChunkRemaining = count - 1n;
      } else {
        nextChunkRemaining = chunkRemaining - 1n;
      }
      let j: bigint;
      if (nextChunkRemaining === 0n) {
        j = chunk;
      } else {
        j = chunk % nextN;
        chunk = chunk / nextN;
      }
      chunkRemaining = nextChunkRemaining;
      n = nextN;
      const jj = Number(j);
      const t = a[i]!;
      a[i] = a[jj]!;
      a[jj] = t;
    }
  }
}

const big = (x: U64): bigint => u64ToBigInt(x);
const fromBig = (x: bigint): U64 => ({ hi: Number((x >> 32n) & U32), lo: Number(x & U32) });

const EDGE_U64: bigint[] = [
  0n, 1n, 2n, 0x7fffffffn, 0x80000000n, U32, 1n << 32n, (1n << 32n) + 1n, 0xffffffff00000000n,
  (1n << 53n) - 1n, 1n << 53n, 1n << 63n, (1n << 63n) - 1n, MASK, MASK - 1n,
  0x9e3779b97f4a7c15n, 0xbf58476d1ce4e5b9n, 0x94d049bb133111ebn, 0x0000ffff0000ffffn, 0xffff0000ffff0000n,
  // low halves whose product a double rounds up across a multiple of 2^32 (e.g. fffffffe × 80000001)
  0xfffffffen, 0xfffffffcn, 0x80000001n, 0xc0000001n, 0x12345678fffffff8n,
];

function randomU64s(count: number, seed: bigint): bigint[] {
  const r = new RefRng(seed);
  const out: bigint[] = [];
  for (let i = 0; i < count; i++) {
    const v = r.nextU64();
    // mix in sparse values too: short words exercise carries and zero halves
    out.push(i % 4 === 0 ? v >> BigInt(i % 64) : v);
  }
  return out;
}

const iota = (n: number): Uint32Array => Uint32Array.from({ length: n }, (_, i) => i);

describe('Rng seeding and raw draws', () => {
  it('reproduces rand’s golden next_u64 values for seed_from_u64(0)', () => {
    const expected = [
      5987356902031041503n, 7051070477665621255n, 6633766593972829180n, 211316841551650330n,
      9136120204379184874n, 379361710973160858n, 15813423377499357806n, 15596884590815070553n,
      5439680534584881407n, 1369371744833522710n,
    ];
    const r = Rng.seed(0);
    for (const e of expected) assert.equal(r.nextU64(), e);
  });

  it('returns the high half of next_u64 from nextU32, and the same words from nextU64Into', () => {
    const a = Rng.seed(0);
    const b = Rng.seed(0);
    const c = Rng.seed(0);
    const buf = new Uint32Array(2);
    for (let i = 0; i < 1000; i++) {
      const v = a.nextU64();
      const u = b.nextU32();
      c.nextU64Into(buf);
      assert.equal(BigInt(u), v >> 32n);
      assert.ok(u >= 0 && Number.isInteger(u));
      assert.equal((BigInt(buf[0]!) << 32n) | BigInt(buf[1]!), v);
    }
  });

  it('matches a BigInt reference of SplitMix64 + xoshiro256++ for many seeds, including seeds of 2^53 and above', () => {
    const seeds: Array<number | bigint> = [
      0, 1, 2, 42, 0xffffffff, 2 ** 32, 2 ** 32 + 1, Number.MAX_SAFE_INTEGER,
      2n ** 53n, 2n ** 63n, 2n ** 64n - 1n, 0xdeadbeefcafebaben,
      ...randomU64s(40, 7n),
    ];
    for (const seed of seeds) {
      const fast = Rng.seed(seed);
      const ref = new RefRng(BigInt(seed));
      const buf = new Uint32Array(2);
      for (let i = 0; i < 2000; i++) {
        fast.nextU64Into(buf);
        const got = (BigInt(buf[0]!) << 32n) | BigInt(buf[1]!);
        const want = ref.nextU64();
        if (got !== want) assert.fail(`seed ${seed}, draw ${i}: got ${got}, want ${want}`);
      }
    }
  });

  it('gives the same stream for a seed passed as number, bigint or U64, and takes bigints mod 2^64', () => {
    const seq = (r: Rng): bigint[] => Array.from({ length: 8 }, () => r.nextU64());
    assert.deepEqual(seq(Rng.seed(123456789)), seq(Rng.seed(123456789n)));
    assert.deepEqual(seq(Rng.seed(123456789)), seq(Rng.seed({ hi: 0, lo: 123456789 })));
    assert.deepEqual(seq(Rng.seed(2n ** 64n + 5n)), seq(Rng.seed(5)));
    assert.deepEqual(seq(Rng.seed(fromBig(2n ** 64n - 1n))), seq(Rng.seed(2n ** 64n - 1n)));
    assert.throws(() => Rng.seed({ hi: 2 ** 32, lo: 0 }), RangeError);
    assert.throws(() => Rng.seed({ hi: 0, lo: -1 }), RangeError);
  });
});

describe('32-bit-halves arithmetic', () => {
  const values = [...EDGE_U64, ...randomU64s(300, 99n)];

  it('adds, multiplies and xors mod 2^64 exactly like BigInt on edge and random values', () => {
    for (const a of values) {
      for (const b of values) {
        const A = fromBig(a);
        const B = fromBig(b);
        const add = big(addU64(A, B));
        const mul = big(mulU64(A, B));
        const xor = big(xorU64(A, B));
        if (add !== ((a + b) & MASK)) assert.fail(`add ${a} ${b}: ${add}`);
        if (mul !== ((a * b) & MASK)) assert.fail(`mul ${a} ${b}: ${mul}`);
        if (xor !== (a ^ b)) assert.fail(`xor ${a} ${b}: ${xor}`);
      }
    }
  });

  it('returns halves that are uint32 numbers', () => {
    const r = mulU64(fromBig(MASK), fromBig(MASK));
    assert.deepEqual(r, { hi: 0, lo: 1 });
    const s = addU64(fromBig(MASK), fromBig(1n));
    assert.deepEqual(s, { hi: 0, lo: 0 });
    const x = xorU64(fromBig(MASK), fromBig(0n));
    assert.deepEqual(x, { hi: 0xffffffff, lo: 0xffffffff });
  });

  it('shifts right logically by every amount 0..63 like BigInt, and rejects other amounts', () => {
    for (const a of values) {
      for (let k = 0; k < 64; k++) {
        const got = big(shrU64(fromBig(a), k));
        if (got !== a >> BigInt(k)) assert.fail(`shr ${a} by ${k}: ${got}`);
      }
    }
    assert.throws(() => shrU64(fromBig(1n), 64), RangeError);
    assert.throws(() => shrU64(fromBig(1n), -1), RangeError);
  });
});

describe('toU64', () => {
  it('rejects -1, 1.5, 2**53 and NaN with RangeError', () => {
    for (const bad of [-1, 1.5, 2 ** 53, NaN, Infinity]) assert.throws(() => toU64(bad), RangeError, String(bad));
    assert.throws(() => toU64(-1n), RangeError);
  });

  it('accepts safe integers and bigints up to 2^64 - 1', () => {
    assert.deepEqual(toU64(2n ** 64n - 1n), { hi: 0xffffffff, lo: 0xffffffff });
    assert.deepEqual(toU64(Number.MAX_SAFE_INTEGER), { hi: 0x1fffff, lo: 0xffffffff });
    assert.deepEqual(toU64(0), { hi: 0, lo: 0 });
    assert.equal(u64ToBigInt(toU64(2n ** 63n + 17n)), 2n ** 63n + 17n);
  });
});

describe('shuffle', () => {
  it('matches a BigInt reference of rand’s shuffle for many lengths and seeds, and consumes the same draws', () => {
    const cases: Array<[number, bigint]> = [];
    for (const seed of [0n, 1n, 12345n, 2n ** 64n - 1n]) {
      for (const len of [0, 1, 2, 3, 4, 10, 13, 14, 100, 1000]) cases.push([len, seed]);
    }
    cases.push([100_000, 0n], [100_000, 0xfeedfacen]);
    for (const [len, seed] of cases) {
      const fast = Rng.seed(seed);
      const ref = new RefRng(seed);
      const got = iota(len);
      const want = iota(len);
      fast.shuffle(got);
      ref.shuffle(want);
      assert.deepEqual(got, want, `len ${len}, seed ${seed}`);
      assert.equal(fast.nextU64(), ref.nextU64(), `stream after shuffle, len ${len}, seed ${seed}`);
    }
  });

  it('leaves lengths 0 and 1 untouched without drawing', () => {
    const r = Rng.seed(9);
    const one = ['x'];
    r.shuffle([]);
    r.shuffle(one);
    assert.deepEqual(one, ['x']);
    assert.equal(r.nextU64(), Rng.seed(9).nextU64());
  });

  it('permutes plain arrays and any typed array the same way as a Uint32Array', () => {
    const n = 500;
    const want = iota(n);
    Rng.seed(77).shuffle(want);
    const strings = Array.from({ length: n }, (_, i) => `s${i}`);
    Rng.seed(77).shuffle(strings);
    assert.deepEqual(strings, Array.from(want, (i) => `s${i}`));
    const floats = Float64Array.from({ length: n }, (_, i) => i + 0.5);
    Rng.seed(77).shuffle(floats);
    assert.deepEqual(Array.from(floats), Array.from(want, (i) => i + 0.5));
  });

  it('refuses lengths of 2^32 - 1 and above', () => {
    assert.throws(() => Rng.seed(0).shuffle({ length: 2 ** 32 - 1 } as unknown as number[]), RangeError);
  });
});

describe('epochPermutation', () => {
  const isPermutation = (p: Uint32Array): boolean => {
    const seen = new Uint8Array(p.length);
    for (const v of p) {
      if (v >= p.length || seen[v]) return false;
      seen[v] = 1;
    }
    return true;
  };

  it('returns a permutation of 0..n-1 equal to the reference shuffle of Rng.seed(seed + epoch)', () => {
    for (const n of [0, 1, 2, 5, 1000, 70_000]) {
      const p = epochPermutation(42, 3, n);
      assert.equal(p.length, n);
      assert.ok(isPermutation(p));
      const want = iota(n);
      new RefRng(45n).shuffle(want);
      assert.deepEqual(p, want);
    }
  });

  it('is reproducible for the same (seed, epoch) and differs across epochs and seeds', () => {
    const a = epochPermutation(7, 0, 1000);
    assert.deepEqual(epochPermutation(7, 0, 1000), a);
    assert.deepEqual(epochPermutation(7n, 0, 1000), a);
    assert.notDeepEqual(epochPermutation(7, 1, 1000), a);
    assert.notDeepEqual(epochPermutation(8, 1000, 1000), a);
    assert.notDeepEqual(epochPermutation(2n ** 60n, 0, 1000), a);
  });

  it('wraps seed + epoch mod 2^64', () => {
    assert.deepEqual(epochPermutation(2n ** 64n - 1n, 1, 1000), epochPermutation(0, 0, 1000));
    assert.deepEqual(epochPermutation({ hi: 0xffffffff, lo: 0xfffffffe }, 5, 300), epochPermutation(3, 0, 300));
  });

  it('rejects a bad n or epoch with RangeError', () => {
    assert.throws(() => epochPermutation(0, 0, -1), RangeError);
    assert.throws(() => epochPermutation(0, 0, 1.5), RangeError);
    assert.throws(() => epochPermutation(0, 0, 2 ** 32 - 1), RangeError);
    assert.throws(() => epochPermutation(0, -1, 10), RangeError);
    assert.throws(() => epochPermutation(0, 0.5, 10), RangeError);
  });
});

describe('derived draws', () => {
  it('computes f64 and f32 from the top bits of the stream and keeps them in [0, 1)', () => {
    const r = Rng.seed(5);
    const ref = new RefRng(5n);
    for (let i = 0; i < 20_000; i++) {
      const x = r.f64();
      assert.ok(x >= 0 && x < 1);
      assert.equal(x, Number(ref.nextU64() >> 11n) * 2 ** -53);
      const y = r.f32();
      assert.ok(y >= 0 && y < 1);
      assert.equal(y, Number(ref.nextU64() >> 40n) * 2 ** -24);
    }
  });

  it('draws below(n) exactly as rand’s u32 random_range(0..n) for small, large and extreme n', () => {
    const ns = [1, 2, 3, 7, 10, 1000, 65_537, 2 ** 31, 2 ** 31 + 1, 3_000_000_019, 2 ** 32 - 5, 2 ** 32 - 1, 2 ** 32];
    for (const n of ns) {
      const r = Rng.seed(n);
      const ref = new RefRng(BigInt(n));
      for (let i = 0; i < 2000; i++) {
        const got = r.below(n);
        const want = Number(ref.uniformU32(BigInt(n)));
        if (got !== want) assert.fail(`below(${n}) draw ${i}: got ${got}, want ${want}`);
        assert.ok(got >= 0 && got < n);
      }
    }
  });

  it('spreads below(n) roughly uniformly (loose chi-square)', () => {
    const r = Rng.seed(2024);
    const n = 10;
    const draws = 100_000;
    const counts = new Array<number>(n).fill(0);
    for (let i = 0; i < draws; i++) counts[r.below(n)]!++;
    const expected = draws / n;
    const chi2 = counts.reduce((s, c) => s + (c - expected) ** 2 / expected, 0);
    assert.ok(chi2 < 40, `chi-square ${chi2} with 9 degrees of freedom`);
  });

  it('rejects below(0), below(2**32 + 1) and below(1.5) with RangeError', () => {
    const r = Rng.seed(0);
    for (const bad of [0, 2 ** 32 + 1, 1.5, -3, NaN]) assert.throws(() => r.below(bad), RangeError, String(bad));
  });

  it('draws int(lo, hi) within [lo, hi) covering both ends, and rejects empty or too wide ranges', () => {
    const r = Rng.seed(11);
    const seen = new Set<number>();
    for (let i = 0; i < 10_000; i++) {
      const v = r.int(-3, 4);
      assert.ok(Number.isInteger(v) && v >= -3 && v < 4);
      seen.add(v);
    }
    assert.equal(seen.size, 7);
    const big = r.int(2 ** 40, 2 ** 40 + 2 ** 32);
    assert.ok(big >= 2 ** 40 && big < 2 ** 40 + 2 ** 32);
    assert.equal(Rng.seed(3).int(100, 107), 100 + Rng.seed(3).below(7));
    assert.throws(() => r.int(5, 5), RangeError);
    assert.throws(() => r.int(0, 2 ** 32 + 1), RangeError);
    assert.throws(() => r.int(0.5, 3), RangeError);
  });

  it('makes bernoulli(p) true about p of the time, never for p = 0 and always for p = 1', () => {
    const r = Rng.seed(12);
    let hits = 0;
    for (let i = 0; i < 100_000; i++) if (r.bernoulli(0.3)) hits++;
    assert.ok(Math.abs(hits / 100_000 - 0.3) < 0.01, `rate ${hits / 100_000}`);
    for (let i = 0; i < 1000; i++) {
      assert.equal(r.bernoulli(0), false);
      assert.equal(r.bernoulli(1), true);
    }
    assert.throws(() => r.bernoulli(1.5), RangeError);
    assert.throws(() => r.bernoulli(NaN), RangeError);
  });

  it('draws normal(mean, std) with about the requested mean and spread', () => {
    const r = Rng.seed(13);
    const draws = 100_000;
    let sum = 0;
    let sumSq = 0;
    for (let i = 0; i < draws; i++) {
      const z = r.normal(2, 3);
      assert.ok(Number.isFinite(z));
      sum += z;
      sumSq += z * z;
    }
    const mean = sum / draws;
    const std = Math.sqrt(sumSq / draws - mean * mean);
    assert.ok(Math.abs(mean - 2) < 0.05, `mean ${mean}`);
    assert.ok(Math.abs(std - 3) < 0.05, `std ${std}`);
    // defaults are mean 0, std 1; each call consumes exactly two u64 draws
    const a = Rng.seed(1);
    const b = Rng.seed(1);
    const z = a.normal();
    const u1 = 1 - b.f64();
    const u2 = b.f64();
    assert.equal(z, Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2));
    assert.equal(a.nextU64(), b.nextU64());
    assert.throws(() => r.normal(0, -1), RangeError);
  });
});

// Speed (quick performance.now measurement outside the tests; Node 20.20, 2-vCPU Xeon VM, warm JIT):
//   Rng.seed(i) + 4 × nextU32 (or 4 × f64): ≈ 80–90 ns;  nextU32 alone: ≈ 5.5 ns
//   epochPermutation(seed, epoch, 1_000_000): ≈ 17–28 ms;  10_000_000: ≈ 280 ms
