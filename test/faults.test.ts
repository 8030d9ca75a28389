// Faults and lifecycle: a dataset that throws or rejects fails its batch only; 'skip' drops it and
// counts it; leaving a loop cancels in-flight reads; close() never hangs; released batches refuse
// to be read. Anything that could hang runs under `within`.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { BatchError, DataLoader, LoaderError, tensor } from '../src/index.js';
import { HANG_MS, MODES, arraysDataset, collect, epochIds, range, scriptedDataset, sorted, waitFor, within, ys } from './fixtures.js';

describe('a dataset that fails (streaming)', () => {
  for (const reject of [false, true]) {
    const how = reject ? 'rejects' : 'throws';
    it(`a dataset that ${how} is an error batch, not a dead loader`, async () => {
      const ds = scriptedDataset(20, { throwAt: [7], reject });
      const loader = await DataLoader.create(ds, { batchSize: 4, shuffle: false, mode: 'streaming' });
      const seen: number[] = [];
      const error = await within(HANG_MS, 'failing epoch', (async () => {
        try {
          for await (const b of loader.epoch(0)) seen.push(...ys(b));
        } catch (e) {
          return e;
        }
        return undefined;
      })());
      assert.ok(error instanceof BatchError, `expected a BatchError, got ${error}`);
      assert.equal(error.code, 'ERR_BATCH_FAILED');
      assert.equal(error.batchIndex, 1);
      assert.equal(error.epoch, 0);
      assert.deepEqual(error.sampleIds, [4, 5, 6, 7]);
      assert.match(error.message, /batch 1 of epoch 0 failed in the dataset \(samples \[4, 5, 6, 7\]\): sample 7 is unreadable/);
      assert.equal((error.cause as Error).message, 'sample 7 is unreadable');
      assert.deepEqual(seen, [0, 1, 2, 3]);
      // The loader is usable: the next epoch runs to the failing batch again and nothing wedged.
      const again = await within(HANG_MS, 'next epoch', collect(loader.epoch(1)).catch((e: unknown) => e));
      assert.ok(again instanceof BatchError);
    });
  }

  it("skips failed batches with errors: 'skip' and counts them", async () => {
    const ds = scriptedDataset(20, { throwAt: [7, 13], async: true });
    const loader = await DataLoader.create(ds, { batchSize: 4, shuffle: false, mode: 'streaming', errors: 'skip' });
    const ids = await within(HANG_MS, 'skipping epoch', epochIds(loader.epoch(0)));
    assert.deepEqual(ids, [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19]);
    const s = loader.stats().epochs[0]!;
    assert.equal(s.failedBatches, 2);
    assert.equal(s.skippedBatches, 2);
    assert.equal(s.batches, 3);
    assert.equal(s.complete, true);
  });

  it("reports which samples each skipped batch held, and why, in stats (errors: 'skip')", async () => {
    const ds = scriptedDataset(20, { throwAt: [7, 13] });
    const loader = await DataLoader.create(ds, { batchSize: 4, shuffle: false, mode: 'streaming', errors: 'skip' });
    await within(HANG_MS, 'skipping epoch', epochIds(loader.epoch(0)));
    const s = loader.stats().epochs[0]!;
    assert.deepEqual(s.skipped, [
      { index: 1, sampleIds: [4, 5, 6, 7], stage: 'dataset', reason: 'sample 7 is unreadable' },
      { index: 3, sampleIds: [12, 13, 14, 15], stage: 'dataset', reason: 'sample 13 is unreadable' },
    ]);
    // A copy: the caller cannot change the loader's record.
    (s.skipped as unknown[]).length = 0;
    assert.equal(loader.stats().epochs[0]!.skipped.length, 2);
  });

  it('fails a batch whose sample changes shape, naming the sample', async () => {
    const ds = { length: 8, get: (i: number) => ({ x: new Float32Array(i === 5 ? 3 : 2), y: Int32Array.of(i) }) };
    const loader = await DataLoader.create(ds, { batchSize: 4, shuffle: false, mode: 'streaming' });
    const error = await collect(loader.epoch(0)).catch((e: unknown) => e);
    assert.ok(error instanceof BatchError);
    assert.equal((error.cause as LoaderError).code, 'ERR_SAMPLE_MISMATCH');
    assert.match((error.cause as Error).message, /dataset\.get\(5\), field "x" is float32 \[3\] but sample 0 had float32 \[2\]/);
  });

  it('fails a batch whose sample has another number of fields', async () => {
    const ds = { length: 4, get: (i: number) => (i === 3 ? [Int32Array.of(i)] : [Int32Array.of(i), Int32Array.of(i)]) };
    const loader = await DataLoader.create(ds, { batchSize: 2, shuffle: false, mode: 'streaming' });
    const error = await collect(loader.epoch(0)).catch((e: unknown) => e);
    assert.ok(error instanceof BatchError);
    assert.match((error.cause as Error).message, /sample 3 has 1 tensors, expected 2 \(same as sample 0\)/);
  });

  it('delivers in plan order when reads finish out of order', async () => {
    const ds = scriptedDataset(40, { async: true });
    const loader = await DataLoader.create(ds, { batchSize: 3, mode: 'streaming', prefetch: 6, dropLast: false });
    const batches = await within(HANG_MS, 'epoch', collect(loader.epoch(0)));
    assert.deepEqual(batches.map((b) => b.index), range(batches.length));
    assert.deepEqual(sorted(batches.flatMap(ys)), range(40));
  });
});

