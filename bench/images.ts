// `bench images`: the ImageNet training recipe from image files — decode, RandomResizedCrop(224),
// random flip, normalize — through Stoker's image folder (decode-time view, CPU decode processes)
// against torchvision's ImageFolder + DataLoader (bench/torchvision_images.py) at the same core
// counts, in one run, on a generated ImageNet-like folder (JPEGs ~400×350, ~110 KB, written by
// sharp; reused from the temp dir when it exists). The rule: both sides read the same files with the
// same recipe and the same number of decoding processes; the last lines are the ratios.
//
//   npm run bench -- images [--files 4000] [--classes 100] [--cores 1,2] [--batch 64] [--dir DIR]
//                           [--output float32|bfloat16] [--decode processes|threads|gpu] [--device cuda] [--epochs 1] [--python PATH (default: the first python3 that imports torch)] [--no-torch]
//
// Per core count n: Stoker with one reader worker driving n decode processes (`--readers r`: r reader
// workers driving ceil(n / r) each; `--shape workers`: n reader workers with one decode process each;
// `--shape main`: no reader worker; `--shape default`: the loader's and the source's defaults, for
// the whole machine whatever n says), torchvision with
// num_workers n. Figures: time to first batch (from create / DataLoader construction), images/s
// after the first batch, CPU cores busy (this process and its reaped children over the run, from
// /proc/self/stat; its share of a machine others also use is not separated). `--decode gpu` is the
// GPU decode path: `decode: 'gpu'` on the source, batches on `--device` (default cuda), bf16 with
// `--output bfloat16` — one run on the whole machine (no decode process), cores busy included.
// `--epochs N` times N epochs of one loader (Stoker side), images/s over all but the first batch.
// One JSON line per configuration, then the table and the ratios.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { workerBoot } from '../src/pipeline/worker-boot.js';
import { DataLoader } from '../src/index.js';
import { imageFolderSource } from '../src/dataset/formats/image-folder.js';
import { defaultDecodeProcesses } from '../src/dataset/formats/image-decoding.js';
import { UsageError, fmtFixed, fmtInt, hardwareLine, table } from './util.js';

const USAGE = 'npm run bench -- images [--files N] [--classes N] [--cores 1,2] [--batch 64] [--dir DIR] [--output float32|bfloat16] [--decode processes|threads|gpu] [--device cuda] [--epochs 1] [--shape worker|workers|main|default] [--readers 1] [--python PATH] [--no-torch]';
const MEAN = [0.485, 0.456, 0.406];
const STD = [0.229, 0.224, 0.225];

interface Row {
  readonly side: 'stoker' | 'torchvision';
  readonly cores: number;
  readonly impl: string;
  readonly firstBatchS: number;
  readonly imagesPerS: number;
  readonly coresBusy: number;
}

/** CPU seconds of this process and of its children already reaped (utime, stime, cutime, cstime). */
function cpuSeconds(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  // After "pid (comm) ": state is field 3, so utime (14) … cstime (17) are indexes 11 … 14.
  const ticks = [11, 12, 13, 14].reduce((s, i) => s + Number(fields[i]), 0);
  return ticks / 100;
}

/** The generated folder (made once per (files, classes), in the temp dir), written by one worker thread per core. */
export async function fixture(files: number, classes: number): Promise<string> {
  const dir = join(tmpdir(), `stoker-bench-images-${files}-${classes}`);
  if (existsSync(join(dir, '.complete'))) return dir;
  const building = `${dir}.${process.pid}`;
  const t0 = performance.now();
  for (let c = 0; c < classes; c++) mkdirSync(join(building, `n${String(c).padStart(8, '0')}`), { recursive: true });
  const threads = Math.max(1, Math.min(availableParallelism(), Math.ceil(files / 50)));
  await Promise.all(Array.from({ length: threads }, (_, t) => new Promise<void>((resolve, reject) => {
    const w = new Worker(workerBoot(new URL('./fixtures/imagenet-like.ts', import.meta.url)), { eval: true, workerData: { dir: building, files, classes, start: t, step: threads } });
    w.once('error', reject);
    w.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`the JPEG writer thread exited with ${code}`))));
  })));
  writeFileSync(join(building, '.complete'), '');
  renameSync(building, dir);
  console.error(`generated ${files} JPEGs in ${dir} (${((performance.now() - t0) / 1000).toFixed(1)} s, ${threads} threads)`);
  return dir;
}

