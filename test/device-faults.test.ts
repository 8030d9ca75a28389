// Device faults that must neither corrupt, leak nor escape: a transient out-of-memory injected at
// every allocation of a short run (resident and streaming, with and without the VRAM pool, reads on
// the main thread and in workers), a persistent one at a resident epoch's start, and loaders closed
// in a tight loop. Faults are injected through `sim: { failAllocation }` on the simulated device and
// through the backend's test hook (allocation-faults.ts) on a real GPU, so the sweep runs on sim in CI
// and on cuda where there is one; the lifecycle checks run on every device here (image folders
// decoding in child processes: cpu, sim).

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import { type AnyTensor, type Batch, BatchError, DataLoader, DeviceTensor, type LoaderOptions, Tensor, sources, tensor } from '../src/index.js';
import { cudaAvailable } from '../src/device/cuda/driver.js';
import { injectCudaAllocationFaults } from '../src/device/cuda/allocation-faults.js';
import sharp from 'sharp';
import { HANG_MS, SUITE_MS, range, within } from './fixtures.js';
import { decodeChildren } from './formats/processes.js';

const SCRIPTED = new URL('./fixtures/scripted-source.ts', import.meta.url);

/** n samples, as the scripted source writes them: x = [i, i + 0.5] (float32), y = i (int32). */
function arrays(n: number) {
  const x = new Float32Array(2 * n);
  for (let i = 0; i < n; i++) x.set([i, i + 0.5], 2 * i);
  return sources.arrays({ x: tensor(x, [n, 2]), y: Int32Array.from(range(n)) });
}

async function host(t: AnyTensor): Promise<Tensor> {
  return t instanceof DeviceTensor ? t.toHost() : t;
}

/** Rows of `b` that do not hold their own sample's content (a zero row, a neighbour's row). */
async function wrongRows(b: Batch<AnyTensor>): Promise<number[]> {
  const x = (await host(b.get('x'))).data as Float32Array;
  const y = (await host(b.get('y'))).data as Int32Array;
  const bad: number[] = [];
  b.sampleIds.forEach((id, r) => {
    if (x[2 * r] !== id || x[2 * r + 1] !== id + 0.5 || y[r] !== id) bad.push(id);
  });
  return bad;
}

interface Sweep {
  readonly name: string;
  readonly workers: number;
  readonly opts: Omit<LoaderOptions<DeviceTensor>, 'device' | 'batchSize'>;
}

const N = 12;
const EPOCHS = 4;

// Four epochs of three batches: the first streams without the pool, which installs after the
// consumer's second batch and captures in the next epoch; the complete pool then turns the loader
// resident (promotion, then resident epochs). So each pooled sweep covers the unpooled path too.
const SWEEPS: readonly Sweep[] = [
  { name: 'resident', workers: 0, opts: { mode: 'resident' } },
  { name: 'streaming, no pool', workers: 0, opts: { mode: 'streaming', vramPool: false, pinSource: false } },
  { name: 'streaming, pool, staged rows', workers: 0, opts: { mode: 'streaming', pinSource: false } },
  { name: 'streaming, pool, rows read in place', workers: 0, opts: { mode: 'streaming', pinSource: 'auto' } },
  { name: 'streaming, pool, reader workers', workers: 1, opts: { mode: 'streaming' } },
];

type FaultDevice = 'sim' | 'cuda';
const FAULT_DEVICES: readonly FaultDevice[] = ['sim', ...(cudaAvailable() ? (['cuda'] as const) : [])];