describe('a resident build over a failing dataset', () => {
  it('builds, and fails only the batch holding the unreadable sample with a BatchError naming it and the cause', async () => {
    const loader = await DataLoader.create(scriptedDataset(10, { throwAt: [6] }), { batchSize: 2, mode: 'resident', shuffle: false });
    assert.equal(loader.isResident, true);
    const seen: number[] = [];
    const error = await within(HANG_MS, 'epoch', (async () => {
      for await (const b of loader.epoch(0)) seen.push(...ys(b));
    })()).catch((e: unknown) => e);
    assert.ok(error instanceof BatchError, String(error));
    assert.equal(error.batchIndex, 3);
    assert.deepEqual(error.sampleIds, [6, 7]);
    assert.match(error.message, /failed in the dataset.*sample 6 is unreadable/s);
    assert.deepEqual(seen, [0, 1, 2, 3, 4, 5]);
    await loader.close();
  });
});

for (const mode of MODES) {
  describe(`transform failures and lifecycle, ${mode} mode`, () => {
    it('a throwing transform is an error batch; the next epoch works', async () => {
      let calls = 0;
      const loader = await DataLoader.create(arraysDataset(12), { batchSize: 4, mode, transform: (rows) => {
        if (++calls === 2) throw new Error('bad augmentation');
        return rows;
      } });
      const error = await collect(loader.epoch(0)).catch((e: unknown) => e);
      assert.ok(error instanceof BatchError);
      assert.match(error.message, /failed in the transform.*bad augmentation/);
      assert.equal((await collect(loader.epoch(1))).length, 3);
    });

    for (const errors of ['throw', 'skip'] as const) {
      it(`a transform that returns the wrong row count fails only its batch (errors: '${errors}')`, async () => {
        // In epoch 0, batch 1 (samples 4…7) comes back with half its rows.
        let broken = true;
        const loader = await DataLoader.create(arraysDataset(12), { batchSize: 4, mode, shuffle: false, errors, transform: (rows) => {
          if (!broken || (rows[1]!.data as Int32Array)[0] !== 4) return rows;
          return rows.map((t) => tensor(t.data.slice(0, t.data.length / 2) as Float32Array, [2, ...t.shape.slice(1)]));
        } });
        const seen: number[] = [];
        const error = await within(HANG_MS, 'epoch', (async () => {
          try {
            for await (const b of loader.epoch(0)) seen.push(...ys(b));
          } catch (e) {
            return e;
          }
          return undefined;
        })());
        const s = loader.stats().epochs[0]!;
        assert.equal(s.failedBatches, 1);
        if (errors === 'throw') {
          assert.ok(error instanceof BatchError, `expected a BatchError, got ${error}`);
          assert.equal(error.batchIndex, 1);
          assert.equal((error.cause as LoaderError).code, 'ERR_TRANSFORM_OUTPUT');
          assert.match(error.message, /failed in the transform.*has shape \[2, 4\] but the batch has 4 rows/);
          assert.deepEqual(seen, [0, 1, 2, 3]);
        } else {
          assert.equal(error, undefined);
          assert.deepEqual(seen, [0, 1, 2, 3, 8, 9, 10, 11]);
          assert.deepEqual(s.skipped.map((k) => [k.index, k.stage]), [[1, 'transform']]);
          assert.equal(s.complete, true);
        }
        broken = false;
        assert.equal((await collect(loader.epoch(1))).length, 3, 'the next epoch works');
        await loader.close();
      });
    }

    it('a consumer that throws inside the loop leaves the loader usable', async () => {
      const loader = await DataLoader.create(arraysDataset(12), { batchSize: 4, mode });
      await assert.rejects(async () => {
        for await (const _ of loader.epoch(0)) throw new Error('consumer bug');
      }, /consumer bug/);
      assert.deepEqual(sorted(await epochIds(loader.epoch(1))), range(12));
    });

    it('close() is idempotent, refuses new epochs, and ends a live loop', async () => {
      const loader = await DataLoader.create(arraysDataset(12), { batchSize: 4, mode });
      const it0 = loader.epoch(0)[Symbol.asyncIterator]();
      assert.equal((await it0.next()).done, false);
      await loader.close();
      await loader.close();
      assert.deepEqual(await it0.next(), { done: true, value: undefined });
      assert.throws(() => loader.epoch(1), { code: 'ERR_LOADER_CLOSED' });
    });

    it('[Symbol.asyncDispose] closes the loader', async () => {
      const loader = await DataLoader.create(arraysDataset(4), { batchSize: 2, mode });
      await loader[Symbol.asyncDispose]();
      assert.throws(() => loader.epoch(0), { code: 'ERR_LOADER_CLOSED' });
    });

    it('a released batch refuses every read, its tensors too', async () => {
      const loader = await DataLoader.create(arraysDataset(8), { batchSize: 4, mode });
      const [b] = await collect(loader.epoch(0));
      const x = b!.get('x');
      b!.release();
      assert.equal(b!.released, true);
      assert.throws(() => b!.get('x'), { code: 'ERR_BATCH_RELEASED' });
      assert.throws(() => b!.at(0), { code: 'ERR_BATCH_RELEASED' });
      assert.throws(() => b!.tensors, { code: 'ERR_BATCH_RELEASED' });
      assert.throws(() => x.data, { code: 'ERR_BATCH_RELEASED' });
      b!.release(); // no-op
      assert.deepEqual(b!.names, ['x', 'y']);
    });

    it('retain() keeps a batch alive through one release; the matching release ends it', async () => {
      const loader = await DataLoader.create(arraysDataset(8), { batchSize: 4, mode });
      const [b] = await collect(loader.epoch(0));
      b!.retain();
      b!.release();
      assert.equal(b!.released, false);
      assert.equal(b!.get('x').shape[0], 4);
      b!.release();
      assert.equal(b!.released, true);
      const [c] = await collect(loader.epoch(1));
      {
        using held = c!;
        assert.equal(held.rows, 4);
      }
      assert.equal(c!.released, true);
    });
  });
}

