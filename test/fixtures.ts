// Test doubles for the loader: datasets that count their reads, throw at a chosen sample, hang,
// or answer out of order. Each sample i carries its own id so delivered content can be checked.

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

/** Reject if `promise` takes longer than `ms`: a hang is a failure with a message. */
export async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms (hang)`)), ms);
  });
  try {
    return await Promise.race([promise, limit]);
  } finally {
    clearTimeout(timer);
  }
}

export const MODES = ['resident', 'streaming'] as const;

export function sorted(a: readonly number[]): number[] {
  return [...a].sort((p, q) => p - q);
}

export function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
