// The decode route (`decode: 'gpu'`, src/pipeline/assemble/decode/decode.ts) on the sim device, whose JPEG
// decoder is the CPU behind the GPU decoder's interface: every pick exactly once, rows equal to the
// reference resampler on the pick's own box (and close to the CPU route's rows), the files the GPU
// hands back (PNG, CMYK, progressive) decoded on the CPU into the same rows, a file neither can read
// failing only its batch under `errors`, the `decode` option's errors, 'auto' staying on the CPU on
// 'cpu' and 'sim', resume, and closing with reads and decodes in flight; and a center-crop view
// ('eval') giving torchvision's pixels (where a Python with torchvision is found).

import assert from 'node:assert/strict';
import { rmSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { type AnyTensor, BatchError, DataLoader, DeviceTensor, LoaderError, sources, type Batch } from '../src/index.js';
import { decodeImage } from '../src/image/image-decode.js';
import { type JpegBatchOutput, checkOutput } from '../src/image/jpeg-plan.js';
import { cropResize, encodeRow } from '../src/image/jpeg-resample.js';
import { fitBox } from '../src/pipeline/assemble/decode/decode.js';
import { decodeRoute } from '../src/pipeline/build.js';
import type { Device } from '../src/device/device.js';
import { PickKey } from '../src/sampler/pick-key.js';
import { boxFor, viewFrom } from '../src/image/crop-box.js';
import { awkwardFiles, baselineJpeg, classPerFile } from './fixtures/jpegs.js';
import { HANG_MS, waitFor, within } from './fixtures.js';
import { evalViewAgainstTorchvision, torchvisionSkip } from './fixtures/torchvision.js';
import { liveJpegThreads } from '../src/device/jpeg/jpeg-slots.js';
import { defaultReaders, liveReaderThreads } from '../src/pipeline/assemble/decode/decode-reads.js';

const SUITE_MS = 120_000;
const SIZE: [number, number] = [16, 20];
const NORMALIZE = { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] };

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const folder = (files: readonly { bytes: Uint8Array; ext: string }[]) => classPerFile(files, dirs, 'stoker-gpu-decode-');

async function jpegFolder(n: number): Promise<{ root: string; files: Uint8Array[] }> {
  const files: Uint8Array[] = [];
  for (let i = 0; i < n; i++) files.push((await baselineJpeg(40 + 3 * i, 30 + 2 * (i % 5), i)).bytes);
  return { root: folder(files.map((bytes) => ({ bytes, ext: '.jpg' }))), files };
}

async function hostOf(b: Batch<AnyTensor>, key: string) {
  const t = b.get(key);
  return t instanceof DeviceTensor ? await t.toHost() : t;
}

/** Every batch of epoch `e`: labels, image rows (raw bytes per row), in delivery order. */
async function epochRows(loader: DataLoader<AnyTensor>, e: number, limit = Infinity): Promise<{ labels: number[]; rows: Uint8Array[] }> {
  const labels: number[] = [];
  const rows: Uint8Array[] = [];
  let k = 0;
  for await (const b of loader.epoch(e)) {
    const label = (await hostOf(b, 'label')).data as Int32Array;
    const image = await hostOf(b, 'image');
    const bytes = image.bytes();
    const rowBytes = bytes.byteLength / label.length;
    for (let r = 0; r < label.length; r++) {
      labels.push(label[r]!);
      rows.push(bytes.slice(r * rowBytes, (r + 1) * rowBytes));
    }
    if (++k === limit) break;
  }
  return { labels, rows };
}

/** Row of the reference resampler (what the GPU kernel writes) for `bytes` cut by `box`. */
async function referenceRow(bytes: Uint8Array, box: Parameters<typeof cropResize>[2], out: Omit<JpegBatchOutput, 'ptr' | 'rowBytes'>): Promise<Uint8Array> {
  const sharp = (await import('sharp')).default;
  const info = await sharp(bytes).metadata();
  const full = await decodeImage(bytes, { size: [info.height, info.width], fit: 'resize', layout: 'hwc', source: 'reference' });
  const o = { ...out, ptr: 0n, rowBytes: 0 };
  return encodeRow(cropResize(full.data, info.width * 3, box, out.size[0], out.size[1]), o, checkOutput({ ...o, rowBytes: 1 << 30 }));
}

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

