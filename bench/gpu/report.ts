// The GPU bench's report (bench/gpu.ts says what it measures and how): the method lines, the tables
// of parts 1–3 and of part 4, the verification line, notes, failures and the ratio lines with their
// verdicts; or all of it as one JSON object with --json.

import type { Column } from '../util.js';
import { fmtInt, hardware, sink, table } from '../util.js';
import type { Env, Ratio, Row } from './common.js';
import { LARGE_SHAPE, LARGE_SPIN_FACTOR, SEED, fmtBytes, fmtOpt } from './common.js';
import type { Recorder } from './measure.js';
import type { TorchOutcome } from './part3-cifar.js';
import type { P4Row, SpinPlan } from './part4-consumer.js';

/** Everything the parts measured, for the report. */
export interface Results {
  readonly rows: readonly Row[];
  readonly p4: readonly P4Row[];
  readonly ratios: readonly Ratio[];
  readonly torch: TorchOutcome | undefined;
  readonly spin: SpinPlan | undefined;
  readonly spinLarge: SpinPlan | undefined;
  readonly rec: Recorder;
}

export function verdict(env: Env, r: Ratio): string {
  if (r.goal === undefined) return '';
  const goal = r.direction === 'atLeast' ? `goal ≥ ${r.percent ? `${r.goal * 100}%` : r.goal}` : `goal < ${r.percent ? `${r.goal * 100}%` : r.goal}`;
  if (!Number.isFinite(r.value)) return `   ${goal}: not measured`;
  if (env.sim) return `   ${goal}: not judged (sim device)`;
  if (env.opts.quick) return `   ${goal}: not judged (--quick is a smoke test)`;
  const met = r.direction === 'atLeast' ? r.value >= r.goal : r.value < r.goal;
  return `   ${goal}: ${met ? 'met' : 'NOT MET'}`;
}

export function metOf(env: Env, r: Ratio): boolean | null {
  if (r.goal === undefined || !Number.isFinite(r.value) || env.sim || env.opts.quick) return null;
  return r.direction === 'atLeast' ? r.value >= r.goal : r.value < r.goal;
}

export function fmtRatio(r: Ratio): string {
  if (!Number.isFinite(r.value)) return '—';
  if (r.percent) return `${(r.value * 100).toFixed(2)}%`;
  return r.value >= 10 ? r.value.toFixed(0) : r.value.toFixed(2);
}

