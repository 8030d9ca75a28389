// Internal: not exported from the package entry.
// Reads rows from any dataset shape (per-sample, per-batch, in-memory columns) into batch-shaped
// memory, through the sample tiers when they are attached, and enforces the schema learned from
// sample 0. Runs on the main thread and inside reader workers alike. The rule: rows written into
// caller memory are fresh; rows returned with `owned: false` may alias the dataset's memory and must
// be copied before anyone writes to them.

import type { SampleCache } from '../cache/sample-cache.js';
import type { TierCounters } from '../cache/tier-counters.js';
import type { DiskStage } from '../cache/disk-stage.js';
import { LoaderError, impureDataset, plannedLengthMismatch, raggedTooLong, sampleMismatchError, show } from '../errors.js';
import { type DType, type Storage, type StorageOf, allocStorage, elementSize, inferDType } from '../tensor/dtype.js';
import { gatherRows } from '../tensor/gather.js';
import { Tensor, trustedTensor } from '../tensor/tensor.js';
import { hasColumns, kColumns } from './arrays-source.js';
import { type PickKeys, pickKeyAt } from '../sampler/pick-key.js';
import { type AnyDataset, type BatchDataset, type Dataset, type ReadContext, type SampleRows, type SampleValue, isBatchDataset, isKeyed } from './dataset.js';
import { type FieldSpec, type RaggedField, type Schema, batchColumns, checkField, describeValue, sampleFields, schemaOf, schemaOfColumns } from './schema.js';

/** Rows of one batch, batch dimension first, in the order they were asked for. */
export interface StagedBatch {
  readonly tensors: readonly Tensor[];
  /** True when the tensors live in memory from the caller's allocator (fresh, never aliased). */
  readonly owned: boolean;
  /** Called once the rows were copied out (staging memory goes back to its ring). */
  readonly done?: () => void;
  /**
   * Ask to keep the rows where they are, in staging, until `done` (the CPU device then adopts them
   * as the batch's memory instead of copying them out): true when the ring can spare the slot, and
   * `done` must then be called when the batch lets go of them; false: copy as usual (NOTE [lent
   * slots], reader-pool.ts).
   */
  readonly lend?: () => boolean;
}

/** Samples read at once by readAll (async reads of one chunk run together; a failed chunk is re-read sample by sample). */
const READ_ALL_CHUNK = 256;

export type Allocate = <D extends DType>(dtype: D, length: number) => StorageOf[D];

/** The sample tiers a per-sample read goes through: RAM cache, then disk stage, then the source. */
export interface SampleTiers {
  readonly cache: SampleCache | undefined;
  readonly disk: DiskStage | undefined;
  readonly counters: TierCounters;
  /** Read the first source miss twice and compare (development mode, reference §5.4). */
  readonly purityProbe: boolean;
}

export class SourceReader {
  readonly schema: Schema;
  readonly #ds: AnyDataset;
  readonly #tiers: SampleTiers | undefined;
  readonly #fieldBytes: number[];
  readonly #scratch: Uint8Array;
  /** The dataset takes keys (NOTE [keyed reads]): reads carry them and skip the tiers. */
  readonly #keyed: boolean;
  #probed = false;

  constructor(ds: AnyDataset, schema: Schema, tiers?: SampleTiers) {
    this.#ds = ds;
    this.schema = schema;
    this.#keyed = isKeyed(ds);
    this.#tiers = tiers;
    this.#fieldBytes = schema.fields.map((f) => f.rowSize * elementSize(f.dtype));
    this.#scratch = new Uint8Array(schema.sampleBytes);
  }

  /** Learn the schema from sample 0 (one dataset read, as flodl's build-time probe). */
  static async probe(ds: AnyDataset, context: ReadContext): Promise<Schema> {
    if (hasColumns(ds)) {
      const { tensors, keys } = ds[kColumns];
      return schemaOfColumns(tensors, keys);
    }
    if (isBatchDataset(ds)) {
      const cols = await ds.getBatch([0], context);
      const { tensors, keys } = batchColumns(cols, 1, undefined, 'dataset.getBatch([0])');
      return schemaOfColumns(tensors, keys);
    }
    const sample = await ds.get(0, context);
    return schemaOf(sampleFields(sample, undefined, 'dataset.get(0)'), 'dataset.get(0)');
  }

