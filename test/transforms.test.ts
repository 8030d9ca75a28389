// The built-in image transform: keyed per pick, correct geometry and arithmetic, and the same bits
// on every device (cpu, sim, and cuda when a GPU is present).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type AnyTensor, DataLoader, DeviceTensor, PickKey, Tensor, sources, tensor, transforms } from '../src/index.js';
import { cudaAvailable } from '../src/device/cuda/driver.js';
import { fromBFloat16Bits, fromFloat16Bits, toBFloat16Bits, toFloat16Bits } from '../src/tensor/half.js';
import { SUITE_MS } from './fixtures.js';

const DEVICES = ['cpu', 'sim', ...(cudaAvailable() ? ['cuda'] : [])];

async function host(t: AnyTensor): Promise<Tensor> {
  return t instanceof DeviceTensor ? t.toHost() : t;
}

describe('float16 and bfloat16 casts (round to nearest even, as CUDA)', () => {
  it('converts exact values, rounds ties to even, saturates to infinity and keeps subnormals', () => {
    assert.equal(toFloat16Bits(1), 0x3c00);
    assert.equal(toFloat16Bits(-2), 0xc000);
    assert.equal(toFloat16Bits(65504), 0x7bff);
    assert.equal(toFloat16Bits(65520), 0x7c00);
    assert.equal(toFloat16Bits(2 ** -24), 0x0001);
    assert.equal(toFloat16Bits(2 ** -25), 0x0000, 'a tie to even rounds to zero');
    assert.equal(toFloat16Bits(1 + 2 ** -11), 0x3c00, 'tie rounds to even');
    assert.equal(toFloat16Bits(1 + 3 * 2 ** -11), 0x3c02);
    assert.ok(Number.isNaN(fromFloat16Bits(toFloat16Bits(Number.NaN))));
    assert.equal(toBFloat16Bits(1), 0x3f80);
    assert.equal(toBFloat16Bits(1 + 2 ** -8), 0x3f80, 'tie rounds to even');
    assert.equal(toBFloat16Bits(1 + 3 * 2 ** -8), 0x3f82);
    for (const x of [0.5, -3.25, 0.0078125, 200]) {
      assert.equal(fromFloat16Bits(toFloat16Bits(x)), x);
      assert.equal(fromBFloat16Bits(toBFloat16Bits(x)), x);
    }
  });
});

