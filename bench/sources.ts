// Built-in file sources through the loader: samples/s of each source (image folder, tar shards and a
// Hugging Face-shaped Arrow stream of the same JPEGs; NPY and safetensors of the decoded pixels) read
// by DataLoader with reader workers, against a hand-written reference measured in the same run. The reference is the job done
// by hand on one core: the same JPEGs read and decoded by sharp in a plain loop (sharp.concurrency(1),
// one decode awaited after another, the same resize and crop). The goal: an image folder read through
// the loader reaches ≥ 0.8 × cores × that loop.
//
// Fixture: an ImageFolder of JPEGs (quality 90) of 341 × 256 pixels — ImageNet as it is usually
// stored for training, pre-resized to a 256-pixel short side — with photo-like content (gradients,
// soft blobs, noise: ~28 KiB a file), in 10 classes, decoded to 224 × 224 by resizing the short side
// and cropping the centre (torchvision's eval transform). Written to a temporary folder, removed at
// the end.
//
// Extension point: ROWS below. Each row makes a dataset from the shared fixture (and may write files
// of its own into a scratch folder); every row is read with each worker count, interleaved with the
// others round by round, and its checksums must agree with the reference loop's.
//
// How it measures: rounds; in each round every contender reads one epoch (epoch index = round, so
// all see the same permutation), the starting contender rotating, after a warm-up round; a figure is
// the contender's median epoch. The sample cache is off, so every epoch decodes every image. Each
// batch is touched (label + two pixels per row, layout-independent) and released. Decodes run on
// libuv's thread pool, shared by the whole process: its size (UV_THREADPOOL_SIZE, default 4) is
// printed, since it caps how many images decode at once whatever the worker count. Two more
// hand-written rows bound what is possible: the loop with `cores` decodes in flight in one process,
// and the one-core loop in `cores` child processes (libvips pipelines contend within a process).
// The image folder is measured both ways: decode 'threads' (sharp in the thread that reads) and
// decode 'processes' (the decode pool; its default size per dataset copy); the tar and Arrow rows
// decode 'processes' too (the same pool, image-decoding.ts). 'CPU cores' is this
// process's CPU time over wall time, '+ children' that of its child processes (Linux /proc).

import { type ChildProcess, fork } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { DataLoader, RandomSampler } from '../src/index.js';
import type { Batch, EpochStats, SourceSpec } from '../src/index.js';
import { type AnyDataset, closeDataset } from '../src/dataset/dataset.js';
import { decodeImage } from '../src/image/image-decode.js';
import { imageFolderSource } from '../src/dataset/formats/images/image-folder.js';
import { arrowSource } from '../src/dataset/formats/arrow/arrow.js';
import { npySource } from '../src/dataset/formats/columns/npy.js';
import { safetensorsSource } from '../src/dataset/formats/columns/safetensors.js';
import { tarShardsSource } from '../src/dataset/formats/tar/tar-shards.js';
import { Binary, Field, Int32, Struct, Table, Utf8, tableToIPC, vectorFromArray } from 'apache-arrow';
import { create as tarCreate } from 'tar';
import { type ImageFixture, writeImageFixture } from './fixtures/images.js';
import type { Column } from './util.js';
import { collectGarbage, fmtFixed, fmtInt, hardware, hardwareLine, median, now, parseFlags, sink, table } from './util.js';
import { coverPlan } from '../src/image/image-reference.js';

const BATCH = 64;
const SEED = 42;
/** Output side: 224 × 224, uint8, 3 channels. */
const SIDE = 224;

interface Config {
  readonly images: number;
  readonly warmupRounds: number;
  readonly rounds: number;
}

const DEFAULT: Config = { images: 2048, warmupRounds: 1, rounds: 3 };
const QUICK: Config = { images: 512, warmupRounds: 1, rounds: 1 };

// ---------------------------------------------------------------------------------------------
// The sources under test (the extension point)