async function stoker(dir: string, cores: number, o: { batch: number; output: 'float32' | 'bfloat16'; decode: string; shape: string; device: string; epochs: number; readers: number }): Promise<Row> {
  const cpu0 = cpuSeconds();
  const t0 = performance.now();
  const shape = o.shape;
  const source = imageFolderSource(dir, {
    size: 224, view: 'train', normalize: { mean: MEAN, std: STD }, output: o.output,
    decode: o.decode as 'processes', decodeProcesses: shape === 'default' ? undefined : shape === 'workers' ? 1 : Math.ceil(cores / Math.min(cores, o.readers)),
  });
  // decode 'gpu': the files are read on the host and decoded on the device (no reader worker, no
  // decode process); the batches stay on the device.
  const gpu = o.decode === 'gpu';
  const workers = gpu ? 0 : shape === 'workers' ? cores : shape === 'main' ? 0 : Math.min(cores, o.readers);
  const each = shape === 'workers' ? 1 : shape === 'main' ? cores : Math.ceil(cores / workers);
  const loader = await DataLoader.create(source, { batchSize: o.batch, shuffle: true, ...(shape === 'default' && !gpu ? {} : { workers }), ...(gpu ? { device: o.device as 'cuda' } : {}) });
  let first = 0;
  let tFirst = 0;
  let images = 0;
  let readers = 0;
  try {
    for (let e = 0; e < o.epochs; e++) {
      const epoch = loader.epoch(e);
      const count = epoch.length;
      let k = 0;
      for await (const b of epoch) {
        if (first === 0) {
          tFirst = performance.now();
          first = (tFirst - t0) / 1000;
        } else images += b.rows;
        if (k === 0 && e === 0) readers = loader.stats().workers;
        // Device batches: wait for the last one's rows (stream order: every earlier decode is done too).
        if (gpu && k + 1 === count && e === o.epochs - 1) await (b.get('image') as { toHost?: () => Promise<unknown> }).toHost?.();
        // As the README's loop does: the loader reuses a released batch's memory (NOTE [released batches reused]).
        b.release();
        k++;
      }
    }
  } finally {
    await loader.close();
    await source.close();
  }
  const end = performance.now();
  const steady = (end - tFirst) / 1000;
  if (gpu) return { side: 'stoker', cores, impl: `decode gpu on ${o.device} (host reads the files, the device decodes)`, firstBatchS: first, imagesPerS: images / steady, coresBusy: (cpuSeconds() - cpu0) / ((end - t0) / 1000) };
  if (shape === 'default') {
    const each = defaultDecodeProcesses(true, readers);
    return { side: 'stoker', cores, impl: `${o.decode}, defaults: ${readers} reader worker${readers === 1 ? '' : 's'} × ${each} decode process${each === 1 ? '' : 'es'}`, firstBatchS: first, imagesPerS: images / steady, coresBusy: (cpuSeconds() - cpu0) / ((end - t0) / 1000) };
  }
  return { side: 'stoker', cores, impl: `${o.decode}, ${workers} reader worker${workers === 1 ? '' : 's'} × ${each} decode process${each === 1 ? '' : 'es'}`, firstBatchS: first, imagesPerS: images / steady, coresBusy: (cpuSeconds() - cpu0) / ((end - t0) / 1000) };
}

/** The first of `python3` (the GPU host's, with torchvision) and Debian's `/usr/bin/python3` that imports torch. */
function torchPython(): string {
  for (const p of ['python3', '/usr/bin/python3']) {
    if (spawnSync(p, ['-c', 'import torch'], { stdio: 'ignore', timeout: 120_000 }).status === 0) return p;
  }
  return 'python3';
}

function torchvision(python: string, dir: string, cores: readonly number[], batch: number): Row[] {
  const script = new URL('./torchvision_images.py', import.meta.url).pathname;
  const r = spawnSync(python, [script, dir, '--workers', cores.join(','), '--batch', String(batch)], { encoding: 'utf8', timeout: 3_600_000, maxBuffer: 16 << 20 });
  if (r.status !== 0) {
    console.error(`torchvision side failed (${python}): ${(r.stderr || r.error?.message || '').trim().split('\n').slice(-3).join(' | ')}`);
    return [];
  }
  return r.stdout.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => {
    const j = JSON.parse(l) as { workers: number; impl: string; firstBatchS: number; imagesPerS: number; coresBusy: number };
    console.log(l);
    return { side: 'torchvision', cores: j.workers, impl: `${j.impl}, num_workers ${j.workers}`, firstBatchS: j.firstBatchS, imagesPerS: j.imagesPerS, coresBusy: j.coresBusy };
  });
}

