// `bench text`: JSON Lines → tokenize in reader workers → batches, against the PyTorch reference
// (bench/text_reference.py: a map-style Dataset by line offsets, Hugging Face `tokenizers` in
// __getitem__, transformers' DataCollatorWithPadding, DataLoader at its best num_workers) on the same
// files and tokenizer, measured in the same run. The rule: tokens/s counts real tokens (not padding);
// padding waste is (padded slots − real tokens) / slots, from the batches delivered.
// `npm run bench -- text [--dir D] [--docs N] [--batch 32] [--seconds 8] [--workers 2,4,8] [--context 2048] [--no-reference]`
// The data (bench/text_data.py) is made in D when missing. Configurations whose loader option this
// build refuses are reported as skipped, with why. (b) and (c) need every document's length before
// the first batch: the source's length pass (loadLengths: tokenize every document in a pool of
// threads, text-lengths.ts) is timed once, cold, in a cache directory of the bench's own (so no
// table from an earlier run is found), then read back from its cached table; the rows that need
// it show the cold time (`length pass`, paid once per file and tokenizer before their first
// batch), apart from their steady-state tokens/s, which they measure over the cached table.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { lengthThreads } from '../src/dataset/formats/text/text-lengths.js';
import { DataLoader, sources } from '../src/index.js';
import { UsageError, fmtFixed, fmtInt, hardwareLine, sink, table } from './util.js';

const USAGE = 'npm run bench -- text [--dir D] [--docs N] [--batch 32] [--seconds 8] [--workers 2,4,8] [--context 2048] [--no-reference] [--python python3]';
const PYTHON_DEFAULT = process.env.PYTHON ?? 'python3';

interface Row {
  readonly config: string;
  readonly workers?: number;
  readonly tokensPerS?: number;
  readonly waste?: number;
  readonly batches?: number;
  /** Seconds of the cold length pass the configuration needs before its first batch (measured once: see the header). */
  readonly lengthsS?: number;
  readonly skipped?: string;
}

type AnyOptions = Record<string, unknown>;
const FIXED = '(0) pad each to --context';

/** Delivered tokens, slots and batches of one timed run; `count(batch)` gives [real tokens, slots]. */
function measure(path: string, tokenizer: string, loaderOptions: AnyOptions, seconds: number, count: (b: any) => [number, number]): Promise<{ tokensPerS: number; waste: number; batches: number }> {
  return measureOn(textSource(path, tokenizer), loaderOptions, seconds, count);
}

function textSource(path: string, tokenizer: string) {
  return sources.jsonl(path, { text: 'text', tokenizer: { path: tokenizer, maxLength: 8192 } });
}

/** The length pass over `path`, cold (in `cache`, empty) and then from the table it cached: seconds, milliseconds. */
async function lengthPass(path: string, tokenizer: string): Promise<{ coldS: number; cachedMs: number }> {
  let t0 = performance.now();
  const cold = textSource(path, tokenizer);
  await cold.loadLengths('text');
  const coldS = (performance.now() - t0) / 1000;
  cold.close();
  t0 = performance.now();
  const warm = textSource(path, tokenizer);
  await warm.loadLengths('text');
  const cachedMs = performance.now() - t0;
  warm.close();
  return { coldS, cachedMs };
}

async function measureOn(ds: Parameters<typeof DataLoader.create>[0], loaderOptions: AnyOptions, seconds: number, count: (b: any) => [number, number]): Promise<{ tokensPerS: number; waste: number; batches: number }> {
  const loader = await DataLoader.create(ds, { mode: 'streaming', sampleCache: false, seed: 7, ...loaderOptions } as any);
  let real = 0;
  let slots = 0;
  let batches = 0;
  const t0 = performance.now();
  try {
    let warm = 0;
    let start = t0;
    for await (const b of loader.epoch(0)) {
      if (warm < 3) {
        // Warm-up: workers started and their tokenizers loaded.
        if (++warm === 3) start = performance.now();
        continue;
      }
      const [r, s] = count(b);
      real += r;
      slots += s;
      batches++;
      if (performance.now() - start > seconds * 1000) break;
    }
    const s = (performance.now() - start) / 1000;
    return { tokensPerS: real / s, waste: slots === 0 ? 0 : (slots - real) / slots, batches };
  } finally {
    await loader.close();
  }
}

/** The pad collate's batch: the token field [B, L] plus lengths (or an attention mask). */
function countPadded(b: any): [number, number] {
  const t = b.get('text');
  const shape: number[] = t.shape;
  const slots = shape[0]! * shape[1]!;
  const lengths = b.names.includes('text_lengths') ? b.get('text_lengths').data : undefined;
  let real = 0;
  if (lengths !== undefined) for (const n of lengths) real += Number(n);
  else {
    const mask = b.get('attention_mask').data as ArrayLike<number>;
    for (let k = 0; k < mask.length; k++) real += mask[k]!;
  }
  sink.value += t.data[0];
  return [real, slots];
}