  /** True when reads go sample by sample (the only shape the sample tiers can serve). */
  static isPerSample(ds: AnyDataset): boolean {
    return !isBatchDataset(ds);
  }

  /**
   * The whole dataset as columns, for resident mode. Never copies in-memory columns. A sample whose
   * read fails does not fail the whole read: its rows stay zero and `failed` maps its id to the
   * cause, so that the batches holding it fail as streaming batches do (the `errors` option).
   */
  async readAll(context: ReadContext, alloc: Allocate): Promise<StagedBatch & { readonly failed: ReadonlyMap<number, unknown> }> {
    const ds = this.#ds;
    const failed = new Map<number, unknown>();
    if (hasColumns(ds)) return { tensors: ds[kColumns].tensors, owned: false, failed };
    const n = ds.length;
    const outs = this.schema.fields.map((f) => alloc(f.dtype, n * f.rowSize) as Storage);
    for (let start = 0; start < n; start += READ_ALL_CHUNK) {
      const ids = Array.from({ length: Math.min(READ_ALL_CHUNK, n - start) }, (_, k) => start + k);
      try {
        await this.readInto(ids, context, outs, start);
      } catch {
        context.signal.throwIfAborted();
        // Find the failing samples of this chunk, one read each.
        for (const id of ids) {
          try {
            await this.readInto([id], context, outs, id);
          } catch (cause) {
            failed.set(id, cause);
          }
        }
      }
    }
    return { tensors: this.schema.fields.map((f, i) => trustedTensor(f.dtype, outs[i]!, [n, ...f.shape])), owned: true, failed };
  }

  /** Rows of `ids`, in that order, in memory from `alloc` (or borrowed from a per-batch dataset). */
  read(ids: ArrayLike<number>, context: ReadContext, alloc: Allocate, keys?: PickKeys): StagedBatch | Promise<StagedBatch> {
    if (isBatchDataset(this.#ds) && !hasColumns(this.#ds)) return this.#readBorrowed(this.#ds, ids, this.#batchContext(context, ids.length, keys));
    const n = ids.length;
    const outs = this.schema.fields.map((f) => alloc(f.dtype, n * f.rowSize) as Storage);
    const finish = (): StagedBatch => ({ tensors: this.schema.fields.map((f, i) => trustedTensor(f.dtype, outs[i]!, [n, ...f.shape])), owned: true });
    const done = this.readInto(ids, context, outs, 0, undefined, keys);
    return done === undefined ? finish() : done.then(finish);
  }

  /** A keyed batch read's context: the key of each row (NOTE [keyed reads]). */
  #batchContext(context: ReadContext, rows: number, keys: PickKeys | undefined): ReadContext {
    if (!this.#keyed || keys === undefined) return context;
    return { signal: context.signal, keys: Array.from({ length: rows }, (_, r) => pickKeyAt(keys, r)) };
  }

  /**
   * Write the rows of `ids` into `outs` (one storage per field, batch-shaped) from row `rowOffset`.
   * Synchronous when every read is; the reader workers write straight into staging memory this way.
   */
  readInto(ids: ArrayLike<number>, context: ReadContext, outs: readonly Storage[], rowOffset: number, cancelled?: () => boolean, keys?: PickKeys): void | Promise<void> {
    const ds = this.#ds;
    if (cancelled?.()) throw cancelledError();
    if (hasColumns(ds)) {
      const t0 = performance.now();
      ds[kColumns].tensors.forEach((t, f) => gatherIntoAt(t, ids, outs[f]!, rowOffset));
      this.#countSource(ids.length, performance.now() - t0);
      return;
    }
    if (isBatchDataset(ds)) {
      return this.#readBorrowed(ds, ids, this.#batchContext(context, ids.length, keys)).then((staged) => {
        staged.tensors.forEach((t, f) => (outs[f] as unknown as { set(a: Storage, o: number): void }).set(t.data, rowOffset * t.rowSize));
      });
    }
    return this.#readSamples(ds, ids, context, outs, rowOffset, cancelled, keys);
  }

