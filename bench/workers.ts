// Reader workers and sample tiers: what `workers`, `sampleCache` and `diskStage` buy, in one process.
// Part 1, a CPU-bound source: each get(i) does ~50 µs of fixed hashing work (a pass count calibrated
// once, not a timed spin), read through DataLoader.create(sources.module(...)) with workers = 0 (the
// main-thread fetcher: the reference), 1, 2, … cores and 'auto', the sample cache off so every epoch
// pays the work; beside them a plain loop calling get(i) on one core (the raw per-sample cost).
// Part 2, a slow source: each get(i) waits 2 ms (setTimeout, no CPU) and returns a CIFAR-sized sample;
// three epochs each with the RAM cache on, off, the disk stage alone (no RAM share) and both, on the
// main thread and with workers: 'auto'; per-epoch time and the rows each tier served.
// The rule: every figure is measured in this process, and the verdict is the ratio lines at the end.
//
// How it measures (printed with the results, so a reader of the output needs nothing else):
// - Part 1 runs interleaved rounds: every contender reads one epoch per round (epoch index = round,
//   so all see the same permutation), the starting contender rotating, after warm-up rounds; a
//   contender's figure is its median epoch. Each batch is touched (two image bytes + label per row)
//   and released; the checksums of all contenders must agree every round, or the bench aborts.
// - Part 2 builds a fresh loader per repetition and configuration, reads epochs 0, 1, 2 and closes
//   it; a figure is the median over the timed repetitions, epoch by epoch. The checksums of every
//   configuration must agree epoch by epoch (a tier that served wrong bytes aborts the bench).
// - Main-thread busy is performance.eventLoopUtilization() over the epoch; CPU is process.cpuUsage()
//   (every thread) over the epoch, divided by its wall time (cores kept busy on average).

import { availableParallelism } from 'node:os';
import { DataLoader, RandomSampler, sources } from '../src/index.js';
import type { Batch, EpochStats, LoaderOptions } from '../src/index.js';
import { IMAGE_BYTES, type CpuSourceOptions, type SlowSourceOptions, cpuSample } from './fixtures/sources.js';
import type { Column } from './util.js';
import { collectGarbage, fmtFixed, fmtInt, hardware, hardwareLine, median, now, parseFlags, sink, table } from './util.js';

const BATCH = 256;
const SEED = 42;
const TARGET_US = 50;
const LATENCY_MS = 2;
const SOURCES = new URL('./fixtures/sources.ts', import.meta.url);

interface Config {
  /** Part 1: samples per epoch (a multiple of BATCH), warm-up and timed rounds. */
  readonly cpuSamples: number;
  readonly cpuWarmupRounds: number;
  readonly cpuRounds: number;
  /** Part 2: samples (a multiple of BATCH), untimed and timed repetitions of the three epochs. */
  readonly slowSamples: number;
  readonly slowWarmupReps: number;
  readonly slowReps: number;
  /** Part 3: samples of the serial slow source (an epoch from the source costs samples × latency). */
  readonly serialSamples: number;
}

const DEFAULT: Config = { cpuSamples: 20_480, cpuWarmupRounds: 1, cpuRounds: 5, slowSamples: 20_480, slowWarmupReps: 1, slowReps: 5, serialSamples: 2_048 };
const QUICK: Config = { cpuSamples: 4_096, cpuWarmupRounds: 1, cpuRounds: 2, slowSamples: 5_120, slowWarmupReps: 0, slowReps: 1, serialSamples: 512 };

// ---------------------------------------------------------------------------------------------
// Measuring one epoch

interface EpochMeasure {
  readonly ms: number;
  readonly rows: number;
  readonly checksum: number;
  /** Main thread: share of the epoch's wall time the event loop was busy. */
  readonly mainBusy: number;
  /** Process CPU time (all threads) over wall time: cores kept busy on average. */
  readonly cores: number;
  /** The loader's own figures for the epoch (undefined for the plain loop). */
  readonly stats: EpochStats | undefined;
}

