// The route a loader's batches take, as a tested fact: `stats().epochs[e].route` records each
// epoch's, and `loader.describe()` names it with the tiers and budgets, on cpu and sim.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DataLoader, sources } from '../src/index.js';
import { SUITE_MS, arraysDataset, range, sorted } from './fixtures.js';

const SCRIPTED = new URL('./fixtures/scripted-source.ts', import.meta.url);

/** Run `count` epochs, each delivering every sample once (ids from the batches, on any device). */
async function epochs(loader: DataLoader<any>, count: number): Promise<void> {
  for (let e = 0; e < count; e++) {
    const ids: number[] = [];
    for await (const b of loader.epoch(e)) ids.push(...b.sampleIds);
    assert.deepEqual(sorted(ids), range(loader.numBatches * loader.batchSize), `epoch ${e}`);
  }
}

describe('the route batches take: stats().epochs[e].route and loader.describe()', { timeout: SUITE_MS }, () => {
  it('in-memory columns on the cpu are resident: a gather per batch', async () => {
    const loader = await DataLoader.create(arraysDataset(32), { batchSize: 8 });
    await epochs(loader, 1);
    assert.equal(loader.stats().epochs[0]!.route, 'resident');
    const text = loader.describe();
    assert.match(text, /^device\s+cpu$/m);
    assert.match(text, /^mode\s+resident: each batch is a gather over data held whole$/m);
    assert.match(text, /^epoch\s+32 picks \(32 samples × augment 1\), batch 8, 4 batches \(short last batch dropped\); 1 run so far$/m);
    assert.match(text, /^world\s+one process$/m);
    await loader.close();
  });

  it('a worker-read source streams through staging, and says how many readers and what the RAM cache holds', async () => {
    const loader = await DataLoader.create(sources.module(SCRIPTED, 'openScripted', { n: 24 }), { batchSize: 6, workers: 2, mode: 'streaming' });
    await epochs(loader, 2);
    assert.deepEqual(loader.stats().epochs.map((s) => s.route), ['staged', 'staged']);
    const text = loader.describe();
    assert.match(text, /^mode\s+streaming: rows are read into host staging, then copied into each batch \(reads on 2 reader workers\)$/m);
    assert.match(text, /^tiers\s+RAM cache \S+ \S+ held of /m);
    assert.match(text, /^budgets\s+ramMaxUsage 0\.5; prefetch \d+ batches \(adaptive\)$/m);
    loader.setPrefetchDepth(3);
    assert.match(loader.describe(), /prefetch 3 batches \(pinned\)/);
    await loader.close();
  });

  it('on sim, an in-memory source streams in place unless pinSource is off, and a pool that holds everything turns the route resident', async () => {
    const inPlace = await DataLoader.create(arraysDataset(64), { batchSize: 8, device: 'sim', mode: 'streaming', vramPool: false });
    await epochs(inPlace, 1);
    assert.equal(inPlace.stats().epochs[0]!.route, 'in-place');
    assert.match(inPlace.describe(), /^mode\s+streaming: the device reads the rows of the page-locked in-memory source where they lie$/m);
    assert.match(inPlace.describe(), /vramMaxUsage 0\.9/);
    await inPlace.close();

    const staged = await DataLoader.create(arraysDataset(64), { batchSize: 8, device: 'sim', mode: 'streaming', pinSource: false });
    await epochs(staged, 4);
    const routes = staged.stats().epochs.map((s) => s.route);
    assert.equal(routes[0], 'staged');
    assert.equal(staged.isResident, true, 'the pool came to hold every sample');
    assert.equal(routes.at(-1), 'resident', `routes ${routes}`);
    assert.match(staged.describe(), /^mode\s+resident: /m);
    await staged.close();
  });

  it('names the VRAM pool, its phase and what it holds while it fills', async () => {
    const loader = await DataLoader.create(arraysDataset(64), { batchSize: 8, device: 'sim', mode: 'streaming', pinSource: false });
    await epochs(loader, 1);
    assert.match(loader.describe(), /VRAM pool (filling|none|trial-stitch), \d+ rows in /);
    await loader.close();
  });
});
