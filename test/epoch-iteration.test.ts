// How a training loop drives epochs: `loader.epoch(e, { signal })` ends when its AbortSignal
// aborts (rejecting as fetch does), and `for await (const b of loader)` runs the next epoch each
// time, as iterating a PyTorch DataLoader does.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type Batch, DataLoader, type ReadContext, type Sample } from '../src/index.js';
import { HANG_MS, MODES, SUITE_MS, arraysDataset, epochIds, range, sorted, within } from './fixtures.js';

/**
 * 16 samples; while `gate.shut`, reads of samples 4–15 wait (a slow source) until the gate opens
 * or their read is aborted, which they count.
 */
function slowDataset() {
  const waiting = new Set<() => void>();
  let blocked!: () => void;
  const ds = {
    length: 16,
    aborted: 0,
    /** Resolves when the first read waits on the gate. */
    blocked: new Promise<void>((resolve) => (blocked = resolve)),
    shut: true,
    open() {
      ds.shut = false;
      for (const go of waiting) go();
    },
    get(i: number, ctx: ReadContext) {
      const make = () => ({ x: Float32Array.of(i, i + 0.5), y: Int32Array.of(i) });
      if (i < 4 || !ds.shut) return make();
      return new Promise<Sample>((resolve, reject) => {
        const go = () => (waiting.delete(go), resolve(make()));
        waiting.add(go);
        blocked();
        ctx.signal.addEventListener('abort', () => {
          waiting.delete(go);
          ds.aborted++;
          reject(ctx.signal.reason);
        }, { once: true });
      });
    },
  };
  return ds;
}

const ids = (b: Batch) => Array.from(b.get('y').data as Int32Array);

describe('epoch(e, { signal })', { timeout: SUITE_MS }, () => {
  it("aborting the signal rejects the pending next() with the signal's reason, cancels in-flight reads, and leaves the loader usable", async () => {
    const ds = slowDataset();
    const loader = await DataLoader.create(ds, { batchSize: 4, shuffle: false, mode: 'streaming', workers: 0 });
    try {
      const controller = new AbortController();
      const it = loader.epoch(0, { signal: controller.signal })[Symbol.asyncIterator]();
      const first = await within(HANG_MS, 'batch 0', it.next());
      assert.deepEqual(ids(first.value!), [0, 1, 2, 3]);
      const pending = it.next(); // batch 1 waits on the slow source
      await within(HANG_MS, 'a read of batch 1 starting', ds.blocked);
      const reason = new Error('the user stopped the epoch');
      controller.abort(reason);
      await assert.rejects(within(HANG_MS, 'the pending next() after abort', pending), (e) => e === reason);
      assert.ok(ds.aborted > 0, 'reads in flight saw the abort');
      await assert.rejects(it.next(), (e) => e === reason, 'later calls reject too');
      assert.equal(loader.stats().epochs[0]!.complete, false);
      ds.open();
      assert.deepEqual(sorted(await within(HANG_MS, 'the next epoch', epochIds(loader.epoch(1)))), range(16));
    } finally {
      await loader.close();
    }
  });

  for (const mode of MODES) {
    it(`an already-aborted signal rejects at the first next() without reading, and the loader stays usable (${mode})`, async () => {
      let gets = 0;
      const loader = await DataLoader.create({ length: 12, get: (i: number) => (gets++, { y: Int32Array.of(i) }) }, { batchSize: 4, mode, workers: 0 });
      try {
        const afterCreate = gets;
        const reason = new DOMException('gave up', 'AbortError');
        const iterator = loader.epoch(0, { signal: AbortSignal.abort(reason) })[Symbol.asyncIterator]();
        await assert.rejects(iterator.next(), (e) => e === reason);
        assert.equal(gets, afterCreate, 'nothing was read for the aborted epoch');
        assert.equal(loader.stats().epochs.length, 0, 'no epoch ran');
        assert.deepEqual(sorted(await within(HANG_MS, 'epoch 0', epochIds(loader.epoch(0)))), range(12));
      } finally {
        await loader.close();
      }
    });

    it(`aborting between batches ends the epoch at the next call and frees the loader for another (${mode})`, async () => {
      const loader = await DataLoader.create(arraysDataset(12), { batchSize: 4, mode });
      try {
        const controller = new AbortController();
        const seen: number[] = [];
        const error = await within(HANG_MS, 'aborted epoch', (async () => {
          for await (const b of loader.epoch(0, { signal: controller.signal })) {
            seen.push(...ids(b));
            controller.abort();
          }
        })()).catch((e: unknown) => e);
        assert.equal(error, controller.signal.reason);
        assert.equal((error as DOMException).name, 'AbortError');
        assert.equal(seen.length, 4);
        assert.deepEqual(sorted(await within(HANG_MS, 'epoch 1', epochIds(loader.epoch(1)))), range(12));
      } finally {
        await loader.close();
      }
    });
  }

  it('a signal that is not an AbortSignal is an ERR_INVALID_OPTION naming it', async () => {
    const loader = await DataLoader.create(arraysDataset(8), { batchSize: 4 });
    try {
      assert.throws(() => loader.epoch(0, { signal: { aborted: false } as unknown as AbortSignal }), {
        code: 'ERR_INVALID_OPTION',
        message: /`epoch\(e, \{ signal \}\)` must be an AbortSignal/,
      });
    } finally {
      await loader.close();
    }
  });
});

