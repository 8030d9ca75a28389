// Internal: not exported from the package entry.
// An accelerator (CUDA or sim) as the pipeline's device. Staged rows cross on the copy stream in one
// async copy per field; every batch carries a ready event; the consumer stream waits on it at
// delivery; a released batch's device memory is reused only after an event recorded on the consumer
// stream at release. The rule: no host or device memory is reused while a queued operation may still
// read it — every reuse goes through `#retire`, which checks the event recorded after the last use.

import type { StagedBatch } from '../dataset/source-reader.js';
import { type DType, type StorageOf, elementSize, storageView } from '../tensor/dtype.js';
import type { Tensor } from '../tensor/tensor.js';
import { type Backend, type DeviceBuffer, type DeviceEvent, type MappedHost, addressAlign, gatherColsWidth, isDeviceOutOfMemory } from './backend.js';
import type { Device, DeviceBatch, MemInfo, ResidentStore } from './device.js';
import { type BatchScratch, DeviceTensor } from './device-tensor.js';
import { HostPool } from './host-pool.js';
import { PAGE_BYTES } from '../pipeline/staging.js';
import { VramPool } from './vram-pool.js';

export interface UploadField {
  readonly dtype: DType;
  /** Shape of one sample's field. */
  readonly shape: readonly number[];
  readonly rowBytes: number;
}

/**
 * Where a batch's rows come from, for the VRAM pool: the sample id of each row, and — when the
 * batch was planned against the pool before it was read — which rows are pooled (staging then
 * holds only the misses, in order).
 */
export interface UploadRoute {
  readonly ids: Uint32Array;
  readonly pool: VramPool;
  readonly fields: readonly UploadField[];
  readonly split: { readonly hits: readonly number[]; readonly misses: readonly number[] } | undefined;
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

function rowBytesOf(t: Tensor): number {
  return t.rowSize * elementSize(t.dtype);
}

/**
 * Rows at least this large are copied from mapped host memory by the copy engines (one batched copy
 * per field); smaller ones by the row-copy kernel. Measured on an H200 (PCIe 5): 150 KB rows reach
 * 0.99 of the pinned-copy ceiling batched vs 0.92 by kernel; 3 KB rows 4.9 GB/s batched vs 40 by kernel.
 */
export const ROW_DMA_MIN_BYTES = 64 * 1024;

/**
 * Columns at most this large are copied to the device whole instead of mapped (labels, metadata):
 * their rows would otherwise be mostly "edge" rows of a partial page (a 4-byte label column has
 * ~1 000 of them at each end), which keep a batch from being gathered in place by ids.
 */
export const DEVICE_COLUMN_MAX_BYTES = 16 * 2 ** 20;

/** Bytes per row of an address table: a destination and a source address, 8 bytes each. */
const TABLE_ROW_BYTES = 16;

/** How a mapped column's rows are addressed: rows [lo, hi) in place, the others in `edge` (device). */
interface MappedField {
  readonly rowBytes: number;
  readonly lo: number;
  readonly hi: number;
  /** Device address row 0 would have in the mapping (rows [lo, hi) are at base + id × rowBytes). */
  readonly base: number;
  /** Device copy of rows [0, lo) then [hi, n) (0 when there are none). */
  readonly edge: number;
  /** Alignment of `base` (a power of two ≤ 16): row copies and gathers move units no wider. */
  readonly align: number;
  /** The whole column is on the device (`edge`, which `base` then equals): every id is in place there. */
  readonly onDevice: boolean;
}

/** A source's columns mapped for the device (see AcceleratorDevice.mapColumns). */
export interface MappedColumns {
  readonly fields: readonly MappedField[];
  /** Device-visible address of field `f` of sample `id`, as an exact number. */
  address(f: number, id: number): number;
  /** Unmap once the copy stream has passed every batch that read the columns. Idempotent. */
  release(): void;
}


interface Pending {
  readonly event: DeviceEvent;
  readonly run: () => void;
}

export class AcceleratorDevice implements Device {
  readonly backend: Backend;
  readonly probesMemory = true;
  readonly autoRelease = true;
  readonly #hostPool: HostPool;
  readonly #unpins = new Map<SharedArrayBuffer, () => void>();
  readonly #free = new Map<number, DeviceBuffer[]>();
  readonly #queues = new Map<string, Pending[]>([['copy', []], ['consumer', []]]);
  /** Buffers of batches not yet released, freed at close (their tensors then refuse to be read). */
  readonly #live = new Set<readonly DeviceBuffer[]>();
  readonly allocate: <D extends DType>(dtype: D, length: number) => StorageOf[D];
  #closed = false;

