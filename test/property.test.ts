// Property: for any dataset size, batch size, augment, drop-last, shuffle and mode, an epoch
// delivers exactly the multiset of sample ids the arithmetic says — each sample `augment` times,
// minus exactly the dropped tail — and every pick of the epoch at most once.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { DataLoader } from '../src/index.js';
import { arraysDataset, scriptedDataset, ys } from './fixtures.js';

describe('exact delivery (property)', () => {
  it('delivers the exact multiset of sample ids for random sizes, batch sizes, augment and dropLast', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 1, max: 70 }),
        fc.integer({ min: 1, max: 4 }),
        fc.boolean(),
        fc.boolean(),
        fc.constantFrom('resident' as const, 'streaming' as const),
        fc.constantFrom('arrays' as const, 'per-sample' as const),
        fc.integer({ min: 0, max: 5 }),
        async (n, batchSize, augment, dropLast, shuffle, mode, kind, epoch) => {
          const ds = kind === 'arrays' ? arraysDataset(n) : scriptedDataset(n, { async: mode === 'streaming' });
          const loader = await DataLoader.create(ds, { batchSize, augment, dropLast, shuffle, mode, seed: n * 31 + batchSize });
          const picks = n * augment;
          const expectedBatches = dropLast ? Math.floor(picks / batchSize) : Math.ceil(picks / batchSize);
          assert.equal(loader.numBatches, expectedBatches);
          const delivered = new Map<number, number>();
          const seenPicks = new Set<number>();
          let batches = 0;
          let rows = 0;
          for await (const b of loader.epoch(epoch)) {
            batches++;
            rows += b.rows;
            assert.ok(b.rows === batchSize || (!dropLast && batches === expectedBatches), 'only the last batch may be short');
            const content = ys(b);
            b.picks.forEach((p, r) => {
              assert.ok(!seenPicks.has(p), `pick ${p} delivered twice`);
              seenPicks.add(p);
              assert.equal(b.sampleIds[r], Math.floor(p / augment));
              assert.equal(content[r], b.sampleIds[r], 'row content matches its sample id');
              delivered.set(b.sampleIds[r]!, (delivered.get(b.sampleIds[r]!) ?? 0) + 1);
            });
            b.release();
          }
          assert.equal(batches, expectedBatches);
          const expectedRows = dropLast ? expectedBatches * batchSize : picks;
          assert.equal(rows, expectedRows);
          // Each sample appears at most `augment` times, and exactly `augment` times when nothing was dropped.
          for (const [id, count] of delivered) {
            assert.ok(id >= 0 && id < n);
            assert.ok(count <= augment);
          }
          if (expectedRows === picks) for (let i = 0; i < n; i++) assert.equal(delivered.get(i), augment, `sample ${i}`);
          // The dropped picks are exactly the tail of the epoch's order: without shuffle, the highest ones.
          if (!shuffle) for (let p = 0; p < expectedRows; p++) assert.ok(seenPicks.has(p));
          await loader.close();
        },
      ),
      { numRuns: 150, seed: 20261129 },
    );
  });
});
