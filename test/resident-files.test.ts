// Which sources `mode: 'auto'` makes resident, and how resident mode over files honours `errors`.
// Pins: 'auto' is resident only for samples already held in memory (a capability, not a class), a
// file source streams however small it is, and a sample that cannot be read while a resident store
// is built fails exactly the batches holding it, as streaming would, instead of failing create().

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { BatchError, DataLoader, sources } from '../src/index.js';
import { HANG_MS, SUITE_MS, collect, range, within } from './fixtures.js';

const COLOURS: Record<string, [number, number, number]> = { ant: [200, 30, 30], bee: [30, 200, 30], cat: [30, 30, 200] };

let root: string;
/** 3 classes × 4 PNGs, one of them corrupt (`bad`). */
let folder: string;
let bad: string;

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'stoker-resident-files-'));
  folder = join(root, 'images');
  for (const cls of Object.keys(COLOURS)) {
    mkdirSync(join(folder, cls), { recursive: true });
    for (let k = 0; k < 4; k++) {
      const [r, g, b] = COLOURS[cls]!;
      writeFileSync(join(folder, cls, `${k}.png`), await sharp({ create: { width: 12, height: 12, channels: 3, background: { r, g, b } } }).png().toBuffer());
    }
  }
  // Classes sort ant, bee, cat: bee/1.png is sample 5, in batch 1 of 3 (batches of 4, no shuffle).
  bad = join(folder, 'bee', '1.png');
  writeFileSync(bad, Buffer.from('\x89PNG\r\n\x1a\n not really a png'));
});
after(() => rmSync(root, { recursive: true, force: true }));

const open = () => sources.imageFolder(folder, { size: 8 });
const base = { batchSize: 4, shuffle: false, workers: 0 } as const;

/** The sample ids each epoch delivered, and the error that ended it (if any). */
async function run(loader: DataLoader, epoch: number): Promise<{ ids: number[]; error: unknown }> {
  const ids: number[] = [];
  const error = await within(HANG_MS, `epoch ${epoch}`, (async () => {
    for await (const b of loader.epoch(epoch)) ids.push(...b.sampleIds);
  })()).then(() => undefined, (e: unknown) => e);
  return { ids, error };
}

function assertFailedBatch(error: unknown, epoch: number): void {
  assert.ok(error instanceof BatchError, String(error));
  assert.equal(error.code, 'ERR_BATCH_FAILED');
  assert.equal(error.epoch, epoch);
  assert.equal(error.batchIndex, 1);
  assert.deepEqual(error.sampleIds, [4, 5, 6, 7]);
  assert.ok(error.message.includes(bad), error.message);
}

describe("mode: 'auto' chooses resident only for samples already in memory", { timeout: SUITE_MS }, () => {
  for (const errors of ['throw', 'skip'] as const) {
    it(`an image folder with a corrupt file streams under 'auto', so create() succeeds and only its batch fails (errors: '${errors}')`, async () => {
      const loader = await DataLoader.create(open(), { ...base, errors });
      try {
        assert.equal(loader.isResident, false);
        const { ids, error } = await run(loader, 0);
        if (errors === 'throw') {
          assertFailedBatch(error, 0);
          assert.deepEqual(ids, [0, 1, 2, 3]);
        } else {
          assert.equal(error, undefined);
          assert.deepEqual(ids, [0, 1, 2, 3, 8, 9, 10, 11]);
          assert.equal(loader.stats().epochs[0]!.skippedBatches, 1);
        }
      } finally {
        await loader.close();
      }
    });
  }

  it('NPY data loaded into memory is resident under auto, and the same file read positioned streams', async () => {
    const file = join(root, 'x.npy');
    const header = "{'descr': '<f4', 'fortran_order': False, 'shape': (12,), }".padEnd(64 - 11, ' ') + '\n';
    const head = Buffer.alloc(10);
    Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]).copy(head);
    head.writeUInt16LE(header.length, 8);
    writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(Float32Array.from(range(12)).buffer)]));
    for (const [load, resident] of [['memory', true], ['positioned', false]] as const) {
      const loader = await DataLoader.create(sources.npy(file, { load }), { ...base });
      try {
        assert.equal(loader.isResident, resident, `load: '${load}'`);
        assert.deepEqual((await collect(loader.epoch(0))).flatMap((b) => [...b.sampleIds]), range(12));
      } finally {
        await loader.close();
      }
    }
  });
});

describe("explicit mode: 'resident' over files honours errors as streaming does", { timeout: SUITE_MS }, () => {
  it("errors: 'throw' builds the store, then each epoch fails at the batch holding the corrupt sample with a BatchError naming it", async () => {
    const loader = await DataLoader.create(open(), { ...base, mode: 'resident' });
    try {
      assert.equal(loader.isResident, true);
      for (const epoch of [0, 1]) {
        const { ids, error } = await run(loader, epoch);
        assertFailedBatch(error, epoch);
        assert.deepEqual(ids, [0, 1, 2, 3], 'the batch before it arrived');
        assert.match((error as Error).message, /cannot decode the image/);
      }
    } finally {
      await loader.close();
    }
  });

  it("errors: 'skip' delivers and counts exactly what streaming delivers and counts", async () => {
    const figures = async (mode: 'resident' | 'streaming') => {
      const loader = await DataLoader.create(open(), { ...base, mode, errors: 'skip' });
      try {
        const out = [];
        for (const epoch of [0, 1]) {
          const { ids, error } = await run(loader, epoch);
          assert.equal(error, undefined);
          const s = loader.stats().epochs[epoch]!;
          out.push({ ids, batches: s.batches, failedBatches: s.failedBatches, skippedBatches: s.skippedBatches, complete: s.complete });
        }
        return out;
      } finally {
        await loader.close();
      }
    };
    const resident = await figures('resident');
    assert.deepEqual(resident[0], { ids: [0, 1, 2, 3, 8, 9, 10, 11], batches: 2, failedBatches: 1, skippedBatches: 1, complete: true });
    assert.deepEqual(resident, await figures('streaming'));
  });
});
