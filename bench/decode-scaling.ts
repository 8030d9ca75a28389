// `bench decode-scaling`: where the CPU image route stops scaling with cores (issue 17). On the same
// files and the ImageNet training view (RandomResizedCrop 224 + flip + normalize; `--view eval`:
// Resize(256) + CenterCrop(224) + normalize, rows a, a2, b, d, e), per process count N (default 1, 4, 8, 15):
//   (a) decodeImage in this thread, one process (file read included);
//   (a2) (a) with the sharp path only (STOKER_VIPS_DIRECT off), the direct libvips route with the
//       JavaScript resample and cast (STOKER_WASM=off), the libvips route with WebAssembly
//       (STOKER_TURBOJPEG=off) and the direct route as it runs (libjpeg-turbo's crop decode, NOTE
//       [crop decode], where it loads), in alternating rounds of the same files, plus the stages of
//       the direct route (decode of the box, resample, cast + normalize) timed apart;
//   (b) N independent Node processes, each running (a)'s loop on its own files: the ceiling;
//   (c) N independent python processes running torchvision's recipe on PIL (bench/pil_recipe_loop.py,
//       the dataset of bench/torchvision_images.py): the reference per core;
//   (d) a DecodePool of N children fed directly (2 requests per child in flight);
//   (e) sources.imageFolder with decodeProcesses N through DataLoader (1 reader worker, batch 64);
// and (d)/(e) again per child-flag variant (STOKER_DECODE_CHILD_FLAGS, UV_THREADPOOL_SIZE).
// Every row: images/s over a timed pass after a warm-up, and CPU ms per image of everything that
// ran (this process + its children: /proc/<pid>/stat of each direct child, or the loops' own
// process.cpuUsage / getrusage), plus cores busy and the scaling against N × (a) (or N × (c)'s N=1).
// For (b)/(c) the N processes warm up, then start their timed loop together (a line on stdin);
// images/s = all images / wall time until the last one ends.
//
//   npm run bench -- decode-scaling [--files 4000] [--classes 100] [--per 240 (images per process per pass)]
//     [--procs 1,4,8,15] [--output bfloat16|float32|uint8] [--batch 64] [--rows a,a2,b,c,d,e] [--view train|eval] [--python python3] [--readers 1 (reader workers for (e), comma-separated: each drives ceil(N / readers) processes)]
//     [--variants default,stgc,pool1,uv1,all]

import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DataLoader } from '../src/index.js';
import { CHILD_FLAGS_ENV, DecodePool } from '../src/image/processes/decode-pool.js';
import { type DecodeImageOptions, decodeImage } from '../src/image/image-decode.js';
import { imageFolderSource } from '../src/dataset/formats/images/image-folder.js';
import { boxFor, viewFrom } from '../src/image/crop-box.js';
import { decodeJpegBox, decodeJpegReduced, setVipsDirect } from '../src/image/vips-direct.js';
import { decodeJpegRegion, setTurboJpeg, turboJpegAvailable } from '../src/image/turbo-jpeg.js';
import { jpegHeader, shrinkFor, toFloats } from '../src/image/image-decode.js';
import { resampleBilinear } from '../src/image/image-resample.js';
import { viewResample } from '../src/image/view-resample.js';
import { setWasmResample, wasmResampler } from '../src/image/resample-wasm.js';
import { PickKey } from '../src/sampler/pick-key.js';
import { fixture } from './images.js';
import { UsageError, clockTicks, cpuTicksOf, fmtFixed, fmtInt, hardwareLine, statFields, table } from './util.js';

const MEAN = [0.485, 0.456, 0.406];
const STD = [0.229, 0.224, 0.225];
const USAGE = 'npm run bench -- decode-scaling [--files 4000] [--classes 100] [--per 240] [--procs 1,4,8,15] [--output bfloat16|float32|uint8] [--batch 64] [--rows a,a2,b,c,d,e] [--view train|eval] [--python python3] [--readers 1 (reader workers for (e), comma-separated: each drives ceil(N / readers) processes)] [--variants default,stgc,pool1,uv1,all]';
const here = dirname(fileURLToPath(import.meta.url));

