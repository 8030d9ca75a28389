// `bench images`: the ImageNet training recipe from image files — decode, RandomResizedCrop(224),
// random flip, normalize — through Stoker's image folder (decode-time view, CPU decode processes)
// against torchvision's ImageFolder + DataLoader (bench/torchvision_images.py) at the same core
// counts, in one run, on a generated ImageNet-like folder (JPEGs ~400×350, ~110 KB, written by
// sharp; reused from the temp dir when it exists). The rule: both sides read the same files with the
// same recipe and the same number of decoding processes; the last lines are the ratios.
//
//   npm run bench -- images [--files 4000] [--classes 100] [--cores 1,2] [--batch 64] [--dir DIR]
//                           [--output float32|bfloat16] [--decode auto|processes|threads|gpu] [--device cuda]
//                           [--epochs 1] [--rounds 1] [--shape worker|workers|main|default] [--readers 1] [--prefetch N]
//                           [--python PATH (default: the first python3 that imports torch)] [--no-torch]
//
// Per core count n: Stoker with its default `decode: 'auto'`, which on these JPEGs with a view
// decodes in the reader threads (NOTE [decoding in a reader thread]): n reader workers, each decoding
// straight into the batch's rows. With `--decode processes`: one reader worker driving n decode processes (`--readers r`: r reader
// workers driving ceil(n / r) each; `--shape workers`: n reader workers with one decode process each;
// `--shape main`: no reader worker; `--shape default`: the loader's and the source's defaults, for
// the whole machine whatever n says; `--prefetch N`: the loader's `prefetch`, batches in flight), torchvision with num_workers n. `--rounds R` runs the two
// sides alternately R times per core count (stoker, torchvision, stoker, torchvision, …; one python
// process per torchvision run), so that both see the same machine state; a warm-up Stoker pass
// comes first. `--epochs N` applies to both sides: N epochs of one loader, images/s over all but the
// first batch. Figures per run: time to first batch (from create / DataLoader construction),
// images/s after the first batch, CPU cores busy (this process and its reaped children over the
// run, from /proc/self/stat; its share of a machine others also use is not separated).
// `--decode gpu` is the GPU decode path: `decode: 'gpu'` on the source, batches on `--device`
// (default cuda), bf16 with `--output bfloat16` — run on the whole machine (no decode process),
// cores busy included.
//
// The decoder's ceiling (bench/images-ceiling.ts, `--no-ceiling` skips it): before each Stoker run,
// libjpeg-turbo alone decodes exactly the boxes of the run (the same crop decode calls and DCT
// scaling as the route, bytes in memory, no resample, no cast, no messages) in a tight loop on this
// one thread; the summary gives Stoker's images/s ÷ (n × the loop's images/s), and the same by CPU
// time (the loop's CPU ms an image ÷ Stoker's, every thread and child: what a loaded host does not
// distort).
//
// Where Stoker's CPU goes (Linux only): after each Stoker run a `cpu` line (and the row's "cpu"
// field) splits the steady state — from the first batch to the end of the last epoch, before
// loader.close() — from /proc/self/task/*/stat and the stat of each direct child running this node
// binary (the decode processes): the main thread's CPU µs per image and busy fraction (CPU s /
// steady wall s), each other thread of this process above 2 % of a core (the reader workers among
// them; by tid, busiest first), the decode children's busy fractions (the mean over those above
// 2 % of a core: an idle one, typically the main thread's own until it retires after 5 s idle, is
// listed but left out of it) and their CPU µs per image together, the share of it on the children's
// main threads (the decode; the rest is V8's and libuv's helpers), how long the main threads waited
// runnable for a CPU (/proc/…/schedstat: a thread neither busy nor waiting for a CPU waits for work),
// and the cores busy in steady state (every thread and child above, plus other children such as
// tsx's esbuild).
//
// Output: one JSON line per run (with "round"), the table of all runs, then per core count the
// median images/s of each side, the median of the per-round stoker / torchvision ratios and their
// min–max, and the ratio lines.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, readlinkSync, realpathSync, renameSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { workerBoot } from '../src/base/worker-boot.js';
import { DataLoader } from '../src/index.js';
import { imageFolderSource } from '../src/dataset/formats/images/image-folder.js';
import { defaultDecodeProcesses } from '../src/image/processes/image-decoding.js';
import { type Ceiling, ceilingJobs, runCeiling } from './images-ceiling.js';
import { UsageError, clockTicks, cpuTicksOf, fmtFixed, fmtInt, hardwareLine, median, statFields, table } from './util.js';

