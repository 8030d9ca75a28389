// `bench parquet-codecs`: what each Parquet codec costs a reader, against the same table stored
// uncompressed, measured in the same run. The input is one table written by DuckDB in every codec it
// writes: `node test/fixtures/reference/make.mjs --bench DIR [--rows N]` (its header says how to
// install DuckDB for it) leaves DIR/<codec>.parquet. Three figures per codec, each the median of
// --rounds rounds in which the codecs take turns, starting with a different one each round:
//   pages   every data page of the file decompressed alone (codecs.ts; SNAPPY by hyparquet's own
//           decoder, as sources.parquet reads it), MB/s of decompressed bytes;
//   decode  every row group decoded by a ParquetSource in this thread, as a reader does: rows/s;
//   threads the same in --threads worker threads at once, each after a first untimed pass (reader
//           workers are long-lived worker threads, and a codec in JavaScript runs in each): rows/s
//           of them all together.
// The last lines are the ratios of decode time against the uncompressed file, in this thread and in
// the worker threads. (Through a DataLoader, per-sample overhead would hide the codecs: sources.parquet
// delivers rows one get(i) at a time.)
// `npm run bench -- parquet-codecs --dir DIR [--rounds 3] [--threads 2]`

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { type CompressionCodec, parquetMetadata, snappyUncompress } from 'hyparquet';
import { parquetHeader } from 'hyparquet/src/column.js';
import { PARQUET_CODECS } from '../src/dataset/formats/codecs.js';
import { parquetSource } from '../src/dataset/formats/text/parquet.js';
import { workerBoot } from '../src/base/worker-boot.js';
import { UsageError, fmtFixed, fmtInt, hardwareLine, median, now, sink, table } from './util.js';

const USAGE = 'npm run bench -- parquet-codecs --dir DIR [--rounds 3] [--threads 2]   (DIR from: node test/fixtures/reference/make.mjs --bench DIR)';
/** make.mjs --bench writes row groups of this many rows. */
const GROUP_ROWS = 100_000;
const CODECS = ['uncompressed', 'snappy', 'gzip', 'zstd', 'brotli', 'lz4_raw'] as const;
const COLUMNS = ['id', 'label', 'x', 'h'];

interface Page {
  readonly bytes: Uint8Array;
  readonly size: number;
  readonly codec: CompressionCodec;
}

/** Every data and dictionary page of the file: its compressed bytes (levels of v2 pages left out) and stated size. */
function pagesOf(path: string): Page[] {
  const file = readFileSync(path);
  const buffer = file.buffer.slice(file.byteOffset, file.byteOffset + file.length);
  const out: Page[] = [];
  for (const group of parquetMetadata(buffer).row_groups) {
    for (const { meta_data: m } of group.columns) {
      const start = Number(m!.dictionary_page_offset || m!.data_page_offset);
      const reader = { view: new DataView(buffer, start, Number(m!.total_compressed_size)), offset: 0 };
      while (reader.offset < reader.view.byteLength) {
        const h = parquetHeader(reader);
        const levels = h.data_page_header_v2 === undefined ? 0 : h.data_page_header_v2.definition_levels_byte_length + h.data_page_header_v2.repetition_levels_byte_length;
        out.push({ bytes: new Uint8Array(buffer, start + reader.offset + levels, h.compressed_page_size - levels), size: h.uncompressed_page_size - levels, codec: m!.codec });
        reader.offset += h.compressed_page_size;
      }
    }
  }
  return out;
}

function decompressAll(pages: readonly Page[]): number {
  let bytes = 0;
  for (const p of pages) {
    let out: Uint8Array;
    if (p.codec === 'UNCOMPRESSED') out = p.bytes;
    else if (p.codec === 'SNAPPY') snappyUncompress(p.bytes, (out = new Uint8Array(p.size)));
    else out = PARQUET_CODECS[p.codec as keyof typeof PARQUET_CODECS](p.bytes, p.size);
    sink.value += out[out.length - 1] ?? 0;
    bytes += out.length;
  }
  return bytes;
}

/** Decode every row group of `path` in this thread (a get per row group: its rows are decoded whole). */
async function decodeAll(path: string): Promise<number> {
  const ds = await parquetSource(path, { columns: COLUMNS });
  for (let i = 0; i < ds.length; i += GROUP_ROWS) sink.value += Number(((await ds.get(i)).label as { data: Int32Array }).data[0]);
  ds.close();
  return ds.length;
}

