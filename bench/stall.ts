// Stalls of the staging ring (issue 32's hang, NOTE [Follow-ups run without a next call] in
// src/device/accelerator/stream-memory.ts): many short epochs of many loaders with reader workers on
// an accelerator, optionally beside busy threads that load the host's cores. An epoch that does not
// deliver all its batches within --deadline-ms is a stall; one that delivers a sample twice or
// misses one is wrong. The verdict line is "stalls 0, wrong 0 of N epochs".
//
//   npm run bench -- stall --device cuda --loaders 100 --epochs 20 --load 12
//
// The source is bench/fixtures/sources.ts's CPU source (a few µs of hashing per sample), so the
// reader worker and the device's copies race the way a real short epoch makes them race.

import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { DataLoader, sources } from '../src/index.js';
import { hardwareLine, UsageError } from './util.js';

const SOURCES = new URL('./fixtures/sources.ts', import.meta.url);
const USAGE = 'stall [--device sim|cuda] [--loaders N] [--epochs N] [--samples N] [--batch N] [--workers N] [--load THREADS] [--deadline-ms MS]';

function int(v: string | undefined, name: string, min: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new UsageError(`--${name}: expected an integer ≥ ${min}, got ${v}\nusage: ${USAGE}`);
  return n;
}

/** Busy threads: each spins until terminated (the host CPU load a training job's other work makes). */
function loadThreads(n: number): Worker[] {
  return Array.from({ length: n }, () => new Worker('let x = 0; for (;;) { x = (x * 1664525 + 1013904223) >>> 0; }', { eval: true }));
}

export async function main(args: readonly string[]): Promise<void> {
  let v: Record<string, string | undefined>;
  try {
    ({ values: v } = parseArgs({
      args: [...args], strict: true,
      options: {
        device: { type: 'string', default: 'sim' }, loaders: { type: 'string', default: '12' }, epochs: { type: 'string', default: '4' },
        samples: { type: 'string', default: '16' }, batch: { type: 'string', default: '2' }, workers: { type: 'string', default: '1' },
        load: { type: 'string', default: '0' }, 'deadline-ms': { type: 'string', default: '60000' },
      },
    }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nusage: ${USAGE}`);
  }
  const device = v.device!;
  const loaders = int(v.loaders, 'loaders', 1);
  const epochs = int(v.epochs, 'epochs', 1);
  const samples = int(v.samples, 'samples', 1);
  const batch = int(v.batch, 'batch', 1);
  const workers = int(v.workers, 'workers', 1);
  const load = int(v.load, 'load', 0);
  const deadline = int(v['deadline-ms'], 'deadline-ms', 1);
  console.log(hardwareLine());
  console.log(`stall: device ${device}, ${loaders} loaders × ${epochs} epochs of ${samples} samples (batch ${batch}, ${workers} reader worker(s)), ${load} busy thread(s) on ${availableParallelism()} cores, deadline ${deadline} ms an epoch`);
  const busy = loadThreads(load);
  let stalls = 0;
  let wrong = 0;
  let total = 0;
  const t0 = performance.now();
  let slowest = 0;
  try {
    for (let seed = 0; seed < loaders; seed++) {
      const loader = await DataLoader.create(sources.module(SOURCES, 'openCpuSource', { n: samples, passes: 1 }), { mode: 'streaming', device, batchSize: batch, workers, seed });
      for (let e = 0; e < epochs; e++) {
        total++;
        const t = performance.now();
        const seen: number[] = [];
        const run = (async () => {
          for await (const b of loader.epoch(e)) {
            seen.push(...b.sampleIds);
            b.release();
          }
        })();
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<'stall'>((res) => (timer = setTimeout(() => res('stall'), deadline)));
        const outcome = await Promise.race([run.then(() => 'done' as const), late]);
        clearTimeout(timer);
        slowest = Math.max(slowest, performance.now() - t);
        if (outcome === 'stall') {
          stalls++;
          console.log(`STALL: loader ${seed} (seed ${seed}), epoch ${e}: ${seen.length} of ${samples} samples after ${deadline} ms`);
          break; // this loader's epoch never ends: leave it and go on with the next loader
        }
        const sorted = [...seen].sort((a, b) => a - b);
        if (sorted.length !== samples || sorted.some((id, i) => id !== i)) {
          wrong++;
          console.log(`WRONG: loader ${seed}, epoch ${e}: ${seen.length} samples, not each of 0..${samples - 1} once`);
        }
      }
      await loader.close();
    }
  } finally {
    await Promise.all(busy.map((w) => w.terminate()));
  }
  const s = (performance.now() - t0) / 1000;
  console.log(`stalls ${stalls}, wrong ${wrong} of ${total} epochs (${loaders} loaders) in ${s.toFixed(1)} s; slowest epoch ${slowest.toFixed(0)} ms`);
  console.log(JSON.stringify({ bench: 'stall', device, loaders, epochs, samples, batch, workers, load, epochsRun: total, stalls, wrong, seconds: +s.toFixed(1), slowestEpochMs: Math.round(slowest) }));
  if (stalls > 0 || wrong > 0) process.exitCode = 1;
  if (stalls > 0) process.exit(1); // a stalled epoch's reads are still pending: nothing else would end the process
}