export async function main(args: readonly string[]): Promise<void> {
  let v: Record<string, string | boolean | undefined>;
  try {
    ({ values: v } = parseArgs({
      args: [...args], strict: true, allowPositionals: false,
      options: {
        files: { type: 'string', default: '4000' }, classes: { type: 'string', default: '100' }, cores: { type: 'string' }, batch: { type: 'string', default: '64' },
        dir: { type: 'string' }, output: { type: 'string', default: 'float32' }, decode: { type: 'string', default: 'processes' }, shape: { type: 'string', default: 'worker' }, readers: { type: 'string', default: '1' }, device: { type: 'string', default: 'cuda' }, epochs: { type: 'string', default: '1' },
        python: { type: 'string' }, 'no-torch': { type: 'boolean', default: false },
      },
    }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nusage: ${USAGE}`);
  }
  const n = availableParallelism();
  const cores = (v.cores as string | undefined)?.split(',').map(Number) ?? [...new Set([1, Math.max(1, n >> 1), n])];
  const batch = Number(v.batch);
  if (!cores.every((c) => Number.isInteger(c) && c >= 1) || !Number.isInteger(batch) || batch < 1) throw new UsageError(`bad --cores or --batch\nusage: ${USAGE}`);
  if (!(Number.isInteger(Number(v.epochs)) && Number(v.epochs) >= 1)) throw new UsageError(`bad --epochs\nusage: ${USAGE}`);
  if (!['float32', 'bfloat16'].includes(v.output as string) || !['worker', 'workers', 'main', 'default'].includes(v.shape as string)) throw new UsageError(`bad --output or --shape\nusage: ${USAGE}`);
  const readers = Number(v.readers);
  if (!Number.isSafeInteger(readers) || readers < 1) throw new UsageError(`bad --readers ${String(v.readers)}: an integer ≥ 1\nusage: ${USAGE}`);
  const dir = (v.dir as string | undefined) ?? (await fixture(Number(v.files), Number(v.classes)));
  console.log(`bench images: ${hardwareLine()}; ${dir}; RandomResizedCrop(224) + flip + normalize, ${v.output}, batch ${batch}`);
  const rows: Row[] = [];
  // A first pass warms the page cache (and the listing cache), so that neither side pays the disk.
  await stoker(dir, cores[cores.length - 1]!, { batch, output: v.output as 'float32', decode: v.decode as string, shape: v.shape as string, device: v.device as string, epochs: 1, readers });
  // The GPU path uses no decode process: one run, on the whole machine.
  for (const c of v.decode === 'gpu' ? [n] : cores) {
    const row = await stoker(dir, c, { batch, output: v.output as 'float32', decode: v.decode as string, shape: v.shape as string, device: v.device as string, epochs: Number(v.epochs), readers });
    console.log(JSON.stringify(row));
    rows.push(row);
  }
  if (!v['no-torch']) rows.push(...torchvision((v.python as string | undefined) ?? torchPython(), dir, cores, batch));
  console.log(table(rows, [
    { title: 'side', cell: (r) => r.side },
    { title: 'cores', align: 'right', cell: (r) => String(r.cores) },
    { title: 'how', cell: (r) => r.impl },
    { title: 'first batch s', align: 'right', cell: (r) => fmtFixed(r.firstBatchS, 2) },
    { title: 'images/s', align: 'right', cell: (r) => fmtInt(r.imagesPerS) },
    { title: 'cores busy', align: 'right', cell: (r) => fmtFixed(r.coresBusy, 2) },
  ]));
  const one = rows.find((r) => r.side === 'stoker' && r.cores === 1);
  for (const c of cores) {
    const s = rows.find((r) => r.side === 'stoker' && r.cores === c);
    const t = rows.find((r) => r.side === 'torchvision' && r.cores === c);
    const parts = [];
    if (s && one && c > 1) parts.push(`scaling ${(s.imagesPerS / one.imagesPerS / c).toFixed(2)} × cores of the 1-core throughput`);
    if (s && t) parts.push(`stoker / torchvision ${(s.imagesPerS / t.imagesPerS).toFixed(2)}× images/s, first batch ${(t.firstBatchS / s.firstBatchS).toFixed(2)}× sooner`);
    if (parts.length > 0) console.log(`${c} cores: ${parts.join('; ')}`);
  }
}