export interface SourceRow {
  /** Shown in the table and the ratio lines. */
  readonly name: string;
  /**
   * The dataset, made from the shared fixture on the main thread (a built-in source that reader
   * workers can reopen). Files of the row's own go under `scratch`, which is removed at the end.
   * Fields: an image (uint8 [3, 224, 224] or [224, 224, 3]) and a label (int32), named or in that order.
   */
  make(fixture: ImageFixture, scratch: string): AnyDataset | SourceSpec | Promise<AnyDataset | SourceSpec>;
  /** Batch names when the source's own are not image / label (tar fields are named by extension). */
  readonly names?: readonly string[];
  /** Worker counts to measure besides 'auto' (default: 0, 1, 2, 4 … cores). */
  readonly workers?: readonly number[];
  /** Whether the image-folder goal (≥ 0.8 × cores × the one-core loop) applies: rows that decode JPEGs. */
  readonly decodes?: boolean;
}

/**
 * Rows for the other formats hold the same pixels decoded once: `decodedImages(fixture)` gives them
 * ([n, 3, 224, 224] uint8, in fixture order, and the labels) to write as NPY, safetensors, Arrow…;
 * a tar row packs the fixture's JPEGs themselves (fixture.dir, fixture.files).
 */
export const ROWS: SourceRow[] = [
  { name: "image folder, decode: 'threads'", decodes: true, make: (f) => imageFolderSource(f.dir, { size: SIDE, decode: 'threads' }) },
  { name: "image folder, decode: 'processes'", decodes: true, make: (f) => imageFolderSource(f.dir, { size: SIDE, decode: 'processes' }) },
  {
    // WebDataset shards of the same JPEGs (4 shards, <key>.jpg + <key>.cls), decoded in the decode pool.
    name: "tar shards (JPEG), decode: 'processes'", decodes: true, names: ['image', 'label'], workers: [1],
    make: async (f, scratch) => {
      const shards = 4;
      const per = Math.ceil(f.n / shards);
      // Each contender makes its own source; the files are written once (rewriting them would change
      // the shards under the sources already open).
      for (let k = 0; k < shards && !existsSync(join(scratch, `shard-${shards - 1}.tar`)); k++) {
        const src = join(scratch, `src-${k}`);
        mkdirSync(src, { recursive: true });
        const names: string[] = [];
        for (let i = k * per; i < Math.min(f.n, (k + 1) * per); i++) {
          const key = String(i).padStart(6, '0');
          copyFileSync(join(f.dir, f.files[i]!), join(src, `${key}.jpg`));
          writeFileSync(join(src, `${key}.cls`), String(f.labels[i]));
          names.push(`${key}.jpg`, `${key}.cls`);
        }
        await tarCreate({ file: join(scratch, `shard-${k}.tar`), cwd: src, portable: true }, names);
      }
      return tarShardsSource(join(scratch, 'shard-{0..3}.tar'), { image: { size: [SIDE, SIDE] }, decode: 'processes' });
    },
  },
  {
    // A Hugging Face-shaped Arrow stream: image = struct<bytes, path> holding the JPEGs, label int32,
    // decoded in the decode pool.
    name: "Arrow stream (HF image struct), decode: 'processes'", decodes: true, workers: [1],
    make: (f, scratch) => {
      const path = join(scratch, 'data.arrow');
      if (existsSync(path)) return arrowSource(path, { decoders: { image: { kind: 'image', size: [SIDE, SIDE] } }, decode: 'processes' });
      const table = new Table({
        image: vectorFromArray(f.files.map((file) => ({ bytes: new Uint8Array(readFileSync(join(f.dir, file))), path: file })), new Struct([new Field('bytes', new Binary(), true), new Field('path', new Utf8(), true)])),
        label: vectorFromArray(Array.from(f.labels), new Int32()),
      });
      writeFileSync(path, tableToIPC(table, 'stream'));
      return arrowSource(path, { decoders: { image: { kind: 'image', size: [SIDE, SIDE] } }, decode: 'processes' });
    },
  },
  {
    // Pre-decoded pixels: [n, 3, 224, 224] uint8 + int32 labels, read by positioned reads.
    name: 'npy (decoded, positioned reads)', workers: [1],
    make: async (f, scratch) => {
      const { images, labels } = await decodedImages(f);
      if (!existsSync(join(scratch, 'label.npy'))) writeFileSync(join(scratch, 'image.npy'), npyFile('|u1', [f.n, 3, SIDE, SIDE], images));
      if (!existsSync(join(scratch, 'label.npy'))) writeFileSync(join(scratch, 'label.npy'), npyFile('<i4', [f.n], new Uint8Array(labels.buffer, labels.byteOffset, labels.byteLength)));
      return npySource({ image: join(scratch, 'image.npy'), label: join(scratch, 'label.npy') }, { load: 'positioned' });
    },
  },
  {
    name: 'safetensors (decoded, positioned reads)', workers: [1],
    make: async (f, scratch) => {
      const { images, labels } = await decodedImages(f);
      const path = join(scratch, 'data.safetensors');
      if (!existsSync(path)) writeFileSync(path, safetensorsFile([
        ['image', 'U8', [f.n, 3, SIDE, SIDE], images],
        ['label', 'I32', [f.n], new Uint8Array(labels.buffer, labels.byteOffset, labels.byteLength)],
      ]));
      return safetensorsSource(path, { load: 'positioned' });
    },
  },
];

