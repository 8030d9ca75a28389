// The streaming engine alone, with a scripted fetcher whose reads finish when the test says so:
// delivery in plan order whatever order reads finish in, the governor's window as a hard bound on
// batches in flight, a failed read failing only its batch, and ending a run aborting what is in flight.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CpuDevice } from '../device/cpu-device.js';
import type { StagedBatch } from '../dataset/source-reader.js';
import { toU64 } from '../sampler/rng.js';
import { Tensor } from '../tensor/tensor.js';
import { EpochPlan } from './epoch-plan.js';
import type { Fetcher } from '../reader/fetcher.js';
import { Governor } from './governor.js';
import { StreamingRun } from './streaming-run.js';
import { StagedAssembler } from './assemble/staged.js';

interface Read {
  readonly ids: number[];
  readonly signal: AbortSignal;
  resolve(): void;
  reject(error: unknown): void;
}

/** A fetcher that records each read and finishes it only when the test calls resolve/reject. */
class ScriptedFetcher implements Fetcher {
  readonly reads: Read[] = [];
  #waiters: (() => void)[] = [];

  fetch(sampleIds: Uint32Array, signal: AbortSignal): Promise<StagedBatch> {
    const ids = Array.from(sampleIds);
    return new Promise((resolve, reject) => {
      const rows = Int32Array.from(ids);
      this.reads.push({ ids, signal, resolve: () => resolve({ tensors: [new Tensor(rows, [ids.length], 'int32')], owned: true }), reject });
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      for (const w of this.#waiters.splice(0)) w();
    });
  }

  /** Resolves once `n` reads have started (event-driven: no polling, no sleep). */
  async started(n: number): Promise<void> {
    while (this.reads.length < n) await new Promise<void>((r) => this.#waiters.push(r));
  }

  async close(): Promise<void> {}
}

function run(batches: number, batchSize: number, prefetch: number, errors: 'throw' | 'skip' = 'throw') {
  const n = batches * batchSize;
  const plan = new EpochPlan(0, Uint32Array.from({ length: n }, (_, i) => i), 1, batchSize, true);
  const fetcher = new ScriptedFetcher();
  const governor = new Governor({ sampleBytes: 4, batchSize, probe: undefined, vramMaxUsage: 0.9 }, prefetch, undefined);
  const delivery = { names: ['y'], transform: undefined, augment: 1, seed: toU64(1) };
  const r = new StreamingRun(plan, 'streaming', delivery, errors, () => {}).bind(new StagedAssembler(fetcher, new CpuDevice()), governor);
  return { run: r, fetcher };
}

const ids = (b: { sampleIds: ArrayLike<number> }) => Array.from(b.sampleIds);

describe('StreamingRun, the streaming engine', () => {
  it('delivers in plan order whatever order the reads finish in', async () => {
    const { run: r, fetcher } = run(4, 2, 4);
    const first = r.next();
    await fetcher.started(4);
    for (const k of [3, 1, 2, 0]) fetcher.reads[k]!.resolve();
    const got: number[][] = [ids((await first).value!)];
    for (;;) {
      const step = await r.next();
      if (step.done === true) break;
      got.push(ids(step.value));
    }
    assert.deepEqual(got, [[0, 1], [2, 3], [4, 5], [6, 7]]);
    assert.equal(r.stats.complete, true);
  });

  it("never has more batches in flight than the governor's window", async () => {
    const { run: r, fetcher } = run(10, 1, 3);
    const first = r.next();
    await fetcher.started(3);
    // Let the event loop run read-ahead turns: a fourth read must not start while three are pending.
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(fetcher.reads.length, 3);
    assert.equal(r.inFlight, 3);
    fetcher.reads[0]!.resolve();
    assert.deepEqual(ids((await first).value!), [0]);
    // Taking batch 0 frees one place in the window: exactly one more read starts.
    await fetcher.started(4);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(fetcher.reads.length, 4);
    r.end();
  });

  it("a failed read fails only its batch: under errors 'skip' the others arrive, and the skip is recorded with its ids", async () => {
    const { run: r, fetcher } = run(3, 2, 3, 'skip');
    const first = r.next();
    await fetcher.started(3);
    fetcher.reads[0]!.resolve();
    fetcher.reads[1]!.reject(new Error('disk on fire'));
    fetcher.reads[2]!.resolve();
    const got = [ids((await first).value!)];
    for (;;) {
      const step = await r.next();
      if (step.done === true) break;
      got.push(ids(step.value));
    }
    assert.deepEqual(got, [[0, 1], [4, 5]]);
    assert.equal(r.stats.skippedBatches, 1);
    assert.deepEqual(r.stats.skipped.map((s) => ({ index: s.index, sampleIds: s.sampleIds })), [{ index: 1, sampleIds: [2, 3] }]);
    assert.match(r.stats.skipped[0]!.reason, /disk on fire/);
  });

  it('ending the run aborts every read in flight and settles a waiting next()', async () => {
    const { run: r, fetcher } = run(5, 1, 4);
    const waiting = r.next();
    await fetcher.started(4);
    r.end();
    assert.ok(fetcher.reads.every((read) => read.signal.aborted), 'every in-flight read saw the abort');
    assert.deepEqual(await waiting, { done: true, value: undefined });
    assert.deepEqual(await r.next(), { done: true, value: undefined });
    assert.equal(r.stats.complete, false);
  });
});
