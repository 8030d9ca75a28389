// Part 3 of the GPU bench (bench/gpu.ts says what it measures and how): a CIFAR-shaped in-RAM
// dataset, samples/s delivered on the device by Stoker (streaming and resident) and by PyTorch's
// DataLoader, which bench/torch_loader.py runs in a child process.

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Data, Env, PartResult, Ratio, Row } from './common.js';
import { SEED, TORCH_SCRIPT } from './common.js';
import type { Recorder, StokerSpec } from './measure.js';
import { streamingEpochs } from './measure.js';

/** The Stoker runs on the CIFAR-shaped set (part 3; part 4 runs them too, with its spin consumer). */
export function cifarSpecs(data: Data, batchSize: number): StokerSpec[] {
  return [
    { key: 'streaming-w0', name: 'Stoker streaming, staged, workers 0', data, batchSize, mode: 'streaming', workers: 0, vramPool: false, pinSource: false },
    { key: 'streaming-wauto', name: 'Stoker streaming, staged, workers auto', data, batchSize, mode: 'streaming', workers: 'auto', vramPool: false, pinSource: false },
    { key: 'streaming-pinned', name: 'Stoker streaming, pinned source', data, batchSize, mode: 'streaming', vramPool: false },
    { key: 'streaming-defaults', name: 'Stoker streaming, defaults (pinned source + pool)', data, batchSize, mode: 'streaming' },
    { key: 'resident', name: 'Stoker resident', data, batchSize, mode: 'resident' },
  ];
}

// ---------------------------------------------------------------------------------------------
// PyTorch (part 3), in a child process

export interface TorchResult {
  readonly numWorkers: number;
  readonly samplesPerSec: number;
  readonly timedS: number;
  readonly warmupS: number;
}

export type TorchOutcome =
  | { readonly status: 'ok'; readonly version: string; readonly cuda: string | null; readonly device: string; readonly results: readonly TorchResult[]; readonly command: string }
  | { readonly status: 'skipped' | 'failed'; readonly reason: string; readonly command: string };

export function runTorch(env: Env): TorchOutcome {
  const { cfg } = env;
  const python = process.env.STOKER_PYTHON ?? 'python3';
  const script = fileURLToPath(TORCH_SCRIPT);
  const args = [
    script, '--samples', String(cfg.cifarSamples), '--batch', String(cfg.p3Batch), '--workers', cfg.torchWorkers.join(','),
    '--warmup', String(cfg.torchWarmup), '--batches', String(cfg.torchBatches), '--seed', String(SEED), '--device', env.sim ? 'cpu' : 'cuda',
  ];
  const command = `${python} bench/torch_loader.py ${args.slice(1).join(' ')}`;
  env.log(`  PyTorch: ${command} (time limit ${cfg.torchTimeoutS} s)`);
  const r = spawnSync(python, args, {
    encoding: 'utf8',
    timeout: cfg.torchTimeoutS * 1000,
    maxBuffer: 64 * 1024 * 1024,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
  });
  const stderr = r.stderr ?? '';
  if (!env.opts.json && stderr.length > 0) process.stderr.write(stderr.endsWith('\n') ? stderr : `${stderr}\n`);
  const tail = stderr.trim().split('\n').slice(-15).join('\n');
  if (r.error !== undefined) {
    const code = (r.error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { status: 'skipped', reason: `${python} was not found (set STOKER_PYTHON to a Python that has torch)`, command };
    if (code === 'ETIMEDOUT') return { status: 'failed', reason: `${python} ran past the ${cfg.torchTimeoutS} s limit and was stopped${tail ? `; its last output:\n${tail}` : ''}`, command };
    return { status: 'failed', reason: `${python} could not run: ${r.error.message}`, command };
  }
  if (r.status !== 0) return { status: 'failed', reason: `${python} exited with ${r.status ?? `signal ${r.signal}`}${tail ? `; its last output:\n${tail}` : ''}`, command };
  const line = (r.stdout ?? '').trim().split('\n').at(-1) ?? '';
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return { status: 'failed', reason: `bench/torch_loader.py printed no JSON on its last stdout line: ${JSON.stringify(line.slice(0, 300))}`, command };
  }
  if (typeof parsed.skipped === 'string') return { status: 'skipped', reason: parsed.skipped, command };
  const results = parsed.results;
  if (!Array.isArray(results) || results.length === 0) return { status: 'failed', reason: `bench/torch_loader.py returned no results: ${line.slice(0, 300)}`, command };
  return {
    status: 'ok',
    version: String(parsed.torch),
    cuda: parsed.cuda === null ? null : String(parsed.cuda),
    device: String(parsed.device),
    results: results.map((x: Record<string, unknown>) => ({
      numWorkers: Number(x.num_workers),
      samplesPerSec: Number(x.samples_per_s),
      timedS: Number(x.timed_s),
      warmupS: Number(x.warmup_s),
    })),
    command,
  };
}

