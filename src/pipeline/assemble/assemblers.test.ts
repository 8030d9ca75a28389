// The three routes alone, on the CPU and the sim device, with a recording fetcher: what each route
// reads through the fetcher, what it puts in the batch, what it gives back on failure, and the
// pool policy each owns (partition before the read, eviction, promotion, close).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AcceleratorDevice } from '../../device/accelerator/accelerator-device.js';
import { CpuDevice } from '../../device/cpu-device.js';
import type { DeviceBatch } from '../../device/device.js';
import { SimBackend } from '../../device/sim/sim-backend.js';
import type { StagedBatch } from '../../dataset/source-reader.js';
import { TierCounters } from '../../cache/tier-counters.js';
import { Tensor } from '../../tensor/tensor.js';
import type { Fetcher } from '../../reader/fetcher.js';
import { Governor } from '../governor.js';
import { newEpochStats } from '../stats.js';
import type { AssembleContext } from './assembler.js';
import { InPlaceAssembler } from './in-place.js';
import { PooledAssembler } from './pooled.js';
import { StagedAssembler } from './staged.js';

const N = 64;
const ROW = 8; // int32 elements per sample: row r holds r*ROW … r*ROW+7

/** A fetcher over rows [id*ROW, id*ROW+ROW) that records every id list it was asked for. */
class RecordingFetcher implements Fetcher {
  readonly asked: number[][] = [];
  done = 0;
  async fetch(ids: Uint32Array): Promise<StagedBatch> {
    this.asked.push(Array.from(ids));
    const data = new Int32Array(ids.length * ROW);
    ids.forEach((id, r) => {
      for (let k = 0; k < ROW; k++) data[r * ROW + k] = id * ROW + k;
    });
    return { tensors: [new Tensor(data, [ids.length, ROW], 'int32')], owned: false, done: () => this.done++ };
  }
  async close(): Promise<void> {}
}

function context(backOffs: unknown[] = []): AssembleContext {
  return {
    signal: new AbortController().signal,
    stats: newEpochStats(0, 'streaming'),
    inFlight: () => 4,
    backOff: async (error, attempt) => {
      backOffs.push(error);
      if (attempt >= 2) throw error;
    },
  };
}

async function rows(batch: DeviceBatch): Promise<number[]> {
  const t = batch.tensors[0]!;
  const host = 'toHost' in t ? await t.toHost() : t;
  const out: number[] = [];
  for (let r = 0; r < host.shape[0]!; r++) out.push(Number(host.data[r * ROW]!) / ROW);
  return out;
}

const fields = [{ dtype: 'int32' as const, shape: [ROW], rowBytes: ROW * 4 }];
const governor = () => {
  const g = new Governor({ sampleBytes: ROW * 4, batchSize: 8, probe: undefined, vramMaxUsage: 0.9 }, 4, undefined);
  g.onConsumed(); // the honest resize: after the consumer's second batch
  g.onConsumed();
  return g;
};

