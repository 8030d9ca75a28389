// Decode-time views on image folders: each delivered image is its pick's RandomResizedCrop box (or
// the eval box), cut and resized by the decoder, mirrored when the key says so, normalized and cast
// there too; a view differs per epoch and per augment repeat, is the same on every rerun, through
// reader workers and decode processes alike; keyed reads bypass the sample cache; exactly once.
// The fixture image is a lossless gradient whose pixel (x, y) is (4x, 4y, 7), so a decoded pixel
// says which source coordinate it came from.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tableToIPC } from 'apache-arrow';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { type Batch, DataLoader, LoaderError, sources } from '../../src/index.js';
import type { AnyDataset } from '../../src/dataset/dataset.js';
import { arrowSource } from '../../src/dataset/formats/arrow/arrow.js';
import { imageFolderSource } from '../../src/dataset/formats/images/image-folder.js';
import { tarShardsSource } from '../../src/dataset/formats/tar/tar-shards.js';
import { hfTable } from './arrow-targets.js';
import { PickKey } from '../../src/sampler/pick-key.js';
import { toU64 } from '../../src/sampler/rng.js';
import { boxFor, viewFrom } from '../../src/image/crop-box.js';
import { fromBFloat16Bits } from '../../src/tensor/half.js';
import { HANG_MS, SUITE_MS, collect, range, sorted, within } from '../fixtures.js';

const W = 60;
const H = 48;
const OUT = 12;
const MEAN = [0.5, 0.25, 0];
const STD = [0.5, 0.25, 1];

let root: string;
let dir: string;
let shard: string;
let arrowFile: string;

async function gradient(): Promise<Buffer> {
  const px = Buffer.alloc(W * H * 3);
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) px.set([4 * x, 4 * y, 7], (y * W + x) * 3);
  return sharp(px, { raw: { width: W, height: H, channels: 3 } }).png().toBuffer();
}

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'stoker-views-'));
  dir = join(root, 'train');
  const png = await gradient();
  for (const cls of ['a', 'b']) {
    mkdirSync(join(dir, cls), { recursive: true });
    for (let i = 0; i < 6; i++) writeFileSync(join(dir, cls, `${i}.png`), png);
  }
  const members = join(root, 'members');
  mkdirSync(members);
  for (let i = 0; i < 8; i++) {
    writeFileSync(join(members, `s${i}.png`), png);
    writeFileSync(join(members, `s${i}.cls`), String(i % 2));
  }
  shard = join(root, 'shard.tar');
  const tar = spawnSync('tar', ['-cf', shard, '-C', members, ...Array.from({ length: 8 }, (_, i) => [`s${i}.png`, `s${i}.cls`]).flat()], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(tar.status, 0, tar.stderr);
  arrowFile = join(root, 'images.arrow');
  writeFileSync(arrowFile, tableToIPC(hfTable(Array.from({ length: 8 }, () => png)), 'file'));
});

after(() => rmSync(root, { recursive: true, force: true }));

/** Checks that the [3, OUT, OUT] uint8 image is the box of `key` (source coordinates under output pixels, ± resampling). */
function assertIsBox(image: Uint8Array, key: PickKey, view = viewFrom('train'), what = ''): void {
  const box = boxFor(view, key, W, H);
  for (const [i, j] of [[2, 2], [2, 9], [6, 5], [9, 2], [9, 9]] as const) {
    const jj = box.flip ? OUT - 1 - j : j;
    const sx = box.left + ((jj + 0.5) * box.width) / OUT - 0.5;
    const sy = box.top + ((i + 0.5) * box.height) / OUT - 0.5;
    const r = image[i * OUT + j]!;
    const g = image[OUT * OUT + i * OUT + j]!;
    // Interior pixels of a linear gradient: any interpolating kernel gives the value at (sx, sy).
    assert.ok(Math.abs(r - 4 * sx) <= 4 && Math.abs(g - 4 * sy) <= 4, `${what} pixel (${i}, ${j}) of box ${JSON.stringify(box)}: R ${r} G ${g}, expected ~${(4 * sx).toFixed(1)} ~${(4 * sy).toFixed(1)}`);
  }
}

