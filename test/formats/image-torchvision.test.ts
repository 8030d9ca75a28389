// A center-crop view ('eval', `centerCrop`) gives torchvision's pixels — what
// `T.Compose([T.Resize(resize), T.CenterCrop(crop)])(Image.open(f).convert(mode))` gives on torchvision
// 0.14 / Pillow 9.4 (Debian 12's python3-torchvision, python3-pil) — within one level on every CPU
// decode route: the default (libjpeg-turbo's crop decode where it loads, the WebAssembly resampler),
// libvips' decode, the JavaScript resample loops, and the sharp path; and through an image folder
// with decode 'threads' and 'processes'. The images are numpy pixels (a smooth field, texture,
// noise and flat rectangles with hard edges) encoded by PIL: JPEG 4:2:0, 4:4:4, progressive, grey
// and CMYK, PNG RGB, RGBA, grey and palette, sized below and above 256, odd, and as extreme as
// 3000×40. A 1-value `normalize` broadcasts over the channels as torchvision's Normalize does.
// Skipped, with the reason, where no Python has torchvision (CI installs it: .ci/run; the Python and
// the image drawn are test/fixtures/torchvision.ts's).

import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DataLoader } from '../../src/index.js';
import { type ImageChannels, decodeImage, loadImageDecoder } from '../../src/image/image-decode.js';
import { type ViewOption, boxFor, viewFrom } from '../../src/image/crop-box.js';
import { imageFolderSource } from '../../src/dataset/formats/images/image-folder.js';
import { PickKey } from '../../src/sampler/pick-key.js';
import { setVipsDirect } from '../../src/image/vips-direct.js';
import { setTurboJpeg } from '../../src/image/turbo-jpeg.js';
import { setWasmResample } from '../../src/image/resample-wasm.js';
import { HANG_MS, SUITE_MS, collect, within } from '../fixtures.js';
import { runTorchvision, torchvisionSkip } from '../fixtures/torchvision.js';

/** Width, height and how PIL writes each image. */
const IMAGES: readonly [number, number, string][] = [
  [500, 375, 'jpeg420'], [375, 500, 'jpeg444'], [256, 256, 'jpegprog'], [224, 224, 'jpeggrey'], [200, 150, 'jpegcmyk'],
  [97, 61, 'png'], [333, 257, 'pngrgba'], [257, 333, 'pnggrey'], [1024, 768, 'pngpal'], [3000, 40, 'jpeg420'],
  [40, 3000, 'png'], [300, 20, 'jpeg444'], [255, 255, 'pngrgba'], [257, 257, 'jpeg420'], [640, 480, 'jpegprog'],
  [511, 512, 'jpeggrey'], [700, 259, 'jpegcmyk'], [5, 3, 'jpeg420'], [1200, 900, 'jpeg420'], [129, 1000, 'pngrgba'],
];

interface Job {
  readonly image: number;
  readonly mode: 'RGB' | 'L' | 'RGBA';
  readonly resize: number;
  readonly crop: number;
  readonly flip: boolean;
  /** For the pick key of a flipping view: a sample whose flip is `flip`. */
  readonly sample: number;
}

const CHANNELS: Record<Job['mode'], ImageChannels> = { RGB: 3, L: 1, RGBA: 4 };
const FLIP_VIEW = viewFrom({ centerCrop: { resize: 160, crop: 128 }, flip: true });

/** The first sample (from `from`) whose key flips (or not) under a flipping view: the flip is drawn first, whatever the image size. */
function sampleWithFlip(flip: boolean, from: number): number {
  for (let s = from; ; s++) if (boxFor(FLIP_VIEW, new PickKey(s, 0, 0, { hi: 0, lo: 0 }), 1, 1).flip === flip) return s;
}

const JOBS: readonly Job[] = [
  ...IMAGES.map((_, image) => ({ image, mode: 'RGB' as const, resize: 256, crop: 224, flip: false, sample: 0 })),
  ...IMAGES.map((_, image) => ({ image, mode: 'L' as const, resize: 256, crop: 224, flip: false, sample: 0 })).filter((j) => j.image % 3 === 0),
  ...IMAGES.map((_, image) => ({ image, mode: 'RGBA' as const, resize: 256, crop: 224, flip: false, sample: 0 })).filter((j) => IMAGES[j.image]![2] === 'pngrgba' || j.image % 5 === 1),
  ...[1, 4, 6, 9, 13, 16].map((image, k) => ({ image, mode: 'RGB' as const, resize: 160, crop: 128, flip: k % 2 === 0, sample: sampleWithFlip(k % 2 === 0, 10 * k) })),
];

