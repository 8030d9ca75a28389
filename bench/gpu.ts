// GPU throughput: Stoker on an NVIDIA GPU against the copy engines' own ceilings and against
// PyTorch's DataLoader, in one run: `npm run -s bench -- gpu [--quick] [--json] [--device sim]`.
//
// Part 1, pinned host → device, ImageNet-sized samples (uint8 [3, 224, 224] = 150 528 bytes): the
//   ceiling is raw cuMemcpyHtoDAsync of one batch (64 rows) from registered (page-locked) memory,
//   repeated; Stoker is a streaming loader (VRAM pool off so every byte crosses the bus) over the
//   same rows: with the source page-locked and read in place (the default for in-memory columns),
//   and staged through reader memory (pinSource: false; workers 0 and 'auto'). Figure: GB/s delivered.
// Part 2, device gather: the ceiling is raw cuMemcpyDtoDAsync of one batch's bytes, reading a
//   dataset-sized source in order; Stoker is a resident loader (one gather kernel per column per
//   batch) on ImageNet-sized rows (batch 256) and on CIFAR-shaped rows (batch 256).
// Part 3, CIFAR-shaped in-RAM dataset (200 000 × uint8 [3, 32, 32] + int64 label), batch 256,
//   shuffled: samples/s delivered on the GPU by Stoker (streaming with workers 0 / 'auto' and the VRAM
//   pool off, streaming with its defaults, resident) and by PyTorch's DataLoader (per-item Dataset,
//   pin_memory, num_workers 0/4/8, .cuda(non_blocking=True)), run by bench/torch_loader.py.
// Part 4, a consumer with a fixed GPU time per batch: a spin kernel launched on the loader's consumer
//   stream per batch; the host paces itself like a training loop that reads its loss every step
//   (it waits on an event recorded two batches back), so it cannot run ahead of the GPU. Figure: the
//   share of wall time the host spent inside the loader waiting for its next batch.
// The rule: every figure is measured in this run (PyTorch in its child process), and the verdict is
// the ratio lines at the end. Without a CUDA device the bench says so and exits 0; `--device sim`
// runs the Stoker parts on the simulated device: a smoke test of the code paths, whose figures are
// not GPU figures and are never judged.
//
// How it measures (printed with the results, so a reader of the output needs nothing else):
// - Every row of every dataset is stamped: its first 4 bytes hold the sample id, its last 4 bytes
//   the id XOR 0x5a5a5a5a; CIFAR labels are the sample ids. In parts 1 and 2, during the warm-up and
//   one untimed window after the timed ones, the consumer launches a tiny kernel on the loader's
//   consumer stream for every batch (after the batch's ready event, as any consumer kernel) that
//   sums both stamps of every row; the sums must equal what the batches' sample ids say, or the run
//   fails. Timed windows only touch each batch (tensor addresses), as PyTorch's loop only copies.
//   In every Stoker run two batches of the last timed window are retained and read back with
//   toHost() after the timing, row by row against the source.
// - A timed window starts after the device is synchronized and ends when the loader's consumer stream
//   is synchronized (loader.synchronize()), so every delivered batch had landed on the device.
//   Streaming windows are whole epochs (a streaming loader reads ahead, up to a whole epoch; a window
//   that started mid-epoch would get batches read before the clock started); resident windows in
//   part 2 are fixed batch counts that cross epoch boundaries.
//
// The code, by part: bench/gpu/common.ts (flags, configuration, the stamped datasets and their
// check, the CUDA environment, records, formatting), bench/gpu/measure.ts (consumers, timed windows,
// one Stoker run, copy ceilings, the recorder of failures), bench/gpu/part1-h2d.ts,
// part2-gather.ts, part3-cifar.ts (with the PyTorch child), part4-consumer.ts, and
// bench/gpu/report.ts (tables, method lines, ratio lines and verdicts, --json).

import { CudaContext } from '../src/device/cuda/context.js';
import { cudaAvailable, driver } from '../src/device/cuda/driver.js';
import { CudaModule } from '../src/device/cuda/module.js';
import { fmtInt, hardware, hardwareLine, now } from './util.js';
import type { CudaEnv, Data, Env, Options, PartResult, Ratio, Row } from './gpu/common.js';
import { CIFAR_SHAPE, LARGE_SHAPE, configOf, fmtBytes, loadBenchPtx, makeData, parseOptions, whyNoCuda } from './gpu/common.js';
import { Recorder } from './gpu/measure.js';
import { runPart1 } from './gpu/part1-h2d.js';
import { runPart2 } from './gpu/part2-gather.js';
import { runPart3 } from './gpu/part3-cifar.js';
import { runPart4 } from './gpu/part4-consumer.js';
import type { Results } from './gpu/report.js';
import { report } from './gpu/report.js';