/** Two image bytes and the label of every row: cheap, and different for every sample. */
function touch(batch: Batch): number {
  const image = batch.get('image').data as Uint8Array;
  const label = batch.get('label').data as Int32Array;
  let acc = 0;
  for (let r = 0; r < label.length; r++) acc += image[r * IMAGE_BYTES]! + image[r * IMAGE_BYTES + IMAGE_BYTES - 1]! + label[r]!;
  return acc;
}

async function timed(body: () => Promise<{ rows: number; checksum: number }> | { rows: number; checksum: number }): Promise<Omit<EpochMeasure, 'stats'>> {
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = process.cpuUsage();
  const t0 = now();
  const { rows, checksum } = await body();
  const ms = now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const elu = performance.eventLoopUtilization(elu0);
  sink.value += checksum;
  return { ms, rows, checksum, mainBusy: elu.utilization, cores: (cpu.user + cpu.system) / 1000 / ms };
}

async function loaderEpoch(loader: DataLoader, epoch: number): Promise<EpochMeasure> {
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
  if (stats.epoch !== epoch || !stats.complete) throw new Error(`epoch ${epoch} did not complete (stats: ${JSON.stringify(stats)})`);
  return { ...m, stats };
}

// ---------------------------------------------------------------------------------------------
// Part 1: a CPU-bound source

interface Calibration {
  readonly passes: number;
  readonly baseUs: number;
  readonly passUs: number;
}

/** Per-sample cost at 0 and 64 passes (after a warm-up), then the pass count that makes ~TARGET_US. */
function calibrate(): Calibration {
  const cost = (passes: number, count: number): number => {
    let best = Infinity;
    for (let rep = 0; rep < 3; rep++) {
      const t0 = now();
      let acc = 0;
      for (let i = 0; i < count; i++) acc += cpuSample(i, passes).image[7]!;
      best = Math.min(best, ((now() - t0) * 1000) / count);
      sink.value += acc;
    }
    return best;
  };
  cost(16, 2_000);
  const baseUs = cost(0, 20_000);
  const passUs = (cost(64, 1_000) - baseUs) / 64;
  const passes = Math.max(1, Math.round((TARGET_US - baseUs) / passUs));
  return { passes, baseUs, passUs };
}

interface Contender {
  readonly key: string;
  readonly name: string;
  /** Workers asked for; undefined for the plain loop. */
  readonly asked: number | 'auto' | undefined;
  runEpoch(epoch: number): Promise<EpochMeasure>;
  /** Reader workers the loader runs (loader.stats().workers). */
  readonly workers: number;
  close(): Promise<void>;
}

async function cpuLoader(options: CpuSourceOptions, workers: number | 'auto'): Promise<Contender> {
  const loader = await DataLoader.create(sources.module(SOURCES, 'openCpuSource', options), {
    batchSize: BATCH, mode: 'streaming', seed: SEED, workers, sampleCache: false,
  });
  const resolved = loader.stats().workers;
  if (workers !== 'auto' && resolved !== workers) throw new Error(`asked for ${workers} workers, the loader runs ${resolved}`);
  const name = workers === 'auto' ? `workers: 'auto' (→ ${resolved})` : `workers: ${workers}${workers === 0 ? ' (main thread)' : ''}`;
  return { key: `w${workers}`, name, asked: workers, workers: resolved, runEpoch: (e) => loaderEpoch(loader, e), close: () => loader.close() };
}

/** get(i) called directly, in the loader's order, on one core: the raw cost with no pipeline. */
function plainLoop(options: CpuSourceOptions): Contender {
  const sampler = new RandomSampler(options.n, SEED);
  const usable = Math.floor(options.n / BATCH) * BATCH;
  return {
    key: 'plain',
    name: 'plain loop: get(i) on one core',
    asked: undefined,
    workers: 0,
    runEpoch: async (epoch) => {
      const m = await timed(() => {
        const order = sampler.indices(epoch);
        let checksum = 0;
        for (let p = 0; p < usable; p++) {
          const id = order[p]!;
          const s = cpuSample(id, options.passes);
          checksum += s.image[0]! + s.image[IMAGE_BYTES - 1]! + s.label[0]!;
        }
        return { rows: usable, checksum };
      });
      return { ...m, stats: undefined };
    },
    close: async () => {},
  };
}

