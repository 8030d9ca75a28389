// Test doubles for the loader: datasets that count their reads, throw at a chosen sample, hang,
// or answer out of order. Each sample i carries its own id so delivered content can be checked.
// Also the suite's waiting rule: wait on events (waitFor) under the budgets below, never on time.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Batch, BatchDataset, Dataset, ReadContext } from '../src/index.js';
import { sources, tensor } from '../src/index.js';

/** n samples: x = [i, i+0.5, i+0.25, -i] (float32), y = i (int32). */
export function arraysDataset(n: number) {
  const x = new Float32Array(n * 4);
  const y = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    x.set([i, i + 0.5, i + 0.25, -i], i * 4);
    y[i] = i;
  }
  return sources.arrays({ x: tensor(x, [n, 4]), y });
}

export interface Scripted extends Dataset {
  gets: number;
  /** Sample ids whose read was started, in order. */
  started: number[];
  aborted: number;
}

/**
 * A per-sample dataset. `throwAt`: sample ids whose read throws. `async`: resolve after a delay
 * that scrambles completion order (reads finish out of order). `hangAt`: reads that never settle
 * unless aborted.
 */
export function scriptedDataset(n: number, opts: { throwAt?: number[]; async?: boolean; hangAt?: number[]; reject?: boolean } = {}): Scripted {
  const ds: Scripted = {
    length: n,
    gets: 0,
    started: [],
    aborted: 0,
    get(i: number, ctx: ReadContext) {
      ds.gets++;
      ds.started.push(i);
      const make = () => ({ x: new Float32Array([i, i + 0.5]), y: Int32Array.of(i) });
      if (opts.hangAt?.includes(i)) {
        return new Promise((_, reject) => {
          ctx.signal.addEventListener('abort', () => {
            ds.aborted++;
            reject(ctx.signal.reason);
          });
        });
      }
      if (opts.throwAt?.includes(i)) {
        if (opts.reject) return Promise.reject(new Error(`sample ${i} is unreadable`));
        throw new Error(`sample ${i} is unreadable`);
      }
      if (opts.async) return sleep((i * 7919) % 5).then(make);
      return make();
    },
  };
  return ds;
}

/** A per-batch dataset over the same content as `scriptedDataset`, counting its calls. */
export function batchDataset(n: number): BatchDataset & { calls: number } {
  const ds = {
    length: n,
    calls: 0,
    getBatch(indices: readonly number[]) {
      ds.calls++;
      const x = new Float32Array(indices.length * 2);
      indices.forEach((i, r) => x.set([i, i + 0.5], r * 2));
      return { x: tensor(x, [indices.length, 2]), y: Int32Array.from(indices) };
    },
  };
  return ds;
}

/** The `y` column of a batch (sample ids as the dataset wrote them). */
export function ys(batch: Batch): number[] {
  return Array.from(batch.get('y').data as Int32Array);
}

export async function collect(iterable: AsyncIterable<Batch>): Promise<Batch[]> {
  const out: Batch[] = [];
  for await (const b of iterable) out.push(b);
  return out;
}

export async function epochIds(iterable: AsyncIterable<Batch>): Promise<number[]> {
  const out: number[] = [];
  for await (const b of iterable) {
    out.push(...ys(b));
    b.release();
  }
  return out;
}

/**
 * Budgets for a loaded 2-core machine (CI, or several suites at once): hang detectors, never
 * performance checks. Each is ≥ 10× what its step takes under a CPU hog, so a failure means a hang.
 * NOTE [ Waiting in tests ]: never sleep a fixed time and then assert; wait for the event (waitFor)
 * under one of these bounds. Where a test asserts that something does NOT happen, anchor it to a
 * later positive event (the next epoch ending, close() resolving) rather than to elapsed time.
 */
/** One awaited step: an epoch, a close(), a worker or child process starting or ending. */
export const HANG_MS = 60_000;
/** A spawned `node --import tsx` process from start to exit (tsx compiles on start: seconds when loaded). */
export const CHILD_MS = 180_000;
/** One test of many steps (a fuzz run of thousands of cases, several epochs through workers). */
export const TEST_MS = 300_000;
/** A whole describe block: node:test cancels every test still to run once a suite's budget is spent. */
export const SUITE_MS = 900_000;

export interface WaitOptions {
  /** What is awaited, for the failure message ("the replacement worker"); a function is read at the deadline. */
  what: string | (() => string);
  /** Default HANG_MS. */
  timeoutMs?: number;
  /** How often a predicate is polled. Default 10 ms. */
  intervalMs?: number;
}

/**
 * Wait for `condition` — a promise, or a predicate polled until it returns a truthy value (returned)
 * — failing with a message naming `what` if it has not happened within `timeoutMs`. A predicate that
 * throws fails the wait at once.
 */
export async function waitFor<T>(condition: Promise<T> | (() => T | Promise<T>), options: WaitOptions): Promise<T> {
  const { what, timeoutMs = HANG_MS, intervalMs = 10 } = options;
  let timer: NodeJS.Timeout | undefined;
  let expired = false;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      expired = true;
      reject(new Error(`${typeof what === 'function' ? what() : what} did not happen within ${timeoutMs} ms (a hang, or a budget too small for this machine)`));
    }, timeoutMs);
  });
  const poll = async (predicate: () => T | Promise<T>): Promise<T> => {
    for (;;) {
      const value = await predicate();
      if (value || expired) return value;
      await sleep(intervalMs);
    }
  };
  try {
    return await Promise.race([typeof condition === 'function' ? poll(condition) : condition, limit]);
  } finally {
    clearTimeout(timer);
  }
}

/** Reject if `promise` takes longer than `ms`: a hang is a failure with a message. Size `ms` from HANG_MS. */
export function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  return waitFor(promise, { what, timeoutMs: ms });
}

/**
 * A fresh directory under the temp dir that only this test uses (mkdtemp), removed when the test
 * ends, pass or fail. Scan this, never tmpdir() itself: other processes' files come and go there.
 */
export function tempDir(t: TestContext, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `stoker-${prefix}-`));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export const MODES = ['resident', 'streaming'] as const;

export function sorted(a: readonly number[]): number[] {
  return [...a].sort((p, q) => p - q);
}

export function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