/** A .npy file (format 1.0) by the published layout. */
function npyFile(descr: string, shape: readonly number[], data: Uint8Array): Uint8Array {
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  const total = Math.ceil((10 + header.length + 1) / 64) * 64;
  header = header.padEnd(total - 11, ' ') + '\n';
  const out = new Uint8Array(total + data.length);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, header.length & 0xff, header.length >> 8]);
  out.set(new TextEncoder().encode(header), 10);
  out.set(data, total);
  return out;
}

/** A safetensors file by the published layout: u64 header length, JSON header, the buffer. */
function safetensorsFile(tensors: readonly [string, string, readonly number[], Uint8Array][]): Uint8Array {
  const header: Record<string, unknown> = {};
  let offset = 0;
  for (const [name, dtype, shape, data] of tensors) {
    header[name] = { dtype, shape, data_offsets: [offset, offset + data.length] };
    offset += data.length;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  let at = 8 + json.length;
  for (const [, , , data] of tensors) {
    out.set(data, at);
    at += data.length;
  }
  return out;
}

let decodedCache: { fixture: ImageFixture; images: Uint8Array; labels: Int32Array } | undefined;

/** Every fixture image decoded as the image folder decodes it: [n, 3, 224, 224] uint8, fixture order. */
export async function decodedImages(fixture: ImageFixture): Promise<{ images: Uint8Array; labels: Int32Array }> {
  if (decodedCache?.fixture === fixture) return decodedCache;
  const per = 3 * SIDE * SIDE;
  const images = new Uint8Array(fixture.n * per);
  for (let i = 0; i < fixture.n; i++) {
    const path = join(fixture.dir, fixture.files[i]!);
    images.set((await decodeImage(readFileSync(path), { size: [SIDE, SIDE], source: path })).data, i * per);
  }
  decodedCache = { fixture, images, labels: fixture.labels };
  return decodedCache;
}

// ---------------------------------------------------------------------------------------------
// Measuring one epoch

interface EpochMeasure {
  readonly ms: number;
  readonly rows: number;
  readonly checksum: number;
  readonly mainBusy: number;
  /** Process CPU time (all threads, libuv's pool included) over wall time. */
  readonly cores: number;
  /** CPU time of this process's child processes (decode pools, the hand-written process loop) over wall time; NaN without /proc. */
  readonly childCores: number;
  readonly stats: EpochStats | undefined;
}

/** CPU milliseconds of this process's live child processes (Linux /proc; NaN elsewhere). Exited children are not counted. */
function childrenCpuMs(): number {
  let ticks = 0;
  try {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        if (Number(fields[1]) === process.pid) ticks += Number(fields[11]) + Number(fields[12]);
      } catch {
        // Gone meanwhile.
      }
    }
  } catch {
    return Number.NaN;
  }
  // USER_HZ is 100 on every Linux build Node supports.
  return ticks * 10;
}

