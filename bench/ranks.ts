// Scale-out: aggregate samples/s of N ranks vs one rank, each rank a process started by a real
// launcher (torchrun --no-python for GPUs, Open MPI's mpirun on the CPU) running examples/ranks.ts:
// the CIFAR-shaped streaming workload of the CUDA bench (200 000 × uint8 [3, 32, 32] + int32 label,
// batch 256, shuffled, streaming with the VRAM pool off as in that bench, so every epoch's bytes
// cross from the host; a rank's pool would otherwise fill over epochs from ever-different shares),
// every rank holding the dataset in RAM and reading its share of each epoch's global order onto its
// own device (`cuda` = cuda:<LOCAL_RANK>, or the CPU).
//
//   npm run bench -- ranks                    # 1 and 2 ranks on the CPU (mpirun)
//   npm run bench -- ranks --cuda --ranks 2   # 1 and 2 ranks, one GPU each (torchrun)
//   flags: --samples N, --launcher torchrun|mpirun
//
// How it measures: 1 rank and N ranks alternate, twice each; each run has 2 warm-up + 20 timed epochs per rank; each epoch is timed
// to a device synchronize; aggregate samples/s = all ranks' samples per epoch / the slowest rank's
// median epoch; the ratio compares the best run of each.

import { execFile, execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { UsageError, fmtFixed, fmtInt, hardwareLine, median } from './util.js';

const EXAMPLE = fileURLToPath(new URL('../examples/ranks.ts', import.meta.url));
const run = promisify(execFile);

function has(cmd: string, args: string[]): boolean {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

interface RankLine {
  rank: number;
  worldSize: number;
  launcher: string;
  device: string;
  samples: number;
  seconds: number;
  epochSeconds: number[];
}

async function launch(launcher: 'torchrun' | 'mpirun', np: number, args: string[]): Promise<RankLine[]> {
  const node = [process.execPath, '--import', 'tsx', EXAMPLE, ...args];
  const argv = launcher === 'torchrun' ? ['torchrun', ['--nproc_per_node', String(np), '--no_python', ...node]] as const : ['mpirun', ['--allow-run-as-root', '--oversubscribe', '-np', String(np), ...node]] as const;
  const { stdout } = await run(argv[0], [...argv[1]], { timeout: 600_000, maxBuffer: 1 << 24, env: { ...process.env, OMP_NUM_THREADS: '1' } });
  return stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as RankLine);
}

export async function main(argv: readonly string[]): Promise<void> {
  let cuda = false;
  let ranks = 2;
  let samples = 200_000;
  let chosen: string | undefined;
  const warmup = 2;
  const timed = 20;
  const rounds = 2;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--cuda') cuda = true;
    else if (argv[i] === '--ranks') ranks = Number(argv[++i]);
    else if (argv[i] === '--samples') samples = Number(argv[++i]);
    else if (argv[i] === '--launcher') chosen = argv[++i];
    else throw new UsageError(`unknown flag ${argv[i]} (flags: --cuda, --ranks N, --samples N, --launcher torchrun|mpirun)`);
  }
  // GPU runs go through torchrun (what PyTorch users launch with), CPU runs through mpirun.
  const order = chosen !== undefined ? [chosen] : cuda ? ['torchrun', 'mpirun'] : ['mpirun', 'torchrun'];
  const launcher = order.find((l) => (l === 'torchrun' ? has('torchrun', ['--help']) : l === 'mpirun' ? has('mpirun', ['--version']) : false)) as 'torchrun' | 'mpirun' | undefined;
  if (launcher === undefined) throw new UsageError(`no launcher found (tried ${order.join(', ')})`);
  const args = ['--samples', String(samples), '--batch', '256', '--epochs', String(warmup + timed), '--warmup', String(warmup), '--device', cuda ? 'cuda' : 'cpu', '--workers', '0', '--no-vram-pool'];
  console.log(`Stoker scale-out bench — ${hardwareLine()}`);
  console.log(`launcher ${launcher}; CIFAR-shaped ${fmtInt(samples)} × (uint8 [3, 32, 32] + int32), batch 256, streaming (VRAM pool off), ${cuda ? 'one GPU per rank (cuda:<local rank>)' : 'CPU'}; ${warmup} warm-up + ${timed} timed epochs per rank\n`);
  const results: { np: number; aggregate: number; lines: RankLine[] }[] = [];
  // Alternate 1 rank and N ranks, `rounds` times each, so that drift of the machine hits both alike.
  for (const np of Array.from({ length: 2 * rounds }, (_, i) => (i % 2 === 0 ? 1 : ranks))) {
    const lines = await launch(launcher, np, args);
    if (lines.length !== np) throw new Error(`${np} ranks printed ${lines.length} result lines`);
    // Per rank, its median epoch; the world is as fast as its slowest rank's median epoch.
    const slowest = Math.max(...lines.map((l) => median(l.epochSeconds)));
    const aggregate = lines.reduce((a, l) => a + l.samples / timed, 0) / slowest;
    results.push({ np, aggregate, lines });
    for (const l of lines.sort((a, b) => a.rank - b.rank)) {
      console.log(`  ${np} rank${np > 1 ? 's' : ''}: rank ${l.rank}/${l.worldSize} on ${l.device} (${l.launcher}): ${fmtInt(l.samples / timed)} samples per epoch, median epoch ${fmtFixed(1000 * median(l.epochSeconds), 1)} ms (min ${fmtFixed(1000 * Math.min(...l.epochSeconds), 1)}, max ${fmtFixed(1000 * Math.max(...l.epochSeconds), 1)}) = ${fmtInt(l.samples / timed / median(l.epochSeconds))} samples/s`);
    }
    console.log(`  ${np} rank${np > 1 ? 's' : ''}: aggregate ${fmtInt(aggregate)} samples/s\n`);
  }
  const best = (np: number) => Math.max(...results.filter((r) => r.np === np).map((r) => r.aggregate));
  console.log(`best of ${rounds}: 1 rank ${fmtInt(best(1))} samples/s, ${ranks} ranks ${fmtInt(best(ranks))} samples/s`);
  const ratio = best(ranks) / best(1);
  console.log(`ratio ranks.aggregate_${ranks}_vs_1 = ${fmtFixed(ratio, 2)}× (goal ≥ ${fmtFixed(0.9 * ranks, 1)}× for ${ranks} ranks)`);
}