export async function main(args: readonly string[]): Promise<void> {
  const opts = parseOptions(args);
  const cfg = configOf(opts);
  const log = opts.json ? (_: string) => {} : (s: string) => process.stderr.write(`${s}\n`);
  const hw = hardware();
  const sim = opts.device === 'sim';

  if (!sim && !cudaAvailable()) {
    const why = whyNoCuda();
    if (opts.json) console.log(JSON.stringify({ bench: 'gpu', hardware: hw, skipped: why }, null, 2));
    else {
      console.log(`hardware: ${hardwareLine(hw)}`);
      console.log(`gpu bench skipped: no CUDA device here (${why}).`);
      console.log('Run it on a machine with an NVIDIA GPU and driver, or pass --device sim for a smoke test of the Stoker paths.');
    }
    return;
  }

  const { cuda, gpuLine, gpuInfo } = sim ? simDevice() : openCuda(opts);
  const env: Env = { opts, cfg, sim, cuda, log };
  if (!opts.json) {
    console.log(`hardware: ${hardwareLine(hw)}`);
    console.log(`gpu: ${gpuLine}`);
  }

  try {
    const res = await runAll(env);
    report(env, hw, gpuInfo, res);
  } finally {
    cuda?.ctx.dispose();
  }
}

interface Device {
  readonly cuda: CudaEnv | undefined;
  readonly gpuLine: string;
  readonly gpuInfo: Record<string, unknown>;
}

function simDevice(): Device {
  return {
    cuda: undefined,
    gpuLine: 'sim (the simulated device, 16 GiB): a smoke test of the Stoker paths; its figures are not GPU figures and no goal is judged',
    gpuInfo: { device: 'sim' },
  };
}

/** Open the CUDA device the flags name and load the bench's kernels; its line and JSON record. */
function openCuda(opts: Options): Device {
  const ordinal = opts.device === 'cuda' ? 0 : Number(opts.device.slice('cuda:'.length));
  const ctx = CudaContext.open(ordinal);
  let cuda: CudaEnv;
  try {
    const ptx = loadBenchPtx();
    cuda = { ctx, ptx, module: CudaModule.load(ctx, ptx) };
  } catch (error) {
    ctx.dispose();
    throw error;
  }
  const mem = ctx.memInfo();
  const v = driver().version;
  const gpuInfo: Record<string, unknown> = {
    name: ctx.name, ordinal, totalBytes: mem.total, usedBytesAtStart: mem.used,
    computeCapability: ctx.computeCapability.join('.'), multiprocessors: ctx.multiprocessors, driverApi: `${Math.floor(v / 1000)}.${(v % 1000) / 10}`,
  };
  const gpuLine =
    `${ctx.name} (cuda:${ordinal}), ${(mem.total / 2 ** 30).toFixed(1)} GiB (${(mem.used / 2 ** 30).toFixed(1)} GiB in use at start), ` +
    `compute ${ctx.computeCapability.join('.')}, ${ctx.multiprocessors} SMs, driver API ${gpuInfo.driverApi}`;
  return { cuda, gpuLine, gpuInfo };
}

/** The datasets the asked parts need (ImageNet-sized: parts 1, 2, 4; CIFAR-shaped: parts 2, 3, 4), and the line that says what they are. */
function makeDatasets(env: Env): { large: Data | undefined; cifar: Data | undefined } {
  const { cfg, opts } = env;
  const parts = opts.parts;
  const t0 = now();
  const needLarge = parts.has(1) || parts.has(2) || parts.has(4);
  const needCifar = parts.has(2) || parts.has(3) || parts.has(4);
  const large = needLarge ? makeData('the ImageNet-sized set', cfg.largeSamples, LARGE_SHAPE, false) : undefined;
  const cifar = needCifar ? makeData('the CIFAR-shaped set', cfg.cifarSamples, CIFAR_SHAPE, true) : undefined;
  const genMs = now() - t0;
  const datasets: string[] = [];
  if (large) datasets.push(`ImageNet-sized: ${fmtInt(large.n)} × uint8 [${large.shape.join(', ')}] (${fmtInt(large.rowBytes)} B), ${fmtBytes(large.n * large.rowBytes)}`);
  if (cifar) datasets.push(`CIFAR-shaped: ${fmtInt(cifar.n)} × (uint8 [${cifar.shape.join(', ')}] + int64 label), ${fmtBytes(cifar.n * cifar.sampleBytes)}`);
  if (!opts.json) console.log(`datasets: ${datasets.join('; ')}; in shared memory, rows stamped with their ids, generated in ${genMs.toFixed(0)} ms`);
  return { large, cifar };
}

/** Run the asked parts in order; each hands back its rows and ratio lines. */
async function runAll(env: Env): Promise<Results> {
  const parts = env.opts.parts;
  const { large, cifar } = makeDatasets(env);
  const rec = new Recorder(env);
  const rows: Row[] = [];
  const ratios: Ratio[] = [];
  const add = (r: PartResult) => {
    rows.push(...r.rows);
    ratios.push(...r.ratios);
  };
  if (parts.has(1)) add(await runPart1(env, rec, large!));
  if (parts.has(2)) add(await runPart2(env, rec, large!, cifar!));
  let torch: Results['torch'];
  if (parts.has(3)) {
    const r = await runPart3(env, rec, cifar!);
    add(r);
    torch = r.torch;
  }
  if (parts.has(4)) {
    const r = await runPart4(env, rec, large!, cifar!);
    ratios.push(...r.ratios);
    return { rows, p4: r.p4, ratios, torch, spin: r.spin, spinLarge: r.spinLarge, rec };
  }
  return { rows, p4: [], ratios, torch, spin: undefined, spinLarge: undefined, rec };
}
