// Fixtures and fuzz targets for the Arrow source: tables written by apache-arrow's own writer whose
// every value is a function of the row id, and a target that opens a file and reads every row.

import {
  Binary, Bool, Field, FixedSizeList, Float16, Float32, Float64, Int16, Int32, Int64, Int8, List, Struct, Table, Uint16, Uint64, Utf8,
  type Vector, tableToIPC, vectorFromArray,
} from 'apache-arrow';
import { arrowSource } from '../../src/dataset/formats/arrow.js';
import { openArrow } from '../../src/dataset/formats/arrow.js';
import { kSourceSpec } from '../../src/dataset/source-spec.js';

export interface RowOptions {
  /** Add arr2d: list<list<int32>> of shape [2, 3] in every row (Hugging Face's Array2D storage). */
  readonly lists?: boolean;
  /** Add blob: binary (row-id bytes) and img: struct<bytes: binary, path: utf8> with null paths. */
  readonly blobs?: boolean;
}

/** Rows [start, start + n) of the numeric table: one record batch. */
export function numericRows(start: number, n: number, opts: RowOptions = {}): Table {
  const ids = Array.from({ length: n }, (_, i) => start + i);
  const columns: Record<string, Vector> = {
    id: vectorFromArray(ids, new Int32()),
    i8: vectorFromArray(ids.map((i) => (i % 100) - 50), new Int8()),
    u16: vectorFromArray(ids.map((i) => i * 3), new Uint16()),
    i64: vectorFromArray(ids.map((i) => BigInt(i) * 1_000_000_000_000n - 7n), new Int64()),
    u64: vectorFromArray(ids.map((i) => BigInt(i) + 2n ** 40n), new Uint64()),
    f16: vectorFromArray(ids.map((i) => i / 2), new Float16()),
    f64: vectorFromArray(ids.map((i) => i + 0.25), new Float64()),
    flag: vectorFromArray(ids.map((i) => i % 3 === 0), new Bool()),
    vec: vectorFromArray(ids.map((i) => [i, i + 0.5, -i]), new FixedSizeList(3, new Field('item', new Float32()))),
    mat: vectorFromArray(ids.map((i) => [[i, 1], [2, -i], [3, 4]]), new FixedSizeList(3, new Field('item', new FixedSizeList(2, new Field('item', new Int16()))))),
  };
  if (opts.lists) {
    // Hugging Face's Array2D storage: list<list<…>> whose lengths are the same in every row.
    columns.arr2d = vectorFromArray(ids.map((i) => [[i, i + 1, i + 2], [i + 3, i + 4, i + 5]]), new List(new Field('item', new List(new Field('item', new Int32())))));
  }
  if (opts.blobs) {
    columns.blob = vectorFromArray(ids.map((i) => Uint8Array.from({ length: 1 + (i % 4) }, (_, j) => i + j)), new Binary());
    columns.img = vectorFromArray(
      ids.map((i) => ({ bytes: Uint8Array.of(i, 255 - i), path: null })),
      new Struct([new Field('bytes', new Binary(), true), new Field('path', new Utf8(), true)]),
    );
  }
  return new Table(columns);
}

/** The numeric table in record batches of the given sizes. */
export function numericTable(sizes: readonly number[], opts: RowOptions = {}): Table {
  let start = 0;
  const parts = sizes.map((n) => {
    const t = numericRows(start, n, opts);
    start += n;
    return t;
  });
  return parts[0]!.concat(...parts.slice(1));
}

export function numericBytes(format: 'stream' | 'file', sizes: readonly number[], opts: RowOptions = {}): Uint8Array {
  return tableToIPC(numericTable(sizes, opts), format);
}

/** A Hugging Face-shaped table: image struct<bytes, path>, int64 label, fixed_size_list<float32>[8] embedding. */
export function hfTable(images: readonly Uint8Array[], start = 0): Table {
  const ids = images.map((_, i) => start + i);
  return new Table({
    image: vectorFromArray(
      images.map((bytes, i) => ({ bytes, path: `img-${start + i}.png` })),
      new Struct([new Field('bytes', new Binary(), true), new Field('path', new Utf8(), true)]),
    ),
    label: vectorFromArray(ids.map((i) => BigInt(i % 10)), new Int64()),
    embedding: vectorFromArray(ids.map((i) => Array.from({ length: 8 }, (_, j) => i + j / 8)), new FixedSizeList(8, new Field('item', new Float32()))),
  });
}

/** Fuzz target: open the file and read every row, in shuffled batches of 5 (many record-batch switches). */
export function readAll(path: string): void {
  const source = arrowSource(path, { cacheBatches: 2 });
  const ids = Array.from({ length: source.length }, (_, i) => (i * 7919) % source.length);
  for (let i = 0; i < ids.length; i += 5) source.getBatch(ids.slice(i, i + 5));
}

/** Fuzz target: as `readAll`, but through the worker factory (the reopen path). */
export function readAllReopened(path: string): void {
  const spec = arrowSource(path, { cacheBatches: 0 })[kSourceSpec]();
  const source = openArrow(spec.options as Parameters<typeof openArrow>[0]);
  for (let i = 0; i < source.length; i += 4) source.getBatch(Array.from({ length: Math.min(4, source.length - i) }, (_, j) => i + j));
}

/** A decoder module as a data: URL (no file to write): the byte count and the first byte, as int32. */
export const LENGTH_DECODER = {
  kind: 'module',
  module: `data:text/javascript,${encodeURIComponent('export function decode(b, row) { return Int32Array.of(b.length, b.length > 0 ? b[0] : -1, row); }')}`,
  export: 'decode',
} as const;

/** Fuzz target: the blob columns through a module decoder, then every row, asynchronously. */
export async function readAllDecoded(path: string): Promise<void> {
  const source = arrowSource(path, { cacheBatches: 2, decoders: { blob: LENGTH_DECODER, img: LENGTH_DECODER } });
  for (let i = 0; i < source.length; i += 3) await source.getBatch(Array.from({ length: Math.min(3, source.length - i) }, (_, j) => source.length - 1 - i - j));
}