/** Label + the first and the centre pixel's channels of each row, in either layout. */
function touch(batch: Batch): number {
  const image = batch.get('image');
  const data = image.data as Uint8Array;
  const labels = batch.get('label').data as Int32Array;
  const chw = image.shape[1] === 3;
  const plane = SIDE * SIDE;
  const centre = (SIDE >> 1) * SIDE + (SIDE >> 1);
  let acc = 0;
  for (let r = 0; r < labels.length; r++) {
    const base = r * 3 * plane;
    acc += labels[r]!;
    for (let c = 0; c < 3; c++) acc += chw ? data[base + c * plane]! + data[base + c * plane + centre]! : data[base + c]! + data[base + centre * 3 + c]!;
  }
  return acc;
}

async function timed(body: () => Promise<{ rows: number; checksum: number }>): Promise<Omit<EpochMeasure, 'stats'>> {
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = process.cpuUsage();
  const kids0 = childrenCpuMs();
  const t0 = now();
  const { rows, checksum } = await body();
  const ms = now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const kids = childrenCpuMs() - kids0;
  const elu = performance.eventLoopUtilization(elu0);
  sink.value += checksum;
  return { ms, rows, checksum, mainBusy: elu.utilization, cores: (cpu.user + cpu.system) / 1000 / ms, childCores: kids / ms };
}

interface Contender {
  readonly key: string;
  readonly name: string;
  readonly row: string;
  /** Reader workers (loader.stats().workers); undefined for the hand-written loops. */
  readonly workers: number | undefined;
  runEpoch(epoch: number): Promise<EpochMeasure>;
  close(): Promise<void>;
}

async function loaderContender(row: SourceRow, fixture: ImageFixture, scratch: string, workers: number | 'auto'): Promise<Contender> {
  const dataset = await row.make(fixture, scratch);
  const loader = await DataLoader.create(dataset, { batchSize: BATCH, mode: 'streaming', seed: SEED, workers, sampleCache: false, names: row.names });
  const resolved = loader.stats().workers;
  const name = workers === 'auto' ? `workers: 'auto' (→ ${resolved})` : `workers: ${workers}${workers === 0 ? ' (main thread)' : ''}`;
  return {
    key: `${row.name}/w${workers}`,
    name,
    row: row.name,
    workers: resolved,
    runEpoch: async (epoch) => {
      const m = await timed(async () => {
        let rows = 0;
        let checksum = 0;
        for await (const batch of loader.epoch(epoch)) {
          checksum += touch(batch);
          rows += batch.rows;
          batch.release();
        }
        return { rows, checksum };
      });
      const stats = loader.stats().epochs.at(-1)!;
      if (stats.epoch !== epoch || !stats.complete) throw new Error(`${row.name}, ${name}: epoch ${epoch} did not complete`);
      return { ...m, stats };
    },
    close: async () => {
      await loader.close();
      await closeDataset(dataset);
    },
  };
}

/**
 * The same files decoded by sharp by hand, in the loader's order: `inFlight` decodes at a time from
 * the main thread (1: the one-core reference, each decode awaited before the next).
 */
function sharpLoop(fixture: ImageFixture, inFlight: number): Contender {
  const sampler = new RandomSampler(fixture.n, SEED);
  const usable = Math.floor(fixture.n / BATCH) * BATCH;
  const centre = (SIDE >> 1) * SIDE + (SIDE >> 1);
  // torchvision's Resize(SIDE) + CenterCrop(SIDE) geometry, as the loader's decode uses; every fixture
  // image has the same size, so the loop plans it once (the loader reads each image's header).
  const plan = coverPlan(fixture.height, fixture.width, SIDE, SIDE);
  const one = async (id: number): Promise<number> => {
    const bytes = readFileSync(join(fixture.dir, fixture.files[id]!));
    const px = await sharp(bytes).resize(plan.rw, plan.rh, { fit: 'fill' }).extract({ left: plan.left, top: plan.top, width: SIDE, height: SIDE }).removeAlpha().toColourspace('srgb').raw().toBuffer();
    let acc = fixture.labels[id]!;
    for (let c = 0; c < 3; c++) acc += px[c]! + px[centre * 3 + c]!;
    return acc;
  };
  return {
    key: `sharp${inFlight}`,
    name: inFlight === 1 ? 'sharp loop, one core (reference)' : `sharp loop, ${inFlight} decodes in flight`,
    row: 'hand-written',
    workers: undefined,
    runEpoch: async (epoch) => {
      const m = await timed(async () => {
        const order = sampler.indices(epoch);
        let checksum = 0;
        let next = 0;
        const lane = async () => {
          while (next < usable) {
            const v = await one(order[next++]!);
            checksum += v;
          }
        };
        await Promise.all(Array.from({ length: inFlight }, lane));
        return { rows: usable, checksum };
      });
      return { ...m, stats: undefined };
    },
    close: async () => {},
  };
}

