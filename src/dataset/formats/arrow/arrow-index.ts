// Internal: not exported from the package entry.
// The record-batch index of an Arrow IPC file or stream, built once at open from the message
// headers (file: the footer's blocks; stream: one pass over the message prefixes), and the decoder
// of one record batch from its bytes. The rule: every length and offset read from the file is
// checked against the file's size, and every flatbuffer vector length against the bytes that hold
// it, *before* apache-arrow sees the bytes: apache-arrow trusts them and would otherwise loop for
// minutes over a vector length of 2^31 or allocate from a forged row count.
//
// NOTE [Decoding one record batch]: apache-arrow has no public "decode this message" call, but its
// stream reader is public. A record batch is decoded by handing the reader a two-message stream:
// the schema message (a stream's own first message; for a file, the footer's schema encoded by
// apache-arrow) followed by the batch's message (prefix, metadata, body), read with one positioned
// read. Dictionary batches are not passed along: dictionary-encoded columns are
// delivered as their integer codes (see arrow-columns.ts), which need no dictionary.

import { type DataType, type Field, Message, MessageHeader, RecordBatch, RecordBatchReader, type Schema, Type } from 'apache-arrow';
import { Footer } from 'apache-arrow/ipc/metadata/file';
import type { RecordBatch as RecordBatchHeader } from 'apache-arrow/ipc/metadata/message';
import { Message as FbMessage } from 'apache-arrow/fb/message';
import { Schema as FbSchema } from 'apache-arrow/fb/schema';
import type { Field as FbField } from 'apache-arrow/fb/field';
import { RecordBatch as FbRecordBatch } from 'apache-arrow/fb/record-batch';
import { DictionaryBatch as FbDictionaryBatch } from 'apache-arrow/fb/dictionary-batch';
import { Footer as FbFooter } from 'apache-arrow/fb/footer';
import { ByteBuffer } from 'flatbuffers';
import { badFile, describeCause } from '../../../errors.js';
import type { PositionedFile } from '../file.js';
import { type BodyCompression, compressionProblem, decompressBatch } from './arrow-compression.js';

/** Where the record batches of one file are: structured-cloneable, so reader workers skip the scan. */
export interface ArrowIndex {
  readonly format: 'file' | 'stream';
  /** Size of the file when it was indexed; a reopen that finds another size is refused. */
  readonly fileSize: number;
  /**
   * The schema as an IPC message (prefix + metadata): a stream's own first message, or for a file
   * its footer's schema encoded by apache-arrow (files need not repeat the schema as a message:
   * apache-arrow's own file writer does not).
   */
  readonly schemaMessage: Uint8Array;
  /** Per record batch: the message's byte offset, its whole length (prefix + metadata + body), the prefix + metadata part, its rows. */
  readonly offsets: readonly number[];
  readonly lengths: readonly number[];
  readonly metaLengths: readonly number[];
  readonly rows: readonly number[];
  /** Dictionary ids whose dictionary is replaced (not extended) after the first record batch: their codes change meaning. */
  readonly replacedDictionaries: readonly number[];
}

/**
 * The vetted buffer tables of every record batch, as the index scan found them (main thread only:
 * arrow-rows.ts keeps the parts its selected columns need). Per record batch: the field nodes as
 * (length, null count) pairs, the buffers as (offset, length) pairs relative to the body (as
 * apache-arrow's header decoder gives them), and the variadic buffer counts of view columns.
 */
export interface BatchHeaders {
  readonly nodes: readonly Float64Array[];
  readonly buffers: readonly Float64Array[];
  readonly variadic: readonly (readonly number[])[];
  /** Whether each record batch's body is compressed (its buffer table then locates compressed bytes). */
  readonly compressed: readonly boolean[];
}

const MAGIC = 'ARROW1';
/** apache-arrow keeps row counts and offsets in 32-bit integers. */
const MAX_ROWS = 2 ** 31 - 1;
/** Deeper types than this are not data people train on (HF's Array5D is 5 levels deep). */
const MAX_DEPTH = 64;

interface MessageAt {
  readonly offset: number;
  /** Bytes before the body: the 4- or 8-byte prefix plus the flatbuffer metadata. */
  readonly metaLength: number;
  readonly bodyLength: number;
  /** Offset just past the body. */
  readonly end: number;
  readonly message: Message;
}