describe('BatchAssembler routes', () => {
  it('staged: reads every id through the fetcher and counts them as fetched', async () => {
    const fetcher = new RecordingFetcher();
    const a = new StagedAssembler(fetcher, new CpuDevice());
    const ctx = context();
    const batch = await a.assemble(Uint32Array.of(5, 1, 9), ctx);
    assert.deepEqual(await rows(batch), [5, 1, 9]);
    assert.deepEqual(fetcher.asked, [[5, 1, 9]]);
    assert.equal(ctx.stats.rowsFetched, 3);
    assert.equal(a.route, 'staged');
    assert.equal(a.promote(), undefined);
  });

  it('staged: an upload that keeps failing with out-of-memory backs off, then hands the staged rows back', async () => {
    const fetcher = new RecordingFetcher();
    const device = new CpuDevice();
    const oom = Object.assign(new Error('out of device memory'), { driverName: 'CUDA_ERROR_OUT_OF_MEMORY' });
    device.upload = () => {
      throw oom;
    };
    const backOffs: unknown[] = [];
    await assert.rejects(new StagedAssembler(fetcher, device).assemble(Uint32Array.of(1, 2), context(backOffs)), (e) => e === oom);
    assert.equal(backOffs.length, 3);
    assert.equal(fetcher.done, 1, 'the staged batch is handed back exactly once');
  });

  it('pooled: once rows are pooled, only the misses are fetched, and the batch is whole and in order', async () => {
    const device = new AcceleratorDevice(new SimBackend({ totalBytes: 2 ** 30 }));
    const fetcher = new RecordingFetcher();
    const pool = device.pooling.createPool([ROW * 4], N, true);
    const a = new PooledAssembler({ fetcher, device: device.pooling, pool, fields, governor: governor(), batchBytes: 8 * ROW * 4 });
    const stats = newEpochStats(0, 'streaming');
    a.beginEpoch(stats);
    (await a.assemble(Uint32Array.of(3, 4, 5), context())).free();
    assert.ok(pool.active, 'the budget was installed at the first batch after the honest probe');
    const ctx = context();
    const batch = await a.assemble(Uint32Array.of(7, 4, 3, 8), ctx);
    assert.deepEqual(await rows(batch), [7, 4, 3, 8]);
    assert.deepEqual(fetcher.asked.at(-1), [7, 8], 'pooled rows 3 and 4 never crossed the bus');
    assert.equal(ctx.stats.rowsFetched, 2);
    batch.free();
    device.close();
  });

  it('pooled: relieve gives the newest slab back, and a pool holding every sample promotes to a resident store', async () => {
    const device = new AcceleratorDevice(new SimBackend({ totalBytes: 2 ** 30 }));
    const fetcher = new RecordingFetcher();
    const pool = device.pooling.createPool([ROW * 4], N, true);
    const a = new PooledAssembler({ fetcher, device: device.pooling, pool, fields, governor: governor(), batchBytes: 8 * ROW * 4 });
    a.beginEpoch(newEpochStats(0, 'streaming'));
    assert.equal(a.promote(N), undefined, 'nothing pooled yet');
    for (let s = 0; s < N; s += 8) (await a.assemble(Uint32Array.from({ length: 8 }, (_, k) => s + k), context())).free();
    assert.equal(pool.pooledRows, N);
    const store = a.promote(N);
    assert.ok(store !== undefined);
    assert.equal(pool.pooledRows, 0, 'the slabs were freed into the resident copy');
    store.prepare(Uint32Array.from({ length: N }, (_, i) => N - 1 - i));
    assert.deepEqual(await rows(store.gather(new Uint32Array(0), 0, 3)), [63, 62, 61]);
    store.dispose();
    // Fill again, then relieve: the pool forgets its newest slab's rows.
    const again = device.pooling.createPool([ROW * 4], N, true);
    const b = new PooledAssembler({ fetcher, device: device.pooling, pool: again, fields, governor: governor(), batchBytes: 8 * ROW * 4 });
    b.beginEpoch(newEpochStats(1, 'streaming'));
    (await b.assemble(Uint32Array.of(1, 2), context())).free();
    assert.equal(again.pooledRows, 2);
    b.relieve();
    assert.equal(again.pooledRows, 0);
    b.close();
    device.close();
  });

  it('in-place: reads mapped rows on the device with no fetch, counting them as read from the source', async () => {
    const device = new AcceleratorDevice(new SimBackend({ totalBytes: 2 ** 30 }));
    const column = new Int32Array(N * ROW).map((_, i) => i);
    const mapped = device.inPlace.mapColumns([new Tensor(column, [N, ROW], 'int32')]);
    const counters = new TierCounters();
    const a = new InPlaceAssembler({ device: device.inPlace, pooling: device.pooling, pool: undefined, mapped, fields, governor: governor(), batchBytes: 8 * ROW * 4, counters });
    const ctx = context();
    const batch = await a.assemble(Uint32Array.of(9, 0, 63), ctx);
    assert.deepEqual(await rows(batch), [9, 0, 63]);
    assert.equal(ctx.stats.rowsFetched, 3);
    assert.equal(counters.snapshot().sourceRows, 3);
    assert.equal(a.route, 'in-place');
    batch.free();
    a.close();
    device.close();
  });
});