/**
 * The one-core loop in `count` child processes at once, each on its share of the epoch: what the
 * machine gives when decodes do not share a process (libvips contends within one).
 */
async function sharpProcesses(fixture: ImageFixture, count: number): Promise<Contender> {
  const sampler = new RandomSampler(fixture.n, SEED);
  const usable = Math.floor(fixture.n / BATCH) * BATCH;
  const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
  const children: ChildProcess[] = [];
  for (let k = 0; k < count; k++) {
    const child = fork(new URL(`./fixtures/sharp-child${ext}`, import.meta.url), { execArgv: process.execArgv.filter((a) => !a.startsWith('--input-type')), stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code) => reject(new Error(`a sharp child process exited with code ${code} at start`)));
    });
  }
  const ask = (child: ChildProcess, ids: ArrayLike<number>): Promise<number> =>
    new Promise((resolve, reject) => {
      child.once('message', (m: { checksum: number }) => resolve(m.checksum));
      child.send({ files: Array.from(ids, (id) => join(fixture.dir, fixture.files[id]!)), labels: Array.from(ids, (id) => fixture.labels[id]!), side: SIDE, plan: coverPlan(fixture.height, fixture.width, SIDE, SIDE) }, (e) => e && reject(e));
    });
  return {
    key: 'processes',
    name: `sharp loop in ${count} processes, one decode each`,
    row: 'hand-written',
    workers: undefined,
    runEpoch: async (epoch) => {
      const m = await timed(async () => {
        const order = sampler.indices(epoch).subarray(0, usable);
        const per = Math.ceil(usable / count);
        const sums = await Promise.all(children.map((c, k) => ask(c, order.subarray(k * per, Math.min(usable, (k + 1) * per)))));
        return { rows: usable, checksum: sums.reduce((a, b) => a + b, 0) };
      });
      return { ...m, mainBusy: Number.NaN, stats: undefined };
    },
    close: async () => {
      for (const c of children) if (c.connected) c.disconnect();
    },
  };
}

/** 0, then 1 … cores when there are few; on a larger host, powers of two and cores. 'auto' is measured apart, also when it names one of these. */
function workerCounts(cores: number): number[] {
  const out = new Set<number>([0]);
  if (cores <= 4) for (let w = 1; w <= cores; w++) out.add(w);
  else {
    for (let w = 1; w < cores; w *= 2) out.add(w);
    out.add(cores);
  }
  return [...out].sort((a, b) => a - b);
}

interface Row {
  readonly key: string;
  readonly row: string;
  readonly name: string;
  readonly workers: number | undefined;
  readonly ms: number;
  readonly msMin: number;
  readonly msMax: number;
  readonly samplesPerSec: number;
  readonly mainBusy: number;
  readonly cores: number;
  readonly childCores: number;
  /** Time the consumer waited for batches (loader.stats()), median ms per epoch. */
  readonly waitMs: number | undefined;
}

// ---------------------------------------------------------------------------------------------