/** Milliseconds for `threads` worker threads to decode the whole file each, all at once (their start-up and first pass left out). */
async function decodeInThreads(path: string, threads: number): Promise<number> {
  const workers = Array.from({ length: threads }, () => new Worker(workerBoot(new URL('./fixtures/parquet-decode-worker.ts', import.meta.url)), { eval: true, workerData: { path, columns: COLUMNS, groupRows: GROUP_ROWS } }));
  try {
    await Promise.all(workers.map((w) => new Promise((resolve, reject) => w.once('message', resolve).once('error', reject))));
    const t = now();
    await Promise.all(workers.map((w) => new Promise((resolve, reject) => {
      w.once('message', resolve).once('error', reject);
      w.postMessage('go');
    })));
    return now() - t;
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

export async function main(args: readonly string[]): Promise<void> {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({ args: [...args], options: { dir: { type: 'string' }, rounds: { type: 'string', default: '3' }, threads: { type: 'string', default: '2' } }, strict: true }) as { values: Record<string, string | undefined> });
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nusage: ${USAGE}`);
  }
  const dir = values.dir;
  if (dir === undefined) throw new UsageError(`--dir is required\nusage: ${USAGE}`);
  const missing = CODECS.filter((c) => !existsSync(join(dir, `${c}.parquet`)));
  if (missing.length > 0) throw new UsageError(`${dir} lacks ${missing.map((c) => `${c}.parquet`).join(', ')}\nusage: ${USAGE}`);
  const rounds = Number(values.rounds);
  const threads = Number(values.threads);
  const path = (c: string) => join(dir, `${c}.parquet`);
  const pages = Object.fromEntries(CODECS.map((c) => [c, pagesOf(path(c))]));
  const times = Object.fromEntries(CODECS.map((c) => [c, { pages: [] as number[], decode: [] as number[], threads: [] as number[] }]));
  let rows = 0;
  let pageBytes = 0;
  for (let r = 0; r < rounds + 1; r++) {
    for (let j = 0; j < CODECS.length; j++) {
      const c = CODECS[(r + j) % CODECS.length]!;
      let t = now();
      pageBytes = decompressAll(pages[c]!);
      const tPages = now() - t;
      t = now();
      rows = await decodeAll(path(c));
      const tDecode = now() - t;
      const tThreads = await decodeInThreads(path(c), threads);
      if (r === 0) continue; // warm-up round
      times[c]!.pages.push(tPages);
      times[c]!.decode.push(tDecode);
      times[c]!.threads.push(tThreads);
    }
  }
  const med = (c: string, k: 'pages' | 'decode' | 'threads') => median(times[c]![k]);
  console.log(`bench parquet-codecs — ${hardwareLine()}`);
  console.log(`${rows} rows × ${COLUMNS.length} columns (${COLUMNS.join(', ')}); ${fmtInt(pageBytes / 1e6)} MB of pages decompressed; median of ${rounds} rounds; ${threads} worker threads\n`);
  console.log(table([...CODECS], [
    { title: 'codec', cell: (c) => c },
    { title: 'file MB', align: 'right', cell: (c) => fmtFixed(readFileSync(path(c)).length / 1e6, 1) },
    { title: 'pages MB/s', align: 'right', cell: (c) => (c === 'uncompressed' ? '—' : fmtInt(pageBytes / 1e3 / med(c, 'pages'))) },
    { title: 'decode rows/s', align: 'right', cell: (c) => fmtInt((rows * 1e3) / med(c, 'decode')) },
    { title: `${threads} threads rows/s`, align: 'right', cell: (c) => fmtInt((threads * rows * 1e3) / med(c, 'threads')) },
  ]));
  console.log(`\nratio of decode time against uncompressed (this thread, ${threads} worker threads):`);
  for (const c of CODECS.slice(1)) console.log(`  ${c.padEnd(8)} ${fmtFixed(med(c, 'decode') / med('uncompressed', 'decode'), 2)}  ${fmtFixed(med(c, 'threads') / med('uncompressed', 'threads'), 2)}`);
  if (sink.value === 0.5) console.log('');
}
