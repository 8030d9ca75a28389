// The decode route (`decode: 'gpu'`) on a real GPU: a loader over an image folder decodes with
// nvJPEG into the batch's device memory — every pick exactly once, each row within ±1 level of the
// CPU decoder cut by the pick's own box and the same resampler (docs/gpu-decode.md's tolerance),
// PNG / CMYK / progressive files decoded on the CPU into their rows, a corrupt file failing only its
// batch, 'auto' taking the route on CUDA, and a center-crop view ('eval') within one level of
// torchvision's own pixels (where a Python with torchvision is found: the GPU machine's python3).
// Skipped, with the reason, without a GPU or libnvjpeg.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import sharp from 'sharp';
import { type AnyTensor, type Batch, DataLoader, DeviceTensor, sources } from '../../src/index.js';
import { decodeImage } from '../../src/image/image-decode.js';
import { cudaAvailable } from '../../src/device/cuda/driver.js';
import { nvjpegAvailable } from '../../src/device/cuda/nvjpeg-lib.js';
import { type JpegBatchOutput, type JpegBox, checkOutput } from '../../src/image/jpeg-plan.js';
import { cropResize, encodeRow } from '../../src/image/jpeg-resample.js';
import { PickKey } from '../../src/sampler/pick-key.js';
import { boxFor, viewFrom } from '../../src/image/crop-box.js';
import { centerCropResize } from '../../src/image/view-resample.js';
import { awkwardFiles, baselineJpeg, classPerFile } from '../fixtures/jpegs.js';
import { evalViewAgainstTorchvision, torchvisionSkip } from '../fixtures/torchvision.js';

const skip = !cudaAvailable() ? 'no CUDA GPU here' : !nvjpegAvailable() ? 'libnvjpeg not found (see docs/gpu-decode.md)' : false;
const SUITE_MS = 180_000;
const SIZE: [number, number] = [64, 56];

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const folder = (files: readonly { bytes: Uint8Array; ext: string }[]) => classPerFile(files, dirs, 'stoker-cuda-decode-');

async function hostOf(b: Batch<AnyTensor>, key: string) {
  const t = b.get(key);
  return t instanceof DeviceTensor ? await t.toHost() : t;
}

async function epochRows(loader: DataLoader<AnyTensor>, e: number): Promise<{ labels: number[]; rows: Uint8Array[] }> {
  const labels: number[] = [];
  const rows: Uint8Array[] = [];
  for await (const b of loader.epoch(e)) {
    const label = (await hostOf(b, 'label')).data as Int32Array;
    const bytes = (await hostOf(b, 'image')).bytes();
    const rowBytes = bytes.byteLength / label.length;
    for (let r = 0; r < label.length; r++) {
      labels.push(label[r]!);
      rows.push(bytes.slice(r * rowBytes, (r + 1) * rowBytes));
    }
  }
  return { labels, rows };
}

async function referenceRow(bytes: Uint8Array, box: JpegBox, out: Omit<JpegBatchOutput, 'ptr' | 'rowBytes'>): Promise<Uint8Array> {
  const info = await sharp(bytes).metadata();
  const full = await decodeImage(bytes, { size: [info.height!, info.width!], fit: 'resize', layout: 'hwc', source: 'reference' });
  const o = { ...out, ptr: 0n, rowBytes: 1 << 30 };
  return encodeRow(cropResize(full.data, info.width! * 3, box, out.size[0], out.size[1], { width: info.width!, height: info.height! }), o, checkOutput(o));
}

function maxDiff(a: Uint8Array, b: Uint8Array): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