describe('buffer recycling on cpu', () => {
  it('a released batch\'s memory serves a later batch; an unreleased batch keeps its own', async () => {
    const loader = await DataLoader.create(arraysDataset(16), { batchSize: 4 });
    const it0 = loader.epoch(0)[Symbol.asyncIterator]();
    const a = (await it0.next()).value!;
    const aBuffer = a.get('x').data.buffer;
    const b = (await it0.next()).value!;
    assert.notEqual(b.get('x').data.buffer, aBuffer, 'a live batch is never aliased');
    a.release();
    const c = (await it0.next()).value!;
    assert.equal(c.get('x').data.buffer, aBuffer, 'released memory is reused');
    const x = c.get('x').data as Float32Array;
    c.sampleIds.forEach((id: number, r: number) => assert.equal(x[r * 4], id));
    await it0.return!();
  });
});

describe('cancellation (streaming)', () => {
  it('breaking out of for await cancels in-flight reads and starts no new ones', async () => {
    // Batch 0 reads fine; every later read hangs until aborted.
    const ds = scriptedDataset(40, { hangAt: range(40).slice(4) });
    const loader = await DataLoader.create(ds, { batchSize: 4, shuffle: false, mode: 'streaming', prefetch: 3 });
    await within(HANG_MS, 'break out', (async () => {
      for await (const b of loader.epoch(0)) {
        assert.deepEqual(ys(b), [0, 1, 2, 3]);
        // The read-ahead starts the next reads (which hang) while the loop works.
        await waitFor(() => ds.started.some((i) => i >= 4), { what: 'the read-ahead starting a hanging read' });
        break;
      }
    })());
    const startedAtBreak = ds.started.length;
    assert.ok(ds.aborted > 0);
    assert.equal(ds.aborted, ds.started.filter((i) => i >= 4).length, 'every hanging read saw the abort');
    // Absence has no event to wait on: a bound, not a budget (load can only make it pass, never fail).
    await sleep(50);
    assert.equal(ds.started.length, startedAtBreak, 'no read starts after the loop ended');
  });

  it('close() returns promptly while the consumer waits on a read that never settles, and the wait ends', async () => {
    const started: number[] = [];
    const ds = { length: 8, get: (i: number) => (started.push(i), i === 0 ? { y: Int32Array.of(0) } : new Promise<never>(() => {})) };
    const loader = await DataLoader.create(ds, { batchSize: 2, shuffle: false, mode: 'streaming' });
    const it0 = loader.epoch(0)[Symbol.asyncIterator]();
    const waiting = it0.next();
    await waitFor(() => started.includes(1), { what: 'the read that never settles starting' });
    await within(HANG_MS, 'close()', loader.close());
    assert.deepEqual(await within(HANG_MS, 'the pending next()', waiting), { done: true, value: undefined });
  });

  it('honours the in-flight window: never more than prefetch batches read ahead', async () => {
    let inFlight = 0;
    let peak = 0;
    const ds = {
      length: 64,
      async get(i: number) {
        inFlight++;
        peak = Math.max(peak, inFlight);
        await sleep(1);
        inFlight--;
        return [Int32Array.of(i)];
      },
    };
    const loader = await DataLoader.create(ds, { batchSize: 1, mode: 'streaming', prefetch: 3 });
    const ids: number[] = [];
    for await (const b of loader.epoch(0)) {
      ids.push((b.at(0).data as Int32Array)[0]!);
      await sleep(2);
    }
    assert.deepEqual(sorted(ids), range(64));
    assert.ok(peak <= 3, `peak in flight ${peak} > 3`);
    assert.ok(peak >= 2, `the window was used (peak ${peak})`);
  });
});

describe('stacking checks', () => {
  it('tensor() refuses data that does not fit its shape or dtype', () => {
    assert.throws(() => tensor(new Float32Array(5), [2, 3]), { code: 'ERR_INVALID_TENSOR', message: /holds 6 elements but the data has 5/ });
    assert.throws(() => tensor(new Float32Array(4), [2, 2], 'int32'), { code: 'ERR_INVALID_TENSOR', message: /Int32Array/ });
    assert.throws(() => tensor(new Float32Array(4), [2, -2]), { code: 'ERR_INVALID_TENSOR' });
  });
});

describe('concurrent next() calls', () => {
  for (const mode of MODES) {
    it(`are served in call order (${mode})`, async () => {
      const loader = await DataLoader.create(scriptedDataset(12, { async: true }), { batchSize: 3, shuffle: false, mode });
      const it0 = loader.epoch(0)[Symbol.asyncIterator]();
      const results = await Promise.all([it0.next(), it0.next(), it0.next(), it0.next(), it0.next()]);
      assert.deepEqual(results.map((r) => (r.done ? 'done' : ys(r.value))), [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11], 'done']);
    });
  }
});
