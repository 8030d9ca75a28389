// Internal: not exported from the package entry.
// The decode route's file readers: a few threads (decode-reads-worker.ts) that read a batch's files
// straight into its page-locked memory with blocking reads, in parallel, so the main thread only
// posts one message per thread per batch (async fs costs the main thread ~80 µs a file in open,
// stat, read and close callbacks: a core at ~12 k files/s). The rules:
// - A batch's memory is written only while its job runs, and `read` resolves only once every thread
//   is done with the job, whatever happened (abort, a bad file): after it, nothing writes there.
// - Jobs run in the order they were posted (each thread takes its messages in order); the files of
//   one job are shared among the threads by an atomic counter and packed by an atomic byte cursor.
// - When the files do not fit, `read` says how many bytes they need and the caller reads again into
//   more memory; a file that cannot be read is reported with its error (the caller names it).

import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { readSwitch } from '../../../base/env.js';
import { workerBoot } from '../../../base/worker-boot.js';
import type { ReadDone, ReadJob } from './decode-reads-worker.js';

const WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? './decode-reads-worker.ts' : './decode-reads-worker.js', import.meta.url);

/** Reader threads: the env switch `decodeReaders` (base/env.ts), else enough for > 15 k files/s of ~110 KB from page cache, never more than the machine has. */
export function defaultReaders(cores = availableParallelism(), env: NodeJS.ProcessEnv = process.env): number {
  return readSwitch('decodeReaders', env) ?? Math.min(4, Math.max(2, cores - 1));
}

let liveThreads = 0;

/** Reader threads started and not yet exited in this process (leak checks). */
export function liveReaderThreads(): number {
  return liveThreads;
}

export type ReadResult =
  | { readonly ok: true; readonly offsets: Float64Array; readonly lengths: Float64Array }
  | { readonly ok: false; readonly need: number }
  | { readonly ok: 'error'; readonly k: number; readonly error: Error };

export class FileReaders {
  readonly #threads: Reader[];
  #id = 0;
  #closed = false;

  constructor(threads = defaultReaders()) {
    this.#threads = Array.from({ length: threads }, () => new Reader());
  }

  get threads(): number {
    return this.#threads.length;
  }

  /**
   * Read the files at `paths` into `memory` (a view over a SharedArrayBuffer): file k at
   * offsets[k], lengths[k] bytes (fewer than its size when it shrank while read).
   */
  async read(paths: readonly (string | Buffer)[], memory: Uint8Array): Promise<ReadResult> {
    if (this.#closed) throw new Error('internal: the decode route’s file readers are closed');
    if (!(memory.buffer instanceof SharedArrayBuffer)) throw new Error('internal: file memory must be a SharedArrayBuffer view');
    const n = paths.length;
    const control = new SharedArrayBuffer(16);
    const results = new SharedArrayBuffer(Math.max(1, 16 * n));
    const job: ReadJob = { id: this.#id++, control, results, memory: memory.buffer, base: memory.byteOffset, capacity: memory.byteLength, paths };
    // Small batches need fewer threads: about 8 files a thread at least.
    const using = this.#threads.slice(0, Math.max(1, Math.min(this.#threads.length, Math.ceil(n / 8))));
    const done = await Promise.allSettled(using.map((t) => t.run(job)));
    const failed = done.find((d) => d.status === 'rejected');
    // A thread died (not a file's fault): the batch fails with its error; the other threads are done with the memory.
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
    const errors = done.flatMap((d) => (d as PromiseFulfilledResult<ReadDone>).value.errors).sort((a, b) => a.k - b.k);
    if (errors.length > 0) {
      const e = errors[0]!;
      const error = Object.assign(new Error(e.message), e.code !== undefined ? { code: e.code } : {});
      return { ok: 'error', k: e.k, error };
    }
    const need = Number(new BigInt64Array(control, 8, 1)[0]!);
    if (need > memory.byteLength) return { ok: false, need };
    return { ok: true, offsets: new Float64Array(results, 0, n), lengths: new Float64Array(results, 8 * n, n) };
  }

  /** Ends the threads once their jobs are done (the caller awaits its reads first). Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const t of this.#threads) t.end();
  }
}

class Reader {
  readonly #worker: Worker;
  readonly #pending = new Map<number, { resolve(d: ReadDone): void; reject(e: unknown): void }>();
  #dead: Error | undefined;

  constructor() {
    this.#worker = new Worker(workerBoot(WORKER_URL), { eval: true, stdout: false, stderr: false });
    liveThreads++;
    // Kept alive only while a job is pending.
    this.#worker.unref();
    this.#worker.on('message', (d: ReadDone) => {
      const p = this.#pending.get(d.id);
      if (p === undefined) return;
      this.#settle(d.id);
      p.resolve(d);
    });
    this.#worker.on('error', (error) => this.#die(error instanceof Error ? error : new Error(String(error))));
    this.#worker.on('exit', (code) => {
      liveThreads--;
      this.#die(new Error(`a decode-route reader thread exited (code ${code})`));
    });
  }

  run(job: ReadJob): Promise<ReadDone> {
    if (this.#dead !== undefined) return Promise.reject(this.#dead);
    return new Promise<ReadDone>((resolve, reject) => {
      if (this.#pending.size === 0) this.#worker.ref();
      this.#pending.set(job.id, { resolve, reject });
      this.#worker.postMessage(job);
    });
  }

  end(): void {
    if (this.#pending.size > 0) {
      // Let the jobs in flight finish (they write into batch memory the caller still holds).
      const ids = [...this.#pending.keys()];
      const last = ids[ids.length - 1]!;
      const p = this.#pending.get(last)!;
      this.#pending.set(last, {
        resolve: (d) => {
          p.resolve(d);
          this.end();
        },
        reject: (e) => {
          p.reject(e);
          this.end();
        },
      });
      return;
    }
    this.#die(new Error('the decode route’s file readers are closed'));
    void this.#worker.terminate();
  }

  #settle(id: number): void {
    this.#pending.delete(id);
    if (this.#pending.size === 0) this.#worker.unref();
  }

  #die(error: Error): void {
    this.#dead ??= error;
    for (const [id, p] of [...this.#pending]) {
      this.#settle(id);
      p.reject(error);
    }
  }
}
