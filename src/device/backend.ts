// Internal: not exported from the package entry.
// What an accelerator backend provides to the accelerator device: device memory, a copy stream and
// a consumer stream with events ordering them, a row gather, and page-locking of host memory. Two
// backends implement it: CUDA (the driver API through koffi) and `sim` (a simulation that runs the
// same device-side policies in CI). The rule: an operation enqueued on a stream completes later;
// nothing may be read from a buffer or reused until an event recorded after the operation is done.

import type { JpegDecoder, MemInfo } from './device.js';
import type { ImagePlan } from '../image/image-plan.js';

export type StreamName = 'copy' | 'consumer';

/** Device memory. `ptr` is the device address (opaque for sim). */
export interface DeviceBuffer {
  readonly ptr: bigint;
  readonly bytes: number;
}

/** A point in a stream's work. */
export interface DeviceEvent {
  /** Backend handle (a CUevent pointer on CUDA), for users who pass it to their own CUDA code. */
  readonly handle: bigint;
}

/** Host memory page-locked and mapped into the device's address space (see `Backend.mapHost`). */
export interface MappedHost {
  /** Device address of byte `start` of the memory. */
  readonly ptr: bigint;
  /** The mapped range as byte offsets into the memory: whole pages only, so it may be narrower than asked. */
  readonly start: number;
  readonly end: number;
  /** Unmap and unpin (idempotent). No queued work may still read the range. */
  release(): void;
}

export interface Backend {
  readonly name: string;
  /** True after close(): device tensors refuse to be read. */
  readonly closed: boolean;
  memInfo(): MemInfo | undefined;
  /**
   * Capability: a GPU JPEG decoder for this device with `slots` decodes in flight (nvJPEG on CUDA,
   * ERR_CUDA_UNAVAILABLE without libnvjpeg; the CPU behind sim). Absent: no GPU JPEG decoding.
   */
  openJpeg?(chroma: 'interpolate' | 'replicate', slots: number): JpegDecoder;
  /** Throws an error recognized by `isDeviceOutOfMemory` when the device is full. */
  alloc(bytes: number): DeviceBuffer;
  free(buffer: DeviceBuffer): void;
  /** Page-lock `[byteOffset, byteOffset + byteLength)` of host memory (whole pages); returns the unpin. Once per buffer, never per batch. */
  pin(memory: ArrayBufferLike, byteOffset: number, byteLength: number): () => void;
  /**
   * Page-lock the whole pages of `[byteOffset, byteOffset + byteLength)` and map them for the device:
   * copies and kernels then read those bytes in place. Once per buffer (a source's columns), never
   * per batch. Throws when the memory cannot be mapped (the caller falls back to staging).
   */
  mapHost(memory: ArrayBufferLike, byteOffset: number, byteLength: number): MappedHost;
  /** True when `copyRowsDma` runs on the copy engines (CUDA 12.8+ drivers); otherwise it must not be called. */
  readonly rowDma: boolean;
  /**
   * Enqueue row copies on the copy engines: `table` (host memory, 2 × rows u64 addresses: dst then
   * src) names each row's destination and source; `rowBytes` bytes each. The table is read during
   * the call; the rows' memory must stay valid until an event recorded after this is done.
   */
  copyRowsDma(table: BigInt64Array, rowBytes: number, rows: number, stream: StreamName): void;
  /** Offset of the first page-aligned byte of `memory` (its address is known only to the driver). */
  pageOffset(memory: ArrayBufferLike): number;
  /** Enqueue host → device; `src` must stay untouched until an event recorded after this is done. */
  copyToDevice(dst: DeviceBuffer, dstOffset: number, src: Uint8Array, stream: StreamName): void;
  /** Enqueue device → host. */
  copyToHost(dst: Uint8Array, src: DeviceBuffer, srcOffset: number, stream: StreamName): void;
  /** Enqueue dst row r = src row ids[idsOffset + r] for r < rows (ids: uint32 on the device). */
  gather(dst: DeviceBuffer, src: DeviceBuffer, rowBytes: number, ids: DeviceBuffer, idsOffset: number, rows: number, stream: StreamName): void;
  /** Enqueue the same gather for several columns (one launch where the backend can). */
  gatherColumns(columns: readonly { dst: DeviceBuffer; src: DeviceBuffer; rowBytes: number }[], ids: DeviceBuffer, idsOffset: number, rows: number, stream: StreamName): void;
  /**
   * Enqueue row copies through address tables: for r < rows, copy `rowBytes` bytes from address
   * src[r] to address dst[r] (`tables` holds 2 × rows u64 addresses: dst then src). `align`: a
   * power of two (≤ 16, default 16) that divides every address apart from multiples of `rowBytes`;
   * rows are moved in units of `rowCopyWidth(rowBytes, align)` bytes.
   */
  copyRows(tables: DeviceBuffer, rowBytes: number, rows: number, stream: StreamName, align?: number): void;
  /**
   * Enqueue the built-in image transform (kernels/image.cu): read uint8 rows at `src` + `srcOffset`,
   * write the plan's output into `dst`; `tables` holds the plan's params (int32) then scale and bias
   * (float32), already uploaded on the same stream.
   */
  image(src: DeviceBuffer, srcOffset: number, dst: DeviceBuffer, tables: DeviceBuffer, plan: ImagePlan, stream: StreamName): void;
  /**
   * Enqueue a ragged collate (src/collate/pieces.ts, kernels/ragged.cu): run the piece table
   * `op.table` (already uploaded on the same stream) over the fixed-capacity rows at `op.src`, writing
   * every byte of the data output and of the optional segment (int32, or a uint8 mask) and position
   * (int32) outputs. One launch. The table must have passed `checkPieces` (a bad row is an illegal address).
   */
  pieces(op: PiecesOp, stream: StreamName): void;
  record(stream: StreamName): DeviceEvent;
  done(event: DeviceEvent): boolean;
  /** Block the host until the event is done. */
  synchronize(event: DeviceEvent): void;
  /** Make later work on `stream` wait for `event`. */
  wait(stream: StreamName, event: DeviceEvent): void;
  /** Return an event to the backend once nobody will query it again. */
  recycle(event: DeviceEvent): void;
  /** Device bytes allocated and host bytes pinned through this backend, not yet released. */
  live(): { device: number; pinned: number };
  close(): void;
}

