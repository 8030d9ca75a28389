// Internal: not exported from the package entry.
// Every record's token count of a tokenized text field, for sequence packing and token budgets
// (`loadLengths(field)`, which build.ts awaits once at create): only known by tokenizing, so it is
// computed in parallel by a pool of worker threads — each opens the source from its spec and counts
// one contiguous range of records into a shared table — and cached on disk beside the JSONL line
// indexes (cache-file.ts), keyed by the file's absolute path, size and mtime, the field, and a
// digest of the tokenizer (tokenizer.json, addSpecialTokens, maxLength). The rules: a
// count is exactly the length `get(i)` gives (the sources count through the same code path); a
// cached table is used only after it is checked against the file as it is now (same size and
// mtime, one entry per record, none past the tokenizer's maxLength); a bad record fails the whole
// pass with the source's typed error, never a guessed length.

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { badFileError, fileAccess, invalidOption, revivedError, show, workerExited, workerFailed } from '../../../errors.js';
import { workerBoot } from '../../../base/worker-boot.js';
import type { SourceSpec } from '../../source-spec.js';
import { readCacheFile, writeCacheFile } from '../columns/cache-file.js';
import { type ShardStamp, indexCacheDir, isPrivateDir } from '../tar/tar-index.js';
import type { ResolvedTokenizer } from './tokenizer.js';

/** What a source gives the pool (counts of `field` for records [start, end)): declared with the other capabilities. */
export type { CountsLengths } from '../../capabilities.js';

/** One lengths pass to run: the source (by its spec, for the workers) and what keys its cache. */
export interface LengthsJob {
  readonly path: string;
  /** The file as the source indexed it. */
  readonly stamp: ShardStamp;
  readonly field: string;
  readonly tokenizer: ResolvedTokenizer;
  readonly count: number;
  readonly spec: SourceSpec;
}

/** Records per worker thread, at least (a thread costs a module load and a tokenizer load). */
export const RECORDS_PER_THREAD = 2000;

const MAGIC = 'stoker-text-lengths 1\n';
/** Which tokenizer implementation counted a table: a table another one counted (the JavaScript port's, before) is counted again. */
const TOKENIZER_LIBRARY = 'tokenizers (Rust)';
const WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? './text-lengths-worker.ts' : './text-lengths-worker.js', import.meta.url);

let started = 0;

/** Worker threads this thread has started for lengths passes (a cache hit starts none). For tests. */
export function lengthWorkersStarted(): number {
  return started;
}

/** Texts a lengths pass keeps tokenizing at once per thread: encodes run on libuv's pool, so a few in flight hide each one's hand-off. */
export const LENGTHS_IN_FLIGHT = 16;

/**
 * `out[i] = await length(i)` for i in [start, end), LENGTHS_IN_FLIGHT at a time. A failure is the
 * one of the lowest record that failed in its group, so a bad record is reported the same on every run.
 */
