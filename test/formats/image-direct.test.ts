// The direct libvips route of a JPEG view (NOTE [direct libvips] in vips-direct.ts) against the sharp
// path it replaces, in one process (setVipsDirect switches between them): the same bytes for boxes
// enlarged on a side (grey and RGB, any channels, flipped or not), within the documented tolerance for
// boxes shrunk on load, the same typed errors for damaged files, the sharp path for what it does not
// cover (CMYK), and the same bytes from a decode child process as from this thread.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { DecodePool } from '../../src/image/processes/decode-pool.js';
import { type DecodeImageOptions, decodeImage, loadImageDecoder } from '../../src/image/image-decode.js';
import { setVipsDirect, vipsDirectAvailable } from '../../src/image/vips-direct.js';
import { photo } from '../fixtures/jpegs.js';
import { type ViewOption, viewFrom } from '../../src/image/crop-box.js';

function options(view: ViewOption, sample: number, extra: Partial<DecodeImageOptions> = {}): DecodeImageOptions {
  return { size: [224, 224], source: 'test.jpg', view: { view: viewFrom(view), sample, repeat: 0, epoch: 0, seed: { hi: 0, lo: 3 } }, ...extra };
}

/** decodeImage through the sharp path only, then through the direct route. */
async function both(bytes: Uint8Array, o: DecodeImageOptions): Promise<[Uint8Array, Uint8Array]> {
  setVipsDirect(false);
  try {
    const old = (await decodeImage(bytes, o)).data as Uint8Array;
    setVipsDirect(true);
    return [old, (await decodeImage(bytes, o)).data as Uint8Array];
  } finally {
    setVipsDirect(true);
  }
}

function stats(a: Uint8Array, b: Uint8Array): { max: number; mean: number } {
  assert.equal(a.length, b.length);
  let max = 0;
  let sum = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    sum += d;
    max = Math.max(max, d);
  }
  return { max, mean: sum / a.length };
}

async function errorOf(p: Promise<unknown>): Promise<{ code: unknown; message: string }> {
  try {
    await p;
  } catch (e) {
    return { code: (e as { code?: unknown }).code, message: (e as Error).message };
  }
  assert.fail('the decode did not fail');
}

describe('direct libvips route of JPEG views', () => {
  after(() => setVipsDirect(true));

  it('loads on linux, from the libvips that sharp loaded', { skip: process.platform !== 'linux' && 'the route is linux-only' }, () => {
    loadImageDecoder();
    assert.equal(vipsDirectAvailable(), true);
  });

  it('gives the bytes of the sharp path for boxes enlarged on a side, and stays within tolerance of it for the others', async () => {
    const jpeg = await photo(500, 375, 1);
    let enlarged = 0;
    let reduced = 0;
    for (let sample = 0; sample < 40; sample++) {
      for (const extra of [{}, { channels: 1 as const }, { layout: 'hwc' as const, output: 'bfloat16' as const, normalize: { mean: [0.5], std: [0.25] } }]) {
        const [old, now] = await both(jpeg, options('train', sample, extra));
        const d = stats(new Uint8Array(old.buffer, old.byteOffset, old.byteLength), new Uint8Array(now.buffer, now.byteOffset, now.byteLength));
        if (d.max === 0) enlarged++;
        else {
          reduced++;
          assert.ok(extra.output === undefined ? d.max <= 3 && d.mean <= 0.5 : true, `sample ${sample} ${JSON.stringify(extra)}: ${JSON.stringify(d)}`);
        }
      }
    }
    assert.ok(enlarged > 0, 'some boxes gave the same bytes');
  });

  it('a grey JPEG decodes to the sharp path\'s bytes as 1 and as 3 channels', async () => {
    const grey = await sharp(await photo(320, 240, 2)).greyscale().jpeg().toBuffer();
    for (const channels of [1, 3] as const) {
      for (let sample = 0; sample < 12; sample++) {
        const [old, now] = await both(grey, options({ randomResizedCrop: { scale: [0.08, 0.3] }, flip: true }, sample, { channels }));
        assert.deepEqual(now, old, `channels ${channels} sample ${sample}`);
      }
    }
  });

  it('a box at least twice the output (shrunk on load) stays within the documented tolerance of the sharp path', async () => {
    const jpeg = await photo(1200, 900, 3, { progressive: true });
    for (let sample = 0; sample < 3; sample++) {
      const [old, now] = await both(jpeg, options('eval', sample));
      const d = stats(old, now);
      assert.ok(d.max <= 16 && d.mean <= 2.5, JSON.stringify(d));
    }
  });

  it('a damaged JPEG fails with the typed error of the sharp path', async () => {
    const jpeg = await photo(300, 200, 4);
    const damaged = [jpeg.subarray(0, Math.floor(jpeg.length / 2)), Buffer.concat([jpeg.subarray(0, 400), Buffer.alloc(2000, 0x55)])];
    for (const bytes of damaged) {
      setVipsDirect(false);
      const old = await errorOf(decodeImage(bytes, options('train', 1)));
      setVipsDirect(true);
      const now = await errorOf(decodeImage(bytes, options('train', 1)));
      assert.equal(old.code, 'ERR_BAD_FILE');
      assert.deepEqual(now, old);
    }
  });

  it('a CMYK JPEG goes through the sharp path (the same bytes either way)', async () => {
    const cmyk = await sharp(await photo(200, 160, 5)).toColourspace('cmyk').jpeg().toBuffer();
    const [old, now] = await both(cmyk, options('train', 2));
    assert.deepEqual(now, old);
  });

  it('decodes in the calling thread: no libvips worker thread starts (NOTE [pixels in the calling thread])', { skip: process.platform !== 'linux' && 'the route is linux-only', timeout: 60_000 }, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'stoker-direct-threads-'));
    try {
      const file = join(dir, 'photo.jpg');
      await writeFile(file, await photo(500, 375, 7));
      const fixture = new URL('../fixtures/direct-threads.ts', import.meta.url).pathname;
      const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', fixture, file], { timeout: 50_000 });
      const r = JSON.parse(stdout.trim().split('\n').at(-1)!) as { direct: boolean; sizes: number[]; threads: string[] };
      assert.equal(r.direct, true);
      assert.deepEqual(r.sizes, Array(24).fill(224 * 224 * 3));
      assert.deepEqual(r.threads.filter((t) => /vips/i.test(t)), [], `threads: ${r.threads.join(', ')}`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a decode child process gives the bytes of this thread', { timeout: 60_000 }, async () => {
    const jpeg = await photo(500, 375, 6);
    const pool = new DecodePool({ size: 1 });
    try {
      for (let sample = 0; sample < 6; sample++) {
        const o = options('train', sample, { output: 'float32', normalize: { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] } });
        const here = await decodeImage(jpeg, o);
        const there = await pool.decode(jpeg, o);
        assert.deepEqual(there.shape, here.shape);
        assert.deepEqual(there.data, here.data, `sample ${sample}`);
      }
    } finally {
      await pool.close();
    }
  });
});
