// codecs.ts: each decompressor gives exactly the stated length or throws — a GZIP page of several
// members is read whole, and a page that decompresses to more or fewer bytes than its header states
// is refused, never cut or padded.

import assert from 'node:assert/strict';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import { describe, it } from 'node:test';
import { ARROW_CODECS, PARQUET_CODECS } from './codecs.js';

const text = new TextEncoder().encode('stoker '.repeat(500));

describe('codecs', () => {
  it('reads a GZIP page of two concatenated members whole (as parquet-testing has one)', () => {
    const page = Buffer.concat([gzipSync(text.subarray(0, 1000)), gzipSync(text.subarray(1000))]);
    assert.deepEqual(PARQUET_CODECS.GZIP(page, text.length), Buffer.from(text));
  });

  it('refuses a page that decompresses to another length than stated, in every codec', () => {
    const gz = gzipSync(text);
    const br = brotliCompressSync(text);
    for (const [name, f] of [['GZIP', () => PARQUET_CODECS.GZIP(gz, text.length - 1)], ['GZIP', () => PARQUET_CODECS.GZIP(gz, text.length + 1)], ['BROTLI', () => PARQUET_CODECS.BROTLI(br, text.length + 1)], ['BROTLI', () => PARQUET_CODECS.BROTLI(br, 10)]] as const) {
      assert.throws(f, (e: Error) => e instanceof Error, name);
    }
    // An LZ4 block of 3 literals then a match: "abcabcabc".
    const block = Uint8Array.from([0x32, 0x61, 0x62, 0x63, 3, 0, 0x00]);
    assert.throws(() => PARQUET_CODECS.LZ4_RAW(block, 8), /LZ4/);
    assert.throws(() => ARROW_CODECS[0]!.decompress(block, 9), /not an LZ4 frame/);
    assert.throws(() => PARQUET_CODECS.ZSTD(block, 9), /zstd|ZSTD/i);
  });
});
