// lz4.ts: frames written by the lz4 command line (linked and independent blocks) decode to their
// input; hand-made blocks pin literals, overlapping matches and Hadoop's framing; every damaged
// stream throws instead of leaving zeros in the output.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { lz4Input } from '../../../test/fixtures/reference/reference-rules.mjs';
import { lz4Block, lz4Frames, lz4Hadoop, lz4Raw } from './lz4.js';

const fixture = (name: string) => new Uint8Array(readFileSync(new URL(`../../../test/fixtures/reference/lz4/${name}`, import.meta.url)));
const bytes = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0));

/** "abcabcabcabcab!": 3 literals, a match of 11 at offset 3 (overlapping), then 1 literal. */
const OVERLAP = Uint8Array.from([0x37, ...bytes('abc'), 3, 0, 0x10, ...bytes('!')]);

describe('LZ4', () => {
  it('decodes frames of the lz4 command line whose blocks reach into the block before, and independent ones with checksums', () => {
    const input = lz4Input();
    for (const name of ['linked.lz4', 'independent.lz4']) {
      const out = lz4Frames(fixture(name), new Uint8Array(input.length));
      assert.ok(Buffer.from(out).equals(Buffer.from(input)), name);
    }
  });

  it('decodes a block of literals and an overlapping match, and concatenated frames with a skippable one between', () => {
    assert.equal(Buffer.from(lz4Raw(OVERLAP, 15)).toString('latin1'), 'abcabcabcabcab!');
    const frame = (block: Uint8Array) => Uint8Array.from([0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82, block.length, 0, 0, 0, ...block, 0, 0, 0, 0]);
    const skip = Uint8Array.from([0x50, 0x2a, 0x4d, 0x18, 2, 0, 0, 0, 9, 9]);
    const out = lz4Frames(Uint8Array.from([...frame(OVERLAP), ...skip, ...frame(OVERLAP)]), new Uint8Array(30));
    assert.equal(Buffer.from(out).toString('latin1'), 'abcabcabcabcab!'.repeat(2));
  });

  it("reads Parquet's legacy LZ4 pages in Hadoop's framing, and as a bare block", () => {
    const hadoop = Uint8Array.from([0, 0, 0, 15, 0, 0, 0, OVERLAP.length, ...OVERLAP, 0, 0, 0, 15, 0, 0, 0, OVERLAP.length, ...OVERLAP]);
    assert.equal(Buffer.from(lz4Hadoop(hadoop, 30)).toString('latin1'), 'abcabcabcabcab!'.repeat(2));
    assert.equal(Buffer.from(lz4Hadoop(OVERLAP, 15)).toString('latin1'), 'abcabcabcabcab!');
  });

  it('throws on a damaged stream: a match before the start, a short or long output, a cut block, a bad magic', () => {
    assert.throws(() => lz4Raw(Uint8Array.from([0x10, 0x61, 5, 0, 0x00]), 10), /reaches 5 bytes back/);
    assert.throws(() => lz4Raw(OVERLAP, 16), /decompresses to 15 bytes, not the 16 stated/);
    assert.throws(() => lz4Raw(OVERLAP, 14), /more than the 14 bytes stated/);
    assert.throws(() => lz4Raw(OVERLAP.subarray(0, 5), 15), /LZ4/);
    assert.throws(() => lz4Frames(bytes('not a frame'), new Uint8Array(4)), /not an LZ4 frame/);
    const cut = fixture('linked.lz4').subarray(0, 900);
    assert.throws(() => lz4Frames(cut, new Uint8Array(200000)), /LZ4/);
    const block = new Uint8Array(20);
    assert.throws(() => lz4Block(Uint8Array.from([0xf0]), 0, 1, block, 0, 0), /literal length/);
  });
});