export async function main(args: readonly string[]): Promise<void> {
  const flags = parseFlags(args, ['json', 'quick'], 'npm run bench -- sources [--json] [--quick]');
  const cfg = flags.quick ? QUICK : DEFAULT;
  const log = flags.json ? (_: string) => {} : (s: string) => process.stderr.write(`${s}\n`);
  const hw = hardware();
  const cores = availableParallelism();
  const poolSize = Number(process.env.UV_THREADPOOL_SIZE ?? 4) || 4;
  if (!flags.json) console.log(`hardware: ${hardwareLine(hw)}; availableParallelism ${cores}; libuv thread pool ${poolSize}${process.env.UV_THREADPOOL_SIZE ? '' : ' (default)'}`);

  const root = mkdtempSync(join(tmpdir(), 'stoker-bench-sources-'));
  const contenders: Contender[] = [];
  try {
    log(`writing ${cfg.images} JPEGs (341 × 256, quality 90) to ${root}`);
    const t0 = now();
    const fixture = await writeImageFixture(join(root, 'images'), { n: cfg.images, classes: 10, width: 341, height: 256, quality: 90 });
    log(`  ${(fixture.totalBytes / 2 ** 20).toFixed(1)} MiB in ${((now() - t0) / 1000).toFixed(1)} s`);
    // The page cache holds the files from here on: every contender reads them warm.
    const usable = Math.floor(fixture.n / BATCH) * BATCH;

    contenders.push(sharpLoop(fixture, 1), sharpLoop(fixture, cores), await sharpProcesses(fixture, cores));
    for (const row of ROWS) {
      const scratch = join(root, `row-${ROWS.indexOf(row)}`);
      mkdirSync(scratch, { recursive: true });
      const auto = await loaderContender(row, fixture, scratch, 'auto');
      for (const w of row.workers ?? workerCounts(cores)) {
        log(`  starting ${row.name}, workers: ${w}`);
        contenders.push(await loaderContender(row, fixture, scratch, w));
      }
      contenders.push(auto);
    }
    const measures: EpochMeasure[][] = contenders.map(() => []);
    const total = cfg.warmupRounds + cfg.rounds;
    for (let round = 0; round < total; round++) {
      const sums = new Map<string, number>();
      for (let k = 0; k < contenders.length; k++) {
        const i = (round + k) % contenders.length;
        const c = contenders[i]!;
        collectGarbage();
        const m = await c.runEpoch(round);
        if (m.rows !== usable) throw new Error(`${c.row}, ${c.name}: epoch ${round} delivered ${m.rows} rows, expected ${usable}`);
        sums.set(`${c.row}, ${c.name}`, m.checksum);
        if (round >= cfg.warmupRounds) measures[i]!.push(m);
      }
      if (new Set(sums.values()).size !== 1) throw new Error(`round ${round}: contenders disagree on the pixels: ${[...sums].map(([n, s]) => `${n}=${s}`).join(', ')}`);
      log(`  round ${round + 1}/${total}${round < cfg.warmupRounds ? ' (warm-up)' : ''}`);
    }

    const rows: Row[] = contenders.map((c, i) => {
      const ms = measures[i]!;
      const stat = (f: (s: EpochStats) => number) => (ms[0]!.stats === undefined ? undefined : median(ms.map((m) => f(m.stats!))));
      const msEpoch = median(ms.map((m) => m.ms));
      return {
        key: c.key, row: c.row, name: c.name, workers: c.workers, ms: msEpoch,
        msMin: Math.min(...ms.map((m) => m.ms)), msMax: Math.max(...ms.map((m) => m.ms)), samplesPerSec: usable / (msEpoch / 1000),
        mainBusy: median(ms.map((m) => m.mainBusy)), cores: median(ms.map((m) => m.cores)), childCores: median(ms.map((m) => m.childCores)),
        waitMs: stat((s) => s.waitMs),
      };
    });
    report(rows, fixture, cfg, cores, poolSize, flags, hw);
  } finally {
    for (const c of contenders) await c.close();
    rmSync(root, { recursive: true, force: true });
  }
}