/** One ragged collate on the device: the layout of `Backend.pieces`' operands (byte offsets into buffers). */
export interface PiecesOp {
  /** The batch's fixed-capacity rows: `rows` rows of `rowBytes` bytes from `srcOffset`. */
  readonly src: DeviceBuffer;
  readonly srcOffset: number;
  readonly rows: number;
  readonly rowBytes: number;
  /** Bytes of one element of the field's dtype (the data output is aligned to it). */
  readonly elementBytes: 1 | 2 | 4 | 8;
  /** Elements per position (the product of the field's trailing dimensions). */
  readonly per: number;
  /** The data output: `total × per` elements from `dstOffset`. */
  readonly dst: DeviceBuffer;
  readonly dstOffset: number;
  /** The fill's little-endian bits in `elementBytes` bytes (pieces.ts `fillBits`). */
  readonly fill: bigint;
  /** int32 segment ids (`width` 4, 4-byte aligned) or a uint8 mask (`width` 1): `total` entries. */
  readonly segment?: { readonly buffer: DeviceBuffer; readonly offset: number; readonly width: 1 | 4 };
  /** int32 position ids, `total` entries, 4-byte aligned. */
  readonly position?: { readonly buffer: DeviceBuffer; readonly offset: number };
  /** The piece table on the device (PIECE_INTS int32 per piece, 4-byte aligned) and its figures. */
  readonly table: DeviceBuffer;
  readonly tableOffset: number;
  readonly count: number;
  readonly total: number;
  readonly maxSpan: number;
}

