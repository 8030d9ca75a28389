// `bench folder-walk`: the walk of an image folder alone, one thread (`walkFolder`) against the
// parallel walk (`walkFolderParallel`, NOTE [parallel walk] in folder-listing.ts) at each thread
// count, interleaved round by round in one process, each walk checked to give the one-thread bytes.
// The rule: the folder is bench first-batch's (build it with `bench first-batch` first: it must exist);
// times are the wall time of the walk (no cache read or write); the median per variant is printed.
//
//   npm run bench -- folder-walk [--files 1280000] [--classes 1000] [--threads 2,4,8,16] [--rounds 3] [--dist]

import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { UsageError, fmtFixed, hardwareLine, median, table } from './util.js';

const USAGE = 'npm run bench -- folder-walk [--files 1280000] [--classes 1000] [--threads 2,4,8,16] [--rounds 3] [--dist]';

export async function main(args: readonly string[]): Promise<void> {
  let v: Record<string, string | boolean | undefined>;
  try {
    ({ values: v } = parseArgs({ args: [...args], strict: true, options: { files: { type: 'string', default: '1280000' }, classes: { type: 'string', default: '1000' }, threads: { type: 'string', default: '2,4,8,16' }, rounds: { type: 'string', default: '3' }, dist: { type: 'boolean', default: false } } }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nusage: ${USAGE}`);
  }
  const dir = join(tmpdir(), `stoker-bench-first-batch-${v.files}-${v.classes}`);
  if (!existsSync(join(dir, '.complete'))) throw new UsageError(`${dir} is not there: run bench first-batch --files ${v.files} --classes ${v.classes} first\nusage: ${USAGE}`);
  const threads = String(v.threads).split(',').map(Number);
  const rounds = Number(v.rounds);
  if (!threads.every((t) => Number.isInteger(t) && t >= 1) || !(Number.isInteger(rounds) && rounds >= 1)) throw new UsageError(`bad numbers\nusage: ${USAGE}`);
  const root = v.dist === true ? '../dist' : '../src';
  const { walkFolder, walkFolderParallel } = (await import(`${root}/dataset/formats/images/folder-listing.js`)) as typeof import('../src/dataset/formats/images/folder-listing.js');
  const ext = new Set(['.jpg', '.jpeg', '.png', '.webp']);
  console.log(`bench folder-walk: ${hardwareLine()}; ${dir}; ${v.dist === true ? 'dist/' : 'src/ under tsx'}; ${rounds} rounds`);
  const times = new Map<string, number[]>();
  let want: Buffer | undefined;
  for (let r = 0; r < rounds; r++) {
    for (const t of [1, ...threads]) {
      const t0 = performance.now();
      const { listing } = t === 1 ? walkFolder(dir, ext) : await walkFolderParallel(dir, ext, t);
      const s = (performance.now() - t0) / 1000;
      const bytes = Buffer.concat([Buffer.from(listing.names), Buffer.from(listing.ends.buffer), Buffer.from(listing.labels.buffer)]);
      want ??= bytes;
      if (!bytes.equals(want)) throw new Error(`the walk on ${t} threads gave another listing`);
      const key = t === 1 ? 'one thread' : `parallel ×${t}`;
      times.set(key, [...(times.get(key) ?? []), s]);
      console.log(JSON.stringify({ round: r, threads: t, s, files: listing.ends.length }));
    }
  }
  console.log(table([...times].map(([k, xs]) => ({ k, xs })), [
    { title: 'walk', cell: (r) => r.k },
    { title: 'median s', align: 'right', cell: (r) => fmtFixed(median(r.xs), 3) },
    { title: 'min s', align: 'right', cell: (r) => fmtFixed(Math.min(...r.xs), 3) },
    { title: 'max s', align: 'right', cell: (r) => fmtFixed(Math.max(...r.xs), 3) },
  ]));
}