  constructor(backend: Backend) {
    this.backend = backend;
    this.#hostPool = new HostPool(
      (dtype, length) => {
        // Page-locked once, when the pool first makes the buffer; reused for every later batch.
        const bytes = Math.max(length * elementSize(dtype), 1);
        const sab = new SharedArrayBuffer(Math.ceil(bytes / PAGE_BYTES) * PAGE_BYTES + PAGE_BYTES);
        const base = this.pinStaging(sab);
        return storageView(dtype, sab, base, length);
      },
      (data) => this.#unpin(data.buffer as SharedArrayBuffer),
    );
    this.allocate = (dtype, length) => {
      this.#retire();
      return this.#hostPool.acquire(dtype, length);
    };
  }

  get name(): string {
    return this.backend.name;
  }

  memInfo(): MemInfo | undefined {
    return this.backend.memInfo();
  }

  live(): { device: number; pinned: number } {
    return this.backend.live();
  }

  pinStaging(memory: SharedArrayBuffer): number {
    const base = this.backend.pageOffset(memory);
    const length = Math.floor((memory.byteLength - base) / PAGE_BYTES) * PAGE_BYTES;
    this.#unpins.set(memory, this.backend.pin(memory, base, length));
    return base;
  }

  #unpin(memory: SharedArrayBuffer): void {
    const unpin = this.#unpins.get(memory);
    this.#unpins.delete(memory);
    unpin?.();
  }

  /** Host-to-device bytes copied so far (batches, tables, resident columns). */
  h2dBytes = 0;

  /** A VRAM sample pool on this device for `rowBytes` fields of `length` samples (dormant until installed). */
  createPool(rowBytes: readonly number[], length: number, enabled: boolean): VramPool {
    return new VramPool(this.backend, rowBytes, length, enabled);
  }

  /** Free a pool's slab buffers once the work queued on the copy stream is done. */
  releasePoolBuffers(buffers: readonly DeviceBuffer[]): void {
    for (const b of buffers) this.#freeAfterCopies(b);
  }

  upload(staged: StagedBatch, route?: UploadRoute): DeviceBatch {
    this.#retire();
    const staging = staged.tensors as readonly Tensor[];
    const pool = route?.pool;
    const split = route?.split;
    // With a planned split, staging holds only the miss rows (hits were never read on the host).
    const fields = route?.fields ?? staging.map((t) => ({ dtype: t.dtype, shape: t.shape.slice(1), rowBytes: rowBytesOf(t) }));
    const rows = route?.ids.length ?? staging[0]?.shape[0] ?? 0;
    const mixed = split !== undefined && split.hits.length > 0;
    const misses = mixed ? split.misses.length : 0;
    // Positions whose rows may be captured into the pool (fresh rows that cross the bus).
    const captures = pool?.admitting === true ? (mixed ? split.misses : range(rows)) : [];
    // NOTE [Upload commits last]: every buffer is acquired before anything is admitted to the pool
    // or queued, so an out-of-memory leaves nothing behind and the caller may simply retry.
    const F = fields.length;
    const held = this.#acquireAll([
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
        this.backend.copyToDevice(buffers[i]!, 0, t.bytes(), 'copy');
        this.h2dBytes += t.byteLength;
      });
      if (captures.length > 0) {
        this.#capture(pool!, route!.ids, captures, fields, (f, position) => Number(buffers[f]!.ptr) + position * fields[f]!.rowBytes, followUps, captureTables);
      }
    } else {
      // Pooled rows are gathered on the device; the misses cross compactly and are stitched in.
      staging.forEach((t, i) => {
        this.backend.copyToDevice(missBuffers[i]!, 0, t.bytes(), 'copy');
        this.h2dBytes += t.byteLength;
      });
      const missSlot = new Int32Array(rows).fill(-1);
      split.misses.forEach((position, k) => (missSlot[position] = k));
      fields.forEach((field, f) => {
        const rb = field.rowBytes;
        const out = Number(buffers[f]!.ptr);
        const miss = missBuffers.length > 0 ? Number(missBuffers[f]!.ptr) : 0;
        const table = this.#table(stitchTables[f]!, rows, (r) => out + r * rb, (r) => {
          const k = missSlot[r]!;
          return k < 0 ? pool!.address(f, route!.ids[r]!) : miss + k * rb;
        }, followUps);
        this.backend.copyRows(table, rb, rows, 'copy');
      });
      if (captures.length > 0) {
        this.#capture(pool!, route!.ids, captures, fields, (f, position) => Number(missBuffers[f]!.ptr) + missSlot[position]! * fields[f]!.rowBytes, followUps, captureTables);
      }
    }
    const ready = this.backend.record('copy');
    // SAFETY: the staged host memory, the address tables and the miss buffers are read by queued
    // copies and kernels until `ready` is done.
    this.#queue('copy').push({
      event: ready,
      run: () => {
        staged.done?.();
        if (staged.owned) for (const t of staging) this.#hostPool.recycle(t.dtype, t.data);
        for (const f of followUps) f();
        for (const b of missBuffers) this.#recycle(b);
      },
    });
    return this.#batch(fields.map((f, i) => ({ buffer: buffers[i]!, dtype: f.dtype, shape: [rows, ...f.shape] })), ready);
  }

  /** Where row r of a mapped batch comes from: the VRAM pool when `hit[r]`, else the mapped source. */
  #rowSource(f: number, ids: Uint32Array, mapped: MappedColumns, hit: Uint8Array | undefined, pool: VramPool | undefined): (r: number) => number {
    if (hit === undefined) return (r) => mapped.address(f, ids[r]!);
    return (r) => (hit[r] === 1 ? pool!.address(f, ids[r]!) : mapped.address(f, ids[r]!));
  }

  /**
   * Admit the fresh rows among `positions` to the pool and enqueue their capture copies. `tables`:
   * one device buffer per field for an address table of `positions.length` rows, acquired by the
   * caller before anything was committed (NOTE [Upload commits last]); they are recycled here when
   * nothing is admitted, else once the copies are done.
   */
  #capture(pool: VramPool, ids: ArrayLike<number>, positions: readonly number[], fields: readonly UploadField[], source: (f: number, position: number) => number, followUps: (() => void)[], tables: readonly DeviceBuffer[]): void {
    const admitted = pool.admit(ids, positions);
    if (admitted.length === 0) {
      // Never handed to queued work: reusable at once.
      for (const t of tables) this.#recycle(t);
      return;
    }
    fields.forEach((field, f) => {
      const table = this.#table(tables[f]!, admitted.length, (k) => pool.address(f, admitted[k]!.id), (k) => source(f, admitted[k]!.position), followUps);
      this.backend.copyRows(table, field.rowBytes, admitted.length, 'copy');
    });
  }

  /**
   * Device buffers of these sizes, all or none: on a failure the ones acquired go back and the error
   * is rethrown. Nothing queued may use them before the call returns, so a failure leaves no trace.
   */
  #acquireAll(sizes: readonly number[]): DeviceBuffer[] {
    const out: DeviceBuffer[] = [];
    try {
      for (const bytes of sizes) out.push(this.#acquire(bytes));
    } catch (error) {
      for (const b of out) this.#recycle(b);
      throw error;
    }
    return out;
  }

  /**
   * Fill `device` (at least TABLE_ROW_BYTES × rows bytes, acquired by the caller) with a [dst…, src…]
   * address table of `rows` rows; its memory returns after the copy stream passes it.
   */
  #table(device: DeviceBuffer, rows: number, dst: (r: number) => number, src: (r: number) => number, followUps: (() => void)[]): DeviceBuffer {
    const host = this.#hostTable(rows, dst, src);
    this.backend.copyToDevice(device, 0, new Uint8Array(host.buffer, host.byteOffset, host.byteLength), 'copy');
    followUps.push(() => {
      this.#hostPool.recycle('int64', host);
      this.#recycle(device);
    });
    return device;
  }

  /**
   * A [dst…, src…] address table of `rows` rows in pinned host memory (from the host pool; the
   * caller recycles it). Addresses are exact numbers (device addresses stay far below 2^53), written
   * as two 32-bit halves: no BigInt per row.
   */
  #hostTable(rows: number, dst: (r: number) => number, src: (r: number) => number): BigInt64Array {
    const host = this.#hostPool.acquire('int64', 2 * rows) as unknown as BigInt64Array;
    const words = new Uint32Array(host.buffer, host.byteOffset, 4 * rows);
    for (let r = 0; r < rows; r++) {
      // Exact for addresses below 2^53: a division by 2^32 and a product are exact, `%` on doubles is slow.
      const d = dst(r);
      const s = src(r);
      const dh = Math.floor(d / 4294967296);
      const sh = Math.floor(s / 4294967296);
      words[2 * r] = d - dh * 4294967296;
      words[2 * r + 1] = dh;
      words[2 * (rows + r)] = s - sh * 4294967296;
      words[2 * (rows + r) + 1] = sh;
    }
    return host;
  }

  /**
   * Map a source's in-memory columns (batch dimension = dataset rows) for the device, so that
   * streaming batches are assembled from them in place (`uploadRows`): no reader, no staging copy.
   * Each distinct buffer is page-locked and mapped once; rows that straddle the partial page at
   * either end of a buffer (at most one or two per column) are copied to the device once. Throws
   * when the memory cannot be mapped; the loader then streams through staging.
   */
  mapColumns(columns: readonly Tensor[]): MappedColumns {
    const backend = this.backend;
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
        this.#queue('copy').push({ event, run: () => { release(); backend.recycle(event); } });
      },
    };
  }

  /**
   * A streaming batch assembled on the device from mapped columns: pooled rows from the VRAM pool,
   * the others read in place from host memory — by the copy engines in one batched copy per field
   * for large rows, by the row-copy kernel for small ones (per-copy engine overhead dominates below
   * ROW_DMA_MIN_BYTES) — then fresh rows are captured into the pool.
   */
  uploadRows(ids: Uint32Array, mapped: MappedColumns, fields: readonly UploadField[], pool: VramPool | undefined): DeviceBatch {
    this.#retire();
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
      if (!(fields[f]!.rowBytes >= ROW_DMA_MIN_BYTES && this.backend.rowDma)) kernelFields.push(f);
    }
    const byIds = kernelFields.length > 0 && hit === undefined && gatherable(ids, mapped, kernelFields);
    const captures = pool?.admitting === true ? (hit === undefined ? range(rows) : split!.misses) : [];
    // NOTE [Upload commits last] (upload): every device buffer first, then the commits.
    const F = fields.length;
    const tableFields = byIds ? 0 : kernelFields.length;
    const held = this.#acquireAll([
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
      const host = this.#hostTable(rows, (r) => out + r * rb, this.#rowSource(f, ids, mapped, hit, pool));
      this.backend.copyRowsDma(host, rb, rows, 'copy');
      // The driver read the table during the call.
      this.#hostPool.recycle('int64', host);
    }
    if (deviceIds !== undefined) {
      const hostIds = this.#hostPool.acquire('uint32', rows);
      hostIds.set(ids);
      this.backend.copyToDevice(deviceIds, 0, new Uint8Array(hostIds.buffer, hostIds.byteOffset, rows * 4), 'copy');
      const spans = kernelFields.map((f) => {
        const m = mapped.fields[f]!;
        return { dst: buffers[f]!, src: { ptr: BigInt(m.base), bytes: Math.max(m.hi, 1) * m.rowBytes }, rowBytes: m.rowBytes };
      });
      this.backend.gatherColumns(spans, deviceIds, 0, rows, 'copy');
      followUps.push(() => {
        this.#hostPool.recycle('uint32', hostIds);
        this.#recycle(deviceIds);
      });
    } else {
      kernelFields.forEach((f, k) => {
        const rb = fields[f]!.rowBytes;
        const out = Number(buffers[f]!.ptr);
        const table = this.#table(rowTables[k]!, rows, (r) => out + r * rb, this.#rowSource(f, ids, mapped, hit, pool), followUps);
        this.backend.copyRows(table, rb, rows, 'copy', mapped.fields[f]!.align);
      });
    }
    this.h2dBytes += (hit === undefined ? rows : split!.misses.length) * sampleBytes;
    if (captures.length > 0) {
      this.#capture(pool!, ids, captures, fields, (f, position) => Number(buffers[f]!.ptr) + position * fields[f]!.rowBytes, followUps, captureTables);
    }
    const ready = this.backend.record('copy');
    if (followUps.length > 0) {
      // SAFETY: the address tables are read by the queued kernels until `ready` is done.
      this.#queue('copy').push({ event: ready, run: () => { for (const f of followUps) f(); } });
    }
    const parts: { buffer: DeviceBuffer; dtype: DType; shape: readonly number[] }[] = [];
    for (let f = 0; f < fields.length; f++) parts.push({ buffer: buffers[f]!, dtype: fields[f]!.dtype, shape: [rows, ...fields[f]!.shape] });
    return this.#batch(parts, ready);
  }

  resident(columns: readonly Tensor[]): ResidentStore {
    const backend = this.backend;
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
    return this.#residentStore(held, columns.map((c) => ({ dtype: c.dtype, shape: c.shape.slice(1), rowBytes: c.rowSize * elementSize(c.dtype) })));
  }

  /**
   * A streaming loader whose VRAM pool holds every sample becomes resident: the pooled rows are
   * copied once, in sample order, into one contiguous buffer per field, the slabs are freed, and
   * later epochs gather like resident mode (one launch per batch on the consumer stream, no host
   * planning, no address tables). Returns undefined — the pool left as it was — when the device
   * cannot hold the contiguous copy beside the slabs.
   */
  promotePool(pool: VramPool, length: number, fields: readonly UploadField[]): ResidentStore | undefined {
    if (!pool.complete) return undefined;
    const backend = this.backend;
    // Address tables in chunks, so that a large dataset never needs one huge host table.
    const CHUNK = 1 << 18;
    const chunks: { start: number; rows: number }[] = [];
    for (let start = 0; start < length; start += CHUNK) chunks.push({ start, rows: Math.min(CHUNK, length - start) });
    // Every buffer before any copy (NOTE [Upload commits last]): a refusal leaves the pool as it was.
    const held: DeviceBuffer[] = [];
    let tables: DeviceBuffer[] = [];
    try {
      for (const f of fields) held.push(backend.alloc(Math.max(length * f.rowBytes, 1)));
      tables = this.#acquireAll(fields.flatMap(() => chunks.map((c) => c.rows * TABLE_ROW_BYTES)));
    } catch (error) {
      for (const b of held) backend.free(b);
      if (isDeviceOutOfMemory(error)) return undefined;
      throw error;
    }
    const followUps: (() => void)[] = [];
    fields.forEach((f, i) => {
      const base = Number(held[i]!.ptr);
      chunks.forEach(({ start, rows }, c) => {
        const table = this.#table(tables[i * chunks.length + c]!, rows, (r) => base + (start + r) * f.rowBytes, (r) => pool.address(i, start + r), followUps);
        backend.copyRows(table, f.rowBytes, rows, 'copy');
      });
    });
    const copied = backend.record('copy');
    backend.synchronize(copied);
    backend.recycle(copied);
    for (const f of followUps) f();
    this.releasePoolBuffers(pool.release());
    this.#retire();
    return this.#residentStore(held, fields);
  }

  #residentStore(held: DeviceBuffer[], columns: readonly UploadField[]): ResidentStore {
    const backend = this.backend;
    // Two id buffers, one per alternate epoch: the upload of an epoch's ids must not overwrite a
    // buffer the consumer stream's queued gathers still read (found by the GPU bench's stamp check
    // once epoch starts got fast: the last batches of an epoch were gathered with the next epoch's
    // ids). Writing the buffer of the epoch before last waits only for that epoch's gathers, which
    // are long done, so the copy stream never stalls at an epoch boundary.
    const idBuffers: (DeviceBuffer | undefined)[] = [undefined, undefined];
    const readBy: (DeviceEvent | undefined)[] = [undefined, undefined];
    let current = 1;
    let ids: DeviceBuffer | undefined;
    const device = this;
    return {
      bytes: held.reduce((s, b) => s + b.bytes, 0),
      prepare(samples: Uint32Array): void {
        const next = current ^ 1;
        const old = idBuffers[next];
        // The one step that can fail comes first, before any state changes: a retry starts clean.
        const fresh = old === undefined || old.bytes < samples.byteLength ? device.#allocOrTrim(Math.max(samples.byteLength, 4)) : undefined;
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
          if (old !== undefined) device.#freeAfterCopies(old);
          idBuffers[current] = fresh;
        }
        const buffer = idBuffers[current]!;
        ids = buffer;
        // SAFETY: `samples` is the epoch plan's array, alive for the whole epoch; the gathers that
        // read `ids` run on the consumer stream, which waits for this copy.
        backend.copyToDevice(ids, 0, new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength), 'copy');
        const uploaded = backend.record('copy');
        backend.wait('consumer', uploaded);
        device.#queue('copy').push({ event: uploaded, run: () => backend.recycle(uploaded) });
      },
      gather(_samples: Uint32Array, start: number, end: number): DeviceBatch {
        device.#retire();
        const rows = end - start;
        const outs: DeviceBuffer[] = [];
        try {
          for (const c of columns) outs.push(device.#acquire(rows * c.rowBytes));
        } catch (error) {
          for (const b of outs) device.#recycle(b);
          throw error;
        }
        const spans: { dst: DeviceBuffer; src: DeviceBuffer; rowBytes: number }[] = [];
        const parts: { buffer: DeviceBuffer; dtype: DType; shape: readonly number[] }[] = [];
        for (let i = 0; i < columns.length; i++) {
          const c = columns[i]!;
          spans.push({ dst: outs[i]!, src: held[i]!, rowBytes: c.rowBytes });
          parts.push({ buffer: outs[i]!, dtype: c.dtype, shape: [rows, ...c.shape] });
        }
        // Resident batches are made on the consumer stream itself: the consumer's work is ordered
        // after them and their memory's next use after the consumer's, with no event per batch.
        backend.gatherColumns(spans, ids!, start, rows, 'consumer');
        return device.#batch(parts, undefined);
      },
      dispose(): void {
        device.#copiesAfterConsumer();
        for (const b of held) device.#freeAfterCopies(b);
        for (const b of idBuffers) if (b !== undefined) device.#freeAfterCopies(b);
        for (const e of readBy) if (e !== undefined) backend.recycle(e);
        held.length = 0;
      },
    };
  }

  /** Block until the consumer stream's queued work is done, then retire what completed. */
  synchronize(): void {
    const event = this.backend.record('consumer');
    this.backend.synchronize(event);
    this.backend.recycle(event);
    this.#retire();
  }

  /** Drain the streams, free device memory, unpin staging. Step 9 of NOTE [Loader shutdown] (loader.ts): after every stage that enqueues work here has stopped. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const queue of this.#queues.values()) for (const p of queue) this.backend.synchronize(p.event);
    this.#retire();
    for (const buffers of this.#live) for (const b of buffers) this.backend.free(b);
    this.#live.clear();
    this.#trim();
    this.#hostPool.clear();
    for (const unpin of this.#unpins.values()) unpin();
    this.#unpins.clear();
    this.backend.close();
  }

  /**
   * Batch memory. `ready` is the copy-stream event the consumer waits on; undefined when the batch
   * was made on the consumer stream (then an event is recorded only if someone asks for one, and
   * the memory is reused in stream order unless an event escaped to other streams).
   */
  #batch(parts: readonly { buffer: DeviceBuffer; dtype: DType; shape: readonly number[] }[], ready: DeviceEvent | undefined): DeviceBatch {
    return new BatchMemory(this, this.#batchHooks, parts, ready);
  }

  /** What a BatchMemory needs from its device (one object per device, not closures per batch). */
  readonly #batchHooks: BatchHooks = {
    acquire: (bytes) => this.#acquire(bytes),
    recycle: (buffer) => this.#recycle(buffer),
    closed: () => this.#closed,
    live: this.#live,
    afterConsumer: (event, run) => this.#queue('consumer').push({ event, run }),
  };

  #queue(stream: 'copy' | 'consumer'): Pending[] {
    return this.#queues.get(stream)!;
  }

  /**
   * Device memory of `bytes` bytes: a released buffer of that size if one is kept, else a new one.
   * Released buffers are all kept (their number is bounded by the peak of batches in flight, which
   * the budget law bounds): freeing and re-allocating per batch costs the host a driver round trip
   * each way, and cuMemFree waits for the device. Under out-of-memory they are given back first.
   */
  #acquire(bytes: number): DeviceBuffer {
    const size = Math.max(bytes, 1);
    const hit = this.#free.get(size)?.pop();
    if (hit !== undefined) {
      this.#keptBytes -= hit.bytes;
      return hit;
    }
    return this.#allocOrTrim(size);
  }

  /** A new buffer; under out-of-memory the kept released buffers are given back first, then once more. */
  #allocOrTrim(bytes: number): DeviceBuffer {
    try {
      return this.backend.alloc(bytes);
    } catch (error) {
      if (!isDeviceOutOfMemory(error) || this.#keptBytes === 0) throw error;
      this.#trim();
      return this.backend.alloc(bytes);
    }
  }

  #recycle(buffer: DeviceBuffer): void {
    let list = this.#free.get(buffer.bytes);
    if (list === undefined) this.#free.set(buffer.bytes, (list = []));
    list.push(buffer);
    this.#keptBytes += buffer.bytes;
  }

  /** Bytes of released buffers kept for reuse. */
  #keptBytes = 0;

  /** Free every kept buffer (they are idle: recycled only after their last use completed). */
  #trim(): void {
    for (const list of this.#free.values()) for (const b of list) this.backend.free(b);
    this.#free.clear();
    this.#keptBytes = 0;
  }

  /** Order later copy-stream work (copies, frees through #freeAfterCopies) after everything queued on the consumer stream so far. */
  #copiesAfterConsumer(): void {
    const consumed = this.backend.record('consumer');
    this.backend.wait('copy', consumed);
    this.#queue('consumer').push({ event: consumed, run: () => this.backend.recycle(consumed) });
  }

  #freeAfterCopies(buffer: DeviceBuffer): void {
    const event = this.backend.record('copy');
    this.#queue('copy').push({ event, run: () => { this.backend.free(buffer); this.backend.recycle(event); } });
  }

  /**
   * Run the follow-ups of completed events (host staging back to its owner, buffers to the pool).
   * Events of one stream complete in the order they were recorded, so each stream's queue is
   * checked from its head and the check stops at the first event not yet done.
   */
  #retire(): void {
    for (const queue of this.#queues.values()) {
      while (queue.length > 0 && this.backend.done(queue[0]!.event)) queue.shift()!.run();
    }
  }
}