/** The method lines, printed before the verification line (so a reader of the output needs nothing else). */
function methodLines(env: Env, res: Results): string[] {
  const { cfg, cuda } = env;
  const parts = env.opts.parts;
  const { spin, spinLarge } = res;
  const method: string[] = [
    'method: every row is stamped with its sample id (first 4 bytes; last 4 bytes = id XOR 0x5a5a5a5a; CIFAR labels = ids). ' +
      (cuda
        ? 'Parts 1–2: in the warm-up and one untimed window after the timed ones, the consumer launches a stamp-summing kernel on the loader\'s consumer stream for every batch (loader.kernel); the sums must match the batches\' sample ids. Timed windows only read each tensor\'s address. '
        : 'Parts 1–2 (sim): no consumer kernel (sim runs no PTX). ') +
      'Every Stoker run retains two batches of its last window and checks them row by row with toHost() after the timing.',
    'method: a window starts on a synchronized device and ends after loader.synchronize() (the consumer stream, which waited on every batch\'s ready event); ' +
      'GB/s and samples/s = delivered bytes or rows / that wall time. Streaming and part 3–4 windows are whole epochs (the read-ahead may span an epoch); ' +
      `part 2 resident windows are ${cfg.p2Window} batches after ${cfg.p2Warmup} warm-up, crossing epochs. "host µs/batch" is the loop's time before the final synchronize.`,
    `method: ceilings are raw driver copies on a stream of the bench's own, ${cfg.ceilingCopies} back-to-back per repetition, median of ${cfg.ceilingReps}; ` +
      'H2D from a registered SharedArrayBuffer (the range checked to cover the copy; the two reference rows show a buffer registered the way Stoker registers its staging, and pageable memory), ' +
      'DtoD from a dataset-sized source read in order into two alternating buffers.',
    `method: shuffled with seed ${SEED}, dropLast; ${cfg.warmEpochs} warm-up epoch(s) before streaming windows; VRAM pool off in parts 1, 3 and 4 unless the row says defaults.`,
  ];
  if (parts.has(3)) {
    method.push(
      `method: PyTorch runs in a child process (bench/torch_loader.py): per-item Dataset over a uint8 tensor + int64 labels, DataLoader(batch_size=${cfg.p3Batch}, shuffle=True, ` +
        `pin_memory=True, drop_last=True, num_workers=${cfg.torchWorkers.join('/')}), x.cuda(non_blocking=True) per batch; ${cfg.torchBatches} batches timed after ${cfg.torchWarmup} warm-up ` +
        '(worker start-up excluded; bounded because its per-item path is slow), torch.cuda.synchronize() at both ends. Stoker\'s figures are whole epochs, start-up included: the comparison favors PyTorch.',
    );
  }
  if (parts.has(4)) {
    method.push(
      `method: part 4 launches a spin kernel per batch on the loader's consumer stream — ${cfg.spinUs} µs for CIFAR-shaped batches, ${cfg.spinUs * LARGE_SPIN_FACTOR} µs for ImageNet-sized ones ` +
        `(${spin ? `${spin.how}; measured ${spin.measuredUs.toFixed(0)} and ${spinLarge?.measuredUs.toFixed(0)} µs` : 'sim: a virtual GPU clock'}) — then ` +
        'records an event after it, blocks (cuEventSynchronize) on the event of two batches back and yields to the event loop once, like a Node loop that awaits its loss every step; ' +
        '"loader wait" is the sum of stats().epochs[e].waitMs over the timed epoch(s), the bench\'s own measure around next() beside it; GPU busy = batches × spin / wall.',
    );
  }
  return method;
}

function printJson(env: Env, hw: ReturnType<typeof hardware>, gpuInfo: Record<string, unknown>, res: Results): void {
  const { cfg, opts } = env;
  const parts = opts.parts;
  const { rows, p4, ratios, torch, spin, spinLarge } = res;
  const { checkedRows, stampedRows, failures, notes } = res.rec;
  const ratioJson = Object.fromEntries(ratios.map((r) => [r.id, { label: r.label, value: Number.isFinite(r.value) ? r.value : null, goal: r.goal ?? null, direction: r.direction, met: metOf(env, r) }]));
  console.log(
    JSON.stringify(
      {
        bench: 'gpu',
        device: opts.device,
        hardware: hw,
        gpu: gpuInfo,
        config: { ...cfg, seed: SEED, quick: opts.quick, parts: [...parts] },
        rows,
        part4: p4,
        torch: torch ?? null,
        spin: [spin, spinLarge].map((sp) => (sp ? { ...sp, arg: sp.arg.toString() } : null)),
        verification: { rowsCheckedWithToHost: checkedRows, rowsCheckedByStampKernel: stampedRows },
        failures,
        notes,
        ratios: ratioJson,
        sink: sink.value,
      },
      null,
      2,
    ),
  );
}

