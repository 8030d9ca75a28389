// Reader workers: exactly-once and ordered delivery through the pool, faults that fail only the
// batches they touch, cancellation, close() that never hangs and leaves nothing alive, and the
// sample tiers (RAM cache, disk stage) counted by the source's own read counter.

import assert from 'node:assert/strict';
import { readdirSync, readlinkSync, writeFileSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { type AnyTensor, type Batch, BatchError, DataLoader, DeviceTensor, type LoaderOptions, sources } from '../src/index.js';
import type { ScriptedOptions } from './fixtures/scripted-source.js';
import { CHILD_MS, HANG_MS, SUITE_MS, collect, epochIds, range, sorted, tempDir, waitFor, within, ys } from './fixtures.js';

const FIXTURE = new URL('./fixtures/scripted-source.ts', import.meta.url);

function counter(n: number): Int32Array {
  return new Int32Array(new SharedArrayBuffer(4 * (n + 1)));
}

function scripted(options: ScriptedOptions) {
  return sources.module(FIXTURE, 'openScripted', options);
}

function make(options: ScriptedOptions, loader: Omit<LoaderOptions, 'mode' | 'device'>) {
  return DataLoader.create(scripted(options), { mode: 'streaming', ...loader });
}

/**
 * The sample ids of every batch of an accelerator's epoch, and the `y` column of its last batch
 * read back to the host. Nothing else calls into the device mid-epoch (a read-back would retire
 * finished copies and hide a slot that never came back on its own).
 */
async function deviceIds(epoch: AsyncIterable<Batch<AnyTensor>>): Promise<{ ids: number[]; last: number[]; lastY: number[] }> {
  const ids: number[] = [];
  let last: Batch<AnyTensor> | undefined;
  for await (const b of epoch) {
    ids.push(...b.sampleIds);
    last?.release();
    last = b.retain();
  }
  const y = last!.get('y');
  const lastY = Array.from((y instanceof DeviceTensor ? await y.toHost() : y).data as Int32Array);
  const lastIds = [...last!.sampleIds];
  last!.release();
  return { ids, last: lastIds, lastY };
}

function threads(): number {
  return readdirSync('/proc/self/task').length;
}

describe('reader workers', { timeout: SUITE_MS }, () => {
  for (const workers of [1, 2, 3]) {
    it(`deliver every sample exactly once per epoch, in plan order (${workers} worker${workers > 1 ? 's' : ''})`, async () => {
      const pooled = await make({ n: 103, latencyMs: workers === 2 ? 1 : 0 }, { batchSize: 8, workers, dropLast: false, seed: 3 });
      const plain = await DataLoader.create({ length: 103, get: (i: number) => ({ x: new Float32Array([i, i + 0.5]), y: Int32Array.of(i) }) }, { batchSize: 8, dropLast: false, seed: 3, mode: 'streaming' });
      for (let e = 0; e < 2; e++) {
        const batches = await within(HANG_MS, 'epoch', collect(pooled.epoch(e)));
        assert.deepEqual(batches.map((b) => b.index), range(batches.length));
        const ids = batches.flatMap(ys);
        assert.deepEqual(sorted(ids), range(103));
        assert.deepEqual(ids, await epochIds(plain.epoch(e)), 'same order as the main-thread reader');
        for (const b of batches) {
          const x = b.get('x').data as Float32Array;
          b.sampleIds.forEach((id, r) => assert.deepEqual([x[2 * r], x[2 * r + 1]], [id, id + 0.5]));
        }
      }
      assert.equal(pooled.stats().workers, workers);
      await pooled.close();
    });
  }

  // NOTE [Follow-ups run without a next call] (stream-memory.ts): on an accelerator a staging slot
  // comes back once its copy is done. When it came back only at the next upload, an epoch whose first
  // fetch found the ring full of finished copies waited for a slot forever (about half of these
  // loaders hung in some epoch after the first). Waits for each epoch's batches, at most HANG_MS.
  it('deliver every epoch on an accelerator: many short epochs with the staging ring at its bound (sim)', async () => {
    for (let seed = 0; seed < 12; seed++) {
      const loader = await DataLoader.create(scripted({ n: 16 }), { mode: 'streaming', device: 'sim', batchSize: 2, workers: 1, seed });
      for (let e = 0; e < 4; e++) {
        const { ids, last, lastY } = await within(HANG_MS, `seed ${seed}, epoch ${e}`, deviceIds(loader.epoch(e)));
        assert.deepEqual(sorted(ids), range(16), `seed ${seed}, epoch ${e}: every sample once`);
        assert.deepEqual(lastY, last, 'the last batch holds its own samples');
      }
      await loader.close();
    }
  });

  it('default to cores − 1 for a worker-openable source, and to the main thread for in-memory arrays', async () => {
    const spec = await make({ n: 10 }, { batchSize: 5 });
    assert.ok(spec.stats().workers >= 1);
    await spec.close();
    const arrays = await DataLoader.create(sources.arrays({ y: new Int32Array(10) }), { batchSize: 5, mode: 'streaming' });
    assert.equal(arrays.stats().workers, 0);
    const pooledArrays = await DataLoader.create(sources.arrays({ y: Int32Array.from(range(10)) }), { batchSize: 5, mode: 'streaming', workers: 2, shuffle: false });
    assert.deepEqual(await epochIds(pooledArrays.epoch(0)), range(10));
    await pooledArrays.close();
  });

  it('refuse workers for a plain dataset object, naming the fix', async () => {
    await assert.rejects(DataLoader.create({ length: 4, get: (i: number) => [Int32Array.of(i)] }, { batchSize: 2, mode: 'streaming', workers: 2 }), {
      code: 'ERR_INVALID_OPTION', message: /`workers` must be 0 for a plain dataset object.*sources.module/,
    });
  });

  it('a throwing dataset fails its batch only; workers survive and the next epoch is whole', async () => {
    const once = new Int32Array(new SharedArrayBuffer(4));
    const loader = await make({ n: 40, throwAt: [17], once }, { batchSize: 4, workers: 2, shuffle: false });
    const error = await collect(loader.epoch(0)).catch((e: unknown) => e);
    assert.ok(error instanceof BatchError);
    assert.equal(error.batchIndex, 4);
    assert.deepEqual(error.sampleIds, [16, 17, 18, 19]);
    assert.match(error.message, /sample 17 is unreadable/);
    assert.deepEqual(await within(HANG_MS, 'next epoch', epochIds(loader.epoch(1))), range(40));
    assert.equal(loader.stats().workers, 2);
    await loader.close();
  });

  for (const [fault, key] of [['exits (process.exit)', 'exitAt'], ['throws an uncaught error', 'crashAt']] as const) {
    it(`a worker that ${fault} fails only the batches it held and is replaced`, async () => {
      const once = new Int32Array(new SharedArrayBuffer(4));
      const loader = await make({ n: 48, [key]: [21], once, latencyMs: 0 }, { batchSize: 4, workers: 2, shuffle: false, errors: 'skip', sampleCache: false });
      const ids = await within(HANG_MS, 'faulty epoch', epochIds(loader.epoch(0)));
      const s = loader.stats().epochs[0]!;
      assert.ok(s.failedBatches >= 1 && s.failedBatches <= 2, `failed ${s.failedBatches}`);
      // Every delivered sample once; the missing ones are exactly the failed batches' rows, and 21 is among them.
      assert.equal(new Set(ids).size, ids.length);
      assert.ok(!ids.includes(21));
      assert.equal(ids.length, 48 - 4 * s.failedBatches);
      for (let b = 0; b < 12; b++) {
        const rows = range(4).map((r) => 4 * b + r);
        const got = rows.filter((r) => ids.includes(r)).length;
        assert.ok(got === 0 || got === 4, `batch ${b} delivered whole or not at all`);
      }
      assert.deepEqual(await within(HANG_MS, 'next epoch', epochIds(loader.epoch(1))), range(48));
      await waitFor(() => loader.stats().workers === 2, { what: 'the replacement worker' });
      await loader.close();
    });
  }

  it('a worker that fails while starting stops the respawning with an error that says why', async () => {
    // Warm up once: the first start also brings up the process's shared thread pools.
    await make({ n: 10, failOpenInWorker: true }, { batchSize: 2, workers: 2 }).catch(() => {});
    const before = threads();
    await assert.rejects(within(HANG_MS, 'create', make({ n: 10, failOpenInWorker: true }, { batchSize: 2, workers: 2 })), (e: Error & { code?: string }) => {
      assert.equal(e.code, 'ERR_WORKER_START');
      assert.match(e.message, /a reader worker failed to start: .*cannot open the scripted source in a worker.*Respawning stopped/);
      return true;
    });
    // A terminated worker's thread leaves the task list a moment after terminate() settles.
    await waitFor(() => threads() <= before, { what: () => `the failed workers' threads ending (${threads()} > ${before})` });
  });

  it('abandoning an epoch cancels queued reads and frees their slots', async () => {
    const reads = counter(200);
    const loader = await make({ n: 200, reads, latencyMs: 2 }, { batchSize: 10, workers: 2, shuffle: false, prefetch: 4, sampleCache: false });
    for await (const _ of loader.epoch(0)) break;
    const after = Atomics.load(reads, 0);
    assert.ok(after < 1 + 200, `reads stopped early (${after})`);
    const s = loader.stats();
    assert.deepEqual(sorted(await within(HANG_MS, 'epoch 1', epochIds(loader.epoch(1)))), range(200));
    // "No read starts after the loop ended", anchored to epoch 1 ending rather than to a sleep: had
    // epoch 0 kept reading, samples past its window (prefetch 4: 5 batches, 50 samples) would have
    // been read twice by now. Epoch 1 (shuffle: false) reads each sample exactly once.
    const twice = range(200).filter((i) => Atomics.load(reads, 1 + i) > 1);
    assert.ok(twice.every((i) => i < 100), `samples read again after the loop ended: ${twice.filter((i) => i >= 100)}`);
    assert.equal(Atomics.load(reads, 1 + 199), 1);
    // A cancelled read's slot comes back once its worker lets go of it, which on a loaded machine can
    // be after the next epoch has started: so the ring may briefly hold two windows (5 + 5 slots), never
    // more. Slots that were never freed would grow the ring by a window at every abandoned epoch.
    const window = 5;
    assert.ok(loader.stats().epochs[1]!.ringSlots <= 2 * window, `slots were reused (${s.epochs[0]!.ringSlots} → ${loader.stats().epochs[1]!.ringSlots})`);
    for (let e = 2; e < 8; e++) for await (const _ of loader.epoch(e)) break;
    assert.deepEqual(sorted(await within(HANG_MS, 'epoch 8', epochIds(loader.epoch(8)))), range(200));
    const slots = loader.stats().epochs.map((x) => x.ringSlots);
    assert.ok(slots.every((n) => n <= 2 * window), `the ring grew across abandoned epochs: ${slots}`);
    await loader.close();
  });

  it('bound the staging ring by the RAM share: no share leaves one slot, whatever the prefetch', async () => {
    const loader = await make({ n: 64, latencyMs: 1 }, { batchSize: 4, workers: 2, prefetch: 6, ramMaxUsage: 0, shuffle: false });
    assert.deepEqual(await epochIds(loader.epoch(0)), range(64));
    assert.equal(loader.stats().epochs[0]!.ringSlots, 1);
    await loader.close();
    const roomy = await make({ n: 64, latencyMs: 1 }, { batchSize: 4, workers: 2, prefetch: 6, shuffle: false });
    assert.deepEqual(await epochIds(roomy.epoch(0)), range(64));
    const slots = roomy.stats().epochs[0]!.ringSlots;
    assert.ok(slots > 1 && slots <= 7, `ring slots ${slots}`);
    await roomy.close();
  });

  it("use the source's readerWorkers when workers is not set, and the option when it is", async () => {
    const asked = await make({ n: 20, readerWorkers: 2 }, { batchSize: 5 });
    assert.equal(asked.stats().workers, 2);
    await asked.close();
    const chosen = await make({ n: 20, readerWorkers: 2 }, { batchSize: 5, workers: 1 });
    assert.equal(chosen.stats().workers, 1);
    await chosen.close();
  });

  it('close() closes the dataset copy each worker opened, and the one the loader opened from a spec', async () => {
    const closes = new Int32Array(new SharedArrayBuffer(8));
    const loader = await make({ n: 40, closes }, { batchSize: 8, workers: 2 });
    for await (const _ of loader.epoch(0));
    assert.deepEqual([...closes], [0, 0]);
    await loader.close();
    await waitFor(() => Atomics.load(closes, 0) >= 2, { what: 'both worker copies closing' });
    assert.deepEqual([...closes], [2, 1], 'two worker copies and the main-thread copy (the probe) closed once each');
  });

  it('close() never hangs on a worker stuck in synchronous code, and leaves no thread, timer or handle', async () => {
    const baseline = threads();
    const resources = process.getActiveResourcesInfo().length;
    // The wait below polls on timers of its own: it counts the other handles; timers are checked after it.
    const handles = () => process.getActiveResourcesInfo().filter((r) => r !== 'Timeout');
    const baseHandles = handles().length;
    const reads = counter(20);
    const loader = await make({ n: 20, reads, spinAt: [5] }, { batchSize: 5, workers: 2, shuffle: false });
    assert.ok(threads() >= baseline + 2);
    const it0 = loader.epoch(0)[Symbol.asyncIterator]();
    await it0.next();
    const pending = it0.next();
    await waitFor(() => Atomics.load(reads, 1 + 5) > 0, { what: 'a worker reaching the spinning sample 5' });
    await within(HANG_MS, 'close()', loader.close());
    assert.deepEqual(await within(HANG_MS, 'pending next()', pending), { done: true, value: undefined });
    // Terminated threads and their ports go a moment after close() settles (more so when loaded).
    await waitFor(() => threads() <= baseline && handles().length <= baseHandles, { what: () => `the worker threads ending (${threads()} > ${baseline}) and their handles closing (${handles()})` });
    assert.ok(process.getActiveResourcesInfo().length <= resources, `handles left: ${process.getActiveResourcesInfo()}`);
  });

  it('an idle pool does not hold the process open', () => {
    const child = spawnNode(`
      import { DataLoader, sources } from ${JSON.stringify(new URL('../src/index.ts', import.meta.url).href)};
      const loader = await DataLoader.create(sources.module(${JSON.stringify(FIXTURE.href)}, 'openScripted', { n: 8 }), { batchSize: 4, workers: 2, mode: 'streaming' });
      for await (const b of loader.epoch(0)) b.release();
      console.log('done');
    `);
    assert.equal(child.status, 0, child.stderr);
    assert.match(child.stdout, /done/);
  });
});

describe('lent staging slots on the CPU (NOTE [lent slots])', { timeout: SUITE_MS }, () => {
  /** Every row of a batch is its sample: x = [i, i + 0.5], y = i. */
  const rowsAreTheirSamples = (b: Batch) => {
    const y = ys(b);
    const x = Array.from(b.get('x').data as Float32Array);
    assert.deepEqual(x, y.flatMap((i) => [i, i + 0.5]), `batch ${b.index} changed under the user's feet`);
  };

  it('a released batch hands its staging slot back: batches are the slots themselves, no copy', async () => {
    const loader = await make({ n: 96 }, { batchSize: 8, workers: 2, seed: 1 });
    try {
      let shared = 0;
      for await (const b of loader.epoch(0)) {
        rowsAreTheirSamples(b);
        if ((b.get('x').data as Float32Array).buffer instanceof SharedArrayBuffer) shared++;
        b.release();
      }
      assert.equal(shared, 12, 'every batch adopted its slot');
    } finally {
      await loader.close();
    }
  });

  it('holding every batch of an epoch never stalls the loader, and no held batch changes (copies once the lent slots run out)', async () => {
    const loader = await make({ n: 200, latencyMs: 1 }, { batchSize: 8, workers: 2, seed: 2, prefetch: 2 });
    try {
      for (let e = 0; e < 2; e++) {
        const held = await within(HANG_MS, `epoch ${e} with every batch held`, collect(loader.epoch(e)));
        assert.equal(held.length, 25);
        for (const b of held) rowsAreTheirSamples(b);
        const lent = held.filter((b) => (b.get('x').data as Float32Array).buffer instanceof SharedArrayBuffer).length;
        assert.ok(lent <= 3, `at most LENT_SLOTS batches hold a slot, got ${lent}`);
        for (const b of held) b.release();
      }
    } finally {
      await loader.close();
    }
  });

  it('batches dropped without release() keep their slots lent; the loader copies from then on and still finishes', async () => {
    const loader = await make({ n: 120 }, { batchSize: 8, workers: 1, seed: 4, prefetch: 2 });
    try {
      const dropAll = async (e: number) => {
        let n = 0;
        for await (const b of loader.epoch(e)) {
          rowsAreTheirSamples(b);
          n++;
        }
        return n;
      };
      for (let e = 0; e < 3; e++) assert.equal(await within(HANG_MS, `epoch ${e} with every batch dropped unreleased`, dropAll(e)), 15);
    } finally {
      await within(HANG_MS, 'close', loader.close());
    }
  });
});

describe('the RAM sample cache', { timeout: SUITE_MS }, () => {
  for (const workers of [0, 2]) {
    it(`serves later epochs without source reads (${workers} workers)`, async () => {
      const reads = counter(30);
      const loader = await make({ n: 30, reads }, { batchSize: 5, workers });
      const first = await epochIds(loader.epoch(0));
      const afterFirst = Atomics.load(reads, 0);
      assert.ok(afterFirst >= 1 + 30 && afterFirst <= 1 + 30 + Math.max(workers, 1), `first epoch reads ${afterFirst}`);
      for (let i = 0; i < 30; i++) assert.ok(Atomics.load(reads, 1 + i) >= 1);
      const second = await epochIds(loader.epoch(1));
      const third = await epochIds(loader.epoch(2));
      assert.equal(Atomics.load(reads, 0), afterFirst, 'epochs 1 and 2 read nothing from the source');
      assert.deepEqual(sorted(second), range(30));
      assert.deepEqual(sorted(third), range(30));
      assert.notDeepEqual(first, second);
      const s = loader.stats().epochs;
      assert.equal(s[0]!.rowsFromSource, 30);
      assert.equal(s[1]!.rowsFromCache, 30);
      assert.equal(s[1]!.rowsFromSource, 0);
      assert.equal(s[1]!.bytesFromCache, 30 * 12);
      assert.equal(s[2]!.cacheHeldBytes, 30 * 12);
      await loader.close();
    });
  }

  it('serves content identical to the source across epochs', async () => {
    const loader = await make({ n: 24 }, { batchSize: 6, workers: 2 });
    for (let e = 0; e < 3; e++) {
      for await (const b of loader.epoch(e)) {
        const x = b.get('x').data as Float32Array;
        b.sampleIds.forEach((id, r) => {
          assert.deepEqual([x[2 * r], x[2 * r + 1]], [id, id + 0.5]);
          assert.equal((b.get('y').data as Int32Array)[r], id);
        });
      }
    }
    await loader.close();
  });

  it('with sampleCache: false re-reads every epoch (1 probe + n per epoch)', async () => {
    const reads = counter(16);
    const loader = await make({ n: 16, reads }, { batchSize: 4, workers: 0, sampleCache: false });
    for (let e = 0; e < 3; e++) await epochIds(loader.epoch(e));
    assert.equal(Atomics.load(reads, 0), 1 + 16 * 3);
    await loader.close();
  });

  it('with no RAM share (ramMaxUsage: 0) admits nothing', async () => {
    const reads = counter(16);
    const loader = await make({ n: 16, reads }, { batchSize: 4, workers: 0, ramMaxUsage: 0 });
    for (let e = 0; e < 2; e++) await epochIds(loader.epoch(e));
    assert.equal(loader.stats().epochs[1]!.rowsFromCache, 0);
    assert.equal(Atomics.load(reads, 0), 1 + 16 * 2);
    await loader.close();
  });

  it('catches an impure dataset with the purity probe', async () => {
    const loader = await make({ n: 8, impure: true }, { batchSize: 4, workers: 0 });
    const error = await collect(loader.epoch(0)).catch((e: unknown) => e);
    assert.ok(error instanceof BatchError);
    assert.equal((error.cause as { code?: string }).code, 'ERR_IMPURE_DATASET');
    assert.match(error.message, /pure function of the index/);
    await loader.close();
  });
});

describe('the disk stage through the loader', { timeout: SUITE_MS }, () => {
  for (const workers of [0, 2]) {
    it(`stages samples below a full RAM cache, serves them next epoch, and is removed on close (${workers} workers)`, async (t) => {
      const reads = counter(20);
      const warnings: string[] = [];
      const onWarning = (w: Error) => warnings.push(w.message);
      process.on('warning', onWarning);
      const base = tempDir(t, 'workers-stage');
      const loader = await make({ n: 20, reads }, { batchSize: 5, workers, ramMaxUsage: 0, diskStage: { gigabytes: 0.001, dir: base } });
      await epochIds(loader.epoch(0));
      const afterFirst = Atomics.load(reads, 0);
      const s0 = loader.stats().epochs[0]!;
      assert.equal(s0.diskStagedBytes, 20 * (16 + 12));
      assert.deepEqual(sorted(await epochIds(loader.epoch(1))), range(20));
      assert.equal(Atomics.load(reads, 0), afterFirst, 'epoch 1 read nothing from the source');
      assert.equal(loader.stats().epochs[1]!.rowsFromDisk, 20);
      assert.equal(packFiles().length, 1 + workers, 'the main thread and each worker hold the (unnamed) pack file open');
      await loader.close();
      assert.deepEqual(packFiles(), [], 'close() lets go of every descriptor of the pack file');
      process.off('warning', onWarning);
      assert.deepEqual(warnings.filter((w) => /disk stage/.test(w)), []);
    });
  }

  it('treats corrupt pack records as misses, counts them, and still delivers the right content', async (t) => {
    const reads = counter(12);
    const base = tempDir(t, 'workers-stage');
    const loader = await make({ n: 12, reads }, { batchSize: 4, workers: 0, ramMaxUsage: 0, diskStage: { gigabytes: 0.001, dir: base } });
    await epochIds(loader.epoch(0));
    const file = packFiles()[0]!;
    const bytes = readFileSync(file);
    for (let k = 0; k < 12; k += 3) bytes[k * 28 + 20]! ^= 0xff; // flip a payload byte of every third record
    writeFileSync(file, bytes);
    const before = Atomics.load(reads, 0);
    for await (const b of loader.epoch(1)) {
      const x = b.get('x').data as Float32Array;
      b.sampleIds.forEach((id, r) => assert.deepEqual([x[2 * r], x[2 * r + 1]], [id, id + 0.5]));
    }
    const s = loader.stats().epochs[1]!;
    assert.equal(s.diskCorruptRecords, 4);
    assert.equal(s.rowsFromDisk, 8);
    assert.equal(s.rowsFromSource, 4);
    assert.equal(Atomics.load(reads, 0) - before, 4);
    await loader.close();
  });

  it('requires the sample layer', async () => {
    await assert.rejects(make({ n: 4 }, { batchSize: 2, sampleCache: false, diskStage: { gigabytes: 1 } }), { code: 'ERR_NEEDS_SAMPLE_LAYER', message: /Remove sampleCache: false/ });
  });
});

/**
 * This process's open descriptors on a disk-stage pack file, as /proc/self/fd paths (the file is
 * unlinked at create, so a descriptor is the only way to reach it; see NOTE [Stage cleanup]).
 */
function packFiles(): string[] {
  return readdirSync('/proc/self/fd').flatMap((fd) => {
    try {
      return /\/stoker-stage-[^/]+\/stage\.pack \(deleted\)$/.test(readlinkSync(`/proc/self/fd/${fd}`)) ? [`/proc/self/fd/${fd}`] : [];
    } catch {
      return []; // closed between the listing and the look
    }
  });
}

import { spawnSync } from 'node:child_process';
function spawnNode(code: string) {
  return spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8', timeout: CHILD_MS });
}