/** Child flag variants for (d)/(e): flags in STOKER_DECODE_CHILD_FLAGS and the child's UV_THREADPOOL_SIZE. */
const VARIANTS: Record<string, { flags: string; uv?: string }> = {
  default: { flags: '' },
  stgc: { flags: '--single-threaded-gc' },
  pool1: { flags: '--v8-pool-size=1' },
  uv1: { flags: '', uv: '1' },
  all: { flags: '--single-threaded-gc --v8-pool-size=1', uv: '1' },
};

interface Row {
  readonly row: string;
  readonly how: string;
  readonly n: number;
  readonly imagesPerS: number;
  readonly cpuMsPerImage: number;
  readonly coresBusy: number;
  /** images/s against N × the one-process reference of its kind. */
  readonly scaling?: number;
}

/** CPU ms of every live direct child of this process (utime + stime in /proc/<pid>/stat). */
function childrenCpuMs(): Map<number, number> {
  const out = new Map<number, number>();
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return out;
  }
  for (const p of pids) {
    const f = statFields(`/proc/${p}/stat`);
    // f[0] is field 3 (state): ppid is field 4.
    if (f !== undefined && Number(f[1]) === process.pid) out.set(Number(p), (cpuTicksOf(f) * 1000) / clockTicks());
  }
  return out;
}

/** CPU ms of this process and its live children since `before` (children that exit meanwhile are lost: keep them alive). */
function cpuSnapshot(): { self: NodeJS.CpuUsage; kids: Map<number, number> } {
  return { self: process.cpuUsage(), kids: childrenCpuMs() };
}
function cpuSince(before: { self: NodeJS.CpuUsage; kids: Map<number, number> }): number {
  const self = process.cpuUsage(before.self);
  let kids = 0;
  for (const [pid, ms] of childrenCpuMs()) kids += ms - (before.kids.get(pid) ?? 0);
  return (self.user + self.system) / 1000 + kids;
}

function row(r: string, how: string, n: number, images: number, s: number, cpuMs: number): Row {
  return { row: r, how, n, imagesPerS: images / s, cpuMsPerImage: cpuMs / images, coresBusy: cpuMs / 1000 / s };
}

interface LoopConfig {
  readonly paths: readonly string[];
  readonly output: 'float32' | 'bfloat16' | 'uint8';
  readonly warm: number;
  /** The view decoded: 'train' (RandomResizedCrop 224 + flip) or 'eval' (Resize(256) + CenterCrop(224)). */
  readonly view: 'train' | 'eval';
}

function decodeOptions(cfg: LoopConfig, i: number): DecodeImageOptions {
  const normalize = cfg.output === 'uint8' ? undefined : { mean: MEAN, std: STD };
  return { size: [224, 224], source: cfg.paths[i]!, view: { view: viewFrom(cfg.view), sample: i, repeat: 0, epoch: 0, seed: { hi: 0, lo: 1 } }, normalize, output: cfg.output };
}

/** The (a) loop: decodeImage over cfg.paths in this thread; returns [seconds, cpu ms]. */
async function loop(cfg: LoopConfig, from: number, to: number): Promise<[number, number]> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = from; i < to; i++) await decodeImage(await readFile(cfg.paths[i]!), decodeOptions(cfg, i));
  const c = process.cpuUsage(c0);
  return [(performance.now() - t0) / 1000, (c.user + c.system) / 1000];
}

/** `--loop-child FILE`: one of (b)'s processes. Warm up, say "ready", wait for a line, run, print JSON. */
async function loopChild(file: string): Promise<void> {
  const cfg = JSON.parse(readFileSync(file, 'utf8')) as LoopConfig;
  await loop(cfg, 0, Math.min(cfg.warm, cfg.paths.length));
  process.stdout.write('ready\n');
  await new Promise<void>((resolve) => {
    const rl = createInterface({ input: process.stdin });
    rl.once('line', () => {
      rl.close();
      process.stdin.destroy();
      resolve();
    });
  });
  const [s, cpuMs] = await loop(cfg, 0, cfg.paths.length);
  process.stdout.write(`${JSON.stringify({ images: cfg.paths.length, s, cpuMs })}\n`);
}

