// Internal: not exported from the package entry.
// The reader pool: worker_threads that open the dataset themselves and write rows straight into
// shared staging slots. It is the streaming pipeline's fetcher when `workers` > 0.
//
// NOTE [Reader pool protocol]
// - A batch (a job) takes one staging slot and is cut into one contiguous chunk of rows per live
//   worker. `tokens[slot]` holds the job id while the job is wanted; cancelling writes 0, and
//   workers check it before every sample, so queued reads of an abandoned epoch cost nothing.
// - Every chunk is answered exactly once (done, failed, cancelled) or settled by the worker's death.
//   The slot returns to the ring only when all its chunks are settled and its rows were copied out.
// - A worker that dies fails only the chunks it held; it is replaced. A worker that dies before it
//   reported ready stops the respawning: the pool fails with the reason, and every later read fails
//   with it too (never a respawn loop).
// - Workers are ref'd only while reads are outstanding, so an idle loader never holds the process
//   open; close() asks workers to exit, then terminates any still alive after a time limit.

import { MAX_IN_FLIGHT } from '../base/budget.js';
import { workerBoot } from '../base/worker-boot.js';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { DiskStageShared } from '../cache/disk-stage.js';
import type { SampleCacheShared } from '../cache/sample-cache.js';
import type { Schema } from '../dataset/schema.js';
import type { StagedBatch } from '../dataset/source-reader.js';
import type { SourceSpec } from '../dataset/source-spec.js';
import { LoaderError, describeCause, formatIds, invalidOptionError, loaderClosedError, revivedError, workerDiedError, workerStartError } from '../errors.js';
import { trustedTensor } from '../tensor/tensor.js';
import { allocStorage } from '../tensor/dtype.js';
import type { PickKeys } from '../sampler/pick-key.js';
import type { Fetcher } from './fetcher.js';
import type { FromWorker, ReaderInit, ToWorker, WireError } from './reader-worker.js';
import { type Slot, type SlotLayout, slotAllocation, slotLayout, slotViews } from './staging.js';

const WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? './reader-worker.ts' : './reader-worker.js', import.meta.url);
/** How long close() lets a worker finish before terminating it. */
const CLOSE_GRACE_MS = 1000;

export function resolveWorkers(workers: number | 'auto'): number {
  return workers === 'auto' ? Math.max(1, availableParallelism() - 1) : workers;
}

export interface ReaderPoolOptions {
  readonly spec: SourceSpec;
  readonly workers: number;
  readonly schema: Schema;
  readonly batchSize: number;
  readonly cache: SampleCacheShared | undefined;
  readonly disk: DiskStageShared | undefined;
  readonly counters: BigInt64Array;
  readonly purityProbe: boolean;
  readonly warn: (message: string) => void;
  /** The dataset is keyed: reads carry their picks' keys (NOTE [keyed reads], dataset.ts). */
  readonly keyed?: boolean;
  /** Page-lock a new staging slot (accelerators) once; returns the offset of its first page-aligned byte. */
  readonly pin?: (slot: SharedArrayBuffer) => number;
}

interface Member {
  readonly index: number;
  readonly worker: Worker;
  ready: boolean;
  /** Chunks this worker holds: job → chunk starts. */
  readonly held: Map<number, Set<number>>;
  cause: unknown;
}

interface Job {
  readonly id: number;
  readonly slot: number;
  readonly ids: Uint32Array;
  /** Chunks not yet settled. */
  open: number;
  finished: boolean;
  readonly resolve: (s: StagedBatch) => void;
  readonly reject: (e: unknown) => void;
}

// NOTE [lent slots] On the CPU a batch's rows would be copied out of their staging slot into the
// batch's own memory (the CPU's "upload": ~0.15 ms of the main thread an image of 224² float32 on
// the 2-core VM, a memory-bound copy). Instead the device may ask to keep the slot as the batch's
// memory (`StagedBatch.lend`) until the batch is released (`done`). A lent slot does not count
// toward the ring's bound (`ringLimit`): a fetch never waits for a slot a user holds, so holding
// batches can never stall the loader. At most LENT_SLOTS are lent at once; past that (a user who
// keeps batches, or drops them without `release()`, whose slots then stay lent until the loader
// closes) the rows are copied as before. So staging holds at most ringLimit + LENT_SLOTS slots.

/** Slots lent to batches at most (NOTE [lent slots]): the batch in use, the one before it, one more. */
export const LENT_SLOTS = 3;