/** One run on `device` with allocation `failAt` failing once; returns what it saw. */
async function run(device: FaultDevice, sweep: Sweep, failAt: number, count?: (ordinal: number) => void) {
  const ds = sweep.workers > 0 ? sources.module(SCRIPTED, 'openScripted', { n: N }) : arrays(N);
  const failAllocation = (ordinal: number) => { count?.(ordinal); return ordinal === failAt; };
  const base = { ...sweep.opts, batchSize: 4, workers: sweep.workers };
  let loader: DataLoader<DeviceTensor>;
  if (device === 'sim') {
    loader = await DataLoader.create(ds, { ...base, device: 'sim', sim: { failAllocation } });
  } else {
    // The backend takes the hook when it opens (inside create); runs on cuda are sequential.
    injectCudaAllocationFaults(failAllocation);
    try {
      loader = await DataLoader.create(ds, { ...base, device: 'cuda' });
    } finally {
      injectCudaAllocationFaults(undefined);
    }
  }
  const bad: number[] = [];
  let error: unknown;
  try {
    for (let e = 0; e < EPOCHS; e++) for await (const b of loader.epoch(e)) bad.push(...(await wrongRows(b)));
  } catch (e) {
    error = e;
  }
  const epochs = loader.stats().epochs;
  await loader.close();
  return { bad, error, epochs, memory: loader.stats().memory };
}

describe('a transient device out-of-memory at any allocation', { timeout: SUITE_MS }, () => {
  for (const device of FAULT_DEVICES) for (const sweep of SWEEPS) {
    it(`on ${device}, ${sweep.name}: every row delivered is right, no batch fails, and no device memory is left after close`, async () => {
      let allocations = 0;
      const clean = await run(device, sweep, -1, (o) => (allocations = Math.max(allocations, o + 1)));
      assert.deepEqual(clean.bad, []);
      assert.ok(allocations > 0, `the fault hook sees the run allocate (${allocations})`); // 2 on cuda (buffers are reused), more on sim
      // Retries wait 100 ms each: runs overlap so the sweep costs little more than its slowest runs.
      const parallel = device === 'cuda' ? 1 : sweep.workers > 0 ? 4 : 8;
      // A few indices past the clean run's count: an injected fault may shift the later ones.
      const indices = range(allocations + 4);
      for (let i = 0; i < indices.length; i += parallel) {
        await within(HANG_MS, `${sweep.name}: runs ${i}…`, Promise.all(indices.slice(i, i + parallel).map(async (k) => {
          const r = await run(device, sweep, k);
          const at = `${device}, ${sweep.name}, allocation ${k} fails`;
          assert.equal(r.error, undefined, `${at}: ${r.error}`);
          assert.deepEqual(r.bad, [], `${at}: rows with the wrong content`);
          assert.equal(r.epochs.length, EPOCHS);
          for (const s of r.epochs) {
            assert.equal(s.complete, true, `${at}: epoch ${s.epoch} complete`);
            assert.equal(s.failedBatches, 0, `${at}: epoch ${s.epoch} failed batches`);
            assert.equal(s.rowsDelivered, N, `${at}: epoch ${s.epoch} rows`);
          }
          assert.ok(r.epochs.reduce((a, s) => a + s.oomRetries, 0) <= 1, `${at}: one fault, at most one retry`);
          assert.deepEqual(r.memory, { device: 0, pinned: 0 }, `${at}: memory held after close`);
        })));
      }
    });
  }
});

/** A resident loader over 8 samples on `device` whose allocations fail while `fail()` says so. */
async function residentWithFaults(device: FaultDevice, errors: 'throw' | 'skip', fail: () => boolean): Promise<DataLoader<DeviceTensor>> {
  const opts = { batchSize: 4, mode: 'resident', shuffle: false, errors } as const;
  if (device === 'sim') return DataLoader.create(arrays(8), { ...opts, device: 'sim', sim: { failAllocation: fail } });
  injectCudaAllocationFaults(fail);
  try {
    return await DataLoader.create(arrays(8), { ...opts, device: 'cuda' });
  } finally {
    injectCudaAllocationFaults(undefined);
  }
}