/** PyTorch's rows, from its child process; a skip or failure becomes a note (a failure: exit code 1). */
function torchRows(env: Env, rec: Recorder): { rows: Row[]; torch: TorchOutcome | undefined } {
  const { cfg, opts } = env;
  if (!opts.torch) {
    rec.notes.push('PyTorch not run (--no-torch)');
    return { rows: [], torch: undefined };
  }
  const torch = runTorch(env);
  if (torch.status !== 'ok') {
    rec.notes.push(`PyTorch ${torch.status === 'skipped' ? 'skipped' : 'FAILED'}: ${torch.reason}`);
    if (torch.status === 'failed') process.exitCode = 1;
    return { rows: [], torch };
  }
  const rows = torch.results.map((t): Row => ({
    part: 3,
    key: `torch-w${t.numWorkers}`,
    name: `PyTorch DataLoader, num_workers=${t.numWorkers}`,
    gbps: undefined,
    samplesPerSec: t.samplesPerSec,
    usPerBatch: (t.timedS * 1e6) / cfg.torchBatches,
    hostUsPerBatch: undefined,
    spread: '—',
    timed: `${cfg.torchBatches} batches after ${cfg.torchWarmup} warm-up`,
    note: `torch ${torch.version}${torch.cuda ? ` (CUDA ${torch.cuda})` : ''} on ${torch.device}; warm-up ${t.warmupS.toFixed(2)} s`,
  }));
  return { rows, torch };
}

function fastest(rows: readonly Row[]): Row {
  return rows.reduce((a, b) => ((b.samplesPerSec ?? -1) > (a.samplesPerSec ?? -1) ? b : a));
}

/** Part 3's ratio lines: best Stoker and best Stoker streaming, each over best PyTorch. */
function part3Ratios(rows: readonly Row[]): Ratio[] {
  const stokerRows = rows.filter((r) => r.part === 3 && r.key.startsWith('p3-'));
  const bestStoker = fastest(stokerRows);
  const torchRows = rows.filter((r) => r.part === 3 && r.key.startsWith('torch-'));
  const bestTorch = torchRows.length > 0 ? fastest(torchRows) : undefined;
  const bestStreaming = fastest(stokerRows.filter((r) => r.key.includes('streaming')));
  const torchLabel = bestTorch ? bestTorch.name.replace('PyTorch DataLoader, ', '') : 'not measured';
  return [
    {
      id: 'p3.best_stoker_vs_best_torch',
      label: `part 3: best Stoker (${bestStoker.name.replace('Stoker ', '')}) / best PyTorch (${torchLabel}), samples/s`,
      value: (bestStoker.samplesPerSec ?? Number.NaN) / (bestTorch?.samplesPerSec ?? Number.NaN),
      goal: 10,
      direction: 'atLeast',
      percent: false,
    },
    {
      id: 'p3.best_streaming_vs_best_torch',
      label: `part 3: best Stoker streaming (${bestStreaming.name.replace('Stoker streaming, ', '')}) / best PyTorch, samples/s`,
      value: (bestStreaming.samplesPerSec ?? Number.NaN) / (bestTorch?.samplesPerSec ?? Number.NaN),
      goal: undefined,
      direction: 'atLeast',
      percent: false,
    },
  ];
}

/** Part 3: CIFAR-shaped samples/s, Stoker vs PyTorch. */
export async function runPart3(env: Env, rec: Recorder, cifar: Data): Promise<PartResult & { torch: TorchOutcome | undefined }> {
  const { cfg } = env;
  env.log(`part 3: CIFAR-shaped, batch ${cfg.p3Batch}, samples/s on the device`);
  const { rows, torch } = torchRows(env, rec);
  for (const spec of cifarSpecs(cifar, cfg.p3Batch)) {
    rows.push(await rec.stoker({ ...spec, key: `p3-${spec.key}` }, 3, { warmup: cfg.warmEpochs, window: 1, reps: cfg.p3Epochs, aligned: true }, false, streamingEpochs(cfg.p3Epochs)));
  }
  return { rows, ratios: part3Ratios(rows), torch };
}
