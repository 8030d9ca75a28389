// Internal: not exported from the package entry.
// Staged rows onto the device: one async copy per field on the copy stream, then — with a VRAM
// pool — pooled rows stitched in on the device and fresh rows captured. The rule: the staged host
// memory, the address tables and the miss buffers are handed back only once the copy stream has
// passed the batch's ready event.

import type { StagedBatch } from '../../dataset/source-reader.js';
import { elementSize } from '../../tensor/dtype.js';
import type { Tensor } from '../../tensor/tensor.js';
import { TABLE_ROW_BYTES, deviceTable } from './address-table.js';
import { type Assembly, capture, range } from './assembly.js';
import type { DeviceBatch, PoolRoute } from '../device.js';

export function uploadStaged(a: Assembly, staged: StagedBatch, route: PoolRoute | undefined): DeviceBatch {
  const memory = a.memory;
  const backend = memory.backend;
  memory.retire();
  const staging = staged.tensors as readonly Tensor[];
  const pool = route?.pool;
  const split = route?.split;
  // With a planned split, staging holds only the miss rows (hits were never read on the host).
  const fields = route?.fields ?? staging.map((t) => ({ dtype: t.dtype, shape: t.shape.slice(1), rowBytes: t.rowSize * elementSize(t.dtype) }));
  const rows = route?.ids.length ?? staging[0]?.shape[0] ?? 0;
  const mixed = split !== undefined && split.hits.length > 0;
  const misses = mixed ? split.misses.length : 0;
  // Positions whose rows may be captured into the pool (fresh rows that cross the bus).
  const captures = pool?.admitting === true ? (mixed ? split.misses : range(rows)) : [];
  // NOTE [Upload commits last] (assembly.ts): every buffer before anything is admitted or queued.
  const F = fields.length;
  const held = memory.acquireAll([
    ...fields.map((f) => rows * f.rowBytes),
    ...(misses > 0 ? fields.map((f) => misses * f.rowBytes) : []),
    ...(mixed ? fields.map(() => rows * TABLE_ROW_BYTES) : []),
    ...(captures.length > 0 ? fields.map(() => captures.length * TABLE_ROW_BYTES) : []),
  ]);
  const buffers = held.slice(0, F);
  const missBuffers = misses > 0 ? held.slice(F, 2 * F) : [];
  const stitchTables = mixed ? held.slice(F + missBuffers.length, 2 * F + missBuffers.length) : [];
  const captureTables = held.slice(F + missBuffers.length + stitchTables.length);
  const followUps: (() => void)[] = [];
  if (!mixed) {
    // Every row crosses the bus: one copy per field, then fresh rows are captured into the pool.
    staging.forEach((t, i) => {
      backend.copyToDevice(buffers[i]!, 0, t.bytes(), 'copy');
      a.countH2d(t.byteLength);
    });
    if (captures.length > 0) {
      capture(memory, pool!, route!.ids, captures, fields, (f, position) => Number(buffers[f]!.ptr) + position * fields[f]!.rowBytes, followUps, captureTables);
    }
  } else {
    // Pooled rows are gathered on the device; the misses cross compactly and are stitched in.
    staging.forEach((t, i) => {
      backend.copyToDevice(missBuffers[i]!, 0, t.bytes(), 'copy');
      a.countH2d(t.byteLength);
    });
    const missSlot = new Int32Array(rows).fill(-1);
    split.misses.forEach((position, k) => (missSlot[position] = k));
    fields.forEach((field, f) => {
      const rb = field.rowBytes;
      const out = Number(buffers[f]!.ptr);
      const miss = missBuffers.length > 0 ? Number(missBuffers[f]!.ptr) : 0;
      const table = deviceTable(memory, stitchTables[f]!, rows, (r) => out + r * rb, (r) => {
        const k = missSlot[r]!;
        return k < 0 ? pool!.address(f, route!.ids[r]!) : miss + k * rb;
      }, followUps);
      backend.copyRows(table, rb, rows, 'copy');
    });
    if (captures.length > 0) {
      capture(memory, pool!, route!.ids, captures, fields, (f, position) => Number(missBuffers[f]!.ptr) + missSlot[position]! * fields[f]!.rowBytes, followUps, captureTables);
    }
  }
  const ready = backend.record('copy');
  // SAFETY: the staged host memory, the address tables and the miss buffers are read by queued
  // copies and kernels until `ready` is done.
  memory.after('copy', ready, () => {
    staged.done?.();
    if (staged.owned) for (const t of staging) memory.host.recycle(t.dtype, t.data);
    for (const f of followUps) f();
    for (const b of missBuffers) memory.recycle(b);
  });
  return a.batch(fields.map((f, i) => ({ buffer: buffers[i]!, dtype: f.dtype, shape: [rows, ...f.shape] })), ready);
}
