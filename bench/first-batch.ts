// `bench first-batch`: time from `sources.imageFolder(...)` + `DataLoader.create` to the first batch
// on an ImageNet-sized folder — 1 000 classes, 1.28 M files by default — made cheaply as hard links
// to a few hundred real JPEGs (bench/images.ts's generator), once, in the temp dir. Cold: no listing
// cache (a fresh cache dir: the folder is walked); warm: the listing read from the cache written by
// the cold run. Each run is a fresh process (so nothing is left in memory from the previous one),
// with the loader's defaults (reader workers, decode processes) and the ImageNet training view. The
// rule: the phases printed (listing, create, first batch) add up to the total; the folder is listed
// once per run, by the main thread (`walks` says how many walks the run made). `--walk`: how the
// source is made — 'sync' (`sources.imageFolder`, the walk on the main thread) and/or 'parallel'
// (`sources.imageFolderAsync`, the walk on worker threads while the main thread awaits, NOTE
// [parallel walk] in folder-listing.ts); several are run interleaved, each with its own cold and
// warm run per round. `--threads`: STOKER_WALK_THREADS for the parallel walk (default: its own).
//
//   npm run bench -- first-batch [--files 1280000] [--classes 1000] [--jpegs 300] [--batch 256] [--runs 2] [--walk sync,parallel] [--threads N] [--dist: import the compiled package, dist/]

import { spawnSync } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { fixture } from './images.js';
import { UsageError, fmtFixed, hardwareLine, table } from './util.js';

const USAGE = 'npm run bench -- first-batch [--files 1280000] [--classes 1000] [--jpegs 300] [--batch 256] [--runs 2] [--walk sync,parallel] [--threads N] [--dist]';
const WALKS = ['sync', 'parallel'] as const;
type Walk = (typeof WALKS)[number];

