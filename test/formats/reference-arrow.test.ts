// sources.arrow on the IPC files and streams Polars writes (test/fixtures/reference/make.mjs, which
// checked that Polars reads each back equal to reference-rules.mjs): uncompressed, and with LZ4
// frame or ZSTD bodies; numbers by row reads or whole decoded record batches, Utf8View strings and
// large lists as ragged fields, tokenized too; through reader workers. A damaged compressed buffer
// is ERR_BAD_FILE naming the record batch and the buffer, and mutants of the compressed files are
// read or refused with a typed error.

import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { ArrowSource } from '../../src/dataset/formats/arrow/arrow.js';
import type { ArrowRaggedSource } from '../../src/dataset/formats/arrow/arrow-ragged.js';
import { buildIndex } from '../../src/dataset/formats/arrow/arrow-index.js';
import { PositionedFile } from '../../src/dataset/formats/file.js';
import { resolveTokenizer, tokenize } from '../../src/dataset/formats/text/tokenizer.js';
import { DataLoader, type Tensor, sources } from '../../src/index.js';
import { HANG_MS, TEST_MS, collect, range, sorted, tempDir, within } from '../fixtures.js';
import { FRAME_ROWS, frameRow } from '../fixtures/reference/reference-rules.mjs';
import { assertFuzzClean, fuzz } from './fuzz.js';
import { TOKENIZER } from './text-targets.js';

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/reference/arrow/${name}`, import.meta.url));
const FILES = ['none', 'lz4', 'zstd'].flatMap((c) => [`polars-${c}.arrow`, `polars-${c}.arrows`]);
const utf8 = (s: string) => Array.from(new TextEncoder().encode(s));
const TARGETS = new URL('./arrow-targets.ts', import.meta.url).href;

describe('sources.arrow reads what Polars writes', () => {
  for (const name of FILES) {
    it(`reads every value of ${name}: numbers, Utf8View / large strings and large lists`, () => {
      const ds = sources.arrow(fixture(name), { columns: ['id', 'x', 'u'] }) as ArrowSource;
      assert.equal(ds.length, FRAME_ROWS);
      // Polars writes a file's chunks as record batches, and rechunks a stream into one.
      const batches = name.endsWith('.arrow') ? 3 : 1;
      assert.equal(ds.numRecordBatches, batches);
      const b = ds.getBatch(range(FRAME_ROWS)) as Record<string, Tensor>;
      assert.deepEqual(Array.from(b.id!.data as BigInt64Array), range(FRAME_ROWS).map((i) => BigInt(frameRow(i).id)));
      assert.deepEqual(Array.from(b.x!.data as Float32Array), range(FRAME_ROWS).map((i) => frameRow(i).x));
      assert.deepEqual(Array.from(b.u!.data as Uint32Array), range(FRAME_ROWS).map((i) => frameRow(i).u));
      // Compressed record batches have no rows in place: they are read whole, once each.
      const stats = ds.stats();
      assert.deepEqual([stats.reads, stats.rowBatches], name.startsWith('polars-none') ? [0, batches] : [batches, 0]);
    });
  }

  it('reads the string and list columns of every file as ragged fields, in the source and through a tokenizer', async () => {
    const t = resolveTokenizer({ path: TOKENIZER });
    for (const name of FILES) {
      const ds = sources.arrow(fixture(name), { columns: ['id'], ragged: { s: 'values', ids: 'values' } }) as ArrowRaggedSource;
      const tokens = sources.arrow(fixture(name), { columns: [], ragged: { s: { tokenizer: { path: TOKENIZER } } } }) as ArrowRaggedSource;
      for (const i of range(FRAME_ROWS)) {
        const r = frameRow(i);
        const s = await ds.get(i);
        assert.equal((s.id as Tensor).data[0], BigInt(r.id), `${name} row ${i}`);
        assert.deepEqual(Array.from(s.s as Uint8Array), utf8(r.s), `${name} row ${i} s`);
        assert.deepEqual(Array.from((s.ids as Tensor).data as Int32Array), r.ids, `${name} row ${i} ids`);
        assert.deepEqual((await tokens.get(i)).s, await tokenize(t, r.s), `${name} row ${i} tokens`);
      }
      assert.deepEqual(Array.from(await ds.loadLengths('s')), range(FRAME_ROWS).map((i) => utf8(frameRow(i).s).length));
      await ds.close();
      await tokens.close();
    }
  });

  it('decompresses in reader workers: the LZ4 and ZSTD files through 2 workers, each row once with its values', { timeout: TEST_MS }, async () => {
    const paths = ['polars-lz4.arrow', 'polars-zstd.arrow', 'polars-lz4.arrows', 'polars-zstd.arrows'].map(fixture);
    const loader = await DataLoader.create(sources.arrow(paths, { columns: ['id', 'u'] }), { batchSize: 128, workers: 2, mode: 'streaming', dropLast: false, seed: 9 });
    try {
      const seen: number[] = [];
      for (const b of await within(HANG_MS, 'an epoch', collect(loader.epoch(0)))) {
        const id = b.get('id').data as BigInt64Array;
        const u = b.get('u').data as Uint32Array;
        b.sampleIds.forEach((sample, r) => {
          const row = frameRow(sample % FRAME_ROWS);
          assert.deepEqual([id[r], u[r]], [BigInt(row.id), row.u], `sample ${sample}`);
          seen.push(sample);
        });
        b.release();
      }
      assert.deepEqual(sorted(seen), range(paths.length * FRAME_ROWS));
    } finally {
      await loader.close();
    }
  });

  it('refuses a compressed buffer that decompresses to another length than it states, naming the record batch and the buffer', (t) => {
    const bytes = new Uint8Array(readFileSync(fixture('polars-lz4.arrow')));
    const file = new PositionedFile(fixture('polars-lz4.arrow'));
    const { index, headers } = buildIndex(file);
    file.close();
    // The first compressed buffer of record batch 1: state one byte more than it holds.
    const body = index.offsets[1]! + index.metaLengths[1]!;
    const buffers = headers.buffers[1]!;
    const dv = new DataView(bytes.buffer);
    let b = 0;
    while (buffers[2 * b + 1]! < 8 || dv.getBigInt64(body + buffers[2 * b]!, true) === -1n) b++;
    const at = body + buffers[2 * b]!;
    dv.setBigInt64(at, dv.getBigInt64(at, true) + 1n, true);
    const path = join(tempDir(t, 'stoker-arrow-lz4-'), 'damaged.arrow');
    writeFileSync(path, bytes);
    const ds = sources.arrow(path, { columns: ['id', 'x', 'u'] }) as ArrowSource;
    assert.throws(() => ds.getBatch([150]), (e: any) => e.code === 'ERR_BAD_FILE' && e.message.includes('record batch 1') && e.message.includes(`buffer ${b}`) && e.message.includes('LZ4'));
    assert.equal((ds.getBatch([5]) as Record<string, Tensor>).u!.data[0], frameRow(5).u, 'the other record batches read on');
  });

  for (const name of ['polars-lz4.arrow', 'polars-zstd.arrows']) {
    it(`500 mutants of ${name} are read or refused with a typed error, never a crash or a hang`, { timeout: TEST_MS }, async () => {
      // A mutant may rename a column (ERR_INVALID_OPTION), change its type to one not read
      // (ERR_INVALID_DATASET), or hold no rows (ERR_EMPTY_DATASET): each names the file.
      const allowCodes = ['ERR_INVALID_OPTION', 'ERR_INVALID_DATASET', 'ERR_EMPTY_DATASET'];
      const report = await fuzz({ valid: new Uint8Array(readFileSync(fixture(name))), ext: '.arrow', module: TARGETS, target: 'readPolars', cases: 500, seed: 11, allowCodes });
      assertFuzzClean(report);
      assert.ok(report.ok > 0 && (report.refused.ERR_BAD_FILE ?? 0) > 0, JSON.stringify(report));
    });
  }
});