/** The device internals a batch's memory uses. */
interface BatchHooks {
  acquire(bytes: number): DeviceBuffer;
  recycle(buffer: DeviceBuffer): void;
  closed(): boolean;
  /** Buffers of batches not yet released (freed at close). */
  readonly live: Set<readonly DeviceBuffer[]>;
  /** Run `run` once `event` (recorded on the consumer stream) is done. */
  afterConsumer(event: DeviceEvent, run: () => void): void;
}

/**
 * One batch's device memory: its buffers (plus scratch its transform allocates), its ready event,
 * and the release that returns the memory once no queued work may read it. A class rather than
 * closures: one is made per batch.
 */
class BatchMemory implements DeviceBatch, BatchScratch {
  readonly tensors: readonly DeviceTensor[];
  readonly #backend: Backend;
  readonly #hooks: BatchHooks;
  readonly #buffers: DeviceBuffer[];
  readonly #events: DeviceEvent[] = [];
  readonly #ready: DeviceEvent | undefined;
  #escaped: DeviceEvent | undefined;

  constructor(device: AcceleratorDevice, hooks: BatchHooks, parts: readonly { buffer: DeviceBuffer; dtype: DType; shape: readonly number[] }[], ready: DeviceEvent | undefined) {
    const backend = device.backend;
    this.#backend = backend;
    this.#hooks = hooks;
    this.#ready = ready;
    const buffers: DeviceBuffer[] = [];
    const tensors: DeviceTensor[] = [];
    for (const p of parts) {
      buffers.push(p.buffer);
      tensors.push(new DeviceTensor({ backend, buffer: p.buffer, offset: 0, dtype: p.dtype, shape: p.shape, ready: ready ?? 'lazy', owner: this }));
    }
    this.#buffers = buffers;
    this.tensors = tensors;
    hooks.live.add(buffers);
  }

