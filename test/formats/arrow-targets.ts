// Fixtures and fuzz targets for the Arrow source: tables written by apache-arrow's own writer whose
// every value is a function of the row id, and targets that open a file and read every row, by row
// reads and by decoding whole record batches, and check that both give the same.

import { isDeepStrictEqual } from 'node:util';
import {
  Binary, Bool, Dictionary, Field, FixedSizeBinary, FixedSizeList, Float16, Float32, Float64, Int16, Int32, Int64, Int8, LargeBinary, LargeList,
  LargeUtf8, List, MessageHeader, Struct, Table, Uint16, Uint32, Uint64, Uint8, Utf8, type Vector, tableToIPC, vectorFromArray,
} from 'apache-arrow';
import { Message as FbMessage } from 'apache-arrow/fb/message';
import { RecordBatch as FbRecordBatch } from 'apache-arrow/fb/record-batch';
import { ByteBuffer } from 'flatbuffers';
import type { Tensor } from '../../src/index.js';
import { type ArrowSource, arrowSource, openArrow } from '../../src/dataset/formats/arrow/arrow.js';
import { arrowRaggedSource } from '../../src/dataset/formats/arrow/arrow-ragged.js';
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

/** Rows 0 … n-1 in a fixed scrambled order (7919 is prime, so this is a permutation unless n is a multiple of it). */
export function scrambled(n: number): number[] {
  return Array.from({ length: n }, (_, i) => (i * 7919) % n);
}

/**
 * Read `batches` of ids from `rows` (row reads) and `whole` (decoding whole record batches) and
 * check that both give the same tensors, or both refuse (the row path's error is thrown). Only one
 * refusing is an error too: with every column selected, both read the same buffers with the same
 * checks. (With some columns left out, decoding may refuse a record batch for a column row reads do
 * not touch, such as an unaligned buffer elsewhere.)
 */
export async function readBothWays(rows: ArrowSource, whole: ArrowSource, batches: readonly (readonly number[])[]): Promise<void> {
  for (const ids of batches) {
    let a: Record<string, Tensor> | undefined;
    let b: Record<string, Tensor> | undefined;
    let errA: unknown;
    let errB: unknown;
    try {
      a = await rows.getBatch(ids);
    } catch (e) {
      errA = e;
    }
    try {
      b = await whole.getBatch(ids);
    } catch (e) {
      errB = e;
    }
    if ((errA === undefined) !== (errB === undefined)) throw new Error(`only ${errA ? 'row reads' : 'whole record batches'} refused ids ${ids.join(', ')}: ${((errA ?? errB) as Error).message}`);
    if (errA !== undefined) throw errA;
    if (errB !== undefined) throw errB;
    for (const name of Object.keys(b!)) {
      const x = a![name]!;
      const y = b![name]!;
      if (x.dtype !== y.dtype || !isDeepStrictEqual(x.shape, y.shape) || !isDeepStrictEqual(bytesOf(x), bytesOf(y))) {
        throw new Error(`row reads and whole record batches differ in column ${name} for ids ${ids.join(', ')}: ${x.dtype} [${x.shape}] vs ${y.dtype} [${y.shape}]`);
      }
    }
    if (!isDeepStrictEqual(Object.keys(a!), Object.keys(b!))) throw new Error(`row reads gave columns ${Object.keys(a!)}, whole record batches ${Object.keys(b!)}`);
  }
}

/** The bytes of a tensor's data (a Uint8Array view). */
export function bytesOf(t: Tensor): Uint8Array {
  const d = t.data;
  return new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
}

function batchesOf(ids: readonly number[], size: number): number[][] {
  const out: number[][] = [];
  for (let i = 0; i < ids.length; i += size) out.push(ids.slice(i, i + size));
  return out;
}

/** Fuzz target: open the file and read every row, in shuffled batches of 5, by row reads and by whole record batches. */
export async function readAll(path: string): Promise<void> {
  const rows = arrowSource(path, { cacheBatches: 2 });
  await readBothWays(rows, arrowSource(path, { cacheBatches: 2, rowReads: false }), batchesOf(scrambled(rows.length), 5));
}

/** Fuzz target: as `readAll`, through the worker factory (the reopen path), in sequential batches of 4. */
export async function readAllReopened(path: string): Promise<void> {
  const spec = arrowSource(path, { cacheBatches: 0 })[kSourceSpec]().options as Parameters<typeof openArrow>[0];
  const rows = openArrow(spec);
  const ids = Array.from({ length: rows.length }, (_, i) => i);
  await readBothWays(rows, openArrow({ ...spec, rowTable: undefined }), batchesOf(ids, 4));
}

