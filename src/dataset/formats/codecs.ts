// Internal: not exported from the package entry.
// The decompressors of Parquet pages and Arrow IPC bodies, one table for both formats: GZIP and
// BROTLI through Node's zlib (native, built in), ZSTD through Node's zlib where it has zstd (Node ≥
// 22.15) and else fzstd (pure JavaScript), LZ4 through lz4.ts. SNAPPY stays with hyparquet's own
// decoder. The rule: each returns exactly the `size` bytes the file states for the data, or throws
// (a stream that decompresses to another length is damaged, never padded or cut).
//
// Why not hyparquet-compressors (the add-on made for hyparquet): measured on the 2-core VM over the
// pages of one 23 MB table (bench/parquet-codecs.ts has the end-to-end figures), its pure-JavaScript
// GZIP and BROTLI decode at a quarter to a third of the speed of Node's zlib, its ZSTD is fzstd
// (used here directly), and its LZ4 has no frame decoder (Arrow needs one) and leaves the rest of
// the output zero when a page decompresses short.

import * as zlib from 'node:zlib';
import { decompress as fzstd } from 'fzstd';
import { lz4Frames, lz4Hadoop, lz4Raw } from './lz4.js';

/** Decompress `input` into exactly `size` bytes, or throw. */
export type Decompress = (input: Uint8Array, size: number) => Uint8Array;

function exactly(out: Uint8Array, size: number, codec: string): Uint8Array {
  if (out.length !== size) throw new Error(`${codec}: the data decompresses to ${out.length} bytes, not the ${size} stated`);
  return out;
}

/** zlib refuses output past `maxOutputLength` (a forged small size cannot make it allocate more). */
const limit = (size: number) => ({ maxOutputLength: Math.max(1, size) });

type ZstdSync = (input: Uint8Array, options: { maxOutputLength: number }) => Buffer;
const nativeZstd = (zlib as unknown as { zstdDecompressSync?: ZstdSync }).zstdDecompressSync;

/** ZSTD in pure JavaScript (fzstd): the decoder where Node's zlib has no zstd, and in tests. */
export const zstdJs: Decompress = (input, size) => exactly(fzstd(input), size, 'ZSTD');

export const zstd: Decompress = nativeZstd === undefined ? zstdJs : (input, size) => exactly(nativeZstd(input, limit(size)), size, 'ZSTD');

/**
 * Parquet's codecs beyond hyparquet's own (UNCOMPRESSED, SNAPPY), keyed as hyparquet's
 * `compressors` option is. GZIP pages may hold several gzip members (zlib's gunzip reads them all).
 */
export const PARQUET_CODECS: Readonly<Record<'GZIP' | 'BROTLI' | 'ZSTD' | 'LZ4' | 'LZ4_RAW', Decompress>> = {
  GZIP: (input, size) => exactly(zlib.gunzipSync(input, limit(size)), size, 'GZIP'),
  BROTLI: (input, size) => exactly(zlib.brotliDecompressSync(input, limit(size)), size, 'BROTLI'),
  ZSTD: zstd,
  LZ4: lz4Hadoop,
  LZ4_RAW: lz4Raw,
};

/** Every Parquet codec Stoker reads. The format also names LZO, which no maintained reader decodes. */
export const PARQUET_READABLE: readonly string[] = ['UNCOMPRESSED', 'SNAPPY', ...Object.keys(PARQUET_CODECS)];

/**
 * Arrow IPC's two body codecs (BodyCompression.codec: 0 LZ4_FRAME, 1 ZSTD), each with the most
 * bytes `n` compressed bytes can stand for, so that a forged length is refused before it is
 * allocated: an LZ4 sequence adds at most 255 bytes per input byte, a ZSTD RLE block 128 KiB per 4.
 */
export const ARROW_CODECS: readonly { readonly name: string; readonly decompress: Decompress; readonly most: (n: number) => number }[] = [
  { name: 'LZ4_FRAME', decompress: (input, size) => lz4Frames(input, new Uint8Array(size)), most: (n) => 255 * n + 64 },
  { name: 'ZSTD', decompress: zstd, most: (n) => 32768 * n + 131072 },
];