/** Packed windows [rows, contextLength] (the field's name, `text`): real tokens are those in a document (segment id > 0; padding is 0). */
function countPacked(b: any): [number, number] {
  const t = b.get('text');
  const seg = b.get('segment_ids').data as ArrayLike<number>;
  let real = 0;
  for (let k = 0; k < seg.length; k++) if (seg[k]! > 0) real++;
  sink.value += t.data[0];
  return [real, t.shape[0] * t.shape[1]];
}

async function attempt(config: string, workers: number, run: () => Promise<{ tokensPerS: number; waste: number; batches: number }>): Promise<Row> {
  try {
    return { config, workers, ...(await run()) };
  } catch (error) {
    const e = error as { code?: string; message?: string };
    return { config, workers, skipped: `${e.code ?? 'error'}: ${(e.message ?? String(error)).split("\n")[0]!.slice(0, 110)}` };
  }
}

/** Digest of the ids of the first `n` documents, as bench/text_reference.py computes it (little-endian int32). */
function idsDigest(path: string, tokenizer: string, n: number): string {
  const ds = sources.jsonl(path, { text: 'text', tokenizer: { path: tokenizer, maxLength: 8192 } });
  const h = createHash('sha256');
  for (let i = 0; i < Math.min(n, ds.length); i++) {
    const ids = (ds.get(i) as any).text as Int32Array;
    h.update(Buffer.from(ids.buffer, ids.byteOffset, ids.byteLength));
  }
  ds.close?.();
  return h.digest('hex');
}