describe('transforms.image on the CPU', () => {
  const image = (n: number, c: number, h: number, w: number) => {
    const data = new Uint8Array(n * c * h * w);
    data.forEach((_, i) => (data[i] = (i * 7) % 251));
    return tensor(data, [n, c, h, w]);
  };
  const keys = (n: number, epoch = 0) => Array.from({ length: n }, (_, i) => new PickKey(i, 0, epoch, 42));

  it('flips rows whose key draws a flip and leaves the others', () => {
    const t = transforms.image({ flip: true });
    const input = image(8, 1, 2, 3);
    const [out] = t([input], keys(8)) as Tensor[];
    const x = input.data as Uint8Array;
    const y = out!.data as Uint8Array;
    let flipped = 0;
    for (let r = 0; r < 8; r++) {
      const flip = keys(8)[r]!.rng().bernoulli(0.5);
      for (let row = 0; row < 2; row++) {
        for (let col = 0; col < 3; col++) {
          assert.equal(y[r * 6 + row * 3 + col], x[r * 6 + row * 3 + (flip ? 2 - col : col)]);
        }
      }
      flipped += flip ? 1 : 0;
    }
    assert.ok(flipped > 0 && flipped < 8);
  });

  it('crops with zero padding at the offsets its keys draw', () => {
    const t = transforms.image({ crop: { size: [4, 4], padding: 2 } });
    const input = image(5, 2, 4, 4);
    const [out] = t([input], keys(5)) as Tensor[];
    const x = input.data as Uint8Array;
    const y = out!.data as Uint8Array;
    assert.deepEqual(out!.shape, [5, 2, 4, 4]);
    for (let r = 0; r < 5; r++) {
      const rng = keys(5)[r]!.rng();
      const oy = rng.below(5) - 2;
      const ox = rng.below(5) - 2;
      for (let c = 0; c < 2; c++) {
        for (let yy = 0; yy < 4; yy++) {
          for (let xx = 0; xx < 4; xx++) {
            const sy = yy + oy;
            const sx = xx + ox;
            const expected = sy < 0 || sy >= 4 || sx < 0 || sx >= 4 ? 0 : x[((r * 2 + c) * 4 + sy) * 4 + sx];
            assert.equal(y[((r * 2 + c) * 4 + yy) * 4 + xx], expected);
          }
        }
      }
    }
  });

  it('normalizes per channel in float32 and casts to float16 and bfloat16', () => {
    const input = image(2, 3, 2, 2);
    const normalize = { mean: [0.5, 0.25, 0.125], std: [0.5, 0.25, 2] };
    const [f32] = transforms.image({ normalize })([input], keys(2)) as Tensor[];
    const [f16] = transforms.image({ normalize, output: 'float16' })([input], keys(2)) as Tensor[];
    const [bf16] = transforms.image({ normalize, output: 'bfloat16' })([input], keys(2)) as Tensor[];
    const x = input.data as Uint8Array;
    (f32!.data as Float32Array).forEach((v, i) => {
      const c = Math.floor(i / 4) % 3;
      const expected = (x[i]! / 255 - normalize.mean[c]!) / normalize.std[c]!;
      assert.ok(Math.abs(v - expected) < 1e-5, `${v} vs ${expected}`);
      assert.equal((f16!.data as Uint16Array)[i], toFloat16Bits(v));
      assert.equal((bf16!.data as Uint16Array)[i], toBFloat16Bits(v));
    });
    assert.equal(f16!.dtype, 'float16');
    assert.equal(bf16!.dtype, 'bfloat16');
  });

  it('a normalize of one mean and one std applies to every channel (torchvision broadcasts a list of one); other lengths are refused by name', () => {
    const input = image(2, 3, 2, 2);
    const [one] = transforms.image({ normalize: { mean: [0.5], std: [0.25] } })([input], keys(2)) as Tensor[];
    const [three] = transforms.image({ normalize: { mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25] } })([input], keys(2)) as Tensor[];
    assert.deepEqual(one!.data, three!.data);
    const two = transforms.image({ normalize: { mean: [0.5, 0.5], std: [0.25] } });
    assert.throws(() => two([input], keys(2)), { code: 'ERR_INVALID_OPTION', message: /normalize\.mean has 2 values for images of 3 channels/ });
    assert.throws(() => transforms.image({ normalize: { mean: [0.5], std: [] } }), { code: 'ERR_INVALID_OPTION', message: /normalize\.std must be an array of finite numbers/ });
  });

  it('gives each (seed, epoch, sample, repeat) the same view, and other epochs other views', () => {
    const t = transforms.image({ crop: { padding: 4 }, flip: true });
    const input = image(16, 3, 8, 8);
    const a = (t([input], keys(16, 3)) as Tensor[])[0]!.data;
    const b = (t([input], keys(16, 3)) as Tensor[])[0]!.data;
    const c = (t([input], keys(16, 4)) as Tensor[])[0]!.data;
    assert.deepEqual(a, b);
    assert.notDeepEqual(a, c);
  });

  it('refuses a non-uint8 field, a crop larger than the padded image and normalize into uint8', () => {
    assert.throws(() => transforms.image({})([tensor(new Float32Array(4), [1, 1, 2, 2])], keys(1)), { code: 'ERR_INVALID_OPTION', message: /must be uint8 \[N, C, H, W\]/ });
    assert.throws(() => transforms.image({ crop: { size: [9, 9], padding: 0 } })([image(1, 1, 8, 8)], keys(1)), { code: 'ERR_INVALID_OPTION', message: /must fit the padded image/ });
    assert.throws(() => transforms.image({ normalize: { mean: [0], std: [1] }, output: 'uint8' }), { code: 'ERR_INVALID_OPTION' });
  });
});

describe('transforms.image gives the same bits on every device', { timeout: SUITE_MS }, () => {
  for (const output of ['uint8', 'float32', 'float16', 'bfloat16'] as const) {
    it(`agrees across ${DEVICES.join(', ')} (${output})`, async () => {
      const n = 40;
      const data = new Uint8Array(n * 3 * 8 * 8);
      data.forEach((_, i) => (data[i] = (i * 31 + 7) % 256));
      const ds = sources.arrays({ image: tensor(data, [n, 3, 8, 8]), label: Int32Array.from({ length: n }, (_, i) => i) });
      const transform = transforms.image({
        crop: { size: [6, 7], padding: 2 }, flip: true, output,
        ...(output === 'uint8' ? {} : { normalize: { mean: [0.49, 0.48, 0.45], std: [0.25, 0.24, 0.26] } }),
      });
      const results: string[] = [];
      for (const device of DEVICES) {
        const loader = await DataLoader.create(ds, { batchSize: 8, device, augment: 2, transform, seed: 9 });
        const chunks: string[] = [];
        for await (const b of loader.epoch(1)) {
          const img = await host(b.get('image'));
          assert.equal(img.dtype, output);
          assert.deepEqual(img.shape, [8, 3, 6, 7]);
          chunks.push(Buffer.from(img.bytes()).toString('hex'));
        }
        results.push(chunks.join(''));
        await loader.close();
      }
      for (let d = 1; d < results.length; d++) assert.ok(results[d] === results[0], `${DEVICES[d]} differs from cpu`);
    });
  }
});
