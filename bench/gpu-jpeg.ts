// GPU JPEG decode throughput of Stoker's GpuJpegDecoder (nvJPEG batched + crop-resize kernel), files
// already in host RAM: `node --import tsx bench/gpu-jpeg.ts <dir of .jpg> [--batch 256] [--dump <file>]`.
// RandomResizedCrop(224) boxes (torchvision's get_params: scale (0.08, 1), ratio (3/4, 4/3), ten tries
// then the central fallback; a seeded generator), random flip, ImageNet mean/std, bf16 CHW output into
// one batch buffer. Per configuration (chroma upsampling, decoders alternating on two streams, batch
// size, calls in flight on one decoder's slots): two warm-up batches, then every file once, twice (two timed passes, to show the spread); the
// device is synchronized before each clock read; host ms per phase from the decoder's stats. One
// JSON line per configuration.
// `--dump`: also decodes the first 8 files with fixed boxes to uint8 HWC 224² and writes the rows and
// boxes (for bench/gpu_jpeg.py compare, which checks them against torchvision).

import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CudaBackend } from '../src/device/cuda/cuda-backend.js';
import { GpuJpegDecoder } from '../src/device/cuda/nvjpeg.js';
import type { CropBox } from '../src/image/jpeg-plan.js';

const args = process.argv.slice(2);
const dir = args[0]!;
const opt = (name: string) => {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args[i + 1];
};
const batch = Number(opt('--batch') ?? 256);
const dump = opt('--dump');

let seed = 12345;
const uniform = () => {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
  return seed / 2 ** 32;
};
const randint = (lo: number, hi: number) => lo + Math.floor(uniform() * (hi - lo)); // [lo, hi)

/** torchvision RandomResizedCrop.get_params, plus a flip with p = 1/2. */
function rrc(_k: number, W: number, H: number): CropBox {
  const area = W * H;
  const flip = uniform() < 0.5;
  for (let t = 0; t < 10; t++) {
    const target = area * (0.08 + uniform() * 0.92);
    const aspect = Math.exp(Math.log(3 / 4) + uniform() * (Math.log(4 / 3) - Math.log(3 / 4)));
    const w = Math.round(Math.sqrt(target * aspect));
    const h = Math.round(Math.sqrt(target / aspect));
    if (w > 0 && w <= W && h > 0 && h <= H) return { top: randint(0, H - h + 1), left: randint(0, W - w + 1), width: w, height: h, flip };
  }
  const ratio = W / H;
  let w = W, h = H;
  if (ratio < 3 / 4) h = Math.round(w / (3 / 4));
  else if (ratio > 4 / 3) w = Math.round(h * (4 / 3));
  return { top: Math.floor((H - h) / 2), left: Math.floor((W - w) / 2), width: w, height: h, flip };
}

const names = readdirSync(dir).filter((n) => n.endsWith('.jpg')).sort();
const t0 = performance.now();
const files = names.map((n) => new Uint8Array(readFileSync(join(dir, n))));
const readS = (performance.now() - t0) / 1000;
const backend = CudaBackend.open(0);
const rowBytes = 3 * 224 * 224 * 2;
const sync = () => {
  for (const stream of ['copy', 'consumer'] as const) backend.synchronize(backend.record(stream));
};