  async #readBorrowed(ds: BatchDataset, ids: ArrayLike<number>, context: ReadContext): Promise<StagedBatch> {
    const t0 = performance.now();
    const cols = await ds.getBatch(Array.from(ids), context);
    const { tensors } = batchColumns(cols, ids.length, this.schema, 'dataset.getBatch');
    this.#countSource(ids.length, performance.now() - t0);
    return { tensors, owned: false };
  }

  #countSource(rows: number, ms: number): void {
    this.#tiers?.counters.add('sourceRows', rows);
    this.#tiers?.counters.add('sourceNs', ms * 1e6);
  }

  #readSamples(ds: Dataset, ids: ArrayLike<number>, context: ReadContext, outs: readonly Storage[], rowOffset: number, cancelled?: () => boolean, keys?: PickKeys): void | Promise<void> {
    // NOTE [keyed reads]: a keyed sample is read with its key and never served from, or offered to, a tier.
    const keyed = this.#keyed && keys !== undefined;
    const tiers = keyed ? undefined : this.#tiers;
    const counters = this.#tiers?.counters;
    const pending: { row: number; id: number; value: Promise<unknown>; t0: number }[] = [];
    let sourceRows = 0;
    let sourceMs = 0;
    let ramRows = 0;
    let diskRows = 0;
    for (let i = 0; i < ids.length; i++) {
      context.signal.throwIfAborted();
      if (cancelled?.()) throw cancelledError();
      const id = ids[i]!;
      const row = rowOffset + i;
      if (tiers !== undefined) {
        const cached = tiers.cache?.lookup(id);
        if (cached !== undefined) {
          this.#unpack(cached, outs, row);
          ramRows++;
          continue;
        }
        if (tiers.disk !== undefined && tiers.disk.read(id, this.#scratch) === 'hit') {
          this.#unpack(this.#scratch, outs, row);
          diskRows++;
          continue;
        }
      }
      const t0 = performance.now();
      // The row's memory goes with the read (ReadContext.rows): a dataset may decode straight into it.
      const rows = this.#rowsOf(outs, row);
      const got = ds.get(id, keyed ? { signal: context.signal, key: pickKeyAt(keys, i), rows } : rows === undefined ? context : { ...context, rows });
      if (isPromise(got)) {
        pending.push({ row, id, value: got, t0 });
        continue;
      }
      sourceMs += performance.now() - t0;
      sourceRows++;
      writeSample(got, id, row, this.schema, outs);
      if (!keyed) this.#afterSource(ds, id, outs, row, context);
    }
    if (counters !== undefined) {
      counters.add('ramRows', ramRows);
      counters.add('diskRows', diskRows);
      counters.add('sourceRows', sourceRows);
      counters.add('sourceNs', sourceMs * 1e6);
    }
    if (pending.length === 0) return;
    return (async () => {
      // Every read settles before the rows are answered for, a failed one included: a dataset may still
      // be writing into its row (ReadContext.rows), and the rows are reused once answered for.
      const outcomes = await Promise.allSettled(pending.map((p) => p.value.then((v) => [v, performance.now() - p.t0] as const)));
      const failed = outcomes.find((o) => o.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
      const samples = outcomes.map((o) => (o as PromiseFulfilledResult<readonly [unknown, number]>).value);
      let ms = 0;
      samples.forEach(([s, dt], k) => {
        const { row, id } = pending[k]!;
        ms += dt;
        writeSample(s, id, row, this.schema, outs);
      });
      if (!keyed) for (const { row, id } of pending) await this.#afterSource(ds, id, outs, row, context);
      counters?.add('sourceRows', pending.length);
      counters?.add('sourceNs', ms * 1e6);
    })();
  }

  /** `ReadContext.rows` for sample row `row` of `outs`: the bytes of each fixed-size keyed field's row. */
  #rowsOf(outs: readonly Storage[], row: number): SampleRows | undefined {
    const { keys, fields } = this.schema;
    if (keys === undefined) return undefined;
    const ragged = this.schema.ragged;
    return {
      of(field: string): Uint8Array | undefined {
        const f = keys.indexOf(field);
        if (f < 0 || ragged?.some((r) => r.field === f)) return undefined;
        const out = outs[f]!;
        const bytes = fields[f]!.rowSize * out.BYTES_PER_ELEMENT;
        return new Uint8Array(out.buffer, out.byteOffset + row * bytes, bytes);
      },
    };
  }

  /** A sample just came from the source: probe purity once, then offer it to the tiers. */
  #afterSource(ds: Dataset, id: number, outs: readonly Storage[], row: number, context: ReadContext): void | Promise<void> {
    const tiers = this.#tiers;
    if (tiers === undefined) return;
    const cache = tiers.cache;
    const disk = tiers.disk;
    const cacheRoom = cache !== undefined && cache.rowsHeld < cache.capacity;
    const diskRoom = disk !== undefined && !disk.latched;
    if (!cacheRoom && !diskRoom) return;
    const packed = this.#pack(outs, row);
    const admit = () => {
      if (!(cacheRoom && cache!.admit(id, packed)) && diskRoom) disk!.admit(id, packed);
    };
    if (!tiers.purityProbe || this.#probed) return admit();
    this.#probed = true;
    // Other reads of this reader may reuse the scratch buffer while the second read is pending.
    const first = packed.slice();
    const again = ds.get(id, context);
    const check = (second: unknown) => {
      const probeOuts = this.schema.fields.map((f) => allocStorage(f.dtype, f.rowSize) as Storage);
      writeSample(second, id, 0, this.schema, probeOuts);
      if (!bytesEqual(first, this.#pack(probeOuts, 0))) throw impure(id);
      this.#scratch.set(first);
      admit();
    };
    return isPromise(again) ? again.then(check) : check(again);
  }

  #pack(outs: readonly Storage[], row: number): Uint8Array {
    const bytes = byteViews(outs);
    let off = 0;
    for (let f = 0; f < bytes.length; f++) {
      const rb = this.#fieldBytes[f]!;
      this.#scratch.set(bytes[f]!.subarray(row * rb, (row + 1) * rb), off);
      off += rb;
    }
    return this.#scratch;
  }

  #unpack(record: Uint8Array, outs: readonly Storage[], row: number): void {
    const bytes = byteViews(outs);
    let off = 0;
    for (let f = 0; f < bytes.length; f++) {
      const rb = this.#fieldBytes[f]!;
      bytes[f]!.set(record.subarray(off, off + rb), row * rb);
      off += rb;
    }
  }
}

