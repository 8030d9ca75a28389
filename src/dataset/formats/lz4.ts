// Internal: not exported from the package entry.
// LZ4 decompression for the two file formats that use it: Arrow IPC bodies (LZ4 frames: Polars,
// pyarrow) and Parquet pages (LZ4_RAW: one bare block; the legacy LZ4 codec: Hadoop's framing, or a
// bare block from writers that ignored it). The rule: the output is exactly the length the file
// states, and every length, offset and match is checked against the buffers before it is used, so a
// damaged stream throws (the caller names the file) instead of leaving zeros or stale bytes behind.
// Block and frame formats: github.com/lz4/lz4, doc/lz4_Block_format.md and lz4_Frame_format.md.

const FRAME_MAGIC = 0x184d2204;
/** Skippable frames carry 0x184D2A50 … 0x184D2A5F. */
const SKIPPABLE = 0x184d2a50;

function fail(what: string): never {
  throw new Error(`LZ4: ${what}`);
}

/**
 * Decode the LZ4 block `src[from, to)` into `dst` from `at`, and return where the output ends. A
 * match may reach back as far as `floor` (earlier blocks of a linked frame), never further.
 */
export function lz4Block(src: Uint8Array, from: number, to: number, dst: Uint8Array, at: number, floor: number): number {
  const end = dst.length;
  let i = from;
  let o = at;
  for (;;) {
    if (i >= to) fail('a block ends inside a sequence');
    const token = src[i++]!;
    let literals = token >>> 4;
    if (literals === 15) {
      for (let b = 255; b === 255; literals += b) {
        if (i >= to) fail('a block ends inside a literal length');
        b = src[i++]!;
      }
    }
    if (literals > to - i) fail('literals run past the end of their block');
    if (literals > end - o) fail(`the data decompresses to more than the ${end} bytes stated`);
    if (literals < 32) for (let j = 0; j < literals; j++) dst[o + j] = src[i + j]!;
    else dst.set(src.subarray(i, i + literals), o);
    i += literals;
    o += literals;
    if (i === to) return o; // the last sequence holds literals only
    if (to - i < 2) fail('a block ends inside a match offset');
    const offset = src[i]! | (src[i + 1]! << 8);
    i += 2;
    if (offset === 0 || offset > o - floor) fail(`a match reaches ${offset} bytes back, before the start of its data`);
    let length = token & 15;
    if (length === 15) {
      for (let b = 255; b === 255; length += b) {
        if (i >= to) fail('a block ends inside a match length');
        b = src[i++]!;
      }
    }
    length += 4;
    if (length > end - o) fail(`the data decompresses to more than the ${end} bytes stated`);
    let p = o - offset;
    if (offset >= length && length >= 32) {
      dst.copyWithin(o, p, p + length);
      o += length;
    } else {
      // Short or overlapping (offset < length repeats the last `offset` bytes): byte by byte.
      for (const stop = o + length; o < stop; ) dst[o++] = dst[p++]!;
    }
  }
}

function u32le(src: Uint8Array, i: number): number {
  if (i + 4 > src.length) fail('the data ends inside a frame header or block size');
  return (src[i]! | (src[i + 1]! << 8) | (src[i + 2]! << 16) | (src[i + 3]! << 24)) >>> 0;
}

/** Decode one or more LZ4 frames (skippable frames skipped) into all of `dst`: exactly its length. */
export function lz4Frames(src: Uint8Array, dst: Uint8Array): Uint8Array {
  let i = 0;
  let o = 0;
  while (i < src.length) {
    const magic = u32le(src, i);
    if ((magic & 0xfffffff0) >>> 0 === SKIPPABLE) {
      i += 8 + u32le(src, i + 4);
      continue;
    }
    if (magic !== FRAME_MAGIC) fail(`not an LZ4 frame (magic ${magic.toString(16)} at byte ${i})`);
    if (i + 7 > src.length) fail('the data ends inside a frame header');
    const flg = src[i + 4]!;
    if (flg >>> 6 !== 1) fail(`frame version ${flg >>> 6}; only version 1 exists`);
    if (flg & 0x01) fail('the frame needs a dictionary, which the format does not carry');
    const independent = (flg & 0x20) !== 0;
    const blockChecksums = (flg & 0x10) !== 0;
    i += 6 + ((flg & 0x08) !== 0 ? 8 : 0) + 1; // magic, FLG, BD, [content size], header checksum
    const frameStart = o;
    for (;;) {
      const word = u32le(src, i);
      i += 4;
      if (word === 0) break; // end mark
      const size = word & 0x7fffffff;
      if (size > src.length - i) fail('a block runs past the end of the data');
      if (word >>> 31 === 1) {
        if (size > dst.length - o) fail(`the data decompresses to more than the ${dst.length} bytes stated`);
        dst.set(src.subarray(i, i + size), o);
        o += size;
      } else {
        o = lz4Block(src, i, i + size, dst, o, independent ? o : frameStart);
      }
      i += size + (blockChecksums ? 4 : 0);
    }
    if (flg & 0x04) i += 4; // content checksum
    if (i > src.length) fail('the data ends inside a checksum');
  }
  if (o !== dst.length) fail(`the data decompresses to ${o} bytes, not the ${dst.length} stated`);
  return dst;
}

/** A Parquet LZ4_RAW page: one bare block of exactly `size` bytes. */
export function lz4Raw(src: Uint8Array, size: number): Uint8Array {
  const dst = new Uint8Array(size);
  const o = src.length === 0 && size === 0 ? 0 : lz4Block(src, 0, src.length, dst, 0, 0);
  if (o !== size) fail(`the data decompresses to ${o} bytes, not the ${size} stated`);
  return dst;
}

/**
 * A page of Parquet's legacy LZ4 codec, whose format writers disagree on: Hadoop's framing (per
 * chunk a big-endian uncompressed and compressed length, then one block: parquet-mr), else an LZ4
 * frame, else one bare block (older parquet-cpp). Arrow C++ reads it the same way, in that order.
 */
export function lz4Hadoop(src: Uint8Array, size: number): Uint8Array {
  const dst = new Uint8Array(size);
  if (hadoopChunks(src, dst)) return dst;
  if (src.length >= 4 && u32le(src, 0) === FRAME_MAGIC) return lz4Frames(src, dst);
  return lz4Raw(src, size);
}

function hadoopChunks(src: Uint8Array, dst: Uint8Array): boolean {
  const be = (i: number) => ((src[i]! << 24) | (src[i + 1]! << 16) | (src[i + 2]! << 8) | src[i + 3]!) >>> 0;
  let i = 0;
  let o = 0;
  while (i < src.length) {
    if (src.length - i < 8) return false;
    const raw = be(i);
    const packed = be(i + 4);
    i += 8;
    if (packed > src.length - i || raw > dst.length - o) return false;
    try {
      if (lz4Block(src, i, i + packed, dst, o, o) !== o + raw) return false;
    } catch {
      return false;
    }
    i += packed;
    o += raw;
  }
  return o === dst.length && i > 0;
}
