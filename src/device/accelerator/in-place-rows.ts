// Internal: not exported from the package entry.
// A streaming batch assembled on the device from mapped columns (see mapped-columns.ts): pooled
// rows from the VRAM pool, the others read in place from host memory — by the copy engines in one
// batched copy per field for large rows, by the row-copy kernel for small ones (per-copy engine
// overhead dominates below ROW_DMA_MIN_BYTES) — then fresh rows are captured into the pool. The
// rule: NOTE [Upload commits last] (assembly.ts).

import { gatherColsWidth } from '../backend.js';
import { TABLE_ROW_BYTES, deviceTable, hostTable } from './address-table.js';
import { type Assembly, type UploadField, capture, range } from './assembly.js';
import type { BatchPart } from './batch-memory.js';
import type { DeviceBatch } from '../device.js';
import type { MappedColumns } from '../device.js';
import type { VramPool } from '../device.js';

/**
 * Rows at least this large are copied from mapped host memory by the copy engines (one batched copy
 * per field); smaller ones by the row-copy kernel. Measured on an H200 (PCIe 5): 150 KB rows reach
 * 0.99 of the pinned-copy ceiling batched vs 0.92 by kernel; 3 KB rows 4.9 GB/s batched vs 40 by kernel.
 */
export const ROW_DMA_MIN_BYTES = 64 * 1024;

export function uploadRows(a: Assembly, ids: Uint32Array, mapped: MappedColumns, fields: readonly UploadField[], pool: VramPool | undefined): DeviceBatch {
  const memory = a.memory;
  const backend = memory.backend;
  memory.retire();
  const rows = ids.length;
  // Counted only once the batch is made: a retried batch must not count its hits twice.
  const split = pool?.active ? pool.partition(ids, false) : undefined;
  let hit: Uint8Array | undefined;
  if (split !== undefined && split.hits.length > 0) {
    hit = new Uint8Array(rows);
    for (const position of split.hits) hit[position] = 1;
  }
  let sampleBytes = 0;
  // Fields the row-copy kernel assembles; when no row of the batch is pooled or an edge row, they
  // are gathered straight from the mapped columns by their ids instead: one small upload and one
  // launch for all of them, no address tables.
  const kernelFields: number[] = [];
  for (let f = 0; f < fields.length; f++) {
    sampleBytes += fields[f]!.rowBytes;
    if (!(fields[f]!.rowBytes >= ROW_DMA_MIN_BYTES && backend.rowDma)) kernelFields.push(f);
  }
  const byIds = kernelFields.length > 0 && hit === undefined && gatherable(ids, mapped, kernelFields);
  const captures = pool?.admitting === true ? (hit === undefined ? range(rows) : split!.misses) : [];
  // NOTE [Upload commits last] (assembly.ts): every device buffer first, then the commits.
  const F = fields.length;
  const tableFields = byIds ? 0 : kernelFields.length;
  const held = memory.acquireAll([
    ...fields.map((f) => rows * f.rowBytes),
    ...(byIds ? [rows * 4] : []),
    ...kernelFields.slice(0, tableFields).map(() => rows * TABLE_ROW_BYTES),
    ...(captures.length > 0 ? fields.map(() => captures.length * TABLE_ROW_BYTES) : []),
  ]);
  const buffers = held.slice(0, F);
  const deviceIds = byIds ? held[F]! : undefined;
  const rowTables = held.slice(F + (byIds ? 1 : 0), F + (byIds ? 1 : 0) + tableFields);
  const captureTables = held.slice(F + (byIds ? 1 : 0) + tableFields);
  if (split !== undefined) pool!.tally(split);
  const followUps: (() => void)[] = [];
  for (let f = 0; f < fields.length; f++) {
    const rb = fields[f]!.rowBytes;
    if (kernelFields.includes(f)) continue;
    const out = Number(buffers[f]!.ptr);
    const host = hostTable(memory.host, rows, (r) => out + r * rb, rowSource(f, ids, mapped, hit, pool));
    backend.copyRowsDma(host, rb, rows, 'copy');
    // The driver read the table during the call.
    memory.host.recycle('int64', host);
  }
  if (deviceIds !== undefined) {
    const hostIds = memory.host.acquire('uint32', rows);
    hostIds.set(ids);
    backend.copyToDevice(deviceIds, 0, new Uint8Array(hostIds.buffer, hostIds.byteOffset, rows * 4), 'copy');
    const spans = kernelFields.map((f) => {
      const m = mapped.fields[f]!;
      return { dst: buffers[f]!, src: { ptr: BigInt(m.base), bytes: Math.max(m.hi, 1) * m.rowBytes }, rowBytes: m.rowBytes };
    });
    backend.gatherColumns(spans, deviceIds, 0, rows, 'copy');
    followUps.push(() => {
      memory.host.recycle('uint32', hostIds);
      memory.recycle(deviceIds);
    });
  } else {
    kernelFields.forEach((f, k) => {
      const rb = fields[f]!.rowBytes;
      const out = Number(buffers[f]!.ptr);
      const table = deviceTable(memory, rowTables[k]!, rows, (r) => out + r * rb, rowSource(f, ids, mapped, hit, pool), followUps);
      backend.copyRows(table, rb, rows, 'copy', mapped.fields[f]!.align);
    });
  }
  a.countH2d((hit === undefined ? rows : split!.misses.length) * sampleBytes);
  if (captures.length > 0) {
    capture(memory, pool!, ids, captures, fields, (f, position) => Number(buffers[f]!.ptr) + position * fields[f]!.rowBytes, followUps, captureTables);
  }
  const ready = backend.record('copy');
  if (followUps.length > 0) {
    // SAFETY: the address tables are read by the queued kernels until `ready` is done.
    memory.after('copy', ready, () => { for (const f of followUps) f(); });
  }
  const parts: BatchPart[] = [];
  for (let f = 0; f < fields.length; f++) parts.push({ buffer: buffers[f]!, dtype: fields[f]!.dtype, shape: [rows, ...fields[f]!.shape] });
  return a.batch(parts, ready);
}

/** Where row r of a mapped batch comes from: the VRAM pool when `hit[r]`, else the mapped source. */
function rowSource(f: number, ids: Uint32Array, mapped: MappedColumns, hit: Uint8Array | undefined, pool: VramPool | undefined): (r: number) => number {
  if (hit === undefined) return (r) => mapped.address(f, ids[r]!);
  return (r) => (hit[r] === 1 ? pool!.address(f, ids[r]!) : mapped.address(f, ids[r]!));
}

/**
 * True when the gather kernel can read every row of the batch in place for these fields: no id is
 * an edge row (all inside [lo, hi)), and each field's mapped base is aligned for the units the
 * kernel moves (16, 4 or 1 bytes, by the row size).
 */
function gatherable(ids: Uint32Array, mapped: MappedColumns, fields: readonly number[]): boolean {
  let lo = 0;
  let hi = Number.POSITIVE_INFINITY;
  for (const f of fields) {
    const m = mapped.fields[f]!;
    if (m.align % gatherColsWidth(m.rowBytes) !== 0) return false;
    if (m.onDevice) continue;
    if (m.lo > lo) lo = m.lo;
    if (m.hi < hi) hi = m.hi;
  }
  for (let r = 0; r < ids.length; r++) {
    const id = ids[r]!;
    if (id < lo || id >= hi) return false;
  }
  return true;
}