/**
 * Fuzz target for the Polars files of test/fixtures/reference/arrow: the numeric columns both ways
 * (a compressed record batch is read whole either way), then the string and list columns as ragged
 * fields, every row.
 */
export async function readPolars(path: string): Promise<void> {
  const columns = ['id', 'x', 'u'];
  const rows = arrowSource(path, { columns, cacheBatches: 2 });
  await readBothWays(rows, arrowSource(path, { columns, cacheBatches: 2, rowReads: false }), batchesOf(scrambled(rows.length), 7));
  const ragged = arrowRaggedSource(path, { columns: [], ragged: { s: 'values', ids: 'values' } });
  for (let i = 0; i < ragged.length; i++) await ragged.get(i);
}

/** A decoder module as a data: URL (no file to write): the byte count and the first byte, as int32. */
export const LENGTH_DECODER = {
  kind: 'module',
  module: `data:text/javascript,${encodeURIComponent('export function decode(b, row) { return Int32Array.of(b.length, b.length > 0 ? b[0] : -1, row); }')}`,
  export: 'decode',
} as const;

/** Fuzz target: the blob columns through a module decoder, then every row in shuffled batches of 3, both ways. */
export async function readAllDecoded(path: string): Promise<void> {
  const decoders = { blob: HASH_DECODER, img: HASH_DECODER };
  const rows = arrowSource(path, { cacheBatches: 2, decoders });
  await readBothWays(rows, arrowSource(path, { cacheBatches: 2, decoders, rowReads: false }), batchesOf(scrambled(rows.length).reverse(), 3));
}

/** A decoder module that hashes the bytes (FNV-1a): [length, hash, row] as int32, so that two reads of a row compare. */
export const HASH_DECODER = {
  kind: 'module',
  module: `data:text/javascript,${encodeURIComponent('export function decode(b, row) { let h = 0x811c9dc5; for (const x of b) { h ^= x; h = Math.imul(h, 0x01000193); } return Int32Array.of(b.length, h | 0, row); }')}`,
  export: 'decode',
} as const;

/** Files a `kindsTable` image struct refers to by path (its bytes null in rows ≡ 1 mod 4). */
export const KIND_FILES = ['kinds-0.bin', 'kinds-1.bin', 'kinds-2.bin'] as const;

/** The binary and string columns of `kindsTable`, which need a decoder. */
export const KIND_DECODED = ['blob', 'text', 'lblob', 'ltext', 'img'] as const;

/**
 * Every column kind the source reads, each value a function of the row id, in record batches of
 * `sizes` (slices of one table, so that the dictionaries are shared): integers of each width,
 * floats, booleans, fixed-size lists (nested, of booleans, of fixed-size binary), fixed-size binary,
 * dictionary codes, fixed-shape lists (list, list of lists, large list), binary and string columns
 * (plain and large), and a Hugging Face image struct whose bytes are null in some rows (read by
 * path) and whose path is null in others.
 */