describe('a persistent device out-of-memory at a resident epoch\'s start', { timeout: SUITE_MS }, () => {
  for (const device of FAULT_DEVICES) for (const errors of ['throw', 'skip'] as const) {
    it(`on ${device}, is retried 10 times, then fails its batch under errors: '${errors}', and the loader recovers`, async () => {
      // The first attempt and its 10 retries fail; the next batch's allocations succeed.
      let failures = 0;
      const loader = await residentWithFaults(device, errors, () => failures-- > 0);
      assert.equal(loader.isResident, true);
      failures = 11;
      const seen: number[] = [];
      const outcome = await within(HANG_MS, 'the failing epoch', (async () => {
        try {
          for await (const b of loader.epoch(0)) seen.push(...b.sampleIds);
        } catch (e) {
          return e;
        }
        return undefined;
      })());
      const s = loader.stats().epochs[0]!;
      assert.equal(s.oomRetries, 10);
      assert.equal(s.failedBatches, 1);
      if (errors === 'throw') {
        assert.ok(outcome instanceof BatchError, `expected a BatchError, got ${outcome}`);
        assert.equal(outcome.batchIndex, 0);
        assert.deepEqual(outcome.sampleIds, [0, 1, 2, 3]);
        assert.match(outcome.message, /batch 0 of epoch 0 failed on the device \(samples \[0, 1, 2, 3\]\): .*out of (device )?memory/);
        assert.equal((outcome.cause as { driverName?: string }).driverName, 'CUDA_ERROR_OUT_OF_MEMORY');
        assert.deepEqual(seen, []);
      } else {
        assert.equal(outcome, undefined);
        assert.deepEqual(seen, [4, 5, 6, 7]);
        assert.equal(s.skippedBatches, 1);
        assert.deepEqual(s.skipped.map((k) => ({ index: k.index, sampleIds: k.sampleIds, stage: k.stage })), [{ index: 0, sampleIds: [0, 1, 2, 3], stage: 'device' }]);
        assert.match(s.skipped[0]!.reason, /out of (device )?memory/);
        assert.equal(s.complete, true);
      }
      const next: number[] = [];
      for await (const b of loader.epoch(1)) next.push(...b.sampleIds);
      assert.deepEqual(next, range(8));
      await loader.close();
      assert.deepEqual(loader.stats().memory, { device: 0, pinned: 0 });
    });
  }
});

/** Threads of this process (Linux), else undefined. */
function threads(): number | undefined {
  try {
    return Number(/Threads:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]);
  } catch {
    return undefined;
  }
}

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

const DEVICES = ['cpu', 'sim', ...(cudaAvailable() ? ['cuda'] : [])];

describe('loaders closed in a tight loop', { timeout: SUITE_MS }, () => {
  for (const device of DEVICES) {
    for (const workers of [0, 1]) {
      it(`on ${device} with ${workers} reader workers, a closed loader gives back everything it took, at once, even while it is still referenced`, async () => {
        const listeners = () => ['exit', 'SIGINT', 'SIGTERM'].map((e) => process.listenerCount(e));
        const cycle = async () => {
          const ds = workers > 0 ? sources.module(SCRIPTED, 'openScripted', { n: 64 }) : arrays(64);
          const loader = await DataLoader.create(ds, { batchSize: 8, device, workers, mode: 'streaming', pinSource: false });
          for (let e = 0; e < 2; e++) for await (const b of loader.epoch(e)) assert.deepEqual(await wrongRows(b), []);
          await loader.close();
          assert.deepEqual(loader.stats().memory, { device: 0, pinned: 0 });
          assert.equal(loader.stats().workers, 0);
          return loader;
        };
        // A warm-up cycle starts what a process starts once (libuv's thread pool, module loading).
        await cycle();
        gc();
        const before = { buffers: process.memoryUsage().arrayBuffers, listeners: listeners(), threads: threads() };
        const closed: DataLoader<AnyTensor>[] = [];
        const cycles = workers > 0 ? 3 : 12;
        // No turn of the event loop between cycles: a closed loader must not need one to let go.
        for (let c = 0; c < cycles; c++) closed.push(await cycle());
        gc();
        const grown = process.memoryUsage().arrayBuffers - before.buffers;
        // A pooled sim loader holds a 64 MiB slab; kept alive, 12 of them would hold 768 MiB. V8 frees
        // array buffers' memory in concurrent sweeper threads, which a loaded machine can leave behind
        // the measurement (107 MiB was seen once under a CPU hog; 0.1 MiB on a quiet one): the bound is
        // half of what the leak held, so any leak of more than half the slabs still fails.
        const slabs = device === 'sim' && workers === 0 ? closed.length : 0;
        const bound = Math.max(96 * 2 ** 20, (slabs * 64 * 2 ** 20) / 2);
        assert.ok(grown < bound, `${closed.length} closed loaders hold ${(grown / 2 ** 20).toFixed(1)} MiB`);
        assert.deepEqual(listeners(), before.listeners, 'process listeners (exit, SIGINT, SIGTERM) left by closed loaders');
        const now = threads();
        if (now !== undefined && before.threads !== undefined) assert.ok(now <= before.threads, `threads ${before.threads} → ${now}`);
      });
    }
  }
});