  beforeDelivery(): void {
    if (this.#ready !== undefined) this.#backend.wait('consumer', this.#ready);
  }

  alloc(bytes: number): DeviceBuffer {
    const b = this.#hooks.acquire(bytes);
    this.#buffers.push(b);
    return b;
  }

  track(event: DeviceEvent): void {
    this.#events.push(event);
  }

  readyEvent(): DeviceEvent {
    this.#escaped ??= this.#backend.record('consumer');
    return this.#escaped;
  }

  free(): void {
    const hooks = this.#hooks;
    if (hooks.closed() || !hooks.live.delete(this.#buffers)) return;
    if (this.#ready === undefined && this.#escaped === undefined && this.#events.length === 0) {
      // Made and used only on the consumer stream: the next use of this memory is ordered after.
      for (const b of this.#buffers) hooks.recycle(b);
      return;
    }
    if (this.#escaped !== undefined) this.#events.push(this.#escaped);
    const released = this.#backend.record('consumer');
    // SAFETY: kernels the consumer queued before the release may still read these buffers.
    hooks.afterConsumer(released, () => this.#retire(released));
  }

  #retire(released: DeviceEvent): void {
    const backend = this.#backend;
    for (const b of this.#buffers) this.#hooks.recycle(b);
    for (const e of this.#events) backend.recycle(e);
    backend.recycle(released);
    if (this.#ready !== undefined) backend.recycle(this.#ready);
  }
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