interface Config {
  chroma: 'interpolate' | 'replicate';
  decoders: number;
  batch: number;
  /** Calls in flight on one decoder with that many slots (each on its own thread and output buffer); default 1: one call at a time. */
  inFlight?: number;
}
/** Every file once per pass; with 2 decoders, batches alternate between them (each on its own stream and output buffer). */
async function measure(config: Config) {
  const streams = ['copy', 'consumer'] as const;
  const inFlight = config.inFlight ?? 1;
  const decoders = Array.from({ length: config.decoders }, () => GpuJpegDecoder.open(backend, { chroma: config.chroma, slots: inFlight }));
  const buffers = Array.from({ length: Math.max(decoders.length, inFlight) }, () => backend.alloc(config.batch * rowBytes));
  const outs = buffers.map((b) => ({ ptr: b.ptr, rowBytes, layout: 'chw' as const, dtype: 'bfloat16' as const, size: [224, 224] as [number, number], mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] }));
  let fallbacks = 0;
  const pass = async (limit: number) => {
    sync();
    const cpu0 = process.cpuUsage();
    const start = performance.now();
    const window: Promise<void>[] = [];
    for (let i = 0, b = 0; i < limit; i += config.batch, b++) {
      if (inFlight > 1) {
        // Up to `inFlight` calls at once on the one decoder; a buffer is reused once its last call returned.
        if (window.length === inFlight) await window.shift();
        window.push(decoders[0]!.decodeInto(files.slice(i, Math.min(i + config.batch, limit)), rrc, outs[b % inFlight]!, 'copy').then(({ fallback }) => void (fallbacks += fallback.length)));
        continue;
      }
      const d = b % decoders.length;
      const { fallback } = await decoders[d]!.decodeInto(files.slice(i, Math.min(i + config.batch, limit)), rrc, outs[d]!, streams[d]!);
      fallbacks += fallback.length;
    }
    await Promise.all(window);
    sync();
    const s = (performance.now() - start) / 1000;
    const cpu = process.cpuUsage(cpu0);
    return { imagesPerS: Math.round(limit / s), coresBusy: Number(((cpu.user + cpu.system) / 1e6 / s).toFixed(2)) };
  };
  await pass(2 * config.batch * decoders.length);
  fallbacks = 0;
  for (const d of decoders) Object.assign(d.stats, { probeMs: 0, decodeMs: 0, launchMs: 0, calls: 0 });
  const passes = [await pass(files.length), await pass(files.length)];
  const host = decoders.map((d) => ({ probeMs: Math.round(d.stats.probeMs), decodeMs: Math.round(d.stats.decodeMs), launchMs: Math.round(d.stats.launchMs) }));
  const chroma = decoders[0]!.chroma;
  const kind = decoders[0]!.kind;
  for (const d of decoders) d.close();
  for (const b of buffers) backend.free(b);
  return { ...config, kind, chromaInEffect: chroma, fallbacks: fallbacks / 2, passes, hostMsOverTwoPasses: host };
}

const configs: Config[] = [
  { chroma: 'interpolate', decoders: 1, batch },
  { chroma: 'interpolate', decoders: 1, batch, inFlight: 2 },
  { chroma: 'interpolate', decoders: 1, batch, inFlight: 3 },
  { chroma: 'replicate', decoders: 1, batch },
  { chroma: 'interpolate', decoders: 2, batch },
  { chroma: 'interpolate', decoders: 1, batch: batch / 2 },
  { chroma: 'interpolate', decoders: 1, batch: batch * 2 },
];
for (const config of configs) console.log(JSON.stringify({ bench: 'stoker-gpu-jpeg', device: backend.context.name, files: files.length, readS: Number(readS.toFixed(2)), ...(await measure(config)) }));

if (dump !== undefined) {
  const n = Math.min(8, files.length);
  const boxes: CropBox[] = Array.from({ length: n }, (_, k) => ({ left: 7 * k, top: 5 * k, width: 300 + 10 * k, height: 250 + 5 * k, flip: k % 2 === 1 }));
  // `dump`: replicated chroma (what torchvision decodes); `dump`.interp: interpolated (what PIL decodes).
  for (const [chroma, path] of [['replicate', dump], ['interpolate', `${dump}.interp`]] as const) {
    const decoder = GpuJpegDecoder.open(backend, { chroma });
    const buffer = backend.alloc(n * 3 * 224 * 224);
    const u8 = { ptr: buffer.ptr, rowBytes: 3 * 224 * 224, layout: 'hwc' as const, dtype: 'uint8' as const, size: [224, 224] as [number, number] };
    await decoder.decodeInto(files.slice(0, n), boxes, u8);
    const host = new Uint8Array(n * u8.rowBytes);
    backend.copyToHost(host, buffer, 0, 'copy');
    sync();
    writeFileSync(path, host);
    decoder.close();
    backend.free(buffer);
  }
  writeFileSync(`${dump}.json`, JSON.stringify({ files: names.slice(0, n), boxes }));
}
backend.close();