describe('image-folder loaders decoding in processes, closed in a tight loop', { timeout: SUITE_MS }, () => {
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'stoker-faults-'));
    for (const cls of ['a', 'b']) {
      mkdirSync(join(dir, cls));
      for (let k = 0; k < 4; k++) {
        const png = await sharp({ create: { width: 6 + k, height: 6, channels: 3, background: { r: 40 * k, g: cls === 'a' ? 0 : 200, b: 9 } } }).png().toBuffer();
        writeFileSync(join(dir, cls, `${k}.png`), png);
      }
    }
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const [device, workers] of [['cpu', 0], ['sim', 1]] as const) {
    it(`on ${device} with ${workers} reader workers, each closed loader leaves no listener, thread or child process behind`, async () => {
      const listeners = () => ['exit', 'SIGINT', 'SIGTERM'].map((e) => process.listenerCount(e));
      const cycle = async () => {
        const ds = sources.imageFolder(dir, { size: 6, decode: 'processes', decodeProcesses: 1 });
        const loader = await DataLoader.create(ds, { batchSize: 4, device, workers, mode: 'streaming', dropLast: false });
        const seen: number[] = [];
        for await (const b of loader.epoch(0)) seen.push(...b.sampleIds);
        assert.deepEqual([...seen].sort((p, q) => p - q), range(8));
        await loader.close();
        await ds.close();
        assert.deepEqual(loader.stats().memory, { device: 0, pinned: 0 });
      };
      await cycle();
      const before = { listeners: listeners(), threads: threads() };
      for (let c = 0; c < (workers > 0 ? 2 : 4); c++) await cycle();
      assert.deepEqual(listeners(), before.listeners, 'process listeners (exit, SIGINT, SIGTERM) left by closed loaders');
      assert.deepEqual(decodeChildren(), [], 'decode processes alive after close');
      const now = threads();
      if (now !== undefined && before.threads !== undefined) assert.ok(now <= before.threads, `threads ${before.threads} → ${now}`);
    });
  }
});

describe('close() called twice', { timeout: SUITE_MS }, () => {
  for (const device of DEVICES) {
    it(`on ${device}, every close() resolves only once the loader is closed (the same promise)`, async () => {
      const loader = await DataLoader.create(sources.module(SCRIPTED, 'openScripted', { n: 16 }), { batchSize: 4, device, workers: 2, mode: 'streaming' });
      for await (const _ of loader.epoch(0));
      assert.equal(loader.stats().workers, 2);
      const first = loader.close();
      const second = loader.close();
      assert.equal(second, first);
      await within(HANG_MS, 'the second close()', second);
      assert.equal(loader.stats().workers, 0, 'the workers were stopped when the second close() resolved');
      await first;
    });
  }
});