/** The tables of parts 1–3 (one per part, with each Stoker row's diagnosis under it). */
function printPartTables(env: Env, rows: readonly Row[]): void {
  const { cfg } = env;
  const columns: Column<Row>[] = [
    { title: 'contender', cell: (r) => r.name },
    { title: 'GB/s', align: 'right', cell: (r) => fmtOpt(r.gbps, 1) },
    { title: 'samples/s', align: 'right', cell: (r) => fmtOpt(r.samplesPerSec, 0) },
    { title: 'µs/batch', align: 'right', cell: (r) => fmtOpt(r.usPerBatch, 1) },
    { title: 'host µs/batch', align: 'right', cell: (r) => fmtOpt(r.hostUsPerBatch, 1) },
    { title: 'spread', align: 'right', cell: (r) => r.spread },
    { title: 'timed', cell: (r) => r.timed },
    { title: 'notes', cell: (r) => r.note },
  ];
  const titles: Record<number, string> = {
    1: `part 1 — pinned host → device, ImageNet-sized samples, batch ${cfg.p1Batch} (${fmtBytes(cfg.p1Batch * LARGE_SHAPE.reduce((a, b) => a * b, 1))}); spread = GB/s per window`,
    2: `part 2 — resident gather vs device-to-device copy, batch ${cfg.p2Batch}; spread = GB/s per window`,
    3: `part 3 — CIFAR-shaped in RAM, ${fmtInt(cfg.cifarSamples)} samples, batch ${cfg.p3Batch}, shuffled, delivered on the device; spread = samples/s per window`,
  };
  for (const part of [1, 2, 3]) {
    const rs = rows.filter((r) => r.part === part);
    if (rs.length === 0) continue;
    console.log('');
    console.log(titles[part]);
    console.log(table(rs, columns));
    for (const r of rs) if (r.diag !== undefined) console.log(`  ${r.name}: ${r.diag}`);
  }
}

function printPart4Table(p4: readonly P4Row[]): void {
  if (p4.length === 0) return;
  console.log('');
  console.log(`part 4 — a consumer with fixed GPU time per batch (column "spin µs"), pacing on the event of two batches back`);
  console.log(
    table(p4, [
      { title: 'loader', cell: (r) => r.name },
      { title: 'batches', align: 'right', cell: (r) => fmtInt(r.batches) },
      { title: 'spin µs', align: 'right', cell: (r) => fmtInt(r.spinUs) },
      { title: 'wall ms', align: 'right', cell: (r) => r.wallMs.toFixed(0) },
      { title: 'GPU busy', align: 'right', cell: (r) => `${(r.gpuBusy * 100).toFixed(1)}%` },
      { title: 'loader wait ms', align: 'right', cell: (r) => fmtOpt(r.loaderWaitMs, 1) },
      { title: 'wait/wall', align: 'right', cell: (r) => `${(r.waitShare * 100).toFixed(2)}%` },
      { title: 'bench-measured', align: 'right', cell: (r) => `${(r.benchWaitShare * 100).toFixed(2)}%` },
      { title: 'host blocked on GPU ms', align: 'right', cell: (r) => r.blockedMs.toFixed(0) },
      { title: 'notes', cell: (r) => r.note },
    ]),
  );
  for (const r of p4) console.log(`  ${r.name}: ${r.diag}`);
}

function printText(env: Env, res: Results): void {
  const { cuda } = env;
  const { rows, p4, ratios } = res;
  const { checkedRows, stampedRows, failures, notes } = res.rec;
  printPartTables(env, rows);
  printPart4Table(p4);
  console.log('');
  for (const m of methodLines(env, res)) console.log(m);
  console.log(
    `verified: ${fmtInt(checkedRows)} rows read back with toHost() and checked against the source` +
      (cuda ? `; ${fmtInt(stampedRows)} delivered rows checked on the device by the stamp kernel` : '') +
      `; ${failures.length === 0 ? 'every check passed' : 'every run that finished passed its checks (a failed check fails its run, below)'}.`,
  );
  for (const n of notes) console.log(`note: ${n}`);
  if (failures.length > 0) {
    console.log('');
    console.log(`FAILURES (${failures.length}; the bench exits with code 1):`);
    for (const f of failures) console.log(`- ${f.where}: ${f.message.replace(/\n/g, '\n    ')}`);
  }
  if (ratios.length > 0) {
    console.log('');
    const width = Math.max(...ratios.map((r) => r.label.length));
    for (const r of ratios) console.log(`${r.label.padEnd(width)}  ${fmtRatio(r).padStart(7)}${verdict(env, r)}`);
  }
}

/** Print the results: the text report, or with --json one JSON object. */
export function report(env: Env, hw: ReturnType<typeof hardware>, gpuInfo: Record<string, unknown>, res: Results): void {
  if (env.opts.json) printJson(env, hw, gpuInfo, res);
  else printText(env, res);
}