describe("decode: 'gpu' on sim (the decode route)", { timeout: SUITE_MS }, () => {
  it('delivers every pick exactly once, each row the reference resampler on the pick’s own RandomResizedCrop box, and close to the CPU route', async () => {
    const { root, files } = await jpegFolder(23);
    const common = { size: SIZE, view: 'train', normalize: NORMALIZE, output: 'float32' } as const;
    const seed = 7;
    const gpu = await DataLoader.create(sources.imageFolder(root, { ...common, decode: 'gpu' }), { device: 'sim', batchSize: 5, seed, shuffle: true, dropLast: false });
    const cpu = await DataLoader.create(sources.imageFolder(root, { ...common, decode: 'threads' }), { device: 'sim', batchSize: 5, seed, shuffle: true, dropLast: false });
    try {
      const view = viewFrom('train');
      for (const e of [0, 1]) {
        const g = await epochRows(gpu, e);
        assert.deepEqual(sorted(g.labels), Array.from({ length: 23 }, (_, i) => i), `epoch ${e}: every sample once`);
        const c = await epochRows(cpu, e);
        assert.deepEqual(g.labels, c.labels, 'the same order as the CPU route');
        let sum = 0;
        let count = 0;
        for (let r = 0; r < g.labels.length; r++) {
          const id = g.labels[r]!;
          const f = files[id]!;
          const meta = await (await import('sharp')).default(f).metadata();
          const box = boxFor(view, new PickKey(id, 0, e, seed), meta.width!, meta.height!);
          const want = await referenceRow(f, box, { layout: 'chw', dtype: 'float32', size: SIZE, mean: NORMALIZE.mean, std: NORMALIZE.std });
          assert.deepEqual(g.rows[r], want, `epoch ${e} sample ${id}: the reference row of its box`);
          const a = new Float32Array(g.rows[r]!.buffer);
          const b = new Float32Array(c.rows[r]!.buffer);
          for (let i = 0; i < a.length; i++) {
            sum += Math.abs(a[i]! - b[i]!) * 255 * 0.226; // back to 8-bit levels (std ≈ 0.226)
            count++;
          }
        }
        // Same box, different resampler (antialiased bilinear vs sharp's Lanczos 3): docs/gpu-decode.md.
        assert.ok(sum / count < 6, `epoch ${e}: mean difference to the CPU route ${(sum / count).toFixed(2)} levels`);
      }
      assert.equal(gpu.stats().epochs[0]!.route, 'decode');
      assert.equal(cpu.stats().epochs[0]!.route, 'staged');
      assert.match(gpu.describe(), /decoded on the device/);
    } finally {
      await gpu.close();
      await cpu.close();
    }
  });

  it('without a view, rows are the fit box (center-crop) of each file, bf16 HWC', async () => {
    const { root, files } = await jpegFolder(6);
    const loader = await DataLoader.create(sources.imageFolder(root, { size: SIZE, layout: 'hwc', output: 'bfloat16', decode: 'gpu' }), { device: 'sim', batchSize: 4, shuffle: false, dropLast: false });
    try {
      const { labels, rows } = await epochRows(loader, 0);
      assert.deepEqual(labels, [0, 1, 2, 3, 4, 5]);
      for (const id of labels) {
        const meta = await (await import('sharp')).default(files[id]!).metadata();
        const want = await referenceRow(files[id]!, fitBox('center-crop', SIZE, meta.width!, meta.height!), { layout: 'hwc', dtype: 'bfloat16', size: SIZE });
        assert.deepEqual(rows[id], want, `sample ${id}`);
      }
    } finally {
      await loader.close();
    }
  });

  it('PNG, CMYK and progressive files among JPEGs are decoded on the CPU into their rows', async () => {
    const odd = await awkwardFiles();
    const jpeg = (await baselineJpeg(50, 40, 1)).bytes;
    const files = [jpeg, odd.png.bytes, odd.cmyk.bytes, jpeg, odd.progressive.bytes];
    const root = folder(files.map((bytes, i) => ({ bytes, ext: i === 1 ? '.png' : '.jpg' })));
    const loader = await DataLoader.create(sources.imageFolder(root, { size: SIZE, fit: 'resize', decode: 'gpu' }), { device: 'sim', batchSize: 5, shuffle: false });
    try {
      const { labels, rows } = await epochRows(loader, 0);
      assert.deepEqual(labels, [0, 1, 2, 3, 4]);
      for (const id of [1, 4]) {
        // The CPU fallback reads the same pixels the CPU decoder does (CMYK by Pillow's formula is checked in sim-jpeg.test.ts).
        const meta = await (await import('sharp')).default(files[id]!).metadata();
        const want = await referenceRow(files[id]!, { left: 0, top: 0, width: meta.width!, height: meta.height!, flip: false }, { layout: 'chw', dtype: 'uint8', size: SIZE });
        assert.deepEqual(rows[id], want, `${id === 1 ? 'png' : 'progressive'} row`);
      }
      assert.equal(rows[2]!.length, 3 * SIZE[0] * SIZE[1]);
    } finally {
      await loader.close();
    }
  });

  it("a file neither decoder reads fails only its batch: 'skip' records it, 'throw' names the file and the loader stays usable", async () => {
    const odd = await awkwardFiles();
    const jpegs = await Promise.all([0, 1, 2, 3, 4, 5].map(async (i) => (await baselineJpeg(40, 30, i)).bytes));
    const files = [...jpegs.slice(0, 3), odd.garbage.bytes, ...jpegs.slice(3)];
    const root = folder(files.map((bytes) => ({ bytes, ext: '.jpg' })));
    const skip = await DataLoader.create(sources.imageFolder(root, { size: SIZE, decode: 'gpu' }), { device: 'sim', batchSize: 2, errors: 'skip', shuffle: false, dropLast: false });
    try {
      const { labels } = await epochRows(skip, 0);
      assert.deepEqual(labels, [0, 1, 4, 5, 6], 'batch 1 (samples 2, 3) skipped, the others whole');
      const s = skip.stats().epochs[0]!;
      assert.equal(s.skippedBatches, 1);
      assert.deepEqual(s.skipped[0]!.sampleIds, [2, 3]);
      assert.match(s.skipped[0]!.reason, /c03/);
    } finally {
      await skip.close();
    }
    const fail = await DataLoader.create(sources.imageFolder(root, { size: SIZE, decode: 'gpu' }), { device: 'sim', batchSize: 2, shuffle: false });
    try {
      await assert.rejects(epochRows(fail, 0), (e: unknown) => e instanceof BatchError && /c03/.test(e.message) && /cannot decode/.test(e.message));
      const again = await epochRows(fail, 1, 1);
      assert.equal(again.labels.length, 2, 'the next epoch starts');
    } finally {
      await fail.close();
    }
  });

  it('the same rows, in the same order, with read-ahead 1, unbounded and the legacy turn chain; STOKER_DECODE_TIMING logs each phase at epoch end', async () => {
    const { root } = await jpegFolder(13);
    const opts = { device: 'sim', batchSize: 3, seed: 7, shuffle: true, dropLast: false } as const;
    const rowsWith = async (env: Record<string, string>) => {
      const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
      Object.assign(process.env, env);
      try {
        const loader = await DataLoader.create(sources.imageFolder(root, { size: SIZE, view: 'train', decode: 'gpu' }), opts);
        try {
          return await epochRows(loader, 0);
        } finally {
          await loader.close();
        }
      } finally {
        for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
      }
    };
    const lines: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      if (String(chunk).startsWith('stoker decode timing:')) lines.push(String(chunk));
      return (write as (...a: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof process.stderr.write;
    let base;
    try {
      base = await rowsWith({ STOKER_DECODE_TIMING: '1' });
    } finally {
      process.stderr.write = write;
    }
    assert.equal(new Set(base.labels.map((_, i) => i)).size, 13);
    assert.equal(lines.length, 1);
    for (const phase of ['ahead 4]', '5 batches', 'reads', 'slot', 'decode', 'cpu fallback', 'total']) assert.ok(lines[0]!.includes(phase), `${phase} in ${lines[0]}`);
    for (const env of [{ STOKER_DECODE_AHEAD: '1' }, { STOKER_DECODE_AHEAD: '0' }, { STOKER_DECODE_LEGACY: '1' }] as Record<string, string>[]) {
      const got = await rowsWith(env);
      assert.deepEqual(got.labels, base.labels, JSON.stringify(env));
      assert.deepEqual(got.rows, base.rows, JSON.stringify(env));
    }
  });

  it('resumes mid-epoch with exactly the rest of the epoch', async () => {
    const { root } = await jpegFolder(13);
    const opts = { device: 'sim', batchSize: 3, seed: 5, shuffle: true, dropLast: false } as const;
    const make = (resume?: ReturnType<DataLoader<AnyTensor>['state']>) => DataLoader.create(sources.imageFolder(root, { size: SIZE, view: 'train', decode: 'gpu' }), { ...opts, ...(resume ? { resume } : {}) });
    const full = await make();
    const whole = await epochRows(full, 0);
    await full.close();
    const first = await make();
    const before = await epochRows(first, 0, 2);
    const state = JSON.parse(JSON.stringify(first.state()));
    await first.close();
    const second = await make(state);
    try {
      const rest = await epochRows(second, 0);
      assert.deepEqual([...before.labels, ...rest.labels], whole.labels);
      assert.deepEqual([...before.rows, ...rest.rows], whole.rows, 'the same crops after resume');
    } finally {
      await second.close();
    }
  });

  it("refuses what the route cannot do with typed errors naming `decode`; 'auto' stays on the CPU on 'cpu' and 'sim'", async () => {
    const { root } = await jpegFolder(4);
    const invalid = (knob: string) => (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_OPTION' && e.message.includes(`\`${knob}\``);
    await assert.rejects(DataLoader.create(sources.imageFolder(root, { size: SIZE, decode: 'gpu' }), { device: 'cpu', batchSize: 2 }), (e: unknown) => invalid('decode')(e) && /device: 'cuda'/.test((e as Error).message));
    await assert.rejects(DataLoader.create(sources.imageFolder(root, { size: SIZE, channels: 1, decode: 'gpu' }), { device: 'sim', batchSize: 2 }), invalid('decode'));
    await assert.rejects(DataLoader.create(sources.imageFolder(root, { size: SIZE, decode: 'gpu' }), { device: 'sim', batchSize: 2, mode: 'resident' }), invalid('mode'));
    assert.throws(() => sources.imageFolder(root, { size: SIZE, decode: 'gpus' as never }), invalid('decode'));
    for (const device of ['cpu', 'sim'] as const) {
      for (const decode of ['auto', 'cpu', undefined] as const) {
        const loader = await DataLoader.create(sources.imageFolder(root, { size: SIZE, ...(decode ? { decode } : {}) }), { device, batchSize: 2, workers: 0, dropLast: false });
        try {
          const { labels } = await epochRows(loader, 0);
          assert.deepEqual(sorted(labels), [0, 1, 2, 3]);
          assert.equal(loader.stats().epochs[0]!.route, 'staged', `${device}, decode ${decode}: the CPU route`);
        } finally {
          await loader.close();
        }
      }
    }
  });

  it("'auto' on a CUDA device without nvJPEG: one warning per process, then the CPU; 'gpu' there is the lookup's ERR_CUDA_UNAVAILABLE", async () => {
    const { root } = await jpegFolder(2);
    let opened = 0;
    const missing = new LoaderError('ERR_CUDA_UNAVAILABLE', 'GPU JPEG decoding is not available: libnvjpeg could not be loaded');
    const device = { name: 'cuda:0', jpeg: { native: true, open: () => { opened++; throw missing; }, decodeBatch: () => { throw new Error('unused'); } } } as unknown as Device;
    const warnings: Error[] = [];
    const listen = (w: Error) => warnings.push(w);
    process.on('warning', listen);
    try {
      const auto = sources.imageFolder(root, { size: SIZE });
      assert.equal(decodeRoute(auto, device), undefined);
      assert.equal(decodeRoute(auto, device), undefined);
      await new Promise((resolve) => setImmediate(resolve));
      const ours = warnings.filter((w) => (w as { code?: string }).code === 'STOKER_GPU_DECODE');
      assert.equal(ours.length, 1, 'one warning');
      assert.match(ours[0]!.message, /decoding images on the CPU/);
      assert.equal(opened, 2, 'each loader tried');
      assert.throws(() => decodeRoute(sources.imageFolder(root, { size: SIZE, decode: 'gpu' }), device), (e: unknown) => e === missing);
      assert.equal(decodeRoute(sources.imageFolder(root, { size: SIZE, decode: 'cpu' }), device), undefined);
      assert.equal(opened, 3, "'cpu' never opens the decoder");
    } finally {
      process.off('warning', listen);
    }
  });

  it('a file gone after the listing fails its batch with ERR_FILE_ACCESS naming it; the other batches arrive', async () => {
    const { root } = await jpegFolder(6);
    const source = sources.imageFolder(root, { size: SIZE, decode: 'gpu' });
    const loader = await DataLoader.create(source, { device: 'sim', batchSize: 2, shuffle: false, errors: 'skip' });
    try {
      unlinkSync(join(root, 'c03', 'img.jpg'));
      const { labels } = await epochRows(loader, 0);
      assert.deepEqual(labels, [0, 1, 4, 5]);
      const s = loader.stats().epochs[0]!;
      assert.deepEqual(s.skipped[0]!.sampleIds, [2, 3]);
      assert.match(s.skipped[0]!.reason, /c03.*img\.jpg/);
    } finally {
      await loader.close();
    }
  });

  it('closing mid-epoch with reads and decodes in flight waits for them, then leaks nothing: device and page-locked memory, decode and reader threads', async () => {
    const { root } = await jpegFolder(48);
    const threads = () => ({ decode: liveJpegThreads(), read: liveReaderThreads() });
    const before = threads();
    const loader = await DataLoader.create(sources.imageFolder(root, { size: SIZE, view: 'train', decode: 'gpu' }), { device: 'sim', batchSize: 4, shuffle: true, seed: 3 });
    const batches = loader.epoch(0)[Symbol.asyncIterator]();
    const first = await within(HANG_MS, 'the first batch', batches.next());
    assert.equal(first.done, false);
    const during = threads();
    assert.ok(during.decode > before.decode && during.read > before.read, `the route's threads run (${JSON.stringify(during)})`);
    assert.ok(loader.stats().memory.device > 0, 'batches in flight hold device memory');
    // The read-ahead window has launched the next batches: close now, without finishing the epoch.
    await within(HANG_MS, 'close with batches in flight', loader.close());
    assert.deepEqual(loader.stats().memory, { device: 0, pinned: 0 });
    await waitFor(() => liveJpegThreads() === before.decode && liveReaderThreads() === before.read, { what: () => `the route's threads to exit (${JSON.stringify(threads())} left, ${JSON.stringify(before)} before)` });
  });

  it('reader threads: 4 on a large machine, 2 on a small one, $STOKER_DECODE_READERS when set (a bad value names it)', () => {
    assert.equal(defaultReaders(16, {}), 4);
    assert.equal(defaultReaders(2, {}), 2);
    assert.equal(defaultReaders(16, { STOKER_DECODE_READERS: '7' }), 7);
    assert.throws(() => defaultReaders(16, { STOKER_DECODE_READERS: 'many' }), { code: 'ERR_INVALID_OPTION', message: /`STOKER_DECODE_READERS` must be an integer from 1 to 64/ });
  });
});

describe("decode: 'gpu' on sim, a center-crop view: torchvision's pixels", { skip: torchvisionSkip, timeout: SUITE_MS }, () => {
  it("view 'eval' rows are within one level of torchvision's Resize(256) + CenterCrop(224) (and a flipped center crop scaled to 96, of PIL's resize of its box), enlarged images among them", async (t) => {
    const { mean, worst } = await evalViewAgainstTorchvision('sim', t, dirs);
    // The sim decoder is libjpeg-turbo's (sharp), as PIL's: measured byte for byte on all 36 rows.
    assert.ok(worst.max <= 1, `max |Δ| ${worst.max} against torchvision (${worst.what})`);
    assert.ok(mean <= 0.01, `mean |Δ| ${mean.toFixed(4)} against torchvision`);
  });
});