/** 1 … cores when there are few; on a larger host, powers of two plus cores − 1 and cores. */
function workerCounts(cores: number): number[] {
  if (cores <= 8) return Array.from({ length: cores }, (_, i) => i + 1);
  const out = new Set<number>();
  for (let w = 1; w < cores; w *= 2) out.add(w);
  out.add(cores - 1);
  out.add(cores);
  return [...out].sort((a, b) => a - b);
}

interface CpuRow {
  readonly key: string;
  readonly name: string;
  readonly asked: number | 'auto' | undefined;
  readonly workers: number;
  readonly ms: number;
  readonly msMin: number;
  readonly msMax: number;
  readonly samplesPerSec: number;
  readonly mainBusy: number;
  readonly cores: number;
  /** Medians of the loader's figures, in ms per epoch. */
  readonly waitMs: number | undefined;
  readonly fetchMs: number | undefined;
  readonly sourceReadMs: number | undefined;
  readonly ringSlots: number | undefined;
}

async function measureCpu(cfg: Config, calib: Calibration, log: (s: string) => void): Promise<CpuRow[]> {
  const options: CpuSourceOptions = { n: cfg.cpuSamples, passes: calib.passes };
  const cores = availableParallelism();
  const contenders: Contender[] = [plainLoop(options)];
  const measures: EpochMeasure[][] = [];
  const total = cfg.cpuWarmupRounds + cfg.cpuRounds;
  const expectRows = Math.floor(cfg.cpuSamples / BATCH) * BATCH;
  try {
    for (const w of [0, ...workerCounts(cores), 'auto' as const]) {
      log(`  starting workers: ${w}`);
      contenders.push(await cpuLoader(options, w));
    }
    for (const _ of contenders) measures.push([]);
    for (let round = 0; round < total; round++) {
      const sums = new Map<string, number>();
      for (let k = 0; k < contenders.length; k++) {
        const i = (round + k) % contenders.length;
        const c = contenders[i]!;
        collectGarbage();
        const m = await c.runEpoch(round);
        if (m.rows !== expectRows) throw new Error(`${c.name}: epoch ${round} delivered ${m.rows} rows, expected ${expectRows}`);
        sums.set(c.name, m.checksum);
        if (round >= cfg.cpuWarmupRounds) measures[i]!.push(m);
      }
      if (new Set(sums.values()).size !== 1) throw new Error(`round ${round}: contenders disagree: ${[...sums].map(([n, s]) => `${n}=${s}`).join(', ')}`);
      const first = contenders[0]!;
      const last = measures[0]!.at(-1);
      log(`  round ${round + 1}/${total}${round < cfg.cpuWarmupRounds ? ' (warm-up)' : ''}${last && round >= cfg.cpuWarmupRounds ? ` — ${first.name}: ${last.ms.toFixed(0)} ms` : ''}`);
    }
  } finally {
    for (const c of contenders) await c.close();
  }
  return contenders.map((c, i) => {
    const ms = measures[i]!;
    const stat = (f: (s: EpochStats) => number) => (ms[0]!.stats === undefined ? undefined : median(ms.map((m) => f(m.stats!))));
    const msEpoch = median(ms.map((m) => m.ms));
    return {
      key: c.key,
      name: c.name,
      asked: c.asked,
      workers: c.workers,
      ms: msEpoch,
      msMin: Math.min(...ms.map((m) => m.ms)),
      msMax: Math.max(...ms.map((m) => m.ms)),
      samplesPerSec: expectRows / (msEpoch / 1000),
      mainBusy: median(ms.map((m) => m.mainBusy)),
      cores: median(ms.map((m) => m.cores)),
      waitMs: stat((s) => s.waitMs),
      fetchMs: stat((s) => s.fetchMs),
      sourceReadMs: stat((s) => s.sourceReadMs),
      ringSlots: stat((s) => s.ringSlots),
    };
  });
}