function rowsOf(b: Batch): Uint8Array[] {
  const data = b.get('image').data as Uint8Array;
  return range(b.rows).map((r) => data.subarray(r * 3 * OUT * OUT, (r + 1) * 3 * OUT * OUT));
}

describe('decode-time views (image folders)', { timeout: SUITE_MS }, () => {
  for (const [workers, decode] of [[0, 'threads'], [1, 'processes']] as const) {
    it(`each delivered image is its pick's RandomResizedCrop box, flipped by its key (workers ${workers}, decode ${decode})`, async () => {
      const source = imageFolderSource(dir, { size: OUT, view: 'train', decode, decodeProcesses: 1 });
      assert.equal(source.keyed, true);
      const loader = await DataLoader.create(source, { batchSize: 4, shuffle: true, seed: 11, workers, augment: 2 });
      try {
        const seed = toU64(11);
        const byEpoch: string[] = [];
        for (const epoch of [0, 1]) {
          const batches = await within(HANG_MS, `epoch ${epoch}`, collect(loader.epoch(epoch)));
          assert.deepEqual(sorted(batches.flatMap((b) => [...b.picks])), range(24), 'every pick exactly once');
          const seen = new Map<number, string>();
          for (const b of batches) {
            rowsOf(b).forEach((img, r) => {
              const key = PickKey.fromPick(b.picks[r]!, 2, epoch, seed);
              assertIsBox(img, key, undefined, `epoch ${epoch} pick ${b.picks[r]}`);
              seen.set(b.picks[r]!, Buffer.from(img).toString('base64'));
            });
          }
          byEpoch.push(range(24).map((p) => seen.get(p)).join());
          // Two repeats of one sample are two crops (the gradient makes any two boxes differ).
          assert.notEqual(seen.get(0), seen.get(1), 'repeat 0 and repeat 1 of sample 0 gave the same image');
        }
        assert.notEqual(byEpoch[0], byEpoch[1], 'epochs 0 and 1 gave the same views');
        // A rerun of epoch 0 gives the same views (the sample cache would freeze the first ones otherwise too: both must hold).
        const again = await within(HANG_MS, 'epoch 0 again', collect(loader.epoch(0)));
        const seen = new Map<number, string>();
        for (const b of again) rowsOf(b).forEach((img, r) => seen.set(b.picks[r]!, Buffer.from(img).toString('base64')));
        assert.equal(range(24).map((p) => seen.get(p)).join(), byEpoch[0]);
        const epochs = loader.stats().epochs;
        assert.equal(epochs.length, 3);
        for (const e of epochs) assert.deepEqual([e.rowsFromCache, e.rowsFromSource], [0, 24], 'a keyed read always comes from the source, never from the sample cache');
      } finally {
        await loader.close();
        await source.close();
      }
    });
  }

  it("a view of plain JPEGs decodes in the reader threads under decode 'auto' (straight into the rows), the bytes of decode processes; other images keep processes", async () => {
    // NOTE [decoding in a reader thread] (image-decoding.ts).
    const jpegs = join(root, 'jpegs');
    const px = Buffer.alloc(97 * 83 * 3);
    for (let i = 0; i < px.length; i++) px[i] = (i * 37 + (i >> 7) * 11) & 255;
    for (const cls of ['a', 'b']) {
      mkdirSync(join(jpegs, cls), { recursive: true });
      for (let i = 0; i < 5; i++) writeFileSync(join(jpegs, cls, `${i}.jpg`), await sharp(px, { raw: { width: 97, height: 83, channels: 3 } }).rotate(90 * i).jpeg({ quality: 90 }).toBuffer());
    }
    assert.equal(imageFolderSource(dir, { size: 64, view: 'train' }).decode, availableParallelism() > 1 ? 'processes' : 'threads', 'PNGs keep the processes');
    const bytesOf = (t: { data: ArrayBufferView }) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    for (const more of [{ output: 'float32' }, { output: 'bfloat16', layout: 'hwc' }, { output: 'uint8', normalize: undefined }] as const) {
      const options = { size: 24, view: 'train', normalize: { mean: MEAN, std: STD }, ...more } as const;
      const auto = imageFolderSource(jpegs, options);
      const procs = imageFolderSource(jpegs, { ...options, decode: 'processes', decodeProcesses: 1 });
      assert.equal(auto.decode, 'threads', 'a JPEG view decodes in the reader threads');
      assert.equal(auto.readerWorkers, availableParallelism());
      const a = await DataLoader.create(auto, { batchSize: 4, shuffle: true, seed: 9, augment: 2, workers: 2 });
      const b = await DataLoader.create(procs, { batchSize: 4, shuffle: true, seed: 9, augment: 2, workers: 1 });
      try {
        for (const epoch of [0, 1]) {
          const [x, y] = await within(HANG_MS, `epoch ${epoch}`, Promise.all([collect(a.epoch(epoch)), collect(b.epoch(epoch))]));
          assert.equal(x.length, 5);
          x.forEach((batch, k) => {
            assert.deepEqual([...batch.picks], [...y[k]!.picks]);
            assert.ok(bytesOf(batch.get('image')).equals(bytesOf(y[k]!.get('image'))), `${JSON.stringify(more)} epoch ${epoch} batch ${k}: the same bytes`);
          });
        }
      } finally {
        await a.close();
        await b.close();
        await auto.close();
        await procs.close();
      }
    }
  });

  for (const kind of ['tarShards', 'arrow'] as const) {
    it(`${kind} image fields take a view too: each epoch's crops are the picks' boxes`, async () => {
      const source: AnyDataset & { keyed: boolean; close(): Promise<void> } =
        kind === 'tarShards'
          ? await tarShardsSource(shard, { image: { size: [OUT, OUT], view: { randomResizedCrop: true, flip: true } }, decode: 'threads', index: 'off' })
          : arrowSource(arrowFile, { columns: ['image', 'label'], decoders: { image: { kind: 'image', size: [OUT, OUT], view: 'train' } }, decode: 'threads' });
      assert.equal(source.keyed, true);
      const loader = await DataLoader.create(source, { batchSize: 4, shuffle: true, seed: 5, workers: 0 });
      try {
        const field = kind === 'tarShards' ? 'png' : 'image';
        const views: string[] = [];
        for (const epoch of [0, 1]) {
          const batches = await within(HANG_MS, `epoch ${epoch}`, collect(loader.epoch(epoch)));
          assert.deepEqual(sorted(batches.flatMap((b) => [...b.sampleIds])), range(8));
          const seen: string[] = [];
          for (const b of batches) {
            const data = b.get(field).data as Uint8Array;
            for (let r = 0; r < b.rows; r++) {
              const img = data.subarray(r * 3 * OUT * OUT, (r + 1) * 3 * OUT * OUT);
              assertIsBox(img, PickKey.fromPick(b.picks[r]!, 1, epoch, toU64(5)), undefined, `${kind} epoch ${epoch} sample ${b.sampleIds[r]}`);
              seen[b.sampleIds[r]!] = Buffer.from(img).toString('base64');
            }
          }
          views.push(seen.join());
        }
        assert.notEqual(views[0], views[1], 'epochs 0 and 1 gave the same views');
      } finally {
        await loader.close();
        await source.close();
      }
    });
  }

  it('a concat of keyed image sources is keyed and passes each part its picks keys', async () => {
    const a = imageFolderSource(dir, { size: OUT, view: 'train', decode: 'threads' });
    const b = imageFolderSource(dir, { size: OUT, view: 'train', decode: 'threads' });
    const both = sources.concat([a, b]);
    assert.equal((both as unknown as { keyed: boolean }).keyed, true);
    const loader = await DataLoader.create(both, { batchSize: 4, shuffle: true, seed: 3, workers: 0 });
    try {
      const batches = await within(HANG_MS, 'epoch 2', collect(loader.epoch(2)));
      assert.deepEqual(sorted(batches.flatMap((x) => [...x.sampleIds])), range(24));
      for (const x of batches) rowsOf(x).forEach((img, r) => assertIsBox(img, PickKey.fromPick(x.picks[r]!, 1, 2, toU64(3)), undefined, `concat sample ${x.sampleIds[r]}`));
    } finally {
      await loader.close();
      await a.close();
      await b.close();
    }
  });

  it('a normalize of one mean and one std applies to every channel (as torchvision broadcasts a list of one); other lengths are refused by name', async () => {
    const one = imageFolderSource(dir, { size: OUT, view: 'eval', normalize: { mean: [0.4], std: [0.3] }, decode: 'threads' });
    const three = imageFolderSource(dir, { size: OUT, view: 'eval', normalize: { mean: [0.4, 0.4, 0.4], std: [0.3, 0.3, 0.3] }, decode: 'threads' });
    try {
      assert.deepEqual((await one.get(1)).image.data, (await three.get(1)).image.data);
    } finally {
      await one.close();
      await three.close();
    }
    for (const [k, normalize] of [['mean', { mean: [0.5, 0.5], std: [0.25] }], ['std', { mean: [0.5], std: [0.2, 0.2, 0.2, 0.2] }]] as const) {
      assert.throws(() => imageFolderSource(dir, { size: OUT, view: 'eval', normalize, decode: 'threads' }), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_OPTION' && e.message.includes(`normalize.${k}`) && e.message.includes('1 or 3'));
    }
  });

  it('normalize and a bf16 output are applied by the decoder, on the eval box', async () => {
    const source = imageFolderSource(dir, { size: OUT, view: 'eval', normalize: { mean: MEAN, std: STD }, output: 'bfloat16', decode: 'threads' });
    const plain = imageFolderSource(dir, { size: OUT, view: 'eval', decode: 'threads' });
    const loader = await DataLoader.create(source, { batchSize: 4, workers: 0 });
    try {
      const [b] = await within(HANG_MS, 'epoch', collect(loader.epoch(0)));
      const t = b!.get('image');
      assert.equal(t.dtype, 'bfloat16');
      assert.deepEqual(t.shape, [4, 3, OUT, OUT]);
      const bits = t.data as Uint16Array;
      for (let r = 0; r < 4; r++) {
        const want = (await plain.get(b!.sampleIds[r]!)).image.data as Uint8Array;
        assertIsBox(want, new PickKey(0, 0, 0, 0), viewFrom('eval'), 'eval');
        for (let k = 0; k < want.length; k += 37) {
          const c = Math.floor(k / (OUT * OUT));
          const v = (want[k]! / 255 - MEAN[c]!) / STD[c]!;
          assert.ok(Math.abs(fromBFloat16Bits(bits[r * want.length + k]!) - v) <= Math.abs(v) / 128 + 1e-6, `row ${r} element ${k}`);
        }
      }
    } finally {
      await loader.close();
      await source.close();
      await plain.close();
    }
  });

  it('bad view options are LoaderErrors naming the knob', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ view: 'random' }, /view/],
      [{ view: 'train', fit: 'resize' }, /fit/],
      [{ view: { randomResizedCrop: { scale: [2, 1] } } }, /view\.randomResizedCrop\.scale/],
      [{ normalize: { mean: [0.5], std: [0.5] }, output: 'uint8' }, /normalize/],
      [{ normalize: { mean: [0.5, 0.5], std: [0.5] }, output: 'float32' }, /normalize\.mean/],
      [{ output: 'int8' }, /output/],
    ];
    for (const [more, knob] of cases) {
      assert.throws(() => imageFolderSource(dir, { size: OUT, ...more } as never), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_OPTION' && knob.test(e.message), JSON.stringify(more));
    }
  });

  it("a keyed source refuses mode 'resident' and diskStage (they would freeze one view)", async () => {
    const source = imageFolderSource(dir, { size: OUT, view: 'train', decode: 'threads' });
    try {
      await assert.rejects(DataLoader.create(source, { batchSize: 4, workers: 0, mode: 'resident' }), (e: unknown) => e instanceof LoaderError && /mode/.test(e.message));
      await assert.rejects(DataLoader.create(source, { batchSize: 4, workers: 0, diskStage: { gigabytes: 1, dir: root } }), (e: unknown) => e instanceof LoaderError && /diskStage/.test(e.message));
    } finally {
      await source.close();
    }
  });
});
