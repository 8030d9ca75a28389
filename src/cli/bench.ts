// `stoker bench`: a short built-in benchmark of the loader on this machine — an in-memory
// CIFAR-shaped dataset (resident), and a PNG image folder read by reader workers through the RAM
// cache and through the disk stage — with per-epoch throughput, loader wait and tier hit rates, as
// a table, a JSON document (--json) or a self-contained HTML report (--report). The rule: the
// figures are `loader.stats()`'s, turned into rates by report/figures.ts and nothing else; the
// consumer does the same work in every scenario (an optional simulated step, then release).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { DataLoader } from '../loader.js';
import { sources } from '../dataset/sources.js';
import type { AnyDataset } from '../dataset/dataset.js';
import type { SourceSpec } from '../dataset/source-spec.js';
import { tensor } from '../tensor/tensor.js';
import { transforms } from '../transforms/transforms.js';
import type { LoaderOptions } from '../options.js';
import type { AnyTensor } from '../device/device-tensor.js';
import { epochFigures, int, pct } from '../report/figures.js';
import { type BenchEpoch, type BenchReport, type BenchScenario, renderBenchReport } from '../report/html.js';
import { type DeviceName, deviceArg, intArg, workersArg } from './args.js';
import { onCleanup } from './cleanup.js';
import { UsageError } from './errors.js';
import { writeShapesDataset } from './demo-data.js';
import { Ui, table } from './ui.js';

export const SCENARIOS = ['memory', 'images', 'disk'] as const;

/**
 * The default run — what `stoker bench --report x.html` shows — sized so that a person learns
 * something from it, in about 25 s on 2 busy cores:
 * - a 10 ms step per batch of 64 (about the demo's MLP training on tfjs-wasm): the consumer takes
 *   real time, so the wait shows whether the loader hid its reads behind the step (cache, memory)
 *   or not (decoding PNGs in epoch 1); its ceiling, 6 400 samples/s, sits between the two;
 * - epochs of 60 batches or more (4 000 images, 10 000 in memory), so an epoch lasts long enough
 *   (≥ 0.6 s) that timer jitter and one GC pause do not make the figures;
 * - 3 epochs: the first reads the source, the next two show the tiers and that they agree.
 */
const DEFAULTS = { samples: 10_000, images: 4000, epochs: 3, batchSize: 64, stepMs: 10 } as const;
/** Every scenario's sample: a uint8 [3, 32, 32] image and an int32 label. */
const SAMPLE_BYTES = 3 * 32 * 32 + 4;
export type ScenarioName = (typeof SCENARIOS)[number];

interface BenchOptions {
  readonly scenarios: readonly ScenarioName[];
  readonly samples: number;
  readonly images: number;
  readonly epochs: number;
  readonly batchSize: number;
  readonly stepMs: number;
  readonly device: DeviceName;
  readonly workers: number | 'auto';
  readonly seed: number;
  readonly report: string | undefined;
  readonly json: boolean;
  readonly progress: boolean;
}

export function benchCommand(): Command {
  return new Command('bench')
    .description('measure the loader on this machine: per-epoch throughput, loader wait and tier hit rates (table, --json, or an HTML report)')
    .addOption(new Option('--scenarios <list>', `comma-separated, from: ${SCENARIOS.join(', ')}`).default([...SCENARIOS], SCENARIOS.join(',')).argParser(scenariosArg))
    .addOption(new Option('--samples <n>', "samples of the in-memory dataset ('memory')").default(DEFAULTS.samples).argParser(intArg(1)))
    .addOption(new Option('--images <n>', "PNG files of the image folder ('images', 'disk')").default(DEFAULTS.images).argParser(intArg(1)))
    .addOption(new Option('--epochs <n>', 'epochs per scenario').default(DEFAULTS.epochs).argParser(intArg(1, 1000)))
    .addOption(new Option('--batch-size <n>', 'rows per batch').default(DEFAULTS.batchSize).argParser(intArg(1, 65536)))
    .addOption(new Option('--step-ms <ms>', 'simulated training step per batch (busy CPU on the main thread), so wait % shows what the loader hides; 0: the loader alone').default(DEFAULTS.stepMs).argParser(msArg))
    .addOption(new Option('--device <name>', 'cpu, cuda, cuda:N or sim').default('cpu').argParser(deviceArg))
    .addOption(new Option('--workers <n>', "reader threads for the image folder ('auto' = cores − 1)").default('auto').argParser(workersArg))
    .addOption(new Option('--seed <n>', 'shuffle and data seed').default(42).argParser(intArg(0, 2 ** 32 - 1)))
    .option('--report <file.html>', 'also write a self-contained HTML report with charts')
    .option('--json', 'print one JSON document instead of text')
    .option('--no-progress', 'no progress bars (they only show on a terminal anyway)')
    .addHelpText('after', `
Scenarios:
  memory   ${describeScenario('memory')}
  images   ${describeScenario('images')}
  disk     ${describeScenario('disk')}

Examples:
  stoker bench                          all three, 3 epochs each, a 10 ms step per batch of 64
  stoker bench --report bench.html      and the charts
  stoker bench --step-ms 0              the loader alone: how fast it delivers with nothing to hide behind
  stoker bench --scenarios images --step-ms 5 --epochs 5
  stoker bench --json | jq '.scenarios[].epochs[].samplesPerSec'`)
    .action(async (opts: BenchOptions) => {
      await runBench(opts, new Ui({ json: opts.json === true, progress: opts.progress }));
    });
}