// ---------------------------------------------------------------------------------------------
// Part 2: a slow source through the sample tiers

interface TierConfig {
  readonly key: string;
  readonly name: string;
  readonly options: Pick<LoaderOptions, 'sampleCache' | 'ramMaxUsage' | 'diskStage'>;
}

const TIERS: readonly TierConfig[] = [
  { key: 'cache', name: 'RAM cache (default)', options: {} },
  { key: 'nocache', name: 'cache off', options: { sampleCache: false } },
  { key: 'disk', name: 'disk stage, no RAM share', options: { ramMaxUsage: 0, diskStage: { gigabytes: 1 } } },
  { key: 'both', name: 'RAM cache + disk stage', options: { diskStage: { gigabytes: 1 } } },
];
const SLOW_WORKERS: readonly (0 | 'auto')[] = [0, 'auto'];

interface SlowRun {
  readonly tier: TierConfig;
  readonly asked: 0 | 'auto';
  readonly workers: number;
  /** loader.prefetchDepth after the run: batches the streaming pipeline keeps in flight. */
  readonly depth: number;
  readonly epochs: EpochMeasure[];
}

interface SlowRow {
  readonly tier: string;
  readonly tierName: string;
  readonly asked: 0 | 'auto';
  readonly workers: number;
  readonly epoch: number;
  readonly ms: number;
  readonly samplesPerSec: number;
  /** This epoch's speed over epoch 0's (medians). */
  readonly vsFirst: number;
  readonly rowsFromCache: number;
  readonly rowsFromDisk: number;
  readonly rowsFromSource: number;
  readonly waitMs: number;
  readonly fetchMs: number;
  readonly sourceReadMs: number;
  readonly mainBusy: number;
  readonly ringSlots: number;
  readonly diskStagedMB: number;
  readonly depth: number;
}

async function slowRun(tier: TierConfig, asked: 0 | 'auto', options: SlowSourceOptions): Promise<SlowRun> {
  const loader = await DataLoader.create(sources.module(SOURCES, 'openSlowSource', options), {
    batchSize: BATCH, mode: 'streaming', seed: SEED, workers: asked, ...tier.options,
  });
  try {
    const epochs: EpochMeasure[] = [];
    for (let e = 0; e < 3; e++) {
      collectGarbage();
      epochs.push(await loaderEpoch(loader, e));
    }
    return { tier, asked, workers: loader.stats().workers, depth: loader.prefetchDepth, epochs };
  } finally {
    await loader.close();
  }
}