describe('for await over the loader', { timeout: SUITE_MS }, () => {
  /** Each epoch's sample ids, in delivery order, and the epoch each batch said it belonged to. */
  async function loop(iterable: AsyncIterable<Batch>): Promise<{ epochs: number[]; order: number[] }> {
    const epochs = new Set<number>();
    const order: number[] = [];
    for await (const b of iterable) {
      epochs.add(b.epoch);
      order.push(...ids(b));
    }
    return { epochs: [...epochs], order };
  }

  for (const mode of MODES) {
    it(`each loop over the loader runs the next epoch with its own shuffle, the batches loader.epoch(e) of a twin gives (${mode})`, async () => {
      const options = { batchSize: 4, mode, seed: 9 } as const;
      const loader = await DataLoader.create(arraysDataset(24), options);
      const twin = await DataLoader.create(arraysDataset(24), options);
      try {
        const first = await within(HANG_MS, 'loop 1', loop(loader));
        const second = await within(HANG_MS, 'loop 2', loop(loader));
        assert.deepEqual(first.epochs, [0]);
        assert.deepEqual(second.epochs, [1]);
        assert.notDeepEqual(first.order, second.order, 'each epoch has its own shuffle');
        assert.deepEqual(first.order, (await loop(twin.epoch(0))).order);
        assert.deepEqual(second.order, (await loop(twin.epoch(1))).order);
      } finally {
        await loader.close();
        await twin.close();
      }
    });
  }

  it("starts at a resume state's epoch, and follows an epoch started with loader.epoch(e)", async () => {
    const options = { batchSize: 4, seed: 3 } as const;
    const first = await DataLoader.create(arraysDataset(16), options);
    await epochIds(first.epoch(0));
    const state = first.state();
    await first.close();
    assert.equal(state.epoch, 1);
    const resumed = await DataLoader.create(arraysDataset(16), { ...options, resume: state });
    const twin = await DataLoader.create(arraysDataset(16), options);
    try {
      const a = await within(HANG_MS, 'resumed loop', loop(resumed));
      assert.deepEqual(a.epochs, [1]);
      assert.deepEqual(a.order, (await loop(twin.epoch(1))).order);
      await epochIds(resumed.epoch(5));
      assert.deepEqual((await within(HANG_MS, 'loop after epoch 5', loop(resumed))).epochs, [6]);
    } finally {
      await resumed.close();
      await twin.close();
    }
  });
});
