// `bench decode-reads`: the read side of the GPU decode route alone — a batch's files read into one
// shared (page-lockable) buffer, from page cache — by the route's reader threads
// (src/pipeline/assemble/decode/decode-reads.ts) against main-thread asynchronous reads (fs/promises:
// stat, then open/read/close, up to 64 in flight: what the route did before). Files: ~110 KB of
// random bytes (90–130 KB), generated once in the temp dir. Figures per configuration: files/s,
// GB/s, CPU cores busy (every thread of the process) and the main thread's event-loop utilization
// (the share of the main thread the reads take: what the loader's main thread no longer has).
//
//   npm run bench -- decode-reads [--files 4000] [--batch 256] [--threads 1,2,4] [--passes 3] [--dir DIR]

import { randomFillSync } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { FileReaders } from '../src/pipeline/assemble/decode/decode-reads.js';
import { UsageError, hardwareLine } from './util.js';

const USAGE = 'npm run bench -- decode-reads [--files 4000] [--batch 256] [--threads 1,2,4] [--passes 3] [--dir DIR]';

function makeFiles(dir: string, n: number): string[] {
  mkdirSync(dir, { recursive: true });
  const paths: string[] = [];
  let s = 12345;
  const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  for (let i = 0; i < n; i++) {
    const p = join(dir, `f${String(i).padStart(6, '0')}.bin`);
    paths.push(p);
    if (existsSync(p)) continue;
    writeFileSync(p, randomFillSync(Buffer.alloc(90_000 + Math.floor(rand() * 40_000))));
  }
  return paths;
}

/** The route's former reads: every size, then each file into its slice, at most 64 in flight. */
async function asyncReads(paths: readonly string[], memory: Uint8Array): Promise<number> {
  let inFlight = 0;
  const waiting: (() => void)[] = [];
  const gated = async <T>(f: () => Promise<T>): Promise<T> => {
    if (inFlight >= 64) await new Promise<void>((r) => waiting.push(r));
    inFlight++;
    try {
      return await f();
    } finally {
      inFlight--;
      waiting.shift()?.();
    }
  };
  const sizes = await Promise.all(paths.map((p) => gated(async () => (await stat(p)).size)));
  const offsets: number[] = [];
  let total = 0;
  for (const size of sizes) {
    offsets.push(total);
    total += size;
  }
  await Promise.all(
    paths.map((p, k) =>
      gated(async () => {
        const f = await open(p, 'r');
        try {
          let done = 0;
          while (done < sizes[k]!) {
            const { bytesRead } = await f.read(memory, offsets[k]! + done, sizes[k]! - done, done);
            if (bytesRead === 0) break;
            done += bytesRead;
          }
        } finally {
          await f.close();
        }
      }),
    ),
  );
  return total;
}

export async function main(args: readonly string[]): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({ args: [...args], options: { files: { type: 'string' }, batch: { type: 'string' }, threads: { type: 'string' }, passes: { type: 'string' }, dir: { type: 'string' } } }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n${USAGE}`);
  }
  const n = Number(values.files ?? 4000);
  const batch = Number(values.batch ?? 256);
  const passes = Number(values.passes ?? 3);
  const threads = (values.threads ?? '1,2,4').split(',').map(Number);
  if (![n, batch, passes, ...threads].every((x) => Number.isInteger(x) && x >= 1)) throw new UsageError(USAGE);
  const paths = makeFiles(values.dir ?? join(tmpdir(), `stoker-bench-reads-${n}`), n);
  console.log(hardwareLine());
  const memory = new Uint8Array(new SharedArrayBuffer(batch * 256 * 1024));
  const configs: { name: string; read: (p: readonly string[]) => Promise<number>; close?: () => void }[] = [
    { name: 'main-thread async fs (64 in flight)', read: (p) => asyncReads(p, memory) },
    ...threads.map((t) => {
      const readers = new FileReaders(t);
      return {
        name: `reader threads ×${t}`,
        read: async (p: readonly string[]) => {
          const r = await readers.read(p as string[], memory);
          if (r.ok !== true) throw new Error(`read failed: ${JSON.stringify(r)}`);
          let total = 0;
          for (const l of r.lengths) total += l;
          return total;
        },
        close: () => readers.close(),
      };
    }),
  ];
  // Warm the page cache.
  await configs[0]!.read(paths.slice(0, Math.min(n, batch)));
  for (const p of paths) await stat(p);
  for (const c of configs) {
    await c.read(paths.slice(0, batch));
    const elu0 = performance.eventLoopUtilization();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let bytes = 0;
    for (let pass = 0; pass < passes; pass++) for (let i = 0; i < n; i += batch) bytes += await c.read(paths.slice(i, i + batch));
    const s = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const elu = performance.eventLoopUtilization(elu0);
    c.close?.();
    console.log(JSON.stringify({ bench: 'decode-reads', config: c.name, files: n * passes, batch, filesPerS: Math.round((n * passes) / s), gbPerS: Number((bytes / s / 1e9).toFixed(2)), coresBusy: Number(((cpu.user + cpu.system) / 1e6 / s).toFixed(2)), mainThreadBusy: Number(elu.utilization.toFixed(2)) }));
  }
}