describe("decode: 'gpu' on CUDA (nvJPEG into the batch)", { skip, timeout: SUITE_MS }, () => {
  it('every pick once; each row within ±1 of the CPU decoder on the pick’s RandomResizedCrop box; fallback files on the CPU', async () => {
    const odd = await awkwardFiles();
    const files: { bytes: Uint8Array; ext: string }[] = [];
    for (let i = 0; i < 37; i++) files.push({ bytes: (await baselineJpeg(120 + 7 * i, 90 + 5 * (i % 7), i)).bytes, ext: '.jpg' });
    files.splice(5, 0, { bytes: odd.png.bytes, ext: '.png' });
    files.splice(17, 0, { bytes: odd.cmyk.bytes, ext: '.jpg' });
    files.splice(29, 0, { bytes: odd.progressive.bytes, ext: '.jpg' });
    const root = folder(files);
    const seed = 3;
    const loader = await DataLoader.create(sources.imageFolder(root, { size: SIZE, view: 'train', decode: 'gpu' }), { device: 'cuda', batchSize: 8, seed, shuffle: true, dropLast: false });
    try {
      const view = viewFrom('train');
      for (const e of [0, 1]) {
        const { labels, rows } = await epochRows(loader, e);
        assert.deepEqual(sorted(labels), Array.from({ length: files.length }, (_, i) => i), `epoch ${e}: every sample once`);
        for (let r = 0; r < labels.length; r++) {
          const id = labels[r]!;
          const bytes = files[id]!.bytes;
          const meta = await sharp(bytes).metadata();
          const box = boxFor(view, new PickKey(id, 0, e, seed), meta.width!, meta.height!);
          const want = await referenceRow(bytes, box, { layout: 'chw', dtype: 'uint8', size: SIZE });
          // CMYK is converted by Pillow's formula on the CPU path; the GPU hands it back, so it is the CPU row exactly.
          assert.ok(maxDiff(rows[r]!, want) <= 1, `epoch ${e} sample ${id}: max difference ${maxDiff(rows[r]!, want)} levels`);
        }
      }
      assert.equal(loader.stats().epochs[0]!.route, 'decode');
    } finally {
      await loader.close();
    }
  });

  it('bf16 normalized rows equal the uint8 rows normalized (the same pixels), and a corrupt file fails only its batch', async () => {
    const odd = await awkwardFiles();
    const files: { bytes: Uint8Array; ext: string }[] = [];
    for (let i = 0; i < 12; i++) files.push({ bytes: (await baselineJpeg(200, 150, i)).bytes, ext: '.jpg' });
    files.splice(6, 0, { bytes: odd.garbage.bytes, ext: '.jpg' });
    const root = folder(files);
    const normalize = { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] };
    const loader = await DataLoader.create(sources.imageFolder(root, { size: SIZE, view: 'eval', normalize, output: 'bfloat16', decode: 'gpu' }), { device: 'cuda', batchSize: 4, shuffle: false, dropLast: false, errors: 'skip' });
    try {
      const { labels, rows } = await epochRows(loader, 0);
      assert.deepEqual(labels, [0, 1, 2, 3, 8, 9, 10, 11, 12], 'batch 1 (samples 4–7, with the corrupt c06) skipped');
      const s = loader.stats().epochs[0]!;
      assert.equal(s.skippedBatches, 1);
      assert.match(s.skipped[0]!.reason, /c06/);
      const view = viewFrom('eval') as Extract<ReturnType<typeof viewFrom>, { kind: 'center-crop' }>;
      for (let r = 0; r < labels.length; r++) {
        const id = labels[r]!;
        // The eval view's box with the Pillow resize the route computes (NOTE [eval on the GPU]).
        const box = { ...boxFor(view, new PickKey(id, 0, 0, 0), 200, 150), pil: centerCropResize(view, 200, 150, SIZE[1], SIZE[0]) };
        const want = await referenceRow(files[id]!.bytes, box, { layout: 'chw', dtype: 'bfloat16', size: SIZE, ...normalize });
        const got = new Uint16Array(rows[r]!.buffer);
        const exp = new Uint16Array(want.buffer);
        let worst = 0;
        const f = (bits: number) => new Float32Array(new Uint32Array([bits << 16]).buffer)[0]!;
        for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(f(got[i]!) - f(exp[i]!)));
        // ±1 level is 1 / (255 · 0.224) ≈ 0.0175 after normalize, plus bf16 rounding (≤ 2^-7 relative of |v| ≤ 2.7).
        assert.ok(worst <= 0.04, `sample ${id}: worst difference ${worst}`);
      }
    } finally {
      await loader.close();
    }
  });

  it("decode 'auto' takes the GPU route on CUDA, 'cpu' does not", async () => {
    const files = await Promise.all([0, 1, 2, 3].map(async (i) => ({ bytes: (await baselineJpeg(100, 80, i)).bytes, ext: '.jpg' })));
    const root = folder(files);
    for (const [decode, route] of [['auto', 'decode'], [undefined, 'decode'], ['cpu', 'staged']] as const) {
      const loader = await DataLoader.create(sources.imageFolder(root, { size: SIZE, ...(decode ? { decode } : {}) }), { device: 'cuda', batchSize: 2, workers: 0 });
      try {
        const { labels } = await epochRows(loader, 0);
        assert.deepEqual(sorted(labels), [0, 1, 2, 3]);
        assert.equal(loader.stats().epochs[0]!.route, route, `decode ${decode}`);
      } finally {
        await loader.close();
      }
    }
  });
});

describe("decode: 'gpu' on CUDA, a center-crop view: torchvision's pixels", { skip: skip || torchvisionSkip, timeout: SUITE_MS }, () => {
  it("view 'eval' rows are within one level of torchvision's Resize(256) + CenterCrop(224) (and a flipped center crop scaled to 96, of PIL's resize of its box), enlarged images among them", async (t) => {
    const { mean, worst } = await evalViewAgainstTorchvision('cuda', t, dirs);
    // nvJPEG's pixels are libjpeg-turbo's within 1 (docs/gpu-decode.md), and each of Pillow's passes is a weighted mean.
    assert.ok(worst.max <= 1, `max |Δ| ${worst.max} against torchvision (${worst.what})`);
    assert.ok(mean <= 0.01, `mean |Δ| ${mean.toFixed(4)} against torchvision`);
  });
});