function describeScenario(name: ScenarioName): string {
  switch (name) {
    case 'memory':
      return 'in-memory uint8 [3, 32, 32] images + int32 labels (sources.arrays), resident, random crop + flip';
    case 'images':
      return 'a folder of 32×32 PNG files (sources.imageFolder), streaming, reader workers decode, RAM sample cache';
    case 'disk':
      return 'the same PNG folder with the RAM cache share at 0 and a disk stage: later epochs read decoded samples from disk';
  }
}

export async function runBench(opts: BenchOptions, ui: Ui): Promise<BenchReport> {
  const t0 = performance.now();
  const startedAt = new Date().toISOString();
  const list = cpus();
  const hardware = { cpu: list[0]?.model.trim() ?? 'unknown CPU', cores: list.length, memoryBytes: totalmem(), node: process.version, platform: `${process.platform}-${process.arch}` };
  ui.line(`Stoker bench — ${hardware.cpu}, ${hardware.cores} cores, Node ${hardware.node}`);
  ui.line(`batch ${opts.batchSize}, ${opts.epochs} epochs per scenario, simulated step ${opts.stepMs} ms per batch, device ${opts.device}`);
  ui.line('');

  const scratch = mkdtempSync(join(tmpdir(), 'stoker-bench-'));
  const removeScratch = onCleanup(() => rmSync(scratch, { recursive: true, force: true }));
  const scenarios: BenchScenario[] = [];
  try {
    let folder: string | undefined;
    for (const name of opts.scenarios) {
      let dataset: AnyDataset | SourceSpec;
      let options: LoaderOptions<AnyTensor>;
      let samples: number;
      const base = { batchSize: opts.batchSize, device: opts.device, seed: opts.seed } as const;
      if (name === 'memory') {
        if (opts.samples < opts.batchSize) throw new UsageError(`--samples (${opts.samples}) is below --batch-size (${opts.batchSize}): no whole batch to time`);
        samples = opts.samples;
        dataset = cifarShaped(samples, opts.seed);
        options = { ...base, transform: transforms.image({ crop: { padding: 4 }, flip: true }) } as LoaderOptions<AnyTensor>;
      } else {
        if (opts.images < opts.batchSize) throw new UsageError(`--images (${opts.images}) is below --batch-size (${opts.batchSize}): no whole batch to time`);
        samples = opts.images;
        if (folder === undefined) {
          const writing = ui.task(`writing ${int(opts.images)} PNG files (32×32) for the image scenarios …`, '{bar} {percentage}% | {value}/{total} files', opts.images);
          const data = await writeShapesDataset(join(scratch, 'images'), { train: opts.images, test: 0, seed: opts.seed, onProgress: (n) => writing.update(n, {}) });
          writing.stop();
          folder = data.trainDir;
          ui.line(`written in ${(data.ms / 1000).toFixed(1)} s`);
        }
        dataset = sources.imageFolder(folder, { size: 32 });
        options = (name === 'images'
          ? { ...base, mode: 'streaming', workers: opts.workers }
          : { ...base, mode: 'streaming', workers: opts.workers, ramMaxUsage: 0, diskStage: { gigabytes: 1, dir: scratch } }) as LoaderOptions<AnyTensor>;
      }
      scenarios.push(await runScenario(name, dataset, options, samples, opts, ui));
    }
  } finally {
    removeScratch();
  }

  const report: BenchReport = {
    ok: true, command: 'bench', startedAt, hardware,
    config: { batchSize: opts.batchSize, epochs: opts.epochs, stepMs: opts.stepMs, seed: opts.seed },
    scenarios, totalSeconds: (performance.now() - t0) / 1000,
  };
  let reportPath: string | undefined;
  if (opts.report !== undefined) {
    reportPath = resolve(opts.report);
    writeFileSync(reportPath, renderBenchReport(report));
  }
  if (ui.json) {
    ui.emit(reportPath === undefined ? report : { ...report, reportPath });
    return report;
  }
  ui.line('');
  type Row = { s: BenchScenario; e: BenchEpoch };
  const rows: Row[] = scenarios.flatMap((s) => s.epochs.map((e) => ({ s, e })));
  const pool = rows.some(({ e }) => (e.poolPct ?? 0) > 0);
  ui.line(table(rows, [
    { title: 'scenario', cell: ({ s, e }) => (e.epoch === 0 ? s.name : '') },
    { title: 'epoch', align: 'right', cell: ({ e }) => String(e.epoch + 1) },
    { title: 'samples/s', align: 'right', cell: ({ e }) => int(e.samplesPerSec) },
    { title: 'wait', align: 'right', cell: ({ e }) => pct(e.waitPct) },
    { title: 'transform', align: 'right', cell: ({ e }) => pct(e.transformPct) },
    ...(pool ? [{ title: 'VRAM pool', align: 'right' as const, cell: ({ e }: Row) => pct(e.poolPct) }] : []),
    { title: 'RAM cache', align: 'right', cell: ({ e }) => pct(e.cachePct) },
    { title: 'disk', align: 'right', cell: ({ e }) => pct(e.diskPct) },
    { title: 'source', align: 'right', cell: ({ e }) => pct(e.sourcePct) },
  ]));
  ui.line('');
  ui.line(`samples/s = rows delivered / epoch wall time; wait = share of the epoch the loop waited on the loader; ${pool ? 'VRAM pool / ' : ''}RAM cache / disk / source = where the rows came from (docs/stats.md).`);
  if (reportPath !== undefined) ui.line(`report: ${reportPath}`);
  ui.line(`total ${report.totalSeconds.toFixed(1)} s`);
  return report;
}