export class ReaderPool implements Fetcher {
  readonly #opts: ReaderPoolOptions;
  readonly #layout: SlotLayout;
  readonly #tokens = new Int32Array(new SharedArrayBuffer(4 * MAX_IN_FLIGHT));
  readonly #slots: Slot[] = [];
  readonly #free: number[] = [];
  readonly #members: (Member | undefined)[] = [];
  readonly #jobs = new Map<number, Job>();
  #nextJob = 1;
  #rr = 0;
  #failure: LoaderError | undefined;
  #closing = false;
  /** Workers start ref'd so that awaiting their start keeps the process alive. */
  #refd = true;
  #started = 0;
  /** The most slots the ring may hold (the epoch's in-flight bound); more fetches wait for a slot. */
  #limit = Number.POSITIVE_INFINITY;
  /** Slots lent to batches now (NOTE [lent slots]). */
  #lent = 0;
  /** Fetches waiting for a slot, in order (NOTE [A bounded ring]). */
  readonly #waiting: (() => void)[] = [];

  private constructor(opts: ReaderPoolOptions) {
    this.#opts = opts;
    this.#layout = slotLayout(opts.schema, opts.batchSize);
  }

  /** Start the workers and wait until each has opened the dataset; fails with the reason if one cannot. */
  static async start(opts: ReaderPoolOptions): Promise<ReaderPool> {
    const pool = new ReaderPool(opts);
    const ready = Array.from({ length: opts.workers }, (_, i) => pool.#spawn(i));
    try {
      await Promise.all(ready);
    } catch (error) {
      await pool.close();
      throw error;
    }
    pool.#refresh();
    return pool;
  }

  get workers(): number {
    return this.#members.filter((m) => m?.ready).length;
  }

  /** Staging slots allocated (the ring's depth). */
  get slots(): number {
    return this.#slots.length;
  }

  get slotBytes(): number {
    return this.#layout.bytes;
  }

  /** Workers started over the pool's life (replacements included). */
  get started(): number {
    return this.#started;
  }

  /**
   * NOTE [A bounded ring] The ring holds at most `ringLimit` slots (the epoch's in-flight bound). A
   * cancelled read's slot comes back only once its worker lets go of the chunk, which on a loaded
   * machine can be after the next epoch has started; a fetch that finds no free slot with the ring
   * at its bound waits for one instead of allocating another, so abandoning epoch after epoch never
   * grows staging memory. The wait is for a slot's chunks to settle (a worker answers every chunk, or
   * dies and is settled for it) and for the device to stop reading it (`done`, called once its copy
   * is done without waiting for another upload: NOTE [Follow-ups run without a next call],
   * stream-memory.ts); each happens in finite time, so the wait ends.
   */
  set ringLimit(slots: number) {
    this.#limit = Math.max(1, slots);
  }

  fetch(sampleIds: Uint32Array, signal: AbortSignal, inFlight = 1, keys?: PickKeys): Promise<StagedBatch> {
    if (this.#failure) return Promise.reject(this.#failure);
    if (this.#closing) return Promise.reject(loaderClosedError('the reader pool is closed'));
    signal.throwIfAborted();
    // NOTE [lent slots]: a slot a batch holds is not the ring's.
    if (this.#free.length > 0 || this.#slots.length - this.#lent < this.#limit) return this.#start(sampleIds, signal, inFlight, keys);
    return new Promise<StagedBatch>((resolve, reject) => {
      const go = () => {
        signal.removeEventListener('abort', abort);
        if (this.#failure) return reject(this.#failure);
        if (this.#closing) return reject(loaderClosedError('the reader pool is closed'));
        this.#start(sampleIds, signal, inFlight, keys).then(resolve, reject);
      };
      const abort = () => {
        const at = this.#waiting.indexOf(go);
        if (at >= 0) this.#waiting.splice(at, 1);
        reject(signal.reason);
      };
      this.#waiting.push(go);
      signal.addEventListener('abort', abort, { once: true });
    });
  }

  #start(sampleIds: Uint32Array, signal: AbortSignal, inFlight: number, keys: PickKeys | undefined): Promise<StagedBatch> {
    // Only a keyed dataset's reads carry keys (NOTE [keyed reads]): the rest pay nothing for them.
    const keyed = this.#opts.keyed === true ? keys : undefined;
    if (signal.aborted) return Promise.reject(signal.reason);
    // No row to read: no chunk would be posted, so no answer would ever settle the job.
    if (sampleIds.length === 0) return Promise.resolve({ tensors: this.#opts.schema.fields.map((f) => trustedTensor(f.dtype, allocStorage(f.dtype, 0), [0, ...f.shape])), owned: false });
    return new Promise<StagedBatch>((resolve, reject) => {
      const slot = this.#acquireSlot();
      const job: Job = { id: this.#nextJob++, slot, ids: sampleIds, open: 0, finished: false, resolve, reject };
      if (this.#nextJob > 0x7ffffff0) this.#nextJob = 1;
      Atomics.store(this.#tokens, slot, job.id);
      this.#jobs.set(job.id, job);
      this.#refresh();
      const members = this.#live();
      if (members.length === 0) {
        this.#finish(job, workerDiedError('no reader worker is alive to read this batch'));
        return;
      }
      const n = sampleIds.length;
      // Enough batches in flight keep every reader busy with whole batches (one message each way);
      // otherwise each batch is cut so that all readers work on it.
      const parts = Math.max(1, Math.min(members.length, n, Math.ceil(members.length / Math.max(inFlight, 1))));
      const size = Math.ceil(n / parts);
      for (let start = 0; start < n; start += size) {
        const member = members[this.#rr++ % members.length]!;
        const end = Math.min(start + size, n);
        const ids = sampleIds.slice(start, end);
        const chunkKeys = keyed === undefined ? undefined : { ...keyed, picks: keyed.picks.slice(start, end) };
        job.open++;
        let held = member.held.get(job.id);
        if (held === undefined) member.held.set(job.id, (held = new Set()));
        held.add(start);
        this.#post(member, { t: 'read', job: job.id, slot, start, rows: n, ids, keys: chunkKeys });
      }
      signal.addEventListener('abort', () => this.#cancel(job, signal.reason), { once: true });
    });
  }

  /** Post newly allocated cache chunks to every worker (before the cache's capacity is raised). */
  shareChunks(chunks: readonly SharedArrayBuffer[]): void {
    for (const m of this.#members) if (m) this.#post(m, { t: 'chunks', chunks });
  }

  /**
   * Idempotent: every call returns the same promise, which resolves once every worker has exited.
   * Step 5 of NOTE [Loader shutdown] (loader.ts): before the memory workers write into is freed.
   */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  #closed: Promise<void> | undefined;

  async #close(): Promise<void> {
    this.#closing = true;
    const error = loaderClosedError('the loader closed while this batch was being read');
    for (const go of this.#waiting.splice(0)) go();
    for (const job of this.#jobs.values()) this.#finish(job, error);
    await Promise.all(this.#members.map((m) => (m ? this.#stop(m) : undefined)));
  }

  #live(): Member[] {
    const ready = this.#members.filter((m): m is Member => m?.ready === true);
    return ready.length > 0 ? ready : this.#members.filter((m): m is Member => m !== undefined);
  }

  #acquireSlot(): number {
    const free = this.#free.pop();
    if (free !== undefined) return free;
    if (this.#slots.length >= this.#tokens.length) throw invalidOptionError(`more than ${this.#tokens.length} batches in flight; lower \`prefetch\``);
    const memory = new SharedArrayBuffer(slotAllocation(this.#layout));
    // Page-locked once, from its first page-aligned byte, so that every copy from it is truly async.
    const base = this.#opts.pin?.(memory) ?? 0;
    this.#slots.push({ memory, base });
    for (const m of this.#members) if (m) this.#post(m, { t: 'slots', slots: this.#slots });
    return this.#slots.length - 1;
  }

  #spawn(index: number): Promise<void> {
    const init: ReaderInit = {
      index, spec: this.#opts.spec, schema: this.#opts.schema, layout: this.#layout, tokens: this.#tokens, slots: this.#slots,
      cache: this.#opts.cache, disk: this.#opts.disk, counters: this.#opts.counters, purityProbe: this.#opts.purityProbe,
      readers: this.#opts.workers,
    };
    const worker = new Worker(bootCode(this.#opts.spec), { eval: true, workerData: init, stdout: false, stderr: false });
    const member: Member = { index, worker, ready: false, held: new Map(), cause: undefined };
    this.#members[index] = member;
    this.#started++;
    if (!this.#refd) worker.unref();
    return new Promise<void>((resolve, reject) => {
      worker.on('message', (m: FromWorker) => {
        if (m.t === 'ready') {
          member.ready = true;
          resolve();
        } else if (m.t === 'warn') this.#opts.warn(m.message);
        else this.#settle(member, m.job, m.start, m.t === 'failed' ? fromWire(m.error) : m.t);
      });
      worker.on('error', (error) => {
        member.cause ??= error;
      });
      worker.on('exit', (code) => {
        if (this.#members[index] === member) this.#members[index] = undefined;
        if (!member.ready) {
          const why = member.cause !== undefined ? describeCause(member.cause) : `it exited with code ${code}`;
          const failure = workerStartError(
            `a reader worker failed to start: ${why}. Respawning stopped. Check that ${this.#opts.spec.module} (export ${JSON.stringify(this.#opts.spec.export)}) opens in a worker thread, or pass workers: 0 to read on the main thread`,
            member.cause,
          );
          if (!this.#closing) this.#fail(failure);
          reject(failure);
          this.#orphan(member, failure);
          return;
        }
        if (this.#closing) return;
        const why = member.cause !== undefined ? describeCause(member.cause) : `exit code ${code}`;
        this.#orphan(member, undefined, why);
        if (!this.#failure) void this.#spawn(index).catch(() => {});
      });
    });
  }

  /** Settle every chunk a dead worker held. */
  #orphan(member: Member, failure: LoaderError | undefined, why?: string): void {
    for (const [jobId, starts] of member.held) {
      const job = this.#jobs.get(jobId);
      for (const start of starts) {
        const error =
          failure ??
          workerDiedError(
            `reader worker ${member.index} died (${why}) while reading samples ${formatIds(job?.ids ?? [])}; this batch fails and the worker is replaced`,
          );
        this.#settle(member, jobId, start, error);
      }
    }
    member.held.clear();
  }

  #settle(member: Member, jobId: number, start: number, outcome: 'done' | 'cancelled' | Error): void {
    const held = member.held.get(jobId);
    if (held === undefined || !held.delete(start)) return;
    if (held.size === 0) member.held.delete(jobId);
    const job = this.#jobs.get(jobId);
    if (job === undefined) return;
    job.open--;
    if (outcome instanceof Error) this.#reject(job, outcome);
    this.#retireIfSettled(job);
  }

  /** Once every chunk of a job is settled: hand its rows over, or put its slot back. */
  #retireIfSettled(job: Job): void {
    if (job.open > 0 || !this.#jobs.delete(job.id)) return;
    if (job.finished) {
      this.#release(job.slot);
    } else {
      job.finished = true;
      const rows = job.ids.length;
      const views = slotViews(this.#opts.schema, this.#layout, this.#slots[job.slot]!, rows);
      const tensors = this.#opts.schema.fields.map((f, i) => trustedTensor(f.dtype, views[i]!, [rows, ...f.shape]));
      let released = false;
      let lent = false;
      job.resolve({
        tensors,
        owned: false,
        done: () => {
          if (released) return;
          released = true;
          if (lent) this.#lent--;
          this.#release(job.slot);
        },
        lend: () => {
          if (released || lent || this.#lent >= LENT_SLOTS) return false;
          lent = true;
          this.#lent++;
          return true;
        },
      });
    }
    this.#refresh();
  }

  /** Fail a job now (its promise rejects at once); its slot waits for its chunks to settle. */
  #reject(job: Job, error: unknown): void {
    if (job.finished) return;
    job.finished = true;
    if (Atomics.load(this.#tokens, job.slot) === job.id) Atomics.store(this.#tokens, job.slot, 0);
    job.reject(error);
    for (const m of this.#members) if (m?.held.has(job.id)) this.#post(m, { t: 'cancel', job: job.id });
  }

  #finish(job: Job, error: unknown): void {
    this.#reject(job, error);
    this.#retireIfSettled(job);
  }

  #cancel(job: Job, reason: unknown): void {
    this.#finish(job, reason);
  }

  #release(slot: number): void {
    Atomics.store(this.#tokens, slot, 0);
    this.#free.push(slot);
    this.#waiting.shift()?.();
  }

  #fail(failure: LoaderError): void {
    this.#failure = failure;
    for (const go of this.#waiting.splice(0)) go();
    for (const job of this.#jobs.values()) this.#finish(job, failure);
  }

  /** Keep the process alive only while reads are outstanding. */
  #refresh(): void {
    const want = this.#jobs.size > 0;
    if (want === this.#refd) return;
    this.#refd = want;
    for (const m of this.#members) if (m) (want ? m.worker.ref() : m.worker.unref());
  }

  #post(member: Member, message: ToWorker): void {
    member.worker.postMessage(message);
  }

  #stop(member: Member): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => void member.worker.terminate(), CLOSE_GRACE_MS);
      member.worker.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      member.worker.ref();
      this.#post(member, { t: 'close' });
    });
  }
}

/** The worker's first line: imports the reader entry (registering tsx first when it or the source is TypeScript). */
function bootCode(spec: SourceSpec): string {
  return workerBoot(WORKER_URL, spec.module);
}

function fromWire(w: WireError): Error {
  const error = w.code !== undefined ? revivedError(w.code, w.message) : new Error(w.message);
  error.name = w.name;
  if (w.stack !== undefined) error.stack = w.stack;
  return error;
}