const USAGE = 'npm run bench -- images [--files N] [--classes N] [--cores 1,2] [--batch 64] [--dir DIR] [--output float32|bfloat16] [--decode auto|processes|threads|gpu] [--device cuda] [--epochs 1] [--rounds 1] [--shape worker|workers|main|default] [--readers 1] [--prefetch N] [--python PATH] [--no-torch] [--no-ceiling]';
const MEAN = [0.485, 0.456, 0.406];
const STD = [0.229, 0.224, 0.225];

/** Where the Stoker side's CPU went in steady state (see the header). */
interface CpuSplit {
  readonly steadyS: number;
  readonly images: number;
  readonly mainUsPerImage: number;
  readonly mainBusy: number;
  /** Fraction of the wall the main thread was runnable but not running (/proc schedstat: waiting for a CPU). */
  readonly mainWait: number;
  /** Other threads of this process above 2 % of a core, busiest first. */
  readonly threads: readonly { readonly tid: number; readonly comm: string; readonly usPerImage: number; readonly busy: number; readonly wait: number }[];
  readonly decodeChildren: number;
  /** Each decode child's busy fraction, by pid, busiest first. */
  readonly childBusy: readonly { readonly pid: number; readonly busy: number }[];
  /** The mean over the decode children above 2 % of a core (an idle one, e.g. the main thread's own pool, would hide the starvation). */
  readonly childMeanBusy: number;
  /** The same mean for the children's main threads only (the decode itself; the rest is V8's GC and libuv helpers). */
  readonly childMainMeanBusy: number;
  /** The mean over the same children of their main threads' time waiting for a CPU (runnable, not running). */
  readonly childMainMeanWait: number;
  readonly childUsPerImage: number;
  readonly coresBusy: number;
}

interface Row {
  readonly side: 'stoker' | 'torchvision';
  readonly cores: number;
  readonly round: number;
  readonly impl: string;
  readonly firstBatchS: number;
  readonly imagesPerS: number;
  readonly coresBusy: number;
  /** Stoker: seconds in loader.close() + source.close(), inside the images/s window. */
  readonly closeS?: number;
  readonly cpu?: CpuSplit;
}

interface CpuSnapshot {
  readonly at: number;
  /** This process's threads: tid → ticks and name (read here: a reader worker is gone once the loader closes). */
  readonly threads: ReadonlyMap<number, { readonly ticks: number; readonly waitNs: number; readonly comm: string }>;
  /** Live direct children: pid → ticks (the whole process, and its main thread alone), and whether it runs this node binary. */
  readonly children: ReadonlyMap<number, { readonly ticks: number; readonly mainTicks: number; readonly mainWaitNs: number; readonly node: boolean }>;
}

let nodeBinary: string | undefined;
/** Per-thread and per-child CPU now; undefined off Linux or when /proc cannot be read. */
function cpuSnapshot(): CpuSnapshot | undefined {
  if (process.platform !== 'linux') return undefined;
  try {
    nodeBinary ??= realpathSync(process.execPath);
    const threads = new Map<number, { ticks: number; waitNs: number; comm: string }>();
    for (const t of readdirSync('/proc/self/task')) {
      const f = statFields(`/proc/self/task/${t}/stat`);
      if (f) threads.set(Number(t), { ticks: cpuTicksOf(f), waitNs: runQueueNs(`/proc/self/task/${t}`), comm: threadName(Number(t)) });
    }
    const children = new Map<number, { ticks: number; mainTicks: number; mainWaitNs: number; node: boolean }>();
    for (const p of readdirSync('/proc')) {
      if (!/^\d+$/.test(p)) continue;
      const f = statFields(`/proc/${p}/stat`);
      if (!f || Number(f[1]) !== process.pid || f[0] === 'Z' || f[0] === 'X') continue;
      let node = false;
      try {
        node = readlinkSync(`/proc/${p}/exe`) === nodeBinary;
      } catch {
        // gone meanwhile, or not ours to read: counted, not as a decode child
      }
      const m = statFields(`/proc/${p}/task/${p}/stat`);
      children.set(Number(p), { ticks: cpuTicksOf(f), mainTicks: m ? cpuTicksOf(m) : 0, mainWaitNs: runQueueNs(`/proc/${p}/task/${p}`), node });
    }
    return { at: performance.now(), threads, children };
  } catch {
    return undefined;
  }
}

