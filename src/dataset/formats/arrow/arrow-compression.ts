// Internal: not exported from the package entry.
// Compressed record batches (Arrow IPC body compression: Polars writes LZ4 frames or ZSTD, pyarrow
// on request). Each buffer of a compressed body is an int64 uncompressed length (-1: stored as is)
// then the codec's bytes. A compressed record batch is read whole (its rows have no fixed place in
// the file) and turned here into the uncompressed message it stands for — every buffer decompressed
// to exactly its stated length, the buffers laid out 8-byte aligned, the header re-encoded without
// its compression — which arrow-index.ts then checks and decodes like any other. The rule: a stated
// length is checked before anything is allocated for it, and a buffer that decompresses to another
// length is ERR_BAD_FILE naming the record batch and the buffer.

import { Message } from 'apache-arrow';
import { BufferRegion, RecordBatch as RecordBatchHeader } from 'apache-arrow/ipc/metadata/message';
import { badFile, describeCause, invalidDatasetError } from '../../../errors.js';
import { ARROW_CODECS } from '../codecs.js';

/** Body compression as apache-arrow's header decoder gives it. */
export interface BodyCompression {
  readonly type: number;
  readonly method: number;
}

/** Largest stated buffer length taken at its word (typed arrays stop at 2³² − 1 elements in V8). */
const MAX_BUFFER = 2 ** 32 - 1;

/** Why compression `c` cannot be read, or undefined when it can: Arrow defines two codecs, one method. */
export function compressionProblem(c: BodyCompression): string | undefined {
  if (ARROW_CODECS[c.type] === undefined) return `its body uses compression codec ${c.type}, which is not one Arrow defines (0 LZ4_FRAME, 1 ZSTD)`;
  if (c.method !== 0) return `its body uses compression method ${c.method}, which is not one Arrow defines (0 BUFFER)`;
  return undefined;
}

/**
 * `head` (the schema message) followed by the uncompressed message for compressed record batch
 * `header` with `body`: its metadata framed as a stream message (continuation marker, length, padded
 * flatbuffer), then the new body.
 */
export function decompressBatch(path: string, offset: number, what: string, header: RecordBatchHeader, body: Uint8Array, head: Uint8Array): Uint8Array {
  const codec = ARROW_CODECS[(header.compression as BodyCompression).type]!;
  const parts: Uint8Array[] = [];
  const regions: BufferRegion[] = [];
  let at = 0;
  for (const [i, { offset: start, length }] of header.buffers.entries()) {
    let part: Uint8Array;
    if (length === 0) {
      part = new Uint8Array(0);
    } else {
      if (length < 8) throw badFile(path, offset, `${what}: compressed buffer ${i} holds ${length} bytes, too few for its uncompressed length`);
      const raw = body.subarray(start, start + length);
      const stated = Number(new DataView(raw.buffer, raw.byteOffset, 8).getBigInt64(0, true));
      const data = raw.subarray(8);
      if (stated === -1) {
        part = data;
      } else {
        if (!Number.isSafeInteger(stated) || stated < 0 || stated > Math.min(MAX_BUFFER, codec.most(data.length))) {
          throw badFile(path, offset, `${what}: compressed buffer ${i} states an uncompressed length of ${stated}, more than its ${data.length} bytes of ${codec.name} can hold`);
        }
        try {
          part = codec.decompress(data, stated);
        } catch (cause) {
          throw badFile(path, offset, `${what}: buffer ${i} cannot be decompressed (${codec.name}): ${describeCause(cause)}`);
        }
      }
    }
    parts.push(part);
    regions.push(new BufferRegion(at, part.length));
    at += (part.length + 7) & ~7;
  }
  const meta = Message.encode(Message.from(new RecordBatchHeader(header.length, header.nodes, regions, null, header.variadicBufferCounts), at));
  const padded = (meta.length + 7) & ~7;
  let out: Uint8Array;
  try {
    out = new Uint8Array(head.length + 8 + padded + at);
  } catch (cause) {
    throw invalidDatasetError(`${path}: ${what} decompresses to ${at} bytes, more than can be allocated at once. Rewrite the file with smaller record batches (Polars: write_ipc of a rechunked frame in parts; pyarrow: max_chunksize)`, cause);
  }
  out.set(head, 0);
  const dv = new DataView(out.buffer, head.length);
  dv.setInt32(0, -1, true);
  dv.setInt32(4, padded, true);
  out.set(meta, head.length + 8);
  parts.forEach((p, i) => out.set(p, head.length + 8 + padded + regions[i]!.offset));
  return out;
}