/** Start n processes, each given its config file; wait for all "ready", release them together, collect their JSON. */
async function independent(cmd: string, argsOf: (file: string) => string[], configs: readonly object[]): Promise<{ s: number; cpuMs: number; images: number }> {
  const procs = await Promise.all(configs.map(async (cfg, k) => {
    const file = join(tmpdir(), `stoker-decode-scaling-${process.pid}-${k}.json`);
    await writeFile(file, JSON.stringify(cfg));
    const p = spawn(cmd, argsOf(file), { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: p.stdout! });
    const it = lines[Symbol.asyncIterator]();
    const exited = new Promise<number | null>((resolve) => p.on('close', resolve));
    return { p, it, exited };
  }));
  for (const { it } of procs) {
    const first = await it.next();
    if (first.done || first.value !== 'ready') throw new Error(`a loop process said ${JSON.stringify(first.value)} instead of "ready"`);
  }
  const t0 = performance.now();
  for (const { p } of procs) p.stdin!.end('go\n');
  // The wall time ends when the last result line arrives, not when the processes have exited (a
  // python with torch takes ~0.1 s to tear down).
  let last = t0;
  const results = await Promise.all(procs.map(async ({ it, exited }) => {
    const r = await it.next();
    last = Math.max(last, performance.now());
    await exited;
    if (r.done) throw new Error('a loop process ended without its result');
    return JSON.parse(r.value) as { images: number; s: number; cpuMs: number };
  }));
  const s = (last - t0) / 1000;
  return { s, cpuMs: results.reduce((a, r) => a + r.cpuMs, 0), images: results.reduce((a, r) => a + r.images, 0) };
}

function withChildEnv<T>(variant: string, run: () => Promise<T>): Promise<T> {
  const v = VARIANTS[variant]!;
  const saved = { flags: process.env[CHILD_FLAGS_ENV], uv: process.env.UV_THREADPOOL_SIZE };
  const restore = () => {
    if (saved.flags === undefined) delete process.env[CHILD_FLAGS_ENV];
    else process.env[CHILD_FLAGS_ENV] = saved.flags;
    if (saved.uv === undefined) delete process.env.UV_THREADPOOL_SIZE;
    else process.env.UV_THREADPOOL_SIZE = saved.uv;
  };
  if (v.flags !== '') process.env[CHILD_FLAGS_ENV] = v.flags;
  // The parent's own libuv pool is already sized; only children spawned from now read it.
  if (v.uv !== undefined) process.env.UV_THREADPOOL_SIZE = v.uv;
  return run().finally(restore);
}

