// Internal: not exported from the package entry.
// The whole dataset held on an accelerator: one contiguous buffer per field, gathered by the
// epoch's device-side ids on the consumer stream itself. The rule: an epoch's id upload never
// overwrites a buffer the consumer stream's queued gathers may still read (two alternate buffers).

import { type DeviceBuffer, type DeviceEvent, isDeviceOutOfMemory } from '../backend.js';
import { TABLE_ROW_BYTES, deviceTable } from './address-table.js';
import type { Assembly, UploadField } from './assembly.js';
import type { BatchPart } from './batch-memory.js';
import type { DeviceBatch, ResidentStore } from '../device.js';
import type { VramPool } from '../device.js';
import { elementSize } from '../../tensor/dtype.js';
import type { Tensor } from '../../tensor/tensor.js';

/** Upload `columns` (batch dimension = dataset rows) whole and hold them for resident gathers. */
export function residentColumns(a: Assembly, columns: readonly Tensor[]): ResidentStore {
  const backend = a.memory.backend;
  const held: DeviceBuffer[] = [];
  try {
    for (const c of columns) {
      const buffer = backend.alloc(c.byteLength);
      held.push(buffer);
      backend.copyToDevice(buffer, 0, c.bytes(), 'copy');
    }
    const uploaded = backend.record('copy');
    backend.synchronize(uploaded);
    backend.recycle(uploaded);
  } catch (error) {
    for (const b of held) backend.free(b);
    throw error;
  }
  return residentStore(a, held, columns.map((c) => ({ dtype: c.dtype, shape: c.shape.slice(1), rowBytes: c.rowSize * elementSize(c.dtype) })), columns[0]?.shape[0] ?? 0);
}

/**
 * A streaming loader whose VRAM pool holds every sample becomes resident: the pooled rows are
 * copied once, in sample order, into one contiguous buffer per field, the slabs are freed, and
 * later epochs gather like resident mode (one launch per batch on the consumer stream, no host
 * planning, no address tables). Returns undefined — the pool left as it was — when the device
 * cannot hold the contiguous copy beside the slabs.
 */
export function promotePool(a: Assembly, pool: VramPool, length: number, fields: readonly UploadField[]): ResidentStore | undefined {
  if (!pool.complete) return undefined;
  const memory = a.memory;
  const backend = memory.backend;
  // Address tables in chunks, so that a large dataset never needs one huge host table.
  const CHUNK = 1 << 18;
  const chunks: { start: number; rows: number }[] = [];
  for (let start = 0; start < length; start += CHUNK) chunks.push({ start, rows: Math.min(CHUNK, length - start) });
  // Every buffer before any copy (NOTE [Upload commits last]): a refusal leaves the pool as it was.
  const held: DeviceBuffer[] = [];
  let tables: DeviceBuffer[] = [];
  try {
    for (const f of fields) held.push(backend.alloc(Math.max(length * f.rowBytes, 1)));
    tables = memory.acquireAll(fields.flatMap(() => chunks.map((c) => c.rows * TABLE_ROW_BYTES)));
  } catch (error) {
    for (const b of held) backend.free(b);
    if (isDeviceOutOfMemory(error)) return undefined;
    throw error;
  }
  const followUps: (() => void)[] = [];
  fields.forEach((f, i) => {
    const base = Number(held[i]!.ptr);
    chunks.forEach(({ start, rows }, c) => {
      const table = deviceTable(memory, tables[i * chunks.length + c]!, rows, (r) => base + (start + r) * f.rowBytes, (r) => pool.address(i, start + r), followUps);
      backend.copyRows(table, f.rowBytes, rows, 'copy');
    });
  });
  const copied = backend.record('copy');
  backend.synchronize(copied);
  backend.recycle(copied);
  for (const f of followUps) f();
  for (const b of pool.release()) memory.freeAfterCopies(b);
  memory.retire();
  return residentStore(a, held, fields, length);
}

function residentStore(a: Assembly, held: DeviceBuffer[], columns: readonly UploadField[], rows: number): ResidentStore {
  const memory = a.memory;
  const backend = memory.backend;
  // Two id buffers, one per alternate epoch: the upload of an epoch's ids must not overwrite a
  // buffer the consumer stream's queued gathers still read (found by the GPU bench's stamp check
  // once epoch starts got fast: the last batches of an epoch were gathered with the next epoch's
  // ids). Writing the buffer of the epoch before last waits only for that epoch's gathers, which
  // are long done, so the copy stream never stalls at an epoch boundary.
  const idBuffers: (DeviceBuffer | undefined)[] = [undefined, undefined];
  const readBy: (DeviceEvent | undefined)[] = [undefined, undefined];
  let current = 1;
  let ids: DeviceBuffer | undefined;
  return {
    bytes: held.reduce((s, b) => s + b.bytes, 0),
    prepare(samples: Uint32Array): void {
      const next = current ^ 1;
      const old = idBuffers[next];
      // The one step that can fail comes first, before any state changes: a retry starts clean.
      const fresh = old === undefined || old.bytes < samples.byteLength ? memory.allocOrTrim(Math.max(samples.byteLength, 4)) : undefined;
      if (ids !== undefined) {
        // The ending epoch's gathers are all queued: this event passes once they ran.
        if (readBy[current] !== undefined) backend.recycle(readBy[current]!);
        readBy[current] = backend.record('consumer');
      }
      current = next;
      const last = readBy[current];
      // SAFETY: cuStreamWaitEvent captures the event's state now; the event may be re-recorded later.
      if (last !== undefined) backend.wait('copy', last);
      if (fresh !== undefined) {
        // SAFETY: freed on the copy stream after the wait above, so after the gathers that read it.
        if (old !== undefined) memory.freeAfterCopies(old);
        idBuffers[current] = fresh;
      }
      const buffer = idBuffers[current]!;
      ids = buffer;
      // SAFETY: `samples` is the epoch plan's array, alive for the whole epoch; the gathers that
      // read `ids` run on the consumer stream, which waits for this copy.
      backend.copyToDevice(ids, 0, new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength), 'copy');
      const uploaded = backend.record('copy');
      backend.wait('consumer', uploaded);
      memory.after('copy', uploaded, () => backend.recycle(uploaded));
    },
    gather(_samples: Uint32Array, start: number, end: number): DeviceBatch {
      memory.retire();
      const rows = end - start;
      const outs = memory.acquireAll(columns.map((c) => rows * c.rowBytes));
      const spans: { dst: DeviceBuffer; src: DeviceBuffer; rowBytes: number }[] = [];
      const parts: BatchPart[] = [];
      for (let i = 0; i < columns.length; i++) {
        const c = columns[i]!;
        spans.push({ dst: outs[i]!, src: held[i]!, rowBytes: c.rowBytes });
        parts.push({ buffer: outs[i]!, dtype: c.dtype, shape: [rows, ...c.shape] });
      }
      // Resident batches are made on the consumer stream itself: the consumer's work is ordered
      // after them and their memory's next use after the consumer's, with no event per batch.
      backend.gatherColumns(spans, ids!, start, rows, 'consumer');
      return a.batch(parts, undefined);
    },
    columns() {
      return columns.map((c, i) => ({ dtype: c.dtype, shape: c.shape, rows, bytes: rows * c.rowBytes, ptr: held[i]!.ptr }));
    },
    dispose(): void {
      memory.copiesAfterConsumer();
      for (const b of held) memory.freeAfterCopies(b);
      for (const b of idBuffers) if (b !== undefined) memory.freeAfterCopies(b);
      for (const e of readBy) if (e !== undefined) backend.recycle(e);
      held.length = 0;
    },
  };
}
