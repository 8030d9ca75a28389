// A fuzzer for file parsers. It mutates one valid file thousands of times (bit flips, bytes set to
// extreme values, truncations, insertions, deletions, copied spans) and hands each mutant to a
// target that opens it and reads every sample. Every outcome must be either success or a
// `LoaderError` with code ERR_BAD_FILE whose message names the file. Anything else — another error,
// a RangeError from a huge allocation, a hang, a crash of the thread — fails the run, with the case
// number and mutation so that it can be replayed.
//
// The cases run in a worker thread, so a parser that hangs is caught: the worker posts before each
// case, and when no case finishes within `stallMs` the main thread terminates it and reports the
// case it was in.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { HANG_MS } from '../fixtures.js';

export interface FuzzOptions {
  /** The valid file to mutate. */
  readonly valid: Uint8Array;
  /** File name extension for the mutants (".npy"), so format detection sees what users give it. */
  readonly ext: string;
  /** Module URL (import.meta.url of the test, or of a helper) exporting `target`. */
  readonly module: string;
  /** Export name of `(path: string) => unknown | Promise<unknown>`: open the file and read every sample. */
  readonly target: string;
  readonly cases: number;
  readonly seed: number;
  /** A case that takes longer than this is a hang (default 30 s: a case takes milliseconds, but a loaded machine can starve the thread for seconds). */
  readonly stallMs?: number;
  /** Extra allowed error codes besides ERR_BAD_FILE (e.g. ERR_SAMPLE_MISMATCH for a loader-level target). */
  readonly allowCodes?: readonly string[];
}

export interface FuzzFailure {
  readonly case: number;
  readonly mutation: string;
  readonly error: string;
}

export interface FuzzReport {
  readonly cases: number;
  /** Mutants that opened and read cleanly. */
  readonly ok: number;
  /** Mutants refused with a typed error, by code. */
  readonly refused: Record<string, number>;
  readonly failures: readonly FuzzFailure[];
  readonly ms: number;
}

export async function fuzz(options: FuzzOptions): Promise<FuzzReport> {
  const dir = mkdtempSync(join(tmpdir(), 'stoker-fuzz-'));
  const started = performance.now();
  const stallMs = options.stallMs ?? 30_000;
  // The worker boots tsx and imports the target first: seconds on a loaded machine, whatever stallMs.
  const startMs = Math.max(4 * stallMs, HANG_MS);
  let tsx: string | undefined;
  try {
    tsx = import.meta.resolve('tsx/esm/api');
  } catch {
    tsx = undefined;
  }
  const entry = JSON.stringify(new URL('./fuzz-worker.ts', import.meta.url).href);
  const boot = tsx === undefined ? `import(${entry})` : `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${entry}); })`;
  const worker = new Worker(boot, {
    eval: true,
    workerData: { ...options, dir, allowCodes: ['ERR_BAD_FILE', ...(options.allowCodes ?? [])] },
    // A parser that allocates from an unchecked header field must not take the machine down.
    resourceLimits: { maxOldGenerationSizeMb: 1024 },
  });
  try {
    return await new Promise<FuzzReport>((resolve, reject) => {
      let current = { case: -1, mutation: 'start-up' };
      let timer = setTimeout(onStall, startMs);
      function onStall() {
        void worker.terminate();
        reject(new Error(`fuzz: case ${current.case} (${current.mutation}) hung for more than ${current.case < 0 ? startMs : stallMs} ms`));
      }
      worker.on('message', (m: { t: 'case'; case: number; mutation: string } | { t: 'done'; report: Omit<FuzzReport, 'ms'> }) => {
        if (m.t === 'case') {
          current = m;
          clearTimeout(timer);
          timer = setTimeout(onStall, stallMs);
        } else {
          clearTimeout(timer);
          resolve({ ...m.report, ms: performance.now() - started });
        }
      });
      worker.on('error', (error) => {
        clearTimeout(timer);
        reject(new Error(`fuzz: the worker died in case ${current.case} (${current.mutation}): ${error.message}`, { cause: error }));
      });
      worker.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`fuzz: the worker exited (code ${code}) in case ${current.case} (${current.mutation})`));
      });
    });
  } finally {
    await worker.terminate();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Throw with the first failures listed, for `assert`-style use in tests. */
export function assertFuzzClean(report: FuzzReport): void {
  if (report.failures.length === 0) return;
  const lines = report.failures.slice(0, 10).map((f) => `  case ${f.case} (${f.mutation}): ${f.error}`);
  throw new Error(`fuzz: ${report.failures.length} of ${report.cases} mutants were not handled cleanly:\n${lines.join('\n')}`);
}