async function runScenario(name: ScenarioName, dataset: AnyDataset | SourceSpec, options: LoaderOptions<AnyTensor>, samples: number, opts: BenchOptions, ui: Ui): Promise<BenchScenario> {
  const c0 = performance.now();
  const loader = await DataLoader.create(dataset, options);
  const createSeconds = (performance.now() - c0) / 1000;
  try {
    const epochs: BenchEpoch[] = [];
    for (let e = 0; e < opts.epochs; e++) {
      const bar = ui.progress(`${name.padEnd(6)} epoch ${e + 1}/${opts.epochs} {bar} {percentage}% | {rate} samples/s | wait {wait}`, loader.numBatches, { rate: '—', wait: '—' });
      let n = 0;
      let sink = 0;
      for await (const batch of loader.epoch(e)) {
        if (opts.stepMs > 0) busy(opts.stepMs);
        const first = batch.at(0);
        if ('data' in first) sink += (first.data as ArrayLike<number>)[0] as number;
        batch.release();
        if (++n % 4 === 0 && ui.bars) {
          const f = epochFigures(loader.stats().epochs.at(-1)!);
          bar.update(n, { rate: int(f.samplesPerSec), wait: pct(f.waitPct, 0) });
        }
      }
      bar.stop();
      const stats = loader.stats().epochs.at(-1)!;
      const figures = epochFigures(stats);
      epochs.push({ ...figures, stats });
      if (Number.isNaN(sink)) throw new Error('unreachable: keeps the reads alive');
      ui.line(`${name.padEnd(6)} epoch ${e + 1}/${opts.epochs}  ${int(figures.samplesPerSec).padStart(9)} samples/s  wait ${pct(figures.waitPct).padStart(7)}  cache hits ${pct(figures.hitPct).padStart(7)}`);
    }
    const s = loader.stats();
    return {
      name, description: describeScenario(name), device: s.device, mode: s.mode, workers: s.workers, samples,
      bytesPerSample: SAMPLE_BYTES, createSeconds, epochs,
    };
  } finally {
    await loader.close();
  }
}

/** Uint8 [n, 3, 32, 32] images (seeded noise) and int32 labels, in memory. */
function cifarShaped(n: number, seed: number) {
  const images = new Uint8Array(n * 3 * 32 * 32);
  const words = new Uint32Array(images.buffer);
  let s = (seed ^ 0x5eed) | 0 || 1;
  for (let i = 0; i < words.length; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    words[i] = s;
  }
  const labels = new Int32Array(n);
  for (let i = 0; i < n; i++) labels[i] = i % 10;
  return sources.arrays({ image: tensor(images, [n, 3, 32, 32]), label: labels });
}

/** Keep the main thread busy for `ms`, as a training step on the CPU would. */
function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // spin
  }
}

function scenariosArg(value: string): ScenarioName[] {
  const names = value.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  const bad = names.filter((n) => !(SCENARIOS as readonly string[]).includes(n));
  if (names.length === 0 || bad.length > 0) throw new InvalidArgumentError(`expected a comma-separated list from ${SCENARIOS.join(', ')}${bad.length > 0 ? `; unknown: ${bad.join(', ')}` : ''}`);
  return [...new Set(names)] as ScenarioName[];
}

function msArg(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0 || n > 10_000) throw new InvalidArgumentError('expected milliseconds from 0 to 10000');
  return n;
}
