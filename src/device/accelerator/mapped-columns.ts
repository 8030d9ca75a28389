// Internal: not exported from the package entry.
// An in-memory source's columns mapped for the device (option `pinSource`): page-locked host
// memory the device reads in place, so streaming batches need no reader and no staging copy. The
// rule: rows that straddle the partial page at either end of a buffer cannot be mapped and are
// copied to the device once ("edge" rows); the mapping is released only after the copy stream has
// passed every batch that read it.

import { addressAlign, type DeviceBuffer, type MappedHost } from '../backend.js';
import type { StreamMemory } from './stream-memory.js';
import type { MappedColumns, MappedField } from '../device.js';
import { elementSize } from '../../tensor/dtype.js';
import type { Tensor } from '../../tensor/tensor.js';

/**
 * Columns at most this large are copied to the device whole instead of mapped (labels, metadata):
 * their rows would otherwise be mostly "edge" rows of a partial page (a 4-byte label column has
 * ~1 000 of them at each end), which keep a batch from being gathered in place by ids.
 */
export const DEVICE_COLUMN_MAX_BYTES = 16 * 2 ** 20;

/**
 * Map a source's in-memory columns (batch dimension = dataset rows) for the device. Each distinct
 * buffer is page-locked and mapped once. Throws when the memory cannot be mapped; the loader then
 * streams through staging.
 */
export function mapColumns(memory: StreamMemory, columns: readonly Tensor[]): MappedColumns {
  const backend = memory.backend;
  const spans = new Map<ArrayBufferLike, { start: number; end: number; mapped?: MappedHost }>();
  for (const c of columns) {
    const b = c.bytes();
    if (b.byteLength <= DEVICE_COLUMN_MAX_BYTES) continue;
    const span = spans.get(b.buffer);
    if (span === undefined) spans.set(b.buffer, { start: b.byteOffset, end: b.byteOffset + b.byteLength });
    else {
      span.start = Math.min(span.start, b.byteOffset);
      span.end = Math.max(span.end, b.byteOffset + b.byteLength);
    }
  }
  const edges: DeviceBuffer[] = [];
  const release = (): void => {
    for (const span of spans.values()) span.mapped?.release();
    for (const e of edges) backend.free(e);
  };
  const layouts: MappedField[] = [];
  try {
    for (const [buffer, span] of spans) span.mapped = backend.mapHost(buffer, span.start, span.end - span.start);
    for (const c of columns) {
      const b = c.bytes();
      // A small column (labels, metadata) is held on the device whole: all its rows are "edge" rows.
      const m = b.byteLength <= DEVICE_COLUMN_MAX_BYTES ? undefined : spans.get(b.buffer)!.mapped!;
      const rowBytes = c.rowSize * elementSize(c.dtype);
      const n = c.shape[0]!;
      // Rows wholly inside the mapped pages: [lo, hi).
      let lo = m === undefined || rowBytes === 0 ? 0 : Math.min(n, Math.max(0, Math.ceil((m.start - b.byteOffset) / rowBytes)));
      let hi = m === undefined ? 0 : rowBytes === 0 ? n : Math.max(0, Math.min(n, Math.floor((m.end - b.byteOffset) / rowBytes)));
      if (hi <= lo) lo = hi = 0;
      const edgeRows = lo + (n - hi);
      let edge: DeviceBuffer | undefined;
      if (edgeRows > 0 && rowBytes > 0) {
        edge = backend.alloc(edgeRows * rowBytes);
        edges.push(edge);
        // Through a private unpinned copy: a copy that straddles a pinned range's edge is refused by CUDA.
        const host = new Uint8Array(edgeRows * rowBytes);
        host.set(b.subarray(0, lo * rowBytes), 0);
        host.set(b.subarray(hi * rowBytes, n * rowBytes), lo * rowBytes);
        backend.copyToDevice(edge, 0, host, 'copy');
        const copied = backend.record('copy');
        backend.synchronize(copied);
        backend.recycle(copied);
      }
      const edgeAt = edge === undefined ? 0 : Number(edge.ptr);
      if (m === undefined || hi === 0) {
        // Every row on the device: the gather reads the device copy (a 256-byte aligned allocation).
        layouts.push({ rowBytes, lo: 0, hi: 0, base: edgeAt, edge: edgeAt, align: 16, onDevice: true });
      } else {
        const base = Number(m.ptr) - m.start + b.byteOffset;
        layouts.push({ rowBytes, lo, hi, base, edge: edgeAt, align: addressAlign(base), onDevice: false });
      }
    }
  } catch (error) {
    release();
    throw error;
  }
  let released = false;
  return {
    fields: layouts,
    address(f: number, id: number): number {
      const l = layouts[f]!;
      if (id >= l.lo && id < l.hi) return l.base + id * l.rowBytes;
      return l.edge + (id < l.lo ? id : l.lo + id - l.hi) * l.rowBytes;
    },
    release: () => {
      if (released) return;
      released = true;
      // SAFETY: batches read the mapped rows and edge copies on the copy stream only.
      const event = backend.record('copy');
      memory.after('copy', event, () => { release(); backend.recycle(event); });
    },
  };
}