function report(rows: readonly Row[], fixture: ImageFixture, cfg: Config, cores: number, poolSize: number, flags: { json: boolean; quick: boolean }, hw: ReturnType<typeof hardware>): void {
  const ref = rows.find((r) => r.key === 'sharp1')!;
  const loop = rows.find((r) => r.key === `sharp${cores}`)!;
  const goal = Math.round(0.8 * cores * 100) / 100;
  const procs = rows.find((r) => r.key === 'processes')!;
  const ratios: { label: string; value: number; goal?: number }[] = [
    { label: `sharp loop, ${cores} decodes in flight in one process / one-core loop`, value: loop.samplesPerSec / ref.samplesPerSec },
    { label: `sharp loop in ${cores} processes / one-core loop (what the cores give)`, value: procs.samplesPerSec / ref.samplesPerSec },
  ];
  for (const row of ROWS) {
    const mine = rows.filter((r) => r.row === row.name);
    const auto = mine.find((r) => r.key.endsWith('/wauto'))!;
    const best = mine.reduce((a, b) => (b.samplesPerSec > a.samplesPerSec ? b : a));
    const g = row.decodes ? goal : undefined;
    ratios.push({ label: `${row.name}, ${auto.name} / one-core loop`, value: auto.samplesPerSec / ref.samplesPerSec, goal: g });
    const one = mine.find((r) => r.key.endsWith('/w1'));
    if (one) ratios.push({ label: `${row.name}, workers: 1 / one-core loop`, value: one.samplesPerSec / ref.samplesPerSec });
    ratios.push({ label: `${row.name}, best (${best.name}) / one-core loop`, value: best.samplesPerSec / ref.samplesPerSec, goal: g });
  }
  const verdict = (r: { value: number; goal?: number }) => (r.goal === undefined ? undefined : r.value >= r.goal);
  if (flags.json) {
    console.log(JSON.stringify({
      bench: 'sources', hardware: { ...hw, availableParallelism: cores, uvThreadpoolSize: poolSize },
      config: { ...cfg, batchSize: BATCH, seed: SEED, side: SIDE, fixture: { n: fixture.n, width: fixture.width, height: fixture.height, quality: fixture.quality, totalBytes: fixture.totalBytes } },
      rows, ratios: Object.fromEntries(ratios.map((r) => [r.label, { value: r.value, goal: r.goal ?? null, met: flags.quick ? null : verdict(r) ?? null }])), sink: sink.value,
    }, null, 2));
    return;
  }
  const columns: Column<Row>[] = [
    { title: 'source', cell: (r) => r.row },
    { title: 'contender', cell: (r) => r.name },
    { title: 'samples/s', align: 'right', cell: (r) => fmtInt(r.samplesPerSec) },
    { title: 'ms/epoch', align: 'right', cell: (r) => fmtFixed(r.ms, 0) },
    { title: 'min–max ms', align: 'right', cell: (r) => `${r.msMin.toFixed(0)}–${r.msMax.toFixed(0)}` },
    { title: '× ref', align: 'right', cell: (r) => fmtFixed(r.samplesPerSec / ref.samplesPerSec, 2) },
    { title: 'CPU cores', align: 'right', cell: (r) => fmtFixed(r.cores, 2) },
    { title: '+ children', align: 'right', cell: (r) => (Number.isFinite(r.childCores) ? fmtFixed(r.childCores, 2) : '—') },
    { title: 'main busy', align: 'right', cell: (r) => (Number.isFinite(r.mainBusy) ? `${(r.mainBusy * 100).toFixed(0)}%` : '—') },
    { title: 'waitMs', align: 'right', cell: (r) => fmtFixed(r.waitMs, 0) },
  ];
  const usable = Math.floor(fixture.n / BATCH) * BATCH;
  console.log('');
  console.log(
    `${fmtInt(usable)} JPEGs/epoch (${fixture.width} × ${fixture.height}, quality ${fixture.quality}, ${(fixture.totalBytes / fixture.n / 1024).toFixed(1)} KiB each) → uint8 [3, ${SIDE}, ${SIDE}] (resize short side + centre crop), ` +
      `batch ${BATCH}, sampleCache: false, ${cfg.warmupRounds} warm-up + ${cfg.rounds} timed round${cfg.rounds === 1 ? '' : 's'}, median epoch`,
  );
  console.log(table(rows, columns));
  console.log('');
  console.log(`cores ${cores}; libuv thread pool ${poolSize} (every sharp decode of a process runs there: at most ${Math.min(cores, poolSize)} at once in one process)`);
  console.log(`goal: image-folder throughput ≥ 0.8 × cores × the one-core loop = ${goal} × ref`);
  console.log('');
  const width = Math.max(...ratios.map((r) => r.label.length));
  for (const r of ratios) {
    const met = verdict(r);
    const judged = flags.quick ? 'not judged (--quick)' : met ? 'met' : 'NOT met';
    console.log(`${r.label.padEnd(width)}  ${r.value.toFixed(2).padStart(6)}${r.goal === undefined ? '' : `   goal ≥ ${r.goal}: ${judged}`}`);
  }
}