export async function countInFlight(start: number, end: number, out: Uint32Array, length: (i: number) => number | Promise<number>): Promise<void> {
  for (let from = start; from < end; from += LENGTHS_IN_FLIGHT) {
    const to = Math.min(end, from + LENGTHS_IN_FLIGHT);
    const got = await Promise.allSettled(Array.from({ length: to - from }, async (_, k) => (out[from + k] = await length(from + k))));
    const failed = got.find((r) => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
  }
}

/** The cache directory of lengths tables, beside the JSONL line indexes. */
export function lengthsCacheDir(): string {
  return join(dirname(indexCacheDir()), 'text-lengths');
}

/** The field a `loadLengths(field)` call means: `field` when it is ragged, the one ragged field when left out. */
/**
 * One length pass per field and source copy: the pending or settled table of `name` from `memo`, or
 * `compute(name)` started and remembered (forgotten again if it fails, so a later call retries).
 */
export function memoLengths(memo: Map<string, Promise<Uint32Array>>, name: string, compute: (name: string) => Promise<Uint32Array>): Promise<Uint32Array> {
  let p = memo.get(name);
  if (p === undefined) {
    p = compute(name);
    memo.set(name, p);
    p.catch(() => memo.delete(name));
  }
  return p;
}

export function lengthsField(path: string, ragged: readonly string[], field: string | undefined): string {
  if (field === undefined) {
    if (ragged.length === 1) return ragged[0]!;
    throw invalidOption('pack.field', `the ragged field whose lengths to compute (${ragged.map(show).join(', ') || 'none'} in ${path})`, field, 'Name it');
  }
  if (!ragged.includes(field)) {
    throw invalidOption('pack.field', `a ragged field of ${path} (${ragged.map(show).join(', ') || 'it has none'})`, field, 'Name a text or list field the source reads');
  }
  return field;
}

/** Digest of everything that decides a text's token ids: the tokenizer's file, the library that reads it, and the options. */
export function tokenizerDigest(t: ResolvedTokenizer): string {
  const h = createHash('sha256');
  try {
    h.update(readFileSync(t.path));
  } catch (cause) {
    throw fileAccess(t.path, 'read the tokenizer to key the lengths cache', cause);
  }
  h.update('\0');
  h.update(JSON.stringify({ library: TOKENIZER_LIBRARY, addSpecialTokens: t.addSpecialTokens, maxLength: t.maxLength ?? null }));
  return h.digest('hex');
}

function cacheName(job: LengthsJob, digest: string): string {
  return `${createHash('sha256').update(`${job.path}\0${job.stamp.size}\0${job.stamp.mtimeNs}\0${job.field}\0${digest}`).digest('hex').slice(0, 32)}.len`;
}

interface Head {
  path?: unknown;
  size?: unknown;
  mtimeNs?: unknown;
  field?: unknown;
  tokenizer?: unknown;
  count?: unknown;
}

/** The lengths of `job`'s field: from the cache when one matches the file and tokenizer, else counted by the pool and cached. */
export async function textLengths(job: LengthsJob, stampNow: () => ShardStamp): Promise<Uint32Array> {
  const now = stampNow();
  if (now.size !== job.stamp.size || now.mtimeNs !== job.stamp.mtimeNs) {
    throw badFileError(`${job.path}: the file changed since it was opened (${job.stamp.size} bytes then, ${now.size} now). Open the source again after rewriting the file`);
  }
  const digest = tokenizerDigest(job.tokenizer);
  const name = cacheName(job, digest);
  const places = [join(lengthsCacheDir(), name), join(tmpdir(), `stoker-text-lengths-${process.getuid?.() ?? 'user'}`, name)];
  for (const place of places) {
    if (!isPrivateDir(dirname(place))) continue;
    const hit = readLengths(place, job, digest);
    if (hit !== undefined) return hit;
  }
  const lengths = await countInPool(job);
  const head = { path: job.path, size: job.stamp.size, mtimeNs: job.stamp.mtimeNs, field: job.field, tokenizer: digest, count: job.count };
  for (const place of places) if (writeCacheFile(place, MAGIC, head, 4, [lengths])) break;
  return lengths;
}

function readLengths(place: string, job: LengthsJob, digest: string): Uint32Array | undefined {
  const file = readCacheFile(place, MAGIC, 4);
  if (file === undefined) return undefined;
  const h = file.head as Head | null;
  if (h?.path !== job.path || h.size !== job.stamp.size || h.mtimeNs !== job.stamp.mtimeNs || h.field !== job.field || h.tokenizer !== digest || h.count !== job.count) return undefined;
  if (file.body.length !== job.count * 4) return undefined;
  const out = new Uint32Array(job.count);
  new Uint8Array(out.buffer).set(file.body);
  const max = job.tokenizer.maxLength;
  if (max !== undefined) for (let i = 0; i < out.length; i++) if (out[i]! > max) return undefined;
  return out;
}

/** Threads for `count` records: one per RECORDS_PER_THREAD, at most one per core, at least one. */
export function lengthThreads(count: number): number {
  return Math.max(1, Math.min(availableParallelism(), Math.floor(count / RECORDS_PER_THREAD)));
}

/** What the main thread sends a lengths worker (workerData). */
export interface LengthsWorkerData {
  readonly spec: SourceSpec;
  readonly field: string;
  readonly start: number;
  readonly end: number;
  /** Uint32 per record, shared: the worker writes its range. */
  readonly out: SharedArrayBuffer;
}

export type FromLengthsWorker = { readonly t: 'done' } | { readonly t: 'failed'; readonly code: string | undefined; readonly message: string };

/** Count every record in a pool of worker threads, contiguous ranges; the first failure ends the pass. */
async function countInPool(job: LengthsJob): Promise<Uint32Array> {
  const shared = new SharedArrayBuffer(job.count * 4);
  const threads = lengthThreads(job.count);
  const workers: Worker[] = [];
  const runs: Promise<void>[] = [];
  for (let w = 0; w < threads; w++) {
    const start = Math.floor((w * job.count) / threads);
    const end = Math.floor(((w + 1) * job.count) / threads);
    const data: LengthsWorkerData = { spec: job.spec, field: job.field, start, end, out: shared };
    const worker = new Worker(workerBoot(WORKER_URL, job.spec.module), { eval: true, workerData: data });
    started++;
    workers.push(worker);
    runs.push(
      new Promise<void>((resolve, reject) => {
        let settled = false;
        worker.on('message', (m: FromLengthsWorker) => {
          settled = true;
          if (m.t === 'done') resolve();
          else reject(m.code?.startsWith('ERR_') ? revivedError(m.code, m.message) : new Error(m.message));
        });
        worker.on('error', (error) => {
          settled = true;
          reject(workerFailed(`${job.path}: a lengths worker (records ${start}–${end - 1})`, error));
        });
        worker.on('exit', (code) => {
          if (!settled) reject(workerExited(`${job.path}: a lengths worker (records ${start}–${end - 1})`, code));
        });
      }),
    );
  }
  try {
    await Promise.all(runs);
  } finally {
    // Also ends the other workers' ranges when one failed: the pass has failed as a whole.
    await Promise.all(workers.map((w) => w.terminate()));
    for (const r of runs) r.catch(() => undefined);
  }
  const out = new Uint32Array(job.count);
  out.set(new Uint32Array(shared));
  return out;
}