/** Scan `file` and index its record batches. Throws ERR_BAD_FILE naming the offset of the first problem. */
export function buildIndex(file: PositionedFile): { index: ArrowIndex; schema: Schema; headers: BatchHeaders } {
  const { path, size } = file;
  if (size === 0) throw badFile(path, 0, 'the file is empty; expected an Arrow IPC file or stream');
  const head = file.read(0, Math.min(size, 8), 'the file header');
  return latin1(head.subarray(0, 6)) === MAGIC ? indexFile(file) : indexStream(file, head);
}

function indexStream(file: PositionedFile, head: Uint8Array): { index: ArrowIndex; schema: Schema; headers: BatchHeaders } {
  const { path, size } = file;
  const first = head.length >= 4 ? new DataView(head.buffer, head.byteOffset, head.length).getInt32(0, true) : 0;
  if (first !== -1 && !(first > 0 && first + 4 <= size)) {
    throw badFile(path, 0, `not an Arrow IPC file or stream: it starts with ${hex(head)} (an IPC file starts with "ARROW1", a stream with ff ff ff ff)`);
  }
  const schemaMsg = readMessageAt(file, 0, 'the schema message');
  if (schemaMsg === 'eos' || !schemaMsg.message.isSchema()) {
    throw badFile(path, 0, 'not an Arrow IPC stream: its first message is not a schema');
  }
  const schema = decodeSchema(file, schemaMsg);
  const b = new Batches();
  const replaced = new Set<number>();
  let at = schemaMsg.end;
  for (;;) {
    const m = readMessageAt(file, at, `message ${b.count + 1}`);
    if (m === 'eos') {
      const end = at + eosLength(file, at);
      if (end !== size) {
        throw badFile(path, end, `${size - end} bytes follow the end-of-stream marker (two streams concatenated?)`, 'Write one stream per file');
      }
      break;
    }
    const type = m.message.headerType;
    if (type === MessageHeader.RecordBatch) {
      b.add(file, m, recordBatchHeader(file.path, m, b.count, schema));
    } else if (type === MessageHeader.DictionaryBatch) {
      const header = decodeHeader(path, m, 'dictionary batch') as { id: number; isDelta: boolean };
      if (b.count > 0 && !header.isDelta) replaced.add(header.id);
    } else if (type === MessageHeader.Schema) {
      throw badFile(path, m.offset, 'a second schema message: the schema changes between record batches', 'Write one schema per file');
    } else {
      throw badFile(path, m.offset, `unexpected message type ${MessageHeader[type] ?? type} in an Arrow IPC stream`);
    }
    at = m.end;
  }
  return { index: b.index('stream', size, file.read(0, schemaMsg.end, 'the schema message'), [...replaced]), schema, headers: b };
}