export function kindsTable(sizes: readonly number[]): Table {
  const n = sizes.reduce((a, b) => a + b, 0);
  const ids = Array.from({ length: n }, (_, i) => i);
  const item = (t: ConstructorParameters<typeof Field>[1]) => new Field('item', t);
  const full = new Table({
    i8: vectorFromArray(ids.map((i) => (i % 200) - 100), new Int8()),
    u8: vectorFromArray(ids.map((i) => (i * 7) % 256), new Uint8()),
    i16: vectorFromArray(ids.map((i) => i * 7 - 300), new Int16()),
    u16: vectorFromArray(ids.map((i) => i * 3), new Uint16()),
    i32: vectorFromArray(ids.map((i) => (i * 100_003) | 0), new Int32()),
    u32: vectorFromArray(ids.map((i) => (i * 2_654_435_761) % 2 ** 32), new Uint32()),
    i64: vectorFromArray(ids.map((i) => BigInt(i) * -3_000_000_000n), new Int64()),
    u64: vectorFromArray(ids.map((i) => BigInt(i) * 2n ** 33n), new Uint64()),
    f16: vectorFromArray(ids.map((i) => i / 4), new Float16()),
    f32: vectorFromArray(ids.map((i) => i * 1.5), new Float32()),
    f64: vectorFromArray(ids.map((i) => i / 3), new Float64()),
    flag: vectorFromArray(ids.map((i) => i % 3 === 0), new Bool()),
    vec: vectorFromArray(ids.map((i) => [i, i + 0.5, -i]), new FixedSizeList(3, item(new Float32()))),
    mat: vectorFromArray(ids.map((i) => [[i, 1], [2, -i], [3, 4]]), new FixedSizeList(3, item(new FixedSizeList(2, item(new Int16()))))),
    bits: vectorFromArray(ids.map((i) => [i % 2 === 0, i % 3 === 0, i % 5 === 0]), new FixedSizeList(3, item(new Bool()))),
    fsb: vectorFromArray(ids.map((i) => Uint8Array.from({ length: 5 }, (_, j) => (i + j) & 255)), new FixedSizeBinary(5)),
    fsbs: vectorFromArray(ids.map((i) => [Uint8Array.of(i & 255, 1), Uint8Array.of(2, (i * 3) & 255)]), new FixedSizeList(2, item(new FixedSizeBinary(2)))),
    cls8: vectorFromArray(ids.map((i) => ['cat', 'dog', 'eel'][i % 3]!), new Dictionary(new Utf8(), new Int8())),
    cls16: vectorFromArray(ids.map((i) => `c${i % 300}`), new Dictionary(new Utf8(), new Int16())),
    seq: vectorFromArray(ids.map((i) => [i, -i]), new List(item(new Int32()))),
    arr2d: vectorFromArray(ids.map((i) => [[i, i + 1, i + 2], [i + 3, i + 4, i + 5]]), new List(item(new List(item(new Int32()))))),
    big: vectorFromArray(ids.map((i) => [i, i / 2]), new LargeList(item(new Float64()))),
    blob: vectorFromArray(ids.map((i) => Uint8Array.from({ length: 1 + (i % 5) }, (_, j) => (i * 11 + j) & 255)), new Binary()),
    text: vectorFromArray(ids.map((i) => 'xyz'.repeat(i % 4)), new Utf8()),
    lblob: vectorFromArray(ids.map((i) => Uint8Array.from({ length: i % 3 }, (_, j) => (i + j * 7) & 255)), new LargeBinary()),
    ltext: vectorFromArray(ids.map((i) => `row ${i}`), new LargeUtf8()),
    img: vectorFromArray(
      ids.map((i) => ({ bytes: i % 4 === 1 ? null : Uint8Array.of(i & 255, 255 - (i & 255)), path: i % 4 === 2 ? null : KIND_FILES[i % 3]! })),
      new Struct([new Field('bytes', new Binary(), true), new Field('path', new Utf8(), true)]),
    ),
  });
  let start = 0;
  return new Table(sizes.flatMap((size) => {
    const part = full.slice(start, start + size);
    start += size;
    return part.batches;
  }));
}

/** Where one record batch's tables lie in an IPC file: byte positions of its field node and buffer structs (two int64 each), and its body. */
export interface BatchTable {
  readonly body: number;
  readonly bodyLength: number;
  /** (length, null count) at each position. */
  readonly nodes: readonly number[];
  /** (offset in the body, length) at each position. */
  readonly buffers: readonly number[];
}

/** The tables of every record batch of a well-formed IPC stream or file, in order. */
export function batchTables(bytes: Uint8Array): BatchTable[] {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = bytes[0] === 0x41 ? 8 : 0; // a file: "ARROW1" and two bytes of padding, then a stream
  const out: BatchTable[] = [];
  for (;;) {
    let length = dv.getInt32(at, true);
    let prefix = 4;
    if (length === -1) {
      length = dv.getInt32(at + 4, true);
      prefix = 8;
    }
    if (length === 0) return out;
    const meta = at + prefix;
    const message = FbMessage.getRootAsMessage(new ByteBuffer(bytes.subarray(meta, meta + length)));
    const body = meta + length;
    const bodyLength = Number(message.bodyLength());
    if (message.headerType() === MessageHeader.RecordBatch) {
      const rb = message.header(new FbRecordBatch()) as FbRecordBatch;
      out.push({
        body, bodyLength,
        nodes: Array.from({ length: rb.nodesLength() }, (_, i) => meta + rb.nodes(i)!.bb_pos),
        buffers: Array.from({ length: rb.buffersLength() }, (_, i) => meta + rb.buffers(i)!.bb_pos),
      });
    }
    at = body + bodyLength;
  }
}