/** The hard-linked folder: `files` names over `classes` class folders, each a link to one of `jpegs` real files (made once). */
async function build(files: number, classes: number, jpegs: number): Promise<string> {
  const dir = join(tmpdir(), `stoker-bench-first-batch-${files}-${classes}`);
  if (existsSync(join(dir, '.complete'))) return dir;
  const src = await fixture(jpegs, 1);
  const cls = readdirSync(src).find((n) => n.startsWith('n'))!;
  const originals = readdirSync(join(src, cls)).sort().map((n) => join(src, cls, n));
  const building = `${dir}.${process.pid}`;
  const t0 = performance.now();
  for (let c = 0; c < classes; c++) mkdirSync(join(building, `n${String(c).padStart(8, '0')}`), { recursive: true });
  for (let i = 0; i < files; i++) {
    const c = i % classes;
    linkSync(originals[i % originals.length]!, join(building, `n${String(c).padStart(8, '0')}`, `n${String(c).padStart(8, '0')}_${String(i).padStart(8, '0')}.JPEG`));
  }
  writeFileSync(join(building, '.complete'), '');
  renameSync(building, dir);
  console.error(`linked ${files} files in ${classes} classes in ${dir} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  return dir;
}

/** One measured run, in a fresh process (this file with --child). */
function run(dir: string, cache: string, batch: number, dist: boolean, walk: Walk, threads: string | undefined): Record<string, number> {
  const r = spawnSync(process.execPath, [...process.execArgv, new URL(import.meta.url).pathname, '--child', dir, '--batch', String(batch), '--walk', walk, ...(dist ? ['--dist'] : [])], {
    encoding: 'utf8', timeout: 600_000, env: { ...process.env, XDG_CACHE_HOME: cache, ...(threads === undefined ? {} : { STOKER_WALK_THREADS: threads }) }, maxBuffer: 16 << 20,
  });
  if (r.status !== 0) throw new Error(`first-batch run failed: ${(r.stderr || r.error?.message || '').trim().split('\n').slice(-5).join(' | ')}`);
  const line = r.stdout.trim().split('\n').filter((l) => l.startsWith('{')).pop();
  if (line === undefined) throw new Error(`first-batch run printed nothing: ${r.stderr}`);
  return JSON.parse(line) as Record<string, number>;
}

/** The measured side (a fresh process): create the source and the loader, take one batch. */
async function child(dir: string, batch: number, walk: Walk): Promise<void> {
  const t0 = performance.now();
  // --dist: the compiled package (dist/, what users install: workers and decode processes start without tsx).
  const root = process.argv.includes('--dist') ? '../dist' : '../src';
  const { DataLoader } = (await import(`${root}/index.js`)) as typeof import('../src/index.js');
  const { imageFolderSource, imageFolderSourceAsync } = (await import(`${root}/dataset/formats/images/image-folder.js`)) as typeof import('../src/dataset/formats/images/image-folder.js');
  const { folderWalks, walkThreads } = (await import(`${root}/dataset/formats/images/folder-listing.js`)) as typeof import('../src/dataset/formats/images/folder-listing.js');
  const tImport = performance.now();
  const options = { size: 224, view: 'train', normalize: { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] }, output: 'bfloat16' } as const;
  const source = walk === 'parallel' ? await imageFolderSourceAsync(dir, options) : imageFolderSource(dir, options);
  const tListed = performance.now();
  const loader = await DataLoader.create(source, { batchSize: batch, shuffle: true });
  const tCreated = performance.now();
  let rows = 0;
  for await (const b of loader.epoch(0)) {
    rows = b.rows;
    break;
  }
  const tFirst = performance.now();
  const out = {
    files: source.length, listing: source.listing === 'cached' ? 1 : 0, walks: folderWalks(), walkThreads: walk === 'parallel' ? walkThreads() : 1, workers: loader.stats().workers ?? -1, rows,
    importS: (tImport - t0) / 1000, listS: (tListed - tImport) / 1000, createS: (tCreated - tListed) / 1000, firstBatchS: (tFirst - tCreated) / 1000, totalS: (tFirst - tImport) / 1000,
  };
  await loader.close();
  await source.close();
  console.log(JSON.stringify(out));
}

export async function main(args: readonly string[]): Promise<void> {
  let v: Record<string, string | boolean | undefined>;
  try {
    ({ values: v } = parseArgs({ args: [...args], strict: true, options: { files: { type: 'string', default: '1280000' }, classes: { type: 'string', default: '1000' }, jpegs: { type: 'string', default: '300' }, batch: { type: 'string', default: '256' }, runs: { type: 'string', default: '2' }, walk: { type: 'string', default: 'sync' }, threads: { type: 'string' }, dist: { type: 'boolean', default: false } } }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nusage: ${USAGE}`);
  }
  const [files, classes, jpegs, batch, runs] = [v.files, v.classes, v.jpegs, v.batch, v.runs].map(Number) as [number, number, number, number, number];
  if (![files, classes, jpegs, batch, runs].every((n) => Number.isInteger(n) && n >= 1) || classes > files) throw new UsageError(`bad numbers\nusage: ${USAGE}`);
  const walks = String(v.walk).split(',') as Walk[];
  if (walks.length === 0 || !walks.every((w) => (WALKS as readonly string[]).includes(w))) throw new UsageError(`--walk: sync and/or parallel, comma-separated\nusage: ${USAGE}`);
  const threads = v.threads as string | undefined;
  if (threads !== undefined && !(Number.isInteger(Number(threads)) && Number(threads) >= 1)) throw new UsageError(`--threads: an integer ≥ 1\nusage: ${USAGE}`);
  const dir = await build(files, classes, jpegs);
  console.log(`bench first-batch: ${hardwareLine()}; ${dir} (${files} files, ${classes} classes, hard links to ${jpegs} JPEGs); view 'train', bf16, batch ${batch}, loader defaults, ${v.dist === true ? 'the compiled package (dist/)' : 'TypeScript sources under tsx'}`);
  const rows: { kind: string; walk: Walk; m: Record<string, number> }[] = [];
  for (let k = 0; k < runs; k++) {
    for (const walk of walks) {
      const cache = mkdtempSync(join(tmpdir(), 'stoker-first-batch-cache-'));
      try {
        for (const kind of ['cold', 'warm']) {
          const r = { kind, walk, m: run(dir, cache, batch, v.dist === true, walk, threads) };
          console.log(JSON.stringify({ kind, walk, ...r.m }));
          rows.push(r);
        }
      } finally {
        rmSync(cache, { recursive: true, force: true });
      }
    }
  }
  console.log(table(rows, [
    { title: 'walk', cell: (r) => (r.walk === 'parallel' ? `parallel ×${r.m.walkThreads}` : 'sync') },
    { title: 'listing', cell: (r) => `${r.kind} (${r.m.listing ? 'cached' : 'walked'})` },
    { title: 'list s', align: 'right', cell: (r) => fmtFixed(r.m.listS!, 2) },
    { title: 'create s', align: 'right', cell: (r) => fmtFixed(r.m.createS!, 2) },
    { title: 'first batch s', align: 'right', cell: (r) => fmtFixed(r.m.firstBatchS!, 2) },
    { title: 'total s', align: 'right', cell: (r) => fmtFixed(r.m.totalS!, 2) },
    { title: 'walks', align: 'right', cell: (r) => String(r.m.walks) },
    { title: 'workers', align: 'right', cell: (r) => String(r.m.workers) },
  ]));
}

if (process.argv.includes('--child')) {
  const at = process.argv.indexOf('--child');
  await child(process.argv[at + 1]!, Number(process.argv[process.argv.indexOf('--batch') + 1]), process.argv[process.argv.indexOf('--walk') + 1] === 'parallel' ? 'parallel' : 'sync');
}