export async function main(args: readonly string[]): Promise<void> {
  let v: Record<string, string | boolean | undefined>;
  try {
    ({ values: v } = parseArgs({
      args: [...args],
      options: {
        dir: { type: 'string' }, docs: { type: 'string' }, batch: { type: 'string' }, seconds: { type: 'string' },
        workers: { type: 'string' }, context: { type: 'string' }, 'no-reference': { type: 'boolean' }, python: { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nusage: ${USAGE}`);
  }
  const docs = Number(v.docs ?? 50_000);
  const dir = String(v.dir ?? join(tmpdir(), `stoker-text-${docs}`));
  const batch = Number(v.batch ?? 32);
  const seconds = Number(v.seconds ?? 8);
  const context = Number(v.context ?? 2048);
  const python = String(v.python ?? PYTHON_DEFAULT);
  const cores = cpus().length;
  const workerList = String(v.workers ?? [2, 4, 8, 16].filter((w) => w <= 2 * cores).join(',')).split(',').map(Number);
  for (const [k, x] of Object.entries({ docs, batch, seconds, context }))
    if (!(x > 0)) throw new UsageError(`--${k} must be a positive number, got ${x}\nusage: ${USAGE}`);
  if (workerList.some((w) => !Number.isSafeInteger(w) || w < 0)) throw new UsageError(`--workers must be a comma-separated list of integers ≥ 0\nusage: ${USAGE}`);

  const corpus = join(dir, 'corpus.jsonl');
  const tokenizer = join(dir, 'tokenizer.json');
  if (!existsSync(corpus) || !existsSync(tokenizer)) {
    const made = spawnSync(python, [join(import.meta.dirname ?? 'bench', 'text_data.py'), dir, '--docs', String(docs)], { stdio: ['ignore', 'inherit', 'inherit'] });
    if (made.status !== 0) throw new Error(`bench/text_data.py failed (exit ${made.status}); make the data with: python3 bench/text_data.py ${dir} --docs ${docs}`);
  }
  const probe = sources.jsonl(corpus, { fields: ['id'] });
  const nDocs = probe.length;
  probe.close();
  console.log(`bench text — ${hardwareLine()}; ${nDocs} documents in ${corpus}; batch ${batch}, ${seconds} s per configuration`);

  const rows: Row[] = [];
  // (0) Needs no ragged batching: each document truncated and padded to `context` ids in the source
  // (padding='max_length'), tokenized in the reader workers. Real tokens/s here is the JSONL →
  // tokenize-in-workers throughput; its waste is what fixed-length padding costs.
  const padId = (JSON.parse(readFileSync(tokenizer, 'utf8')).model.vocab as Record<string, number>)['<pad>'] ?? 0;
  const fixed = sources.module(new URL('./fixtures/text-fixed.ts', import.meta.url), 'openFixedJsonl', { path: corpus, tokenizer, length: context, padId });
  for (const w of workerList)
    rows.push(await attempt(FIXED, w, () => measureOn(fixed, { batchSize: batch, workers: w }, seconds, (b) => {
      const t = b.get('text');
      const n = b.get('length').data as Int32Array;
      let real = 0;
      for (const x of n) real += x;
      sink.value += t.data[0];
      return [real, t.shape[0] * t.shape[1]];
    })));
  const best = (config: string) => rows.filter((r) => r.config === config && r.tokensPerS !== undefined).sort((a, b) => b.tokensPerS! - a.tokensPerS!)[0];
  const bestWorkers = best(FIXED)?.workers ?? workerList[workerList.length - 1]!;
  // (a) pad to the longest of each batch; (b) token budgets (batches of ≤ batch × 512 tokens, grouped
  // by length in a window); (c) packing into contextLength windows, best-fit and concat.
  const padCollate = { collate: { text: 'pad' } };
  for (const w of workerList) rows.push(await attempt('(a) pad', w, () => measure(corpus, tokenizer, { batchSize: batch, workers: w, ...padCollate }, seconds, countPadded)));
  // The length pass (b) and (c) need, in a cache directory of the bench's own.
  const savedCache = process.env.XDG_CACHE_HOME;
  const cacheDir = mkdtempSync(join(tmpdir(), 'stoker-bench-lengths-'));
  process.env.XDG_CACHE_HOME = cacheDir;
  try {
    const pass = await lengthPass(corpus, tokenizer);
    const threads = lengthThreads(nDocs);
    console.log(`length pass (every document tokenized, ${threads} thread${threads === 1 ? '' : 's'}): ${fmtFixed(pass.coldS, 2)} s cold (${fmtInt(nDocs / pass.coldS)} documents/s); ${fmtFixed(pass.cachedMs, 1)} ms from the cached table`);
    const needs = (row: Row): Row => (row.skipped === undefined ? { ...row, lengthsS: pass.coldS } : row);
    rows.push(needs(await attempt('(b) batchTokens + pad', bestWorkers, () => measure(corpus, tokenizer, { batchSize: 4 * batch, batchTokens: batch * 512, workers: bestWorkers, ...padCollate }, seconds, countPadded))));
    // best-fit never splits a document: one longer than the context is truncated to it (its tail is not delivered).
    for (const mode of ['best-fit', 'concat'] as const)
      rows.push(needs(await attempt(`(c) pack ${mode}`, bestWorkers, () => measure(corpus, tokenizer, { batchSize: Math.max(1, Math.round((batch * 300) / context)), workers: bestWorkers, pack: { contextLength: context, mode, ...(mode === 'best-fit' ? { truncate: true } : {}) } }, seconds, countPacked))));
  } finally {
    if (savedCache === undefined) delete process.env.XDG_CACHE_HOME;
    else process.env.XDG_CACHE_HOME = savedCache;
    rmSync(cacheDir, { recursive: true, force: true });
  }

  let reference: any;
  if (v['no-reference'] !== true) {
    const ref = spawnSync(python, [join(import.meta.dirname ?? 'bench', 'text_reference.py'), dir, '--batch', String(batch), '--seconds', String(seconds), '--workers', workerList.join(',')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 });
    const last = ref.stdout?.trim().split('\n').pop();
    try {
      reference = JSON.parse(last ?? '');
    } catch {
      reference = { skipped: `bench/text_reference.py exited ${ref.status}: ${last ?? ref.error?.message}` };
    }
  }

  const cell = (r: Row, i: number): string => {
    if (r.skipped !== undefined) return ['skipped', r.skipped, ''][i]!;
    return [fmtInt(r.tokensPerS!), `${fmtFixed(100 * r.waste!, 1)} %`, String(r.batches)][i]!;
  };
  console.log(table(rows, [
    { title: 'configuration', cell: (r) => r.config },
    { title: 'workers', align: 'right', cell: (r) => String(r.workers ?? '') },
    { title: 'tokens/s', align: 'right', cell: (r) => cell(r, 0) },
    { title: 'padding waste', align: 'right', cell: (r) => cell(r, 1) },
    { title: 'batches', align: 'right', cell: (r) => cell(r, 2) },
    { title: 'length pass', align: 'right', cell: (r) => (r.lengthsS === undefined ? '' : `${fmtFixed(r.lengthsS, 2)} s`) },
  ]));
  for (const r of rows) console.log(JSON.stringify({ bench: 'stoker-text', ...r }));
  if (reference === undefined) return;
  console.log(JSON.stringify({ bench: 'torch-text', ...reference }));
  if (reference.skipped !== undefined) {
    console.log(`reference skipped: ${reference.skipped}`);
    return;
  }
  const ours = idsDigest(corpus, tokenizer, reference.digestDocs);
  console.log(`tokenizers agree on the first ${reference.digestDocs} documents (Node addon vs Python): ${ours === reference.idsDigest ? 'yes' : `NO (${ours} vs ${reference.idsDigest})`}`);
  const refPad = reference.best?.pad;
  const refGrouped = reference.best?.grouped;
  const ratio = (config: string, against: any, name: string) => {
    const s = best(config);
    if (s === undefined || against === undefined) return;
    console.log(`ratio ${config} (workers ${s.workers}) / reference ${name} (num_workers ${against.workers}): ${fmtFixed(s.tokensPerS! / against.tokensPerS, 2)}× tokens/s; padding waste ${fmtFixed(100 * s.waste!, 1)} % vs ${fmtFixed(100 * against.waste, 1)} %`);
  };
  ratio('(a) pad', refPad, 'DataCollatorWithPadding');
  ratio('(b) batchTokens + pad', refGrouped, 'LengthGroupedSampler + padding');
  ratio('(c) pack best-fit', refPad, 'DataCollatorWithPadding');
  ratio('(c) pack concat', refPad, 'DataCollatorWithPadding');
  ratio(FIXED, refPad, 'DataCollatorWithPadding');
}