function indexFile(file: PositionedFile): { index: ArrowIndex; schema: Schema; headers: BatchHeaders } {
  const { path, size } = file;
  // "ARROW1" + 2 padding bytes, the stream, the footer, its int32 length, "ARROW1".
  if (size < 8 + 10 || latin1(file.read(size - 6, 6, 'the trailing magic')) !== MAGIC) {
    throw badFile(path, size, 'the file starts with the Arrow IPC file magic "ARROW1" but does not end with it: it is truncated (or was not closed when written)');
  }
  const footerLength = int32(file.read(size - 10, 4, 'the footer length'));
  const footerStart = size - 10 - footerLength;
  if (footerLength <= 0 || footerStart < 8) {
    throw badFile(path, size - 10, `the footer length ${footerLength} does not fit in the file (size ${size})`);
  }
  const footerBytes = file.read(footerStart, footerLength, 'the footer');
  const problem = vetFooter(footerBytes);
  if (problem !== undefined) throw badFile(path, footerStart, `the footer is corrupt: ${problem}`);
  let blocks: { offset: number; metaDataLength: number; bodyLength: number }[];
  let footerSchema: Schema;
  try {
    const footer = Footer.decode(footerBytes);
    footerSchema = footer.schema;
    blocks = [...footer.recordBatches()].map((b) => ({ offset: b.offset, metaDataLength: b.metaDataLength, bodyLength: b.bodyLength }));
  } catch (cause) {
    throw badFile(path, footerStart, `the footer cannot be decoded: ${describeCause(cause)}`);
  }
  checkSchema(path, footerStart, footerSchema);
  // Workers decode the schema from this message: read it back here too, so that both see the same
  // schema (a name that is not valid UTF-8 does not survive the round trip unchanged).
  let schemaMessage: Uint8Array;
  let schema: Schema;
  try {
    schemaMessage = framed(Message.encode(Message.from(footerSchema)));
    schema = Message.decode(schemaMessage.subarray(8)).header() as Schema;
  } catch (cause) {
    throw badFile(path, footerStart, `the footer's schema cannot be re-encoded: ${describeCause(cause)}`);
  }
  checkSchema(path, footerStart, schema);
  const b = new Batches();
  let previousEnd = 8;
  for (const [k, block] of blocks.entries()) {
    const what = `record batch ${k}`;
    if (!Number.isSafeInteger(block.offset) || block.offset < previousEnd || block.offset >= footerStart) {
      throw badFile(path, footerStart, `the footer places ${what} at byte ${block.offset}, outside [${previousEnd}, ${footerStart}) (blocks must follow each other, before the footer)`);
    }
    const m = readMessageAt(file, block.offset, what);
    if (m === 'eos' || m.message.headerType !== MessageHeader.RecordBatch) throw badFile(path, block.offset, `the footer's block ${k} does not point at a record batch`);
    if (m.metaLength !== block.metaDataLength || m.bodyLength !== block.bodyLength || m.end > footerStart) {
      throw badFile(path, block.offset, `${what}: the footer says ${block.metaDataLength} metadata + ${block.bodyLength} body bytes, the message says ${m.metaLength} + ${m.bodyLength}`);
    }
    b.add(file, m, recordBatchHeader(file.path, m, k, schema));
    previousEnd = m.end;
  }
  return { index: b.index('file', size, schemaMessage, []), schema, headers: b };
}

class Batches implements BatchHeaders {
  readonly offsets: number[] = [];
  readonly lengths: number[] = [];
  readonly metaLengths: number[] = [];
  readonly rows: number[] = [];
  readonly nodes: Float64Array[] = [];
  readonly buffers: Float64Array[] = [];
  readonly variadic: number[][] = [];
  readonly compressed: boolean[] = [];
  #total = 0;

  get count(): number {
    return this.offsets.length;
  }

