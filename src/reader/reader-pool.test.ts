// The reader-worker pool alone, over an in-memory source opened in each worker from its spec:
// rows land in staging in the order asked whichever worker reads them, a cancelled read rejects
// without harming the pool, every read's slot goes back through `done`, and close is idempotent
// and makes later reads fail with a typed error.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TierCounters } from '../cache/tier-counters.js';
import { ArraySource } from '../dataset/arrays-source.js';
import { SourceReader } from '../dataset/source-reader.js';
import { specOf } from '../dataset/source-spec.js';
import { ReaderPool } from './reader-pool.js';
import { HANG_MS, within } from '../../test/fixtures.js';

const N = 40;

async function pool(workers: number) {
  const ds = new ArraySource({ x: Int32Array.from({ length: N }, (_, i) => i) });
  const schema = await SourceReader.probe(ds, { signal: new AbortController().signal });
  return ReaderPool.start({
    spec: specOf(ds)!, workers, schema, batchSize: 8, cache: undefined, disk: undefined,
    counters: new TierCounters().cells, purityProbe: false, warn: () => {},
  });
}

describe('ReaderPool', () => {
  it('stages the rows of concurrent reads in the order asked, whichever worker read them', async () => {
    const p = await pool(2);
    try {
      assert.equal(p.workers, 2);
      const signal = new AbortController().signal;
      const asks = [Uint32Array.of(7, 3, 39, 0), Uint32Array.of(12, 11, 10), Uint32Array.of(1)];
      const staged = await Promise.all(asks.map((ids) => p.fetch(ids, signal, 1)));
      staged.forEach((s, k) => {
        assert.deepEqual(Array.from(s.tensors[0]!.data as Int32Array), Array.from(asks[k]!, (id) => id));
        s.done?.();
      });
      assert.ok(p.slots >= 1 && p.slots <= 3, `one slot per concurrent read at most (${p.slots})`);
    } finally {
      await p.close();
    }
  });

  it('settles a read of no rows at once with empty fields (no chunk is posted, so no worker would answer)', async () => {
    const p = await pool(1);
    try {
      // NOTE: waits for the empty read's promise, at most HANG_MS (it never settled before).
      const staged = await within(HANG_MS, 'a read of no rows', p.fetch(new Uint32Array(0), new AbortController().signal, 1));
      assert.deepEqual(staged.tensors.map((t) => t.shape), [[0]]);
      staged.done?.();
      const next = await p.fetch(Uint32Array.of(5), new AbortController().signal, 1);
      assert.deepEqual(Array.from(next.tensors[0]!.data as Int32Array), [5]);
      next.done?.();
    } finally {
      await p.close();
    }
  });

  it('rejects a read whose signal aborts, and keeps serving later reads', async () => {
    const p = await pool(1);
    try {
      const ac = new AbortController();
      ac.abort(new Error('left the epoch'));
      await assert.rejects(async () => p.fetch(Uint32Array.of(1, 2), ac.signal), /left the epoch/);
      const s = await p.fetch(Uint32Array.of(5), new AbortController().signal);
      assert.deepEqual(Array.from(s.tensors[0]!.data as Int32Array), [5]);
      s.done?.();
    } finally {
      await p.close();
    }
  });

  it('closes once however often it is asked, and refuses reads after with ERR_LOADER_CLOSED', async () => {
    const p = await pool(2);
    await Promise.all([p.close(), p.close()]);
    assert.equal(p.workers, 0);
    await assert.rejects(async () => p.fetch(Uint32Array.of(1), new AbortController().signal), (e: Error & { code?: string }) => e.code === 'ERR_LOADER_CLOSED');
  });
});