/** Nanoseconds the thread has spent runnable but waiting for a CPU (field 2 of its schedstat; 0 where the kernel keeps none). */
function runQueueNs(task: string): number {
  try {
    return Number(readFileSync(`${task}/schedstat`, 'utf8').split(' ')[1]) || 0;
  } catch {
    return 0;
  }
}

function threadName(tid: number): string {
  try {
    return readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

/** The steady-state split between two snapshots; a thread or child gone by the end is skipped, one new since the start counts from zero. */
function cpuSplit(a: CpuSnapshot, b: CpuSnapshot, images: number): CpuSplit | undefined {
  const wall = (b.at - a.at) / 1000;
  if (!(wall > 0) || images <= 0) return undefined;
  const hz = clockTicks();
  const us = (ticks: number) => (ticks / hz) * 1e6 / images;
  const busy = (ticks: number) => ticks / hz / wall;
  const waitOf = (ns: number) => ns / 1e9 / wall;
  let total = 0;
  let main = 0;
  let mainWaitNs = 0;
  const others: { tid: number; comm: string; ticks: number; waitNs: number }[] = [];
  for (const [tid, t] of b.threads) {
    const d = Math.max(0, t.ticks - (a.threads.get(tid)?.ticks ?? 0));
    const w = Math.max(0, t.waitNs - (a.threads.get(tid)?.waitNs ?? 0));
    total += d;
    if (tid === process.pid) {
      main = d;
      mainWaitNs = w;
    } else others.push({ tid, comm: t.comm, ticks: d, waitNs: w });
  }
  let decode = 0;
  const children: { pid: number; ticks: number; mainTicks: number; mainWaitNs: number }[] = [];
  for (const [pid, c] of b.children) {
    const d = Math.max(0, c.ticks - (a.children.get(pid)?.ticks ?? 0));
    total += d;
    if (c.node) {
      decode += d;
      const before = a.children.get(pid);
      children.push({ pid, ticks: d, mainTicks: Math.max(0, c.mainTicks - (before?.mainTicks ?? 0)), mainWaitNs: Math.max(0, c.mainWaitNs - (before?.mainWaitNs ?? 0)) });
    }
  }
  const decodeChildren = children.length;
  const working = children.filter((c) => busy(c.ticks) > 0.02);
  const r2 = (x: number) => Math.round(x * 100) / 100;
  const r0 = (x: number) => Math.round(x);
  return {
    steadyS: Math.round(wall * 1000) / 1000, images,
    mainUsPerImage: r0(us(main)), mainBusy: r2(busy(main)), mainWait: r2(waitOf(mainWaitNs)),
    threads: others.filter((o) => busy(o.ticks) > 0.02).sort((x, y) => y.ticks - x.ticks)
      .map((o) => ({ tid: o.tid, comm: o.comm, usPerImage: r0(us(o.ticks)), busy: r2(busy(o.ticks)), wait: r2(waitOf(o.waitNs)) })),
    decodeChildren, childBusy: children.sort((x, y) => y.ticks - x.ticks).map((c) => ({ pid: c.pid, busy: r2(busy(c.ticks)) })),
    childMeanBusy: working.length > 0 ? r2(working.reduce((t, c) => t + busy(c.ticks), 0) / working.length) : 0,
    childMainMeanBusy: working.length > 0 ? r2(working.reduce((t, c) => t + busy(c.mainTicks), 0) / working.length) : 0,
    childMainMeanWait: working.length > 0 ? r2(working.reduce((t, c) => t + waitOf(c.mainWaitNs), 0) / working.length) : 0,
    childUsPerImage: r0(us(decode)),
    coresBusy: r2(busy(total)),
  };
}

/** CPU ms an image of every thread and child in steady state. */
function cpuMsPerImage(c: CpuSplit): number {
  return (c.coresBusy * c.steadyS * 1000) / c.images;
}

function cpuLine(c: CpuSplit): string {
  const parts = [`main thread ${c.mainUsPerImage} µs/image (${c.mainBusy.toFixed(2)} busy, ${c.mainWait.toFixed(2)} waiting for a CPU)`];
  for (const t of c.threads) parts.push(`tid ${t.tid} ${t.comm} ${t.usPerImage} µs/image (${t.busy.toFixed(2)} busy, ${t.wait.toFixed(2)} waiting for a CPU)`);
  const idle = c.childBusy.filter((x) => x.busy <= 0.02).length;
  parts.push(`${c.decodeChildren} decode process${c.decodeChildren === 1 ? '' : 'es'}${idle > 0 ? ` (${idle} idle)` : ''}: ${c.childMeanBusy.toFixed(2)} busy on average of the working ones (${c.childBusy.map((x) => x.busy.toFixed(2)).join(', ')}; their main threads ${c.childMainMeanBusy.toFixed(2)} busy, ${c.childMainMeanWait.toFixed(2)} waiting for a CPU), ${c.childUsPerImage} µs/image together`);
  return `  cpu over ${c.steadyS.toFixed(2)} s of steady state, ${c.images} images: ${parts.join('; ')}; ${c.coresBusy.toFixed(2)} cores busy, ${cpuMsPerImage(c).toFixed(2)} CPU ms/image in all`;
}

/** CPU seconds of this process and of its children already reaped (utime, stime, cutime, cstime). */
function cpuSeconds(): number {
  const fields = statFields('/proc/self/stat')!;
  // State is field 3 (index 0), so utime (14) … cstime (17) are indexes 11 … 14.
  const ticks = [11, 12, 13, 14].reduce((s, i) => s + Number(fields[i]), 0);
  return ticks / clockTicks();
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

async function stoker(dir: string, cores: number, round: number, o: { batch: number; output: 'float32' | 'bfloat16'; decode: string; shape: string; device: string; epochs: number; readers: number; prefetch: number | undefined }): Promise<Row> {
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
  // Decoding in the reader threads (decode 'threads', or 'auto' on a JPEG view: NOTE [decoding in a
  // reader thread]), n cores are n reader workers, each its own decoder.
  const inThreads = !gpu && source.decode === 'threads' && shape !== 'main';
  const workers = gpu ? 0 : inThreads ? cores : shape === 'workers' ? cores : shape === 'main' ? 0 : Math.min(cores, o.readers);
  const each = shape === 'workers' ? 1 : shape === 'main' ? cores : Math.ceil(cores / workers);
  const loader = await DataLoader.create(source, { batchSize: o.batch, shuffle: true, ...(shape === 'default' && !gpu ? {} : { workers }), ...(gpu ? { device: o.device as 'cuda' } : {}), ...(o.prefetch === undefined ? {} : { prefetch: o.prefetch }) });
  let first = 0;
  let tFirst = 0;
  let images = 0;
  let readers = 0;
  let snap0: CpuSnapshot | undefined;
  let snap1: CpuSnapshot | undefined;
  let closing = 0;
  try {
    for (let e = 0; e < o.epochs; e++) {
      const epoch = loader.epoch(e);
      const count = epoch.length;
      let k = 0;
      for await (const b of epoch) {
        if (first === 0) {
          tFirst = performance.now();
          first = (tFirst - t0) / 1000;
          snap0 = cpuSnapshot();
        } else images += b.rows;
        if (k === 0 && e === 0) readers = loader.stats().workers;
        // Device batches: wait for the last one's rows (stream order: every earlier decode is done too).
        if (gpu && k + 1 === count && e === o.epochs - 1) await (b.get('image') as { toHost?: () => Promise<unknown> }).toHost?.();
        // As the loop in docs/datasets.md does: the loader reuses a released batch's memory (NOTE [released batches reused]).
        b.release();
        k++;
      }
    }
    if (snap0) snap1 = cpuSnapshot();
  } finally {
    closing = performance.now();
    await loader.close();
    await source.close();
  }
  const end = performance.now();
  const steady = (end - tFirst) / 1000;
  const cpu = snap0 && snap1 ? cpuSplit(snap0, snap1, images) : undefined;
  const common = { side: 'stoker' as const, cores, round, firstBatchS: first, imagesPerS: images / steady, coresBusy: (cpuSeconds() - cpu0) / ((end - t0) / 1000), closeS: Math.round(end - closing) / 1000, ...(cpu ? { cpu } : {}) };
  if (gpu) return { ...common, impl: `decode gpu on ${o.device} (host reads the files, the device decodes)` };
  if (source.decode === 'threads' && shape !== 'main') return { ...common, impl: `${o.decode}: decoded in ${readers} reader worker${readers === 1 ? '' : 's'}` };
  if (shape === 'default') {
    const each = defaultDecodeProcesses(true, readers);
    return { ...common, impl: `${o.decode}, defaults: ${readers} reader worker${readers === 1 ? '' : 's'} × ${each} decode process${each === 1 ? '' : 'es'}` };
  }
  return { ...common, impl: `${o.decode}, ${workers} reader worker${workers === 1 ? '' : 's'} × ${each} decode process${each === 1 ? '' : 'es'}` };
}

/** The first of `python3` (the GPU host's, with torchvision) and Debian's `/usr/bin/python3` that imports torch. */
function torchPython(): string {
  for (const p of ['python3', '/usr/bin/python3']) {
    if (spawnSync(p, ['-c', 'import torch'], { stdio: 'ignore', timeout: 120_000 }).status === 0) return p;
  }
  return 'python3';
}

/** One python process running torchvision_images.py at these num_workers; undefined when it failed (the message is printed). */
function torchvision(python: string, dir: string, cores: readonly number[], batch: number, epochs: number, round: number): Row[] | undefined {
  const script = new URL('./torchvision_images.py', import.meta.url).pathname;
  const r = spawnSync(python, [script, dir, '--workers', cores.join(','), '--batch', String(batch), '--epochs', String(epochs)], { encoding: 'utf8', timeout: 3_600_000, maxBuffer: 16 << 20 });
  if (r.status !== 0) {
    console.error(`torchvision side failed (${python}): ${(r.stderr || r.error?.message || '').trim().split('\n').slice(-3).join(' | ')}`);
    return undefined;
  }
  return r.stdout.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => {
    const j = JSON.parse(l) as { workers: number; impl: string; firstBatchS: number; imagesPerS: number; coresBusy: number };
    const row: Row = { side: 'torchvision', cores: j.workers, round, impl: `${j.impl}, num_workers ${j.workers}`, firstBatchS: j.firstBatchS, imagesPerS: j.imagesPerS, coresBusy: j.coresBusy };
    console.log(JSON.stringify({ ...j, round }));
    return row;
  });
}

export async function main(args: readonly string[]): Promise<void> {
  let v: Record<string, string | boolean | undefined>;
  try {
    ({ values: v } = parseArgs({
      args: [...args], strict: true, allowPositionals: false,
      options: {
        files: { type: 'string', default: '4000' }, classes: { type: 'string', default: '100' }, cores: { type: 'string' }, batch: { type: 'string', default: '64' },
        dir: { type: 'string' }, output: { type: 'string', default: 'float32' }, decode: { type: 'string', default: 'auto' }, shape: { type: 'string', default: 'worker' }, readers: { type: 'string', default: '1' }, device: { type: 'string', default: 'cuda' }, epochs: { type: 'string', default: '1' }, rounds: { type: 'string', default: '1' },
        prefetch: { type: 'string' }, python: { type: 'string' }, 'no-torch': { type: 'boolean', default: false }, 'no-ceiling': { type: 'boolean', default: false },
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
  const epochs = Number(v.epochs);
  const rounds = Number(v.rounds);
  if (!Number.isSafeInteger(rounds) || rounds < 1) throw new UsageError(`bad --rounds ${String(v.rounds)}: an integer ≥ 1\nusage: ${USAGE}`);
  if (v.prefetch !== undefined && !(Number.isSafeInteger(Number(v.prefetch)) && Number(v.prefetch) >= 1)) throw new UsageError(`bad --prefetch ${String(v.prefetch)}: an integer ≥ 1\nusage: ${USAGE}`);
  const gpu = v.decode === 'gpu';
  const opts = { batch, output: v.output as 'float32', decode: v.decode as string, shape: v.shape as string, device: v.device as string, readers, prefetch: v.prefetch === undefined ? undefined : Number(v.prefetch) };
  let python = v['no-torch'] ? undefined : ((v.python as string | undefined) ?? torchPython());
  const rows: Row[] = [];
  // The decoder's ceiling (bench/images-ceiling.ts): the same boxes, the same decoder calls, one
  // thread, no messages; measured once per round, beside the Stoker run of that round.
  const ceilings: { c: number; round: number; ceiling: Ceiling }[] = [];
  const jobs = gpu || v['no-ceiling'] ? undefined : ceilingJobs(imageFolderSource(dir, { size: 224, view: 'train', decode: 'threads' }), epochs);
  // A first pass warms the page cache (and the listing cache), so that neither side pays the disk.
  await stoker(dir, cores[cores.length - 1]!, 0, { ...opts, epochs: 1 });
  // Per core count, the two sides alternately, round after round. The GPU path uses no decode
  // process: its Stoker runs are on the whole machine (n), paired with torchvision at n if asked.
  for (const c of gpu ? [...new Set([...cores, n])] : cores) {
    for (let r = 1; r <= rounds; r++) {
      if (jobs !== undefined) {
        const ceiling = runCeiling(jobs);
        ceilings.push({ c, round: r, ceiling });
        console.log(`  ceiling, round ${r}: ${ceiling.decoder} of the run's ${ceiling.images} boxes (${ceiling.shrunk} shrunk on load), one thread: ${fmtInt(ceiling.imagesPerS)} images/s, ${ceiling.cpuMsPerImage.toFixed(3)} CPU ms/image`);
      }
      if (!gpu || c === n) {
        const row = await stoker(dir, c, r, { ...opts, epochs });
        console.log(JSON.stringify(row));
        if (row.cpu) console.log(cpuLine(row.cpu));
        rows.push(row);
      }
      if (python !== undefined && cores.includes(c)) {
        const t = torchvision(python, dir, [c], batch, epochs, r);
        if (t === undefined) python = undefined; // failed once: no more python runs
        else rows.push(...t);
      }
    }
  }
  console.log(table(rows, [
    { title: 'side', cell: (r) => r.side },
    { title: 'cores', align: 'right', cell: (r) => String(r.cores) },
    { title: 'round', align: 'right', cell: (r) => String(r.round) },
    { title: 'how', cell: (r) => r.impl },
    { title: 'first batch s', align: 'right', cell: (r) => fmtFixed(r.firstBatchS, 2) },
    { title: 'images/s', align: 'right', cell: (r) => fmtInt(r.imagesPerS) },
    { title: 'cores busy', align: 'right', cell: (r) => fmtFixed(r.coresBusy, 2) },
    { title: 'steady cores busy', align: 'right', cell: (r) => fmtFixed(r.cpu?.coresBusy, 2) },
    { title: 'main µs/image', align: 'right', cell: (r) => (r.cpu ? fmtInt(r.cpu.mainUsPerImage) : '—') },
    { title: 'busiest thread', align: 'right', cell: (r) => fmtFixed(r.cpu?.threads[0]?.busy, 2) },
    { title: 'decode busy', align: 'right', cell: (r) => fmtFixed(r.cpu?.childMeanBusy, 2) },
    { title: 'decode main thread', align: 'right', cell: (r) => fmtFixed(r.cpu?.childMainMeanBusy, 2) },
  ]));
  const of = (side: Row['side'], c: number) => rows.filter((r) => r.side === side && r.cores === c);
  const med = (rs: readonly Row[], f: (r: Row) => number) => median(rs.map(f));
  const oneStoker = of('stoker', 1);
  const summary = (gpu ? [...new Set([...cores, n])] : cores).map((c) => {
    const s = of('stoker', c);
    const t = of('torchvision', c);
    // Per-round ratios: the Stoker and torchvision runs of the same round.
    const ratios = s.flatMap((x) => t.filter((y) => y.round === x.round).map((y) => x.imagesPerS / y.imagesPerS));
    const sooner = s.flatMap((x) => t.filter((y) => y.round === x.round).map((y) => y.firstBatchS / x.firstBatchS));
    // Per-round fractions of the ceiling per core used: Stoker's images/s ÷ (c × the loop's images/s of that round).
    const cl = ceilings.filter((y) => y.c === c);
    const ofCeiling = s.flatMap((x) => cl.filter((y) => y.round === x.round).map((y) => x.imagesPerS / (c * y.ceiling.imagesPerS)));
    // The same by CPU time (what a loaded host does not distort): the loop's CPU ms an image ÷ Stoker's, every thread and child in steady state.
    const cpuOfCeiling = s.flatMap((x) => cl.filter((y) => y.round === x.round && x.cpu !== undefined).map((y) => y.ceiling.cpuMsPerImage / cpuMsPerImage(x.cpu!)));
    return { c, s, t, ratios, sooner, cl, ofCeiling, cpuOfCeiling };
  }).filter((x) => x.s.length > 0 || x.t.length > 0);
  console.log(table(summary, [
    { title: 'cores', align: 'right', cell: (x) => String(x.c) },
    { title: 'rounds', align: 'right', cell: (x) => String(Math.max(x.s.length, x.t.length)) },
    { title: 'stoker images/s (median)', align: 'right', cell: (x) => fmtInt(med(x.s, (r) => r.imagesPerS)) },
    { title: 'torchvision images/s (median)', align: 'right', cell: (x) => fmtInt(med(x.t, (r) => r.imagesPerS)) },
    { title: 'ratio (median)', align: 'right', cell: (x) => (x.ratios.length > 0 ? `${median(x.ratios).toFixed(2)}×` : '—') },
    { title: 'ratio min–max', align: 'right', cell: (x) => (x.ratios.length > 0 ? `${Math.min(...x.ratios).toFixed(2)}–${Math.max(...x.ratios).toFixed(2)}×` : '—') },
    { title: 'ceiling images/s per core (median)', align: 'right', cell: (x) => (x.cl.length > 0 ? fmtInt(median(x.cl.map((y) => y.ceiling.imagesPerS))) : '—') },
    { title: '÷ (cores × ceiling), median', align: 'right', cell: (x) => (x.ofCeiling.length > 0 ? median(x.ofCeiling).toFixed(2) : '—') },
    { title: 'min–max', align: 'right', cell: (x) => (x.ofCeiling.length > 0 ? `${Math.min(...x.ofCeiling).toFixed(2)}–${Math.max(...x.ofCeiling).toFixed(2)}` : '—') },
    { title: 'by CPU time: ceiling ms ÷ stoker ms an image', align: 'right', cell: (x) => (x.cpuOfCeiling.length > 0 ? `${median(x.cpuOfCeiling).toFixed(2)} (${Math.min(...x.cpuOfCeiling).toFixed(2)}–${Math.max(...x.cpuOfCeiling).toFixed(2)})` : '—') },
  ]));
  for (const { c, s, ratios, sooner, ofCeiling, cpuOfCeiling } of summary) {
    const parts = [];
    if (ofCeiling.length > 0) parts.push(`stoker / (${c} × the decoder's ceiling) ${median(ofCeiling).toFixed(2)}${ofCeiling.length > 1 ? ` (median of ${ofCeiling.length} rounds, ${Math.min(...ofCeiling).toFixed(2)}–${Math.max(...ofCeiling).toFixed(2)})` : ''}`);
    if (cpuOfCeiling.length > 0) parts.push(`by CPU time ${median(cpuOfCeiling).toFixed(2)} of the ceiling`);
    if (s.length > 0 && oneStoker.length > 0 && c > 1) parts.push(`scaling ${(med(s, (r) => r.imagesPerS) / med(oneStoker, (r) => r.imagesPerS) / c).toFixed(2)} × cores of the 1-core throughput`);
    if (ratios.length > 0) parts.push(`stoker / torchvision ${median(ratios).toFixed(2)}× images/s${ratios.length > 1 ? ` (median of ${ratios.length} rounds, ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}×)` : ''}, first batch ${median(sooner).toFixed(2)}× sooner`);
    if (parts.length > 0) console.log(`${c} cores: ${parts.join('; ')}`);
  }
}