/** Check the operands of `Backend.pieces` fit their buffers and alignments (the table's content is the caller's: `checkPieces`). */
export function checkPiecesOp(op: PiecesOp): void {
  const bad = (what: string): never => {
    throw new RangeError(`pieces: ${what}`);
  };
  const count = (name: string, v: number, max = Number.MAX_SAFE_INTEGER) => {
    if (!(Number.isSafeInteger(v) && v >= 0 && v <= max)) bad(`${name} must be an integer in [0, ${max}], got ${v}`);
  };
  if (![1, 2, 4, 8].includes(op.elementBytes)) bad(`elementBytes must be 1, 2, 4 or 8, got ${op.elementBytes}`);
  count('per', op.per, 0xffffffff);
  if (op.per === 0) bad('per must be ≥ 1');
  for (const [name, v] of [['srcOffset', op.srcOffset], ['rows', op.rows], ['rowBytes', op.rowBytes], ['dstOffset', op.dstOffset], ['tableOffset', op.tableOffset], ['maxSpan', op.maxSpan]] as const) count(name, v);
  count('count', op.count, 0x7fffffff);
  count('total', op.total, 0x7fffffff);
  const posBytes = op.per * op.elementBytes;
  if (op.srcOffset + op.rows * op.rowBytes > op.src.bytes) bad(`${op.rows} rows of ${op.rowBytes} bytes from offset ${op.srcOffset} overflow the source (${op.src.bytes} bytes)`);
  if (op.dstOffset + op.total * posBytes > op.dst.bytes) bad(`${op.total} positions of ${posBytes} bytes from offset ${op.dstOffset} overflow the destination (${op.dst.bytes} bytes)`);
  if ((op.dst.ptr + BigInt(op.dstOffset)) % BigInt(op.elementBytes) !== 0n) bad(`the destination at offset ${op.dstOffset} is not aligned to its ${op.elementBytes}-byte elements`);
  if ((op.src.ptr + BigInt(op.srcOffset)) % BigInt(op.elementBytes) !== 0n || op.rowBytes % op.elementBytes !== 0) bad(`the source rows (offset ${op.srcOffset}, ${op.rowBytes} bytes each) are not aligned to their ${op.elementBytes}-byte elements`);
  if (op.tableOffset + op.count * 20 > op.table.bytes || op.tableOffset % 4 !== 0) bad(`${op.count} pieces from offset ${op.tableOffset} overflow (or misalign) the table (${op.table.bytes} bytes)`);
  if (op.segment !== undefined) {
    if (op.segment.width !== 1 && op.segment.width !== 4) bad(`segment width must be 1 (a mask) or 4 (int32 ids), got ${op.segment.width}`);
    if (op.segment.offset + op.total * op.segment.width > op.segment.buffer.bytes || op.segment.offset % op.segment.width !== 0) bad(`the segment output (${op.total} × ${op.segment.width} bytes from offset ${op.segment.offset}) overflows or misaligns its buffer`);
  }
  if (op.position !== undefined && (op.position.offset + op.total * 4 > op.position.buffer.bytes || op.position.offset % 4 !== 0)) bad(`the position output (${op.total} × 4 bytes from offset ${op.position.offset}) overflows or misaligns its buffer`);
  if (op.maxSpan > op.total || (op.total > 0 && op.maxSpan === 0)) bad(`maxSpan ${op.maxSpan} is not the table's widest span (1 … total ${op.total}): pass the PieceTable's maxSpan`);
}

/** The marker both backends put on out-of-memory errors. */
export function isDeviceOutOfMemory(error: unknown): boolean {
  return (error as { driverName?: unknown } | null)?.driverName === 'CUDA_ERROR_OUT_OF_MEMORY';
}

/**
 * The widest unit (16, 8, 4 or 1 bytes) that row copies through address tables may use: it must
 * divide the row size and the alignment of the row addresses (device allocations are 256-byte
 * aligned; rows of host memory mapped for the device are only as aligned as the typed array).
 */
export function rowCopyWidth(rowBytes: number, align = 16): 16 | 8 | 4 | 1 {
  for (const w of [16, 8, 4] as const) if (rowBytes % w === 0 && align % w === 0) return w;
  return 1;
}

/**
 * The unit (16, 4 or 1 bytes) the multi-column gather kernel (kernels/gather-cols.cu) moves a row
 * in, chosen from the row size alone: the source must be aligned to it.
 */
export function gatherColsWidth(rowBytes: number): 16 | 4 | 1 {
  return rowBytes % 16 === 0 ? 16 : rowBytes % 4 === 0 ? 4 : 1;
}

/** The largest power of two ≤ 16 dividing `address` (an exact number). */
export function addressAlign(address: number): number {
  for (const w of [16, 8, 4, 2]) if (address % w === 0) return w;
  return 1;
}