  add(file: PositionedFile, m: MessageAt, h: BatchHeader): void {
    const rows = h.length;
    this.#total += rows;
    if (!Number.isSafeInteger(this.#total)) throw badFile(file.path, m.offset, 'the record batches hold more rows than can be counted');
    this.offsets.push(m.offset);
    this.lengths.push(m.end - m.offset);
    this.metaLengths.push(m.metaLength);
    this.rows.push(rows);
    this.nodes.push(Float64Array.from(h.nodes.flatMap((n) => [n.length, n.nullCount])));
    this.buffers.push(Float64Array.from(h.buffers.flatMap((b) => [b.offset, b.length])));
    this.variadic.push([...h.variadicBufferCounts]);
    this.compressed.push(h.compression !== null && h.compression !== undefined);
  }

  index(format: 'file' | 'stream', fileSize: number, schemaMessage: Uint8Array, replaced: number[]): ArrowIndex {
    return {
      format, fileSize, schemaMessage,
      offsets: this.offsets, lengths: this.lengths, metaLengths: this.metaLengths, rows: this.rows, replacedDictionaries: replaced,
    };
  }
}

/**
 * Read the message at `offset`: its prefix (0xFFFFFFFF + int32 length, or a bare int32 length
 * before Arrow 0.15), its vetted flatbuffer metadata and its body length, all checked against the
 * file. `'eos'` for an end-of-stream marker (a zero length).
 */
function readMessageAt(file: PositionedFile, offset: number, what: string): MessageAt | 'eos' {
  const { path, size } = file;
  if (offset + 4 > size) {
    throw badFile(path, offset, `the file ends where ${what} or an end-of-stream marker should start: it is truncated (or the writer was not closed)`);
  }
  let prefix = 4;
  let length = int32(file.read(offset, 4, `the prefix of ${what}`));
  if (length === -1) {
    if (offset + 8 > size) throw badFile(path, offset, `the file ends inside the prefix of ${what}: it is truncated`);
    length = int32(file.read(offset + 4, 4, `the prefix of ${what}`));
    prefix = 8;
  }
  if (length === 0) return 'eos';
  if (length < 0) throw badFile(path, offset, `${what} has a negative metadata length ${length}`);
  file.checkRange(offset + prefix, length, `the metadata of ${what}`);
  const m = parseMessage(path, offset, prefix, file.read(offset + prefix, length, `the metadata of ${what}`), what);
  file.checkRange(offset + m.metaLength, m.bodyLength, `the body of ${what}`);
  return m;
}

/** Vet and decode the flatbuffer metadata `meta` of the message at `offset` (its prefix is `prefix` bytes). */
function parseMessage(path: string, offset: number, prefix: number, meta: Uint8Array, what: string): MessageAt {
  const problem = vetMessage(meta);
  if (problem !== undefined) throw badFile(path, offset, `the metadata of ${what} is corrupt: ${problem}`);
  let message: Message;
  try {
    message = Message.decode(meta);
  } catch (cause) {
    throw badFile(path, offset, `the metadata of ${what} cannot be decoded: ${describeCause(cause)}`);
  }
  const bodyLength = message.bodyLength;
  if (!Number.isSafeInteger(bodyLength) || bodyLength < 0) throw badFile(path, offset, `${what} has an invalid body length ${bodyLength}`);
  const metaLength = prefix + meta.length;
  return { offset, metaLength, bodyLength, end: offset + metaLength + bodyLength, message };
}

/** Flatbuffer metadata with its prefix (continuation marker, padded length), as a message without a body. */
function framed(meta: Uint8Array): Uint8Array {
  const padded = (meta.length + 7) & ~7;
  const out = new Uint8Array(8 + padded);
  const dv = new DataView(out.buffer);
  dv.setInt32(0, -1, true);
  dv.setInt32(4, padded, true);
  out.set(meta, 8);
  return out;
}

function eosLength(file: PositionedFile, offset: number): number {
  return int32(file.read(offset, 4, 'the end-of-stream marker')) === -1 ? 8 : 4;
}

function decodeHeader(path: string, m: MessageAt, what: string): unknown {
  try {
    const header = m.message.header();
    if (header === null || header === undefined) throw new Error('the header is missing');
    return header;
  } catch (cause) {
    throw badFile(path, m.offset, `the ${what} header cannot be decoded: ${describeCause(cause)}`);
  }
}

function decodeSchema(file: PositionedFile, m: MessageAt): Schema {
  const schema = decodeHeader(file.path, m, 'schema') as Schema;
  if (m.bodyLength !== 0) throw badFile(file.path, m.offset, `the schema message claims a body of ${m.bodyLength} bytes`);
  checkSchema(file.path, m.offset, schema);
  return schema;
}

/** Refuse a schema apache-arrow decoded from impossible metadata (a list without an element type, a 13-bit integer). */
function checkSchema(path: string, offset: number, schema: Schema): void {
  if (schema.fields.length === 0) throw badFile(path, offset, 'the schema has no columns');
  for (const f of schema.fields) {
    const problem = typeProblem(f, 0);
    if (problem !== undefined) throw badFile(path, offset, `the schema is corrupt: column ${JSON.stringify(f?.name)} ${problem}`);
  }
}

function typeProblem(field: Field | undefined, depth: number): string | undefined {
  const type = field?.type as (DataType & Record<string, unknown>) | undefined;
  if (type === undefined || type === null) return 'has a field without a type';
  if (depth > MAX_DEPTH) return `nests deeper than ${MAX_DEPTH} levels`;
  const children = (type.typeId === Type.Dictionary ? [] : (type.children ?? [])) as (Field | undefined)[];
  const count = (n: number) => (children.length === n ? undefined : `has a ${Type[type.typeId]} with ${children.length} child types`);
  const size = (v: unknown, what: string) => (Number.isSafeInteger(v) && (v as number) >= 0 ? undefined : `has a ${what} of ${String(v)}`);
  let problem: string | undefined;
  switch (type.typeId) {
    case Type.Int:
      problem = [8, 16, 32, 64].includes(type.bitWidth as number) ? undefined : `has an integer of ${String(type.bitWidth)} bits`;
      break;
    case Type.Float:
      problem = [0, 1, 2].includes(type.precision as number) ? undefined : `has a float of precision ${String(type.precision)}`;
      break;
    case Type.List:
    case Type.LargeList:
    case Type.Map:
      problem = count(1);
      break;
    case Type.FixedSizeList:
      problem = count(1) ?? size(type.listSize, 'fixed-size list size');
      break;
    case Type.FixedSizeBinary:
      problem = size(type.byteWidth, 'byte width');
      break;
    case Type.Dictionary: {
      const indices = type.indices as { bitWidth?: unknown } | undefined;
      problem = [8, 16, 32, 64].includes(indices?.bitWidth as number) ? typeProblem({ type: type.dictionary } as Field, depth + 1) : 'has dictionary codes of an unknown width';
      break;
    }
    default:
      problem = undefined;
  }
  if (problem !== undefined) return problem;
  for (const c of children) {
    const p = typeProblem(c, depth + 1);
    if (p !== undefined) return p;
  }
  return undefined;
}

interface BatchHeader {
  readonly length: number;
  readonly nodes: readonly { readonly length: number; readonly nullCount: number }[];
  readonly buffers: readonly { readonly offset: number; readonly length: number }[];
  readonly compression: BodyCompression | null | undefined;
  readonly variadicBufferCounts: readonly number[];
}

/**
 * Check a record batch's header against its body and the schema, and return it. What apache-arrow
 * would otherwise trust: the row count, each field node's length and null count (a null count of
 * -1 makes it count bits over the claimed length), each buffer's range in the body, and the
 * variadic buffer counts of view columns (it allocates an array of that many). A compressed body
 * is checked again once decompressed (decodeRecordBatch), the row count against it then.
 */
function recordBatchHeader(path: string, m: MessageAt, k: number, schema: Schema): BatchHeader {
  const what = `record batch ${k}`;
  const h = decodeHeader(path, m, what) as BatchHeader;
  const compressed = h.compression !== null && h.compression !== undefined;
  const problem = compressed ? compressionProblem(h.compression!) : undefined;
  if (problem !== undefined) throw badFile(path, m.offset, `${what}: ${problem}`);
  const rows = h.length;
  if (!Number.isSafeInteger(rows) || rows < 0 || rows > MAX_ROWS) throw badFile(path, m.offset, `${what} claims ${rows} rows; expected an integer in [0, ${MAX_ROWS}]`);
  // Every column that holds data needs at least one bit per row: a row count beyond that is forged.
  if (!compressed && rows > m.bodyLength * 8 && schema.fields.some((f) => holdsBits(f.type))) {
    throw badFile(path, m.offset, `${what} claims ${rows} rows but its body holds only ${m.bodyLength} bytes`);
  }
  const expected = schema.fields.reduce((n, f) => n + nodeCount(f.type), 0);
  if (h.nodes.length !== expected) throw badFile(path, m.offset, `${what} describes ${h.nodes.length} field nodes; its schema has ${expected}`);
  for (const [i, node] of h.nodes.entries()) {
    if (!Number.isSafeInteger(node.length) || node.length < 0 || node.length > MAX_ROWS || !Number.isSafeInteger(node.nullCount) || node.nullCount < 0 || node.nullCount > node.length) {
      throw badFile(path, m.offset, `${what}: field node ${i} has length ${node.length} and null count ${node.nullCount}`);
    }
  }
  let node = 0;
  for (const f of schema.fields) {
    if (h.nodes[node]!.length !== rows) throw badFile(path, m.offset, `${what}: column ${JSON.stringify(f.name)} has ${h.nodes[node]!.length} rows, the batch ${rows}`);
    node += nodeCount(f.type);
  }
  for (const [i, buf] of h.buffers.entries()) {
    if (!Number.isSafeInteger(buf.offset) || !Number.isSafeInteger(buf.length) || buf.offset < 0 || buf.length < 0 || buf.offset + buf.length > m.bodyLength) {
      throw badFile(path, m.offset, `${what}: buffer ${i} spans [${buf.offset}, ${buf.offset + buf.length}) outside its body of ${m.bodyLength} bytes`);
    }
  }
  for (const count of h.variadicBufferCounts ?? []) {
    if (!Number.isSafeInteger(count) || count < 0 || count > h.buffers.length) {
      throw badFile(path, m.offset, `${what} claims ${count} variadic buffers for a view column; it lists ${h.buffers.length} buffers in all`);
    }
  }
  return h;
}

/** Field nodes a type takes in a record batch: one per field, children included (pre-order). */
function nodeCount(type: DataType): number {
  if (type.typeId === Type.Dictionary) return 1;
  return 1 + (type.children ?? []).reduce((n: number, c: Field) => n + nodeCount(c.type), 0);
}

function holdsBits(type: DataType): boolean {
  if (type.typeId === Type.Null) return false;
  if (type.typeId === Type.Dictionary) return true;
  if (type.typeId === Type.Struct) return (type.children ?? []).some((c: Field) => holdsBits(c.type));
  return true;
}

/**
 * Decode record batch `k` from `bytes`: the schema message at [0, schemaLength), the batch's
 * message after it (see NOTE [Decoding one record batch]). Any error apache-arrow throws becomes
 * ERR_BAD_FILE at the batch's offset.
 */
export function decodeRecordBatch(path: string, bytes: Uint8Array, schemaLength: number, index: ArrowIndex, k: number, schema: Schema): RecordBatch {
  const offset = index.offsets[k]!;
  const what = `record batch ${k}`;
  // The bytes were read again: check them as at indexing, in case the file changed in place.
  const msg = bytes.subarray(schemaLength);
  const prefix = msg.length >= 8 && int32(msg) === -1 ? 8 : 4;
  const metaLength = msg.length >= prefix ? int32(msg.subarray(prefix - 4)) : -1;
  if (prefix + metaLength !== index.metaLengths[k] || msg.length !== index.lengths[k]) {
    throw badFile(path, offset, `${what} is not where the file's index put it (did the file change?)`);
  }
  const m = parseMessage(path, offset, prefix, msg.subarray(prefix, prefix + metaLength), what);
  const changed = () => badFile(path, offset, `${what} is not the record batch the file's index found there (did the file change?)`);
  if (m.end - offset !== index.lengths[k] || m.message.headerType !== MessageHeader.RecordBatch) throw changed();
  const h = recordBatchHeader(path, m, k, schema);
  if (h.length !== index.rows[k]) throw changed();
  let stream = bytes;
  if (h.compression !== null && h.compression !== undefined) {
    // Decompressed into the message it stands for, which is checked as an uncompressed one is.
    stream = decompressBatch(path, offset, what, h as unknown as RecordBatchHeader, msg.subarray(m.metaLength), bytes.subarray(0, schemaLength));
    const plain = stream.subarray(schemaLength);
    const p = parseMessage(path, offset, 8, plain.subarray(8, 8 + int32(plain.subarray(4))), what);
    if (recordBatchHeader(path, p, k, schema).length !== index.rows[k]) throw changed();
  }
  let batch: RecordBatch | undefined;
  try {
    const reader = RecordBatchReader.from(stream);
    const next = reader.next();
    batch = next.done === true ? undefined : (next.value as RecordBatch);
  } catch (cause) {
    throw badFile(path, offset, `${what} cannot be decoded: ${describeCause(cause)}`);
  }
  if (!(batch instanceof RecordBatch) || batch.numRows !== index.rows[k] || batch.numCols !== schema.fields.length) {
    throw badFile(path, offset, `${what} decodes to ${batch?.numRows ?? 'no'} rows where its header said ${index.rows[k]}`);
  }
  return batch;
}

// ---- flatbuffer vetting ------------------------------------------------------------------------
// A vector's elements lie inside the buffer that holds it, so a length whose elements would not fit
// is forged. Field trees are walked with a budget (a field table takes at least 4 bytes) so that
// cyclic or exponentially shared children are refused before apache-arrow recurses into them.

/** Why the flatbuffer message metadata in `meta` cannot be trusted, or undefined. */
export function vetMessage(meta: Uint8Array): string | undefined {
  try {
    const n = meta.length;
    if (n < 8) return `${n} bytes are too few for message metadata`;
    const bb = new ByteBuffer(meta);
    const msg = FbMessage.getRootAsMessage(bb);
    const kv = vec(msg.customMetadataLength(), 4, n, 'custom metadata entries');
    if (kv) return kv;
    switch (msg.headerType()) {
      case MessageHeader.Schema: {
        const s = msg.header(new FbSchema()) as FbSchema | null;
        return s === null ? 'the schema header is missing' : vetSchema(s, n);
      }
      case MessageHeader.RecordBatch: {
        const rb = msg.header(new FbRecordBatch()) as FbRecordBatch | null;
        return rb === null ? 'the record batch header is missing' : vetRecordBatch(rb, n);
      }
      case MessageHeader.DictionaryBatch: {
        const db = msg.header(new FbDictionaryBatch()) as FbDictionaryBatch | null;
        const rb = db?.data() ?? null;
        return rb === null ? 'the dictionary batch header is missing' : vetRecordBatch(rb, n);
      }
      default:
        return undefined;
    }
  } catch (cause) {
    return describeCause(cause);
  }
}

function vetFooter(bytes: Uint8Array): string | undefined {
  try {
    const n = bytes.length;
    if (n < 8) return `${n} bytes are too few for a footer`;
    const footer = FbFooter.getRootAsFooter(new ByteBuffer(bytes));
    const problem =
      vec(footer.recordBatchesLength(), 24, n, 'record batch blocks') ??
      vec(footer.dictionariesLength(), 24, n, 'dictionary blocks') ??
      vec(footer.customMetadataLength(), 4, n, 'custom metadata entries');
    if (problem) return problem;
    const schema = footer.schema();
    return schema === null ? 'it has no schema' : vetSchema(schema, n);
  } catch (cause) {
    return describeCause(cause);
  }
}

function vetRecordBatch(rb: FbRecordBatch, n: number): string | undefined {
  return vec(rb.nodesLength(), 16, n, 'field nodes') ?? vec(rb.buffersLength(), 16, n, 'buffers') ?? vec(rb.variadicBufferCountsLength(), 8, n, 'variadic buffer counts');
}

function vetSchema(s: FbSchema, n: number): string | undefined {
  const problem = vec(s.fieldsLength(), 4, n, 'fields') ?? vec(s.customMetadataLength(), 4, n, 'custom metadata entries') ?? vec(s.featuresLength(), 8, n, 'features');
  if (problem) return problem;
  const budget = { left: Math.floor(n / 4) };
  for (let i = 0; i < s.fieldsLength(); i++) {
    const f = s.fields(i);
    const p = f === null ? undefined : vetField(f, n, 1, budget);
    if (p) return p;
  }
  return undefined;
}

function vetField(f: FbField, n: number, depth: number, budget: { left: number }): string | undefined {
  if (depth > MAX_DEPTH) return `types nest deeper than ${MAX_DEPTH} levels`;
  if (--budget.left < 0) return 'the fields reference each other in a cycle (more field tables than the metadata can hold)';
  const problem = vec(f.childrenLength(), 4, n, 'child fields') ?? vec(f.customMetadataLength(), 4, n, 'custom metadata entries');
  if (problem) return problem;
  for (let i = 0; i < f.childrenLength(); i++) {
    const c = f.children(i);
    const p = c === null ? undefined : vetField(c, n, depth + 1, budget);
    if (p) return p;
  }
  return undefined;
}

function vec(length: number, elementBytes: number, n: number, what: string): string | undefined {
  return length * elementBytes > n ? `it lists ${length} ${what}, more than its ${n} bytes can hold` : undefined;
}

function int32(b: Uint8Array): number {
  return new DataView(b.buffer, b.byteOffset, 4).getInt32(0, true);
}

function latin1(b: Uint8Array): string {
  return String.fromCharCode(...b);
}

function hex(b: Uint8Array): string {
  return Array.from(b.subarray(0, 8), (x) => x.toString(16).padStart(2, '0')).join(' ');
}
