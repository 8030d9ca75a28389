// The crop decode of JPEG views through libjpeg-turbo (NOTE [crop decode] in turbo-jpeg.ts): a box's
// pixels are those of the whole decode, byte for byte (random boxes; 4:2:0, 4:2:2, 4:4:4, grey,
// progressive; at 1/1 … 1/8 scale), decodeImage's views give the libvips route's bytes, damaged files
// the same typed errors, other files the same route as before, and STOKER_TURBOJPEG turns it off or
// points it at another library.

import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import sharp from 'sharp';
import { type DecodeImageOptions, decodeImage, jpegHeader, loadImageDecoder } from '../../src/image/image-decode.js';
import { decodeJpegRegion, setTurboJpeg, turboJpegAvailable, turboJpegPath } from '../../src/image/turbo-jpeg.js';
import { type ViewOption, viewFrom } from '../../src/image/crop-box.js';
import { workerBoot } from '../../src/base/worker-boot.js';
import { photo } from '../fixtures/jpegs.js';

const skip = turboJpegPath() === undefined && 'libturbojpeg is not here (linux only, optional dependency @julusian/jpeg-turbo)';
const alloc = (n: number) => new Uint8Array(n);

function options(view: ViewOption, sample: number, extra: Partial<DecodeImageOptions> = {}): DecodeImageOptions {
  return { size: [224, 224], source: 'test.jpg', view: { view: viewFrom(view), sample, repeat: 0, epoch: 0, seed: { hi: 0, lo: 3 } }, ...extra };
}

/** decodeImage through the libvips route, then through the crop decode. */
async function both(bytes: Uint8Array, o: DecodeImageOptions): Promise<[Uint8Array, Uint8Array]> {
  setTurboJpeg(false);
  try {
    const old = (await decodeImage(bytes, o)).data;
    setTurboJpeg(true);
    const now = (await decodeImage(bytes, o)).data;
    return [new Uint8Array(old.buffer, old.byteOffset, old.byteLength), new Uint8Array(now.buffer, now.byteOffset, now.byteLength)];
  } finally {
    setTurboJpeg(true);
  }
}

async function errorOf(p: Promise<unknown>): Promise<{ code: unknown; message: string }> {
  try {
    await p;
  } catch (e) {
    return { code: (e as { code?: unknown }).code, message: (e as Error).message };
  }
  assert.fail('the decode did not fail');
}

/** A 4:2:2 JPEG written by PIL (sharp writes only 4:2:0 and 4:4:4), or undefined without Debian's Python and PIL. */
function pil422(dir: string, w: number, h: number): string | undefined {
  const file = join(dir, 'p422.jpg');
  const code = `from PIL import Image\nimport random\nrandom.seed(5)\nim = Image.effect_noise((${w}, ${h}), 60).convert('RGB')\nim = Image.merge('RGB', [im.getchannel(0), Image.linear_gradient('L').resize((${w}, ${h})), im.getchannel(0).rotate(90)])\nim.save('${file}', quality=90, subsampling=1)\n`;
  const r = spawnSync('/usr/bin/python3', ['-c', code], { encoding: 'utf8', timeout: 30_000 });
  return r.status === 0 ? file : undefined;
}