async function measureSlow(
  cfg: Config,
  log: (s: string) => void,
  options: SlowSourceOptions = { n: cfg.slowSamples, latencyMs: LATENCY_MS },
  tiers: readonly TierConfig[] = TIERS,
  workerChoices: readonly (0 | 'auto')[] = SLOW_WORKERS,
  reps = { warmup: cfg.slowWarmupReps, timed: cfg.slowReps },
): Promise<SlowRow[]> {
  const combos = tiers.flatMap((tier) => workerChoices.map((asked) => ({ tier, asked })));
  const runs = combos.map(() => [] as SlowRun[]);
  const expectRows = Math.floor(options.n / BATCH) * BATCH;
  const total = reps.warmup + reps.timed;
  for (let rep = 0; rep < total; rep++) {
    const sums: number[][] = [[], [], []];
    for (let k = 0; k < combos.length; k++) {
      const i = (rep + k) % combos.length;
      const { tier, asked } = combos[i]!;
      const run = await slowRun(tier, asked, options);
      log(`    ${tier.name}, workers ${asked}: ${run.epochs.map((m) => `${m.ms.toFixed(0)} ms`).join(', ')}`);
      run.epochs.forEach((m, e) => {
        if (m.rows !== expectRows) throw new Error(`${tier.name}, workers ${asked}: epoch ${e} delivered ${m.rows} rows, expected ${expectRows}`);
        sums[e]!.push(m.checksum);
      });
      if (rep >= reps.warmup) runs[i]!.push(run);
    }
    sums.forEach((s, e) => {
      if (new Set(s).size !== 1) throw new Error(`repetition ${rep}, epoch ${e}: configurations disagree on what they delivered (${s.join(', ')})`);
    });
    log(`  repetition ${rep + 1}/${total}${rep < reps.warmup ? ' (warm-up)' : ''}`);
  }
  const rows: SlowRow[] = [];
  combos.forEach(({ tier, asked }, i) => {
    const rs = runs[i]!;
    const first = median(rs.map((r) => r.epochs[0]!.ms));
    for (let e = 0; e < 3; e++) {
      const ms = median(rs.map((r) => r.epochs[e]!.ms));
      const st = (f: (s: EpochStats) => number) => median(rs.map((r) => f(r.epochs[e]!.stats!)));
      rows.push({
        tier: tier.key,
        tierName: tier.name,
        asked,
        workers: rs[0]!.workers,
        epoch: e,
        ms,
        samplesPerSec: expectRows / (ms / 1000),
        vsFirst: first / ms,
        rowsFromCache: st((s) => s.rowsFromCache),
        rowsFromDisk: st((s) => s.rowsFromDisk),
        rowsFromSource: st((s) => s.rowsFromSource),
        waitMs: st((s) => s.waitMs),
        fetchMs: st((s) => s.fetchMs),
        sourceReadMs: st((s) => s.sourceReadMs),
        mainBusy: median(rs.map((r) => r.epochs[e]!.mainBusy)),
        ringSlots: st((s) => s.ringSlots),
        diskStagedMB: st((s) => s.diskStagedBytes) / 1e6,
        depth: rs[0]!.depth,
      });
    }
  });
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Report

interface Ratio {
  readonly label: string;
  readonly value: number;
  /** ≥ min, or within [min, max] when max is given; no goal when undefined. */
  readonly goal: { readonly min: number; readonly max?: number; readonly text: string } | undefined;
}

function verdict(r: Ratio): boolean | null {
  if (r.goal === undefined) return null;
  return r.value >= r.goal.min && (r.goal.max === undefined || r.value <= r.goal.max);
}

export async function main(args: readonly string[]): Promise<void> {
  const flags = parseFlags(args, ['json', 'quick'], 'npm run bench -- workers [--json] [--quick]');
  const cfg = flags.quick ? QUICK : DEFAULT;
  const log = flags.json ? (_: string) => {} : (s: string) => process.stderr.write(`${s}\n`);
  const hw = hardware();
  const cores = availableParallelism();
  if (!flags.json) console.log(`hardware: ${hardwareLine(hw)}; availableParallelism ${cores}`);

  log('part 1: calibrating the CPU-bound source');
  const calib = calibrate();
  log(`part 1: CPU-bound source, ${calib.passes} hash passes per sample; ${cfg.cpuWarmupRounds} warm-up + ${cfg.cpuRounds} timed rounds`);
  const cpu = await measureCpu(cfg, calib, log);
  log('part 2: slow source through the sample tiers');
  const slow = await measureSlow(cfg, log);
  log('part 3: serial slow source (one read at a time) through the sample tiers');
  const serial = await measureSlow(cfg, log, { n: cfg.serialSamples, latencyMs: LATENCY_MS, serial: true }, TIERS.filter((t) => t.key !== 'both'), [0], { warmup: 0, timed: 1 });
  const serialAt = (tier: string, epoch: number) => serial.find((r) => r.tier === tier && r.epoch === epoch)!;

  const plain = cpu.find((r) => r.key === 'plain')!;
  const w0 = cpu.find((r) => r.key === 'w0')!;
  const w1 = cpu.find((r) => r.key === 'w1')!;
  const auto = cpu.find((r) => r.key === 'wauto')!;
  const pooled = cpu.filter((r) => r.asked !== undefined && r.asked !== 0);
  const best = pooled.reduce((a, b) => (b.samplesPerSec > a.samplesPerSec ? b : a));
  const slowAt = (tier: string, asked: 0 | 'auto', epoch: number) => slow.find((r) => r.tier === tier && r.asked === asked && r.epoch === epoch)!;
  const speedGoal = Math.round(0.8 * cores * 100) / 100;
  const autoName = (a: 0 | 'auto') => (a === 0 ? 'workers 0' : `workers 'auto' (→ ${slowAt('cache', 'auto', 0).workers})`);
  const ratios: Ratio[] = [
    { label: `CPU source: best speed-up vs workers 0 (${best.name})`, value: best.samplesPerSec / w0.samplesPerSec, goal: { min: speedGoal, text: `≥ 0.8 × ${cores} cores = ${speedGoal}` } },
    { label: `CPU source: best speed-up vs workers 1 (${best.name})`, value: best.samplesPerSec / w1.samplesPerSec, goal: undefined },
    { label: `CPU source: ${auto.name} vs workers 0`, value: auto.samplesPerSec / w0.samplesPerSec, goal: undefined },
    { label: 'CPU source: workers 0 / plain loop', value: w0.samplesPerSec / plain.samplesPerSec, goal: undefined },
  ];
  ratios.push({ label: 'serial slow source, RAM cache, workers 0: epoch 2 / epoch 1 speed', value: serialAt('cache', 1).vsFirst, goal: { min: 20, text: '≥ 20' } });
  ratios.push({ label: 'serial slow source, disk stage, workers 0: epoch 2 / epoch 1 speed', value: serialAt('disk', 1).vsFirst, goal: undefined });
  ratios.push({ label: 'serial slow source, cache off, workers 0: epoch 2 / epoch 1 speed', value: serialAt('nocache', 1).vsFirst, goal: { min: 0.8, max: 1.25, text: '≈ 1 (0.8–1.25)' } });
  for (const a of SLOW_WORKERS) {
    ratios.push({ label: `slow source, RAM cache, ${autoName(a)}: epoch 2 / epoch 1 speed`, value: slowAt('cache', a, 1).vsFirst, goal: undefined });
  }
  for (const a of SLOW_WORKERS) {
    ratios.push({ label: `slow source, disk stage, ${autoName(a)}: epoch 2 / epoch 1 speed`, value: slowAt('disk', a, 1).vsFirst, goal: undefined });
  }
  for (const a of SLOW_WORKERS) {
    ratios.push({ label: `slow source, RAM cache + disk, ${autoName(a)}: epoch 2 / epoch 1 speed`, value: slowAt('both', a, 1).vsFirst, goal: undefined });
  }
  for (const a of SLOW_WORKERS) {
    ratios.push({ label: `slow source, cache off, ${autoName(a)}: epoch 2 / epoch 1 speed`, value: slowAt('nocache', a, 1).vsFirst, goal: undefined });
  }

  const cpuRows = Math.floor(cfg.cpuSamples / BATCH) * BATCH;
  const slowRows = Math.floor(cfg.slowSamples / BATCH) * BATCH;
  const depth = slow.find((r) => r.tier === 'nocache' && r.asked === 0)!.depth;
  if (flags.json) {
    console.log(
      JSON.stringify(
        {
          bench: 'workers',
          hardware: { ...hw, availableParallelism: cores },
          config: { ...cfg, batchSize: BATCH, seed: SEED, targetMicrosPerSample: TARGET_US, latencyMs: LATENCY_MS, quick: flags.quick },
          cpu: { calibration: calib, epochRows: cpuRows, contenders: cpu },
          slow: { epochRows: slowRows, rows: slow },
          serial: { epochRows: Math.floor(cfg.serialSamples / BATCH) * BATCH, rows: serial },
          ratios: Object.fromEntries(ratios.map((r) => [r.label, { value: r.value, goal: r.goal?.text ?? null, met: flags.quick ? null : verdict(r) }])),
          sink: sink.value,
        },
        null,
        2,
      ),
    );
    return;
  }

  const ms = (x: number | undefined) => fmtFixed(x, 0);
  const cpuColumns: Column<CpuRow>[] = [
    { title: 'contender', cell: (r) => r.name },
    { title: 'samples/s', align: 'right', cell: (r) => fmtInt(r.samplesPerSec) },
    { title: 'ms/epoch', align: 'right', cell: (r) => fmtFixed(r.ms, 0) },
    { title: 'min–max ms', align: 'right', cell: (r) => `${r.msMin.toFixed(0)}–${r.msMax.toFixed(0)}` },
    { title: '× w0', align: 'right', cell: (r) => fmtFixed(r.samplesPerSec / w0.samplesPerSec, 2) },
    { title: '× w1', align: 'right', cell: (r) => fmtFixed(r.samplesPerSec / w1.samplesPerSec, 2) },
    { title: 'main busy', align: 'right', cell: (r) => `${(r.mainBusy * 100).toFixed(0)}%` },
    { title: 'CPU cores', align: 'right', cell: (r) => fmtFixed(r.cores, 2) },
    { title: 'waitMs', align: 'right', cell: (r) => ms(r.waitMs) },
    { title: 'fetchMs', align: 'right', cell: (r) => ms(r.fetchMs) },
    { title: 'sourceReadMs', align: 'right', cell: (r) => ms(r.sourceReadMs) },
    { title: 'ring', align: 'right', cell: (r) => (r.ringSlots === undefined ? '—' : String(r.ringSlots)) },
  ];
  console.log('');
  console.log(`part 1 — CPU-bound source: ${fmtInt(cpuRows)} samples/epoch, batch ${BATCH}, sampleCache: false, ${calib.passes} hash passes ≈ ${(calib.baseUs + calib.passes * calib.passUs).toFixed(1)} µs per sample (calibrated)`);
  console.log(table(cpu, cpuColumns));

  const slowColumns: Column<SlowRow>[] = [
    { title: 'tiers', cell: (r) => (r.epoch === 0 ? r.tierName : '') },
    { title: 'workers', cell: (r) => (r.epoch === 0 ? (r.asked === 0 ? '0' : `'auto' → ${r.workers}`) : '') },
    { title: 'epoch', align: 'right', cell: (r) => String(r.epoch + 1) },
    { title: 'ms', align: 'right', cell: (r) => fmtFixed(r.ms, 1) },
    { title: 'samples/s', align: 'right', cell: (r) => fmtInt(r.samplesPerSec) },
    { title: '× ep 1', align: 'right', cell: (r) => (r.vsFirst >= 10 ? r.vsFirst.toFixed(0) : r.vsFirst.toFixed(2)) },
    { title: 'from cache', align: 'right', cell: (r) => fmtInt(r.rowsFromCache) },
    { title: 'from disk', align: 'right', cell: (r) => fmtInt(r.rowsFromDisk) },
    { title: 'from source', align: 'right', cell: (r) => fmtInt(r.rowsFromSource) },
    { title: 'waitMs', align: 'right', cell: (r) => fmtFixed(r.waitMs, 0) },
    { title: 'fetchMs', align: 'right', cell: (r) => fmtFixed(r.fetchMs, 0) },
    { title: 'sourceReadMs', align: 'right', cell: (r) => fmtInt(r.sourceReadMs) },
    { title: 'main busy', align: 'right', cell: (r) => `${(r.mainBusy * 100).toFixed(0)}%` },
    { title: 'ring', align: 'right', cell: (r) => String(r.ringSlots) },
    { title: 'disk MB', align: 'right', cell: (r) => fmtFixed(r.diskStagedMB, 1) },
  ];
  console.log('');
  console.log(`part 2 — slow source (${LATENCY_MS} ms per read, setTimeout): ${fmtInt(slowRows)} samples/epoch × (uint8 [3072] + int32 label), batch ${BATCH}`);
  console.log(table(slow, slowColumns));
  console.log('');
  console.log(`part 3 — serial slow source (${LATENCY_MS} ms per read, one read at a time): ${fmtInt(Math.floor(cfg.serialSamples / BATCH) * BATCH)} samples/epoch, batch ${BATCH}, workers 0`);
  console.log(table(serial, slowColumns));
  console.log('');
  console.log(
    `method: part 1 — ${cfg.cpuWarmupRounds} warm-up + ${cfg.cpuRounds} timed rounds, every contender one epoch per round (same permutation, starting contender rotating), median epoch; ` +
      `get(i) hashes a 3072-byte buffer ${calib.passes} times in place (fixed work: ${calib.baseUs.toFixed(1)} µs + ${calib.passes} × ${calib.passUs.toFixed(2)} µs, calibrated once on the main thread) and returns { image: Uint8Array(3072), label: Int32Array [i % 10] }; ` +
      'each batch is touched (2 bytes + label per row) and released; all contenders\' checksums agreed every round.',
  );
  console.log(
    `method: part 2 — per configuration a fresh loader reads epochs 1–3 (${cfg.slowWarmupReps} untimed + ${cfg.slowReps} timed repetition${cfg.slowReps === 1 ? '' : 's'}, median per epoch); ` +
      `the ${BATCH} reads of a batch run concurrently and the loader keeps ${depth} batches in flight (prefetchDepth on the CPU), so a source-bound epoch costs about ` +
      `batches × ${LATENCY_MS} ms / ${depth} = ${fmtInt(slowRows / BATCH)} × ${LATENCY_MS} / ${depth} ≈ ${fmtInt(((slowRows / BATCH) * LATENCY_MS) / depth)} ms plus the per-sample CPU of the read path, not samples × ${LATENCY_MS} ms; ` +
      'checksums of every configuration agreed epoch by epoch.',
  );
  console.log(
    'method: main busy = event-loop utilization of the main thread over the epoch; CPU cores = process CPU time (all threads) / wall time; ' +
      'waitMs, fetchMs (summed over overlapping batches), sourceReadMs (summed over reads and threads) and ring (staging slots) are loader.stats() figures, medians; ' +
      `the development-mode purity probe is on (NODE_ENV=${process.env.NODE_ENV ?? 'unset'}): each reader reads its first source sample twice.`,
  );
  console.log(
    `plain loop: ${(1e6 / plain.samplesPerSec).toFixed(1)} µs per get(i) on one core; workers 0 adds ${(((w0.ms - plain.ms) * 1000) / (cpuRows / BATCH)).toFixed(0)} µs per batch of ${BATCH} over it`,
  );
  const us = (tier: string, a: 0 | 'auto', e: number) => ((slowAt(tier, a, e).ms * 1000) / slowRows).toFixed(2);
  for (const a of SLOW_WORKERS) {
    console.log(
      `slow source, ${autoName(a)}: wall per sample — epoch 1 from the source ${us('cache', a, 0)} µs (cache off: ${us('nocache', a, 0)}), ` +
        `epoch 2 from the RAM cache ${us('cache', a, 1)} µs, from the disk stage ${us('disk', a, 1)} µs`,
    );
  }
  console.log('');
  const width = Math.max(...ratios.map((r) => r.label.length));
  for (const r of ratios) {
    const value = r.value >= 10 ? r.value.toFixed(0) : r.value.toFixed(2);
    const met = verdict(r);
    const judged = flags.quick ? 'not judged (--quick is a smoke test)' : met ? 'met' : 'not met';
    const goal = r.goal === undefined ? '' : `   goal ${r.goal.text}: ${judged}`;
    console.log(`${r.label.padEnd(width)}  ${value.padStart(6)}${goal}`);
  }
}