/** Writes the images and, for each job, torchvision's uint8 HWC pixels (job k: `k.ref`); the normalize reference (`norm.ref`, float32 CHW). */
const PY = String.raw`
import json, sys
import torch, torchvision.transforms as T
out, spec = sys.argv[1], json.load(open(sys.argv[2]))
paths = []
for i, (w, h, kind) in enumerate(spec['images']):
    px = photo(w, h, i)
    im = Image.fromarray(px)
    if kind.startswith('jpeg'):
        if kind == 'jpeggrey': im = im.convert('L')
        if kind == 'jpegcmyk': im = im.convert('CMYK')
        path = f'{out}/{i:02d}_{w}x{h}_{kind}.jpg'
        im.save(path, quality=90, subsampling=0 if kind == 'jpeg444' else 2, progressive=kind == 'jpegprog')
    else:
        if kind == 'pngrgba': im = Image.fromarray(np.dstack([px, np.random.default_rng(i).integers(0, 256, (h, w), dtype=np.uint8)]), 'RGBA')
        if kind == 'pnggrey': im = im.convert('L')
        if kind == 'pngpal': im = im.convert('P', palette=Image.ADAPTIVE)
        path = f'{out}/{i:02d}_{w}x{h}_{kind}.png'
        im.save(path)
    paths.append(path)
for k, j in enumerate(spec['jobs']):
    ts = [T.Resize(j['resize']), T.CenterCrop(j['crop'])] + ([T.RandomHorizontalFlip(1.0)] if j['flip'] else [])
    np.asarray(T.Compose(ts)(Image.open(paths[j['image']]).convert(j['mode']))).tofile(f'{out}/{k}.ref')
n = spec['normalize']
norm = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(n['mean'], n['std'])])
norm(Image.open(paths[0]).convert('RGB')).numpy().astype(np.float32).tofile(f'{out}/norm.ref')
json.dump(paths, open(f'{out}/paths.json', 'w'))
`;

/** The jobs of the image folder test: eval as RGB, the first eight (jobs 0–7, so classes c0–c7 sort in job order). */
const FOLDER_JOBS = [...JOBS.entries()].slice(0, 8);

const NORMALIZE = { mean: [0.45], std: [0.225] };

let dir: string;
let paths: string[];

/** The view and pick key of a job. */
function viewOf(j: Job): { view: ViewOption; key: PickKey } {
  const view: ViewOption = j.resize === 256 && j.crop === 224 && !j.flip ? 'eval' : { centerCrop: { resize: j.resize, crop: j.crop }, flip: true };
  return { view, key: new PickKey(j.sample, 0, 0, { hi: 0, lo: 0 }) };
}

function diff(got: Uint8Array, want: Uint8Array, what: string): { max: number; sum: number } {
  assert.equal(got.length, want.length, `${what}: ${got.length} bytes where torchvision has ${want.length}`);
  let max = 0;
  let sum = 0;
  for (let i = 0; i < got.length; i++) {
    const d = Math.abs(got[i]! - want[i]!);
    sum += d;
    if (d > max) max = d;
  }
  return { max, sum };
}

/** The CPU decode routes, by the switches that select them (each falls through to the next where its library is missing). */
const ROUTES: readonly { name: string; direct: boolean; turbo: boolean; wasm: boolean }[] = [
  { name: 'default (libjpeg-turbo crop decode, WebAssembly resample)', direct: true, turbo: true, wasm: true },
  { name: 'libvips decode (STOKER_TURBOJPEG=off)', direct: true, turbo: false, wasm: true },
  { name: 'JavaScript resample (STOKER_WASM=off)', direct: true, turbo: true, wasm: false },
  { name: 'sharp path (STOKER_VIPS_DIRECT=off, STOKER_TURBOJPEG=off)', direct: false, turbo: false, wasm: true },
];