describe('crop decode of JPEG views (libjpeg-turbo)', { skip }, () => {
  const dirs: string[] = [];
  after(async () => {
    setTurboJpeg(true);
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('loads on linux from the optional dependency', () => {
    loadImageDecoder();
    assert.equal(turboJpegAvailable(), true);
  });

  it("a box's pixels are those of the whole decode: random boxes, every subsampling, grey, progressive, at 1/1 to 1/8 scale", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'stoker-turbo-'));
    dirs.push(dir);
    const cases: [string, Uint8Array][] = [
      ['4:2:0', await photo(397, 283, 1)],
      ['4:4:4', await photo(301, 222, 2, { chromaSubsampling: '4:4:4' })],
      ['progressive 4:2:0', await photo(333, 250, 3, { progressive: true })],
      ['grey', await sharp(await photo(250, 190, 4)).greyscale().jpeg().toBuffer()],
    ];
    const p422 = pil422(dir, 290, 211);
    if (p422 !== undefined) cases.push(['4:2:2', await readFile(p422)]);
    else if (process.env.CI !== undefined) assert.fail('CI has Debian\'s python3-pil: the 4:2:2 case must run');
    let seed = 7;
    const rand = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32;
    for (const [name, bytes] of cases) {
      const { width: W, height: H, channels: bands } = jpegHeader(bytes)!;
      for (const shrink of [1, 2, 4, 8]) {
        const whole = decodeJpegRegion(bytes, { left: 0, top: 0, width: W, height: H }, shrink, bands, alloc)!;
        assert.ok(whole !== undefined, `${name} 1/${shrink}: the whole image decodes`);
        let cropped = 0;
        for (let t = 0; t < 60; t++) {
          const width = 1 + Math.floor(rand() * (W - 1));
          const height = 1 + Math.floor(rand() * (H - 1));
          const box = { left: Math.floor(rand() * (W - width + 1)), top: Math.floor(rand() * (H - height + 1)), width, height };
          const r = decodeJpegRegion(bytes, box, shrink, bands, alloc)!;
          const label = `${name} 1/${shrink} box ${JSON.stringify(box)}`;
          assert.ok(r !== undefined, label);
          const cl = Math.floor(box.left / shrink);
          const ct = Math.floor(box.top / shrink);
          assert.equal(r.width, Math.ceil(Math.min(whole.width, (box.left + box.width) / shrink)) - cl, label);
          assert.equal(r.height, Math.ceil(Math.min(whole.height, (box.top + box.height) / shrink)) - ct, label);
          if (r.stride < whole.stride) cropped++;
          for (let y = 0; y < r.height; y++) {
            const got = r.data.subarray(y * r.stride, y * r.stride + r.width * bands);
            const at = (ct + y) * whole.stride + cl * bands;
            const want = whole.data.subarray(at, at + r.width * bands);
            const i = got.findIndex((v, k) => v !== want[k]);
            assert.equal(i, -1, `${label}: row ${y}, byte ${i}`);
          }
        }
        assert.ok(cropped > 0, `${name} 1/${shrink}: some decodes were cropped`);
      }
    }
  });

  it("decodeImage's views give the libvips route's bytes (RGB and grey JPEGs, 1 and 3 channels, floats, shrunk boxes)", async () => {
    const jpeg = await photo(500, 375, 1);
    const grey = await sharp(await photo(320, 240, 2)).greyscale().jpeg().toBuffer();
    const large = await photo(1200, 900, 3, { progressive: true });
    const floats = { layout: 'hwc' as const, output: 'bfloat16' as const, normalize: { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] } };
    for (let sample = 0; sample < 24; sample++) {
      for (const [bytes, view, extra] of [
        [jpeg, 'train', {}], [jpeg, 'train', { channels: 1 }], [jpeg, 'train', floats], [jpeg, 'eval', floats],
        [grey, { randomResizedCrop: { scale: [0.08, 0.3] }, flip: true }, {}], [grey, 'train', { channels: 1 }], [large, sample % 2 === 0 ? 'eval' : 'train', floats],
      ] as [Uint8Array, ViewOption, Partial<DecodeImageOptions>][]) {
        const [old, now] = await both(bytes, options(view, sample, extra));
        assert.deepEqual(now, old, `sample ${sample} ${JSON.stringify(view)} ${JSON.stringify(extra)}`);
      }
    }
  });

  it('a damaged JPEG fails with the typed error of the libvips route; CMYK JPEGs and PNGs decode as before', async () => {
    const jpeg = await photo(300, 200, 4);
    const damaged = [jpeg.subarray(0, Math.floor(jpeg.length / 2)), Buffer.concat([jpeg.subarray(0, 400), Buffer.alloc(2000, 0x55)])];
    for (const bytes of damaged) {
      setTurboJpeg(false);
      const old = await errorOf(decodeImage(bytes, options('train', 1)));
      setTurboJpeg(true);
      const now = await errorOf(decodeImage(bytes, options('train', 1)));
      assert.equal(old.code, 'ERR_BAD_FILE');
      assert.deepEqual(now, old);
    }
    const cmyk = await sharp(await photo(200, 160, 5)).toColourspace('cmyk').jpeg().toBuffer();
    const png = await sharp(await photo(200, 160, 6)).png().toBuffer();
    for (const bytes of [cmyk, png]) {
      const [old, now] = await both(bytes, options('train', 2));
      assert.deepEqual(now, old);
    }
  });

  it("a decode in a worker thread (its own TurboJPEG handle) gives this thread's bytes", { timeout: 60_000 }, async () => {
    const jpeg = await photo(500, 375, 8);
    const o = options('train', 3, { output: 'float32' });
    const here = (await decodeImage(jpeg, o)).data as Float32Array;
    // The project's worker boot (tsx registered first: workers do not inherit its hooks on Node 20).
    const body = `const { workerData, parentPort } = await import('node:worker_threads');
      const m = await import(${JSON.stringify(new URL('../../src/image/image-decode.ts', import.meta.url).href)});
      const t = await import(${JSON.stringify(new URL('../../src/image/turbo-jpeg.ts', import.meta.url).href)});
      m.loadImageDecoder();
      const out = await m.decodeImage(workerData.bytes, workerData.o);
      parentPort.postMessage({ turbo: t.turboJpegAvailable(), data: out.data });`;
    const w = new Worker(workerBoot(new URL(`data:text/javascript,${encodeURIComponent(body)}`), 'image-decode.ts'), { eval: true, workerData: { bytes: jpeg, o } });
    try {
      const there = await new Promise<{ turbo: boolean; data: Float32Array }>((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      });
      assert.equal(there.turbo, true);
      assert.deepEqual(there.data, here);
    } finally {
      await w.terminate();
    }
  });

  it('STOKER_TURBOJPEG=off turns it off, and a path that does not load leaves the libvips route (the same bytes)', { timeout: 60_000 }, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'stoker-turbo-env-'));
    dirs.push(dir);
    const file = join(dir, 'photo.jpg');
    await sharp(await photo(500, 375, 9)).toFile(file);
    const script = `import { readFileSync } from 'node:fs';
      import { decodeImage, loadImageDecoder } from ${JSON.stringify(new URL('../../src/image/image-decode.ts', import.meta.url).href)};
      import { turboJpegAvailable, turboJpegPath } from ${JSON.stringify(new URL('../../src/image/turbo-jpeg.ts', import.meta.url).href)};
      import { viewFrom } from ${JSON.stringify(new URL('../../src/image/crop-box.ts', import.meta.url).href)};
      loadImageDecoder();
      const t = await decodeImage(new Uint8Array(readFileSync(${JSON.stringify(file)})), { size: [224, 224], source: 'x', view: { view: viewFrom('train'), sample: 1, repeat: 0, epoch: 0, seed: { hi: 0, lo: 3 } } });
      let sum = 0; for (const v of t.data) sum = (sum * 31 + v) >>> 0;
      console.log(JSON.stringify({ on: turboJpegAvailable(), path: turboJpegPath() ?? null, sum }));`;
    const run = async (env: Record<string, string>) => {
      const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { env: { ...process.env, ...env }, timeout: 50_000 });
      return JSON.parse(stdout.trim().split('\n').at(-1)!) as { on: boolean; path: string | null; sum: number };
    };
    const on = await run({});
    const off = await run({ STOKER_TURBOJPEG: 'off' });
    const missing = await run({ STOKER_TURBOJPEG: join(dir, 'no-such-libturbojpeg.so') });
    const given = await run({ STOKER_TURBOJPEG: turboJpegPath()! });
    assert.equal(on.on, true);
    assert.deepEqual([off.on, off.path], [false, null]);
    assert.deepEqual([missing.on, missing.path], [false, join(dir, 'no-such-libturbojpeg.so')]);
    assert.deepEqual([given.on, given.path], [true, turboJpegPath()]);
    assert.equal(off.sum, on.sum);
    assert.equal(missing.sum, on.sum);
  });
});