/** Byte views of batch outputs, made once per output set (a cached sample costs no view allocation). */
const BYTE_VIEWS = new WeakMap<readonly Storage[], Uint8Array[]>();
function byteViews(outs: readonly Storage[]): Uint8Array[] {
  let views = BYTE_VIEWS.get(outs);
  if (views === undefined) {
    views = outs.map((o) => new Uint8Array(o.buffer, o.byteOffset, o.byteLength));
    BYTE_VIEWS.set(outs, views);
  }
  return views;
}

function gatherIntoAt(src: Tensor, ids: ArrayLike<number>, out: Storage, rowOffset: number): void {
  const rs = src.rowSize;
  const view = (out as unknown as { subarray(a: number, b: number): Storage }).subarray(rowOffset * rs, (rowOffset + ids.length) * rs);
  gatherRows(src.data, rs, ids, 0, ids.length, view);
}

function cancelledError(): Error {
  return new DOMException('the read was cancelled', 'AbortError');
}

function impure(id: number): LoaderError {
  return impureDataset(id);
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function writeSample(sample: unknown, id: number, row: number, schema: Schema, outs: readonly Storage[]): void {
  const { fields, keys } = schema;
  const where = `dataset.get(${id})`;
  const { values } = sampleFields(sample as never, keys, where);
  const visible = schema.visible ?? fields.length;
  if (values.length !== visible) {
    throw sampleMismatchError(`${where}: sample ${id} has ${values.length} tensors, expected ${visible} (same as sample 0)`);
  }
  let ragged = 0;
  for (let f = 0; f < visible; f++) {
    const spec = fields[f]!;
    const value = values[f]!;
    const out = outs[f]! as unknown as { [i: number]: unknown; set(a: ArrayLike<unknown>, o: number): void; fill(v: number | bigint, a: number, b: number): void };
    const r = schema.ragged?.[ragged];
    if (r !== undefined && r.field === f) {
      ragged++;
      const n = writeRagged(r, spec, value, id, row, out, `${where}, field ${label(keys, f)}`);
      (outs[r.lengthField] as Int32Array)[row] = n;
      r.lengths[id] = n;
      continue;
    }
    if (typeof value === 'number' || typeof value === 'bigint') {
      if (!fastMatch(spec, value)) checkField(spec, describeValue(value, where), `${where}, field ${label(keys, f)}`);
      out[row] = value;
      continue;
    }
    if (!fastMatch(spec, value)) {
      checkField(spec, describeValue(value, `${where}, field ${label(keys, f)}`), `${where}, field ${label(keys, f)}`);
    }
    const data = (value instanceof Tensor ? value.data : value) as unknown as ArrayLike<unknown>;
    const base = row * spec.rowSize;
    if (spec.rowSize <= 16) for (let k = 0; k < spec.rowSize; k++) out[base + k] = data[k];
    else if (!inPlace(data, outs[f]!, base)) out.set(data, base);
  }
}

/** Whether `data` is already the row at element `base` of `out` (a dataset wrote it there: ReadContext.rows). */
function inPlace(data: ArrayLike<unknown>, out: Storage, base: number): boolean {
  const d = data as Partial<Storage>;
  return d.buffer === out.buffer && d.byteOffset === out.byteOffset + base * out.BYTES_PER_ELEMENT && d.BYTES_PER_ELEMENT === out.BYTES_PER_ELEMENT;
}

/**
 * Write a ragged field's row (NOTE [ragged rows], schema.ts): its positions, zeros up to the
 * capacity; returns the length written. Longer than the capacity: truncated when the collate says
 * so, else ERR_TOO_LONG.
 */
function writeRagged(
  r: RaggedField, spec: FieldSpec, value: SampleValue, id: number, row: number,
  out: { set(a: ArrayLike<unknown>, o: number): void; fill(v: number | bigint, a: number, b: number): void }, where: string,
): number {
  const got = typeof value === 'number' || typeof value === 'bigint' ? undefined : describeValue(value, where);
  const rest = spec.shape.slice(1);
  if (got === undefined || got.dtype !== spec.dtype || got.shape.length !== spec.shape.length || got.shape.some((d, k) => k > 0 && d !== rest[k - 1])) {
    const shown = got === undefined ? show(value) : `${got.dtype} [${got.shape.join(', ')}]`;
    throw sampleMismatchError(
      `${where} is ${shown} but the ragged field is ${spec.dtype} [len${rest.map((d) => `, ${d}`).join('')}] (from sample 0). A ragged field varies only in its first dimension`,
    );
  }
  const len = got.shape[0]!;
  // A plan placed this sample's tokens by its planned length: another one would cut or pad it.
  if (r.planned !== undefined && r.planned.lengths[id] !== len) throw plannedLengthMismatch(r.name, id, len, r.planned.lengths[id]!, r.planned.by);
  let n = len;
  if (len > r.capacity) {
    if (!r.truncate) {
      throw raggedTooLong(r.name, id, len, r.capacity, 'read');
    }
    n = r.capacity;
  }
  const data = (value instanceof Tensor ? value.data : value) as unknown as { subarray(a: number, b: number): ArrayLike<unknown> };
  const base = row * spec.rowSize;
  out.set(n === len ? (data as unknown as ArrayLike<unknown>) : data.subarray(0, n * r.per), base);
  if (n < r.capacity) out.fill(spec.dtype === 'int64' ? 0n : 0, base + n * r.per, base + spec.rowSize);
  return n;
}

/** Cheap check that `value` has the field's dtype and shape; the slow path explains a mismatch. */
function fastMatch(spec: FieldSpec, value: SampleValue): boolean {
  if (typeof value === 'number') return spec.dtype === 'float64' && spec.shape.length === 0;
  if (typeof value === 'bigint') return spec.dtype === 'int64' && spec.shape.length === 0;
  if (value instanceof Tensor) {
    if (value.dtype !== spec.dtype || value.shape.length !== spec.shape.length) return false;
    for (let i = 0; i < spec.shape.length; i++) if (value.shape[i] !== spec.shape[i]) return false;
    return true;
  }
  return spec.shape.length === 1 && (value as { length: number }).length === spec.rowSize && inferDType(value) === spec.dtype;
}

function label(keys: readonly string[] | undefined, i: number): string {
  return keys?.[i] !== undefined ? show(keys[i]) : String(i);
}

function isPromise(v: unknown): v is Promise<unknown> {
  return v !== null && typeof v === 'object' && typeof (v as { then?: unknown }).then === 'function';
}