export async function main(args: readonly string[]): Promise<void> {
  if (args[0] === '--loop-child') return loopChild(args[1]!);
  let v: Record<string, string | boolean | undefined>;
  try {
    ({ values: v } = parseArgs({ args: [...args], strict: true, options: {
      files: { type: 'string', default: '4000' }, classes: { type: 'string', default: '100' }, per: { type: 'string', default: '240' },
      procs: { type: 'string', default: '1,4,8,15' }, output: { type: 'string', default: 'bfloat16' }, batch: { type: 'string', default: '64' },
      rows: { type: 'string', default: 'a,b,c,d,e' }, view: { type: 'string', default: 'train' }, python: { type: 'string', default: 'python3' }, readers: { type: 'string', default: '1' }, variants: { type: 'string', default: 'default,stgc,pool1,uv1,all' },
    } }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nusage: ${USAGE}`);
  }
  const output = v.output as LoopConfig['output'];
  if (!['float32', 'bfloat16', 'uint8'].includes(output)) throw new UsageError(`bad --output ${String(v.output)}\nusage: ${USAGE}`);
  const procs = String(v.procs).split(',').map(Number);
  if (!procs.every((n) => Number.isInteger(n) && n >= 1)) throw new UsageError(`bad --procs ${String(v.procs)}: positive integers, comma-separated\nusage: ${USAGE}`);
  const per = Number(v.per);
  const batch = Number(v.batch);
  if (!(Number.isInteger(per) && per >= 1) || !(Number.isInteger(batch) && batch >= 1)) throw new UsageError(`bad --per or --batch\nusage: ${USAGE}`);
  const rows = new Set(String(v.rows).split(','));
  const view = String(v.view) as LoopConfig['view'];
  if (view !== 'train' && view !== 'eval') throw new UsageError(`bad --view ${String(v.view)}: train or eval\nusage: ${USAGE}`);
  if (view === 'eval' && rows.has('c')) throw new UsageError(`row c (the PIL recipe) runs the training recipe only: leave it out of --rows with --view eval\nusage: ${USAGE}`);
  const variants = String(v.variants).split(',');
  const readers = String(v.readers).split(',').map(Number);
  if (!readers.every((n) => Number.isInteger(n) && n >= 1)) throw new UsageError(`bad --readers ${String(v.readers)}: positive integers, comma-separated\nusage: ${USAGE}`);
  for (const name of variants) if (!(name in VARIANTS)) throw new UsageError(`bad --variants: ${name} (known: ${Object.keys(VARIANTS).join(', ')})\nusage: ${USAGE}`);
  const files = Number(v.files);
  const dir = await fixture(files, Number(v.classes));
  const source = imageFolderSource(dir, { size: 224, view, decode: 'processes', decodeProcesses: 1 });
  const order = Array.from({ length: source.length }, (_, i) => i).sort((a, b) => ((a * 2654435761) >>> 0) - ((b * 2654435761) >>> 0));
  const all = order.map((i) => source.pathOf(i) as string);
  await source.close();
  const slice = (k: number) => Array.from({ length: per }, (_, i) => all[(k * per + i) % all.length]!);
  console.log(`bench decode-scaling: ${hardwareLine()}; ${dir} (${all.length} files); ${view === 'train' ? 'RandomResizedCrop(224) + flip' : 'Resize(256) + CenterCrop(224)'}${output === 'uint8' ? '' : ' + normalize'}, ${output}; ${per} images per process per pass; N = ${procs.join(', ')}`);
  const out: Row[] = [];
  const print = (r: Row) => {
    out.push(r);
    console.log(JSON.stringify(r));
  };
  const warm = Math.min(24, per);

  let one: Row | undefined;
  if (rows.has('a')) {
    const cfg: LoopConfig = { paths: slice(0), output, warm, view };
    await loop(cfg, 0, warm);
    const [s, cpuMs] = await loop(cfg, 0, per);
    one = row('a', 'decodeImage loop in this thread', 1, per, s, cpuMs);
    print(one);
  }
  if (rows.has('a2')) {
    const cfg: LoopConfig = { paths: slice(0), output, warm, view };
    const bytes = await Promise.all(cfg.paths.map((p) => readFile(p)));
    // In-memory bytes (no file read), rounds rotating over the ways, 4 rounds each: the sharp path,
    // the libvips route with the JavaScript resample and cast, the libvips route with WebAssembly (run
    // 16's), and the direct route as it runs (the crop decode of turbo-jpeg.ts where it loads).
    type Way = 'sharp' | 'js' | 'vips' | 'direct';
    const round = async (way: Way): Promise<[number, number]> => {
      setVipsDirect(way !== 'sharp');
      setWasmResample(way !== 'js');
      setTurboJpeg(way === 'direct');
      try {
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        for (let i = 0; i < bytes.length; i++) await decodeImage(bytes[i]!, decodeOptions(cfg, i));
        const c = process.cpuUsage(c0);
        return [(performance.now() - t0) / 1000, (c.user + c.system) / 1000];
      } finally {
        setVipsDirect(true);
        setWasmResample(true);
        setTurboJpeg(true);
      }
    };
    const turbo = turboJpegAvailable();
    const ways: Way[] = turbo ? ['sharp', 'js', 'vips', 'direct'] : ['sharp', 'js', 'direct'];
    for (const w of ways) await round(w);
    const sum = new Map<Way, [number, number]>(ways.map((w) => [w, [0, 0]]));
    for (let r = 0; r < 4; r++) {
      for (let k = 0; k < ways.length; k++) {
        const w = ways[(k + r) % ways.length]!;
        const [s, ms] = await round(w);
        const acc = sum.get(w)!;
        acc[0] += s;
        acc[1] += ms;
      }
    }
    const rowOf = (w: Way, how: string) => row('a2', how, 1, 4 * per, sum.get(w)![0], sum.get(w)![1]);
    const oldRow = rowOf('sharp', 'decodeImage, sharp path only (bytes in memory)');
    print(oldRow);
    const jsRow = rowOf('js', 'decodeImage, direct libvips route, JavaScript resample and cast (STOKER_WASM=off)');
    print({ ...jsRow, scaling: jsRow.imagesPerS / oldRow.imagesPerS });
    if (turbo) {
      const vipsRow = rowOf('vips', 'decodeImage, direct libvips route, WebAssembly resample and cast (STOKER_TURBOJPEG=off)');
      print({ ...vipsRow, scaling: vipsRow.imagesPerS / oldRow.imagesPerS });
    }
    const newRow = rowOf('direct', `decodeImage, direct route${turbo ? ', libjpeg-turbo crop decode' : ', libvips'}${wasmResampler() === undefined ? '' : ', WebAssembly resample and cast'} (bytes in memory)`);
    print({ ...newRow, scaling: newRow.imagesPerS / oldRow.imagesPerS });
    // The stages of the direct route, wall ms per image over one pass each.
    const cropView = viewFrom(view);
    const stage = { reduced: 0, reducedMs: 0, decode: 0, resample: 0, cast: 0 };
    for (let i = 0; i < bytes.length; i++) {
      const h = jpegHeader(bytes[i]!)!;
      const box = boxFor(cropView, new PickKey(i, 0, 0, { hi: 0, lo: 1 }), h.width, h.height);
      const shrink = shrinkFor(cropView, box, 224, 224);
      let px: Uint8Array;
      const t0 = performance.now();
      // As directView: libvips reduces a box at least the output only where WebAssembly does not run (never a center crop's).
      if (cropView.kind !== 'center-crop' && shrink === 1 && box.width >= 224 && box.height >= 224 && wasmResampler() === undefined) {
        px = decodeJpegReduced(bytes[i]!, box, 1, h.channels, 224, 224, box.flip)!;
        stage.reduced++;
        stage.reducedMs += performance.now() - t0;
      } else {
        const plan = shrink === 1 ? viewResample(cropView, box, h.width, h.height, 224, 224) : undefined;
        const region = plan?.region ?? box;
        const d = (turbo ? decodeJpegRegion(bytes[i]!, region, shrink, h.channels, (n) => new Uint8Array(n)) : undefined) ?? decodeJpegBox(bytes[i]!, region, shrink, h.channels)!;
        const t1 = performance.now();
        px = resampleBilinear(d.data, d.width, d.height, d.bands, plan?.box ?? { x0: d.x0, y0: d.y0, x1: d.x1, y1: d.y1 }, 224, 224, box.flip, d.stride);
        d.release?.();
        stage.decode += t1 - t0;
        stage.resample += performance.now() - t1;
      }
      const t2 = performance.now();
      if (output !== 'uint8') toFloats(px, 224 * 224, 3, false, output, { mean: MEAN, std: STD });
      stage.cast += performance.now() - t2;
    }
    const other = per - stage.reduced;
    console.log(`a2 stages of the direct route, wall ms per image: ${stage.reduced === 0 ? '' : `${stage.reduced} reduced boxes: decode + libvips reduce ${(stage.reducedMs / stage.reduced).toFixed(3)}; `}${other} ${stage.reduced === 0 ? 'boxes' : 'others'}: ${turbo ? 'libjpeg-turbo' : 'libvips'} decode of the box ${(stage.decode / Math.max(1, other)).toFixed(3)} + ${wasmResampler() === undefined ? 'JS' : 'WebAssembly'} resample ${(stage.resample / Math.max(1, other)).toFixed(3)}; all: cast${output === 'uint8' ? '' : ' + normalize'} ${(stage.cast / per).toFixed(3)}`);
  }
  const scaled = (r: Row, ref: Row | undefined): Row => (ref === undefined ? r : { ...r, scaling: r.imagesPerS / (r.n * ref.imagesPerS) });
  if (rows.has('b')) {
    for (const n of procs) {
      const r = await independent(process.execPath, (f) => ['--import', import.meta.resolve('tsx'), join(here, 'run.ts'), 'decode-scaling', '--loop-child', f], Array.from({ length: n }, (_, k) => ({ paths: slice(k), output, warm, view })));
      print(scaled(row('b', `${n} independent node decodeImage loops`, n, r.images, r.s, r.cpuMs), one));
    }
  }
  if (rows.has('c')) {
    let pyOne: Row | undefined;
    for (const n of procs) {
      const r = await independent(String(v.python), (f) => [join(here, 'pil_recipe_loop.py'), f], Array.from({ length: n }, (_, k) => ({ paths: slice(k), output, warm, root: dir })));
      const pr = row('c', `${n} independent python PIL recipe loops`, n, r.images, r.s, r.cpuMs);
      pyOne ??= n === 1 ? pr : undefined;
      print(scaled(pr, pyOne));
    }
  }
  for (const variant of variants) {
    const label = variant === 'default' ? '' : ` [${variant}: ${[VARIANTS[variant]!.flags, VARIANTS[variant]!.uv === undefined ? '' : `UV_THREADPOOL_SIZE=${VARIANTS[variant]!.uv}`].filter((x) => x !== '').join(' ')}]`;
    if (rows.has('d')) {
      for (const n of procs) {
        await withChildEnv(variant, async () => {
          const pool = new DecodePool({ size: n });
          const paths = Array.from({ length: n }, (_, k) => slice(k)).flat();
          const cfg: LoopConfig = { paths, output, warm, view };
          const pass = async (count: number) => {
            let next = 0;
            await Promise.all(Array.from({ length: 2 * n }, async () => {
              for (let i = next++; i < count; i = next++) await pool.decode({ path: paths[i]! }, decodeOptions(cfg, i));
            }));
          };
          try {
            await pass(Math.min(paths.length, warm * n));
            const c0 = cpuSnapshot();
            const t0 = performance.now();
            await pass(paths.length);
            const s = (performance.now() - t0) / 1000;
            print(scaled(row('d', `DecodePool of ${n} fed directly${label}`, n, paths.length, s, cpuSince(c0)), one));
          } finally {
            await pool.close();
          }
        });
      }
    }
    if (rows.has('e')) {
      for (const readerCount of readers) for (const n of procs) {
        const w = Math.min(readerCount, n);
        const each = Math.ceil(n / w);
        if (readerCount > 1 && w < readerCount) continue;
        await withChildEnv(variant, async () => {
          const normalize = output === 'uint8' ? undefined : { mean: MEAN, std: STD };
          // decodeProcesses is per dataset copy: each reader worker holds one copy.
          const src = imageFolderSource(dir, { size: 224, view, normalize, output, decode: 'processes', decodeProcesses: each });
          const loader = await DataLoader.create(src, { batchSize: batch, shuffle: true, workers: w });
          const batches = Math.max(1, Math.ceil((w * each * per) / batch));
          // The images delivered (an epoch shorter than the pass ends it early).
          const pass = async (epoch: number, count: number): Promise<number> => {
            let k = 0;
            let images = 0;
            for await (const b of loader.epoch(epoch)) {
              images += b.sampleIds.length;
              b.release();
              if (++k >= count) break;
            }
            return images;
          };
          try {
            await pass(0, Math.max(1, Math.ceil((warm * n) / batch)));
            const c0 = cpuSnapshot();
            const t0 = performance.now();
            const images = await pass(1, batches);
            const s = (performance.now() - t0) / 1000;
            print(scaled(row('e', `imageFolder, ${w} reader worker${w === 1 ? '' : 's'} × decodeProcesses ${each}, batch ${batch}${label}`, w * each, images, s, cpuSince(c0)), one));
          } finally {
            await loader.close();
            await src.close();
          }
        });
      }
    }
  }
  console.log(table(out, [
    { title: 'row', cell: (r) => r.row },
    { title: 'how', cell: (r) => r.how },
    { title: 'images/s', align: 'right', cell: (r) => fmtInt(r.imagesPerS) },
    { title: 'CPU ms/image', align: 'right', cell: (r) => fmtFixed(r.cpuMsPerImage, 2) },
    { title: 'cores busy', align: 'right', cell: (r) => fmtFixed(r.coresBusy, 1) },
    { title: '÷ N×one', align: 'right', cell: (r) => (r.scaling === undefined ? '' : fmtFixed(r.scaling, 2)) },
  ]));
  console.log('÷ N×one: images/s against N × the one-process row of its kind ((a) for Node rows, (c) N=1 for python); the goal is ≥ 0.8.');
}