describe("a center-crop view gives torchvision's pixels", { skip: torchvisionSkip, timeout: SUITE_MS }, () => {
  before(() => {
    loadImageDecoder();
    dir = mkdtempSync(join(tmpdir(), 'stoker-torchvision-'));
    const spec = join(dir, 'spec.json');
    writeFileSync(spec, JSON.stringify({ images: IMAGES, jobs: JOBS, normalize: NORMALIZE }));
    runTorchvision(PY, [dir, spec]);
    paths = JSON.parse(readFileSync(join(dir, 'paths.json'), 'utf8')) as string[];
    // An image folder of the first eight eval jobs' images, one class each, in job order.
    for (const [k, j] of FOLDER_JOBS) {
      mkdirSync(join(dir, 'folder', `c${k}`), { recursive: true });
      copyFileSync(paths[j.image]!, join(dir, 'folder', `c${k}`, basename(paths[j.image]!)));
    }
  });

  after(() => {
    setVipsDirect(true);
    setTurboJpeg(true);
    setWasmResample(true);
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  for (const route of ROUTES) {
    it(`every pixel within one level, on the route: ${route.name}`, async () => {
      setVipsDirect(route.direct);
      setTurboJpeg(route.turbo);
      setWasmResample(route.wasm);
      try {
        let worst = { max: 0, what: '' };
        let sum = 0;
        let n = 0;
        for (const [k, j] of JOBS.entries()) {
          const { view, key } = viewOf(j);
          const size = j.crop;
          const t = await decodeImage(readFileSync(paths[j.image]!), {
            size: [size, size], channels: CHANNELS[j.mode], layout: 'hwc', source: paths[j.image]!,
            view: { view: viewFrom(view), sample: key.sample, repeat: 0, epoch: 0, seed: key.seed },
          });
          const what = `${basename(paths[j.image]!)} as ${j.mode}, Resize(${j.resize}) + CenterCrop(${j.crop})${j.flip ? ' + flip' : ''}`;
          const d = diff(t.data as Uint8Array, readFileSync(join(dir, `${k}.ref`)), what);
          if (d.max > worst.max) worst = { max: d.max, what };
          sum += d.sum;
          n += t.data.length;
        }
        assert.ok(worst.max <= 1, `max |Δ| ${worst.max} (${worst.what})`);
        assert.ok(sum / n <= 0.01, `mean |Δ| ${(sum / n).toFixed(4)}`);
      } finally {
        setVipsDirect(true);
        setTurboJpeg(true);
        setWasmResample(true);
      }
    });
  }

  it("an image folder with view 'eval' delivers them, with decode 'threads' and 'processes'", async () => {
    const root = join(dir, 'folder');
    const jobs = FOLDER_JOBS;
    for (const decode of ['threads', 'processes'] as const) {
      const source = imageFolderSource(root, { size: 224, view: 'eval', layout: 'hwc', decode, decodeProcesses: 1, index: 'off' });
      const loader = await DataLoader.create(source, { batchSize: 4, shuffle: false, workers: 0 });
      try {
        const batches = await within(HANG_MS, `decode ${decode}`, collect(loader.epoch(0)));
        let row = 0;
        for (const b of batches) {
          const data = b.get('image').data as Uint8Array;
          for (let r = 0; r < b.rows; r++, row++) {
            const [k] = jobs[row]!;
            const d = diff(data.subarray(r * 224 * 224 * 3, (r + 1) * 224 * 224 * 3), readFileSync(join(dir, `${k}.ref`)), `decode ${decode} row ${row}`);
            assert.ok(d.max <= 1, `decode ${decode}, ${basename(paths[jobs[row]![1].image]!)}: max |Δ| ${d.max}`);
          }
        }
        assert.equal(row, jobs.length);
      } finally {
        await loader.close();
      }
    }
  });

  it("a normalize of one mean and one std is torchvision's Normalize of a list of one: every channel", async () => {
    const t = await decodeImage(readFileSync(paths[0]!), {
      size: [224, 224], source: paths[0]!, normalize: NORMALIZE, output: 'float32',
      view: { view: viewFrom('eval'), sample: 0, repeat: 0, epoch: 0, seed: { hi: 0, lo: 0 } },
    });
    const want = new Float32Array(new Uint8Array(readFileSync(join(dir, 'norm.ref'))).buffer);
    const got = t.data as Float32Array;
    assert.equal(got.length, want.length);
    let max = 0;
    for (let i = 0; i < got.length; i++) max = Math.max(max, Math.abs(got[i]! - want[i]!));
    // float32 x · (1 / (255·std)) + (−mean / std) against torchvision's (x / 255 − mean) / std: rounding apart.
    assert.ok(max <= 1e-5, `max |Δ| ${max}`);
  });
});
