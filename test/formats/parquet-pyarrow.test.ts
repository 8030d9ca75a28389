// sources.parquet on files written by an independent tool, pyarrow, in the test: int64, int32,
// float32, bool, list<int32> and string columns over several row groups, with pyarrow's compression,
// dictionary and data-page settings varied — every row read back equal to what Python wrote, by the
// source and by a reopened copy (what reader workers make), rows in shuffled order too. Skipped where
// no Python with pyarrow is found ($PYTHON, python3, /usr/bin/python3): the GPU host has it.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { openParquet } from '../../src/dataset/formats/text/parquet.js';
import { specOf } from '../../src/dataset/source-spec.js';
import { type Tensor, sources } from '../../src/index.js';
import { TEST_MS, range } from '../fixtures.js';
import { EXPECTED, TOKENIZER } from './text-targets.js';

const candidates = [process.env.PYTHON, 'python3', '/usr/bin/python3'].filter((p): p is string => p !== undefined && p !== '');
const PYTHON = candidates.find((p) => spawnSync(p, ['-c', 'import pyarrow'], { stdio: 'ignore', timeout: 30_000 }).status === 0);
const skip = PYTHON === undefined ? `no Python with pyarrow (tried ${candidates.join(', ')})` : false;
const dir = mkdtempSync(join(tmpdir(), 'stoker-pyarrow-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const N = 53;
const TEXTS = Object.keys(EXPECTED);
const WRITE = `
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
path, n, compression, dictionary, page = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == 'yes', sys.argv[5]
texts = json.loads(sys.argv[6])
table = pa.table({
    'id': pa.array(range(n), pa.int64()),
    'label': pa.array([i % 3 for i in range(n)], pa.int32()),
    'x': pa.array([i / 4 for i in range(n)], pa.float32()),
    'flag': pa.array([i % 2 == 1 for i in range(n)], pa.bool_()),
    'ids': pa.array([[100 * i + j for j in range(i % 5)] for i in range(n)], pa.list_(pa.int32())),
    'text': pa.array([texts[i % len(texts)] for i in range(n)], pa.string()),
})
pq.write_table(table, path, row_group_size=8, compression=compression, use_dictionary=dictionary, data_page_version=page)
print(pq.ParquetFile(path).metadata.num_row_groups, pa.__version__)
`;

function write(name: string, compression: string, dictionary: boolean, page: '1.0' | '2.0'): { path: string; rowGroups: number } {
  const path = join(dir, name);
  const r = spawnSync(PYTHON!, ['-c', WRITE, path, String(N), compression, dictionary ? 'yes' : 'no', page, JSON.stringify(TEXTS)], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  return { path, rowGroups: Number(r.stdout.trim().split(' ')[0]) };
}

function checkRow(s: Record<string, unknown>, i: number): void {
  assert.equal((s.id as Tensor).data[0], BigInt(i));
  assert.equal((s.label as Tensor).dtype, 'int32');
  assert.equal((s.label as Tensor).data[0], i % 3);
  assert.equal((s.x as Tensor).dtype, 'float32');
  assert.equal((s.x as Tensor).data[0], i / 4);
  assert.equal((s.flag as Tensor).data[0], i % 2);
  assert.equal((s.ids as Tensor).dtype, 'int32');
  assert.deepEqual(Array.from((s.ids as Tensor).data as Int32Array), range(i % 5).map((j) => 100 * i + j));
  assert.deepEqual(Array.from(s.text as Int32Array), EXPECTED[TEXTS[i % TEXTS.length]!], `row ${i}'s text`);
}

describe('sources.parquet reads files pyarrow wrote', { skip, timeout: TEST_MS }, () => {
  for (const [compression, dictionary, page] of [['snappy', true, '1.0'], ['none', false, '2.0'], ['snappy', false, '2.0'], ['none', true, '1.0']] as const) {
    it(`every row equal: compression ${compression}, dictionary ${dictionary ? 'on' : 'off'}, data pages v${page}`, async () => {
      const { path, rowGroups } = write(`${compression}-${dictionary}-${page}.parquet`, compression, dictionary, page);
      assert.equal(rowGroups, Math.ceil(N / 8), 'pyarrow wrote several row groups');
      const ds = await sources.parquet(path, { columns: ['id', 'label', 'x', 'flag', 'ids', 'text'], tokenizer: { path: TOKENIZER, addSpecialTokens: false } });
      assert.equal(ds.length, N);
      assert.equal(ds.numRowGroups, rowGroups);
      assert.deepEqual(ds.ragged, ['ids', 'text']);
      for (const i of range(N)) checkRow(await ds.get(i), i);
      // A reopened copy, as a reader worker opens it, in a shuffled order across row groups.
      const again = await openParquet(specOf(ds)!.options as never);
      const order = range(N).map((i) => (i * 37) % N);
      for (const i of order) checkRow(await again.get(i), i);
      ds.close();
      again.close();
    });
  }
});
