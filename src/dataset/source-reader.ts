// Internal: not exported from the package entry.
// Reads rows from any dataset shape (per-sample, per-batch, in-memory columns) into batch-shaped
// tensors, and enforces the schema learned from sample 0. The rule: rows written into memory from
// `alloc` are fresh and owned by the caller; rows returned with `owned: false` may alias the
// dataset's memory and must be copied before anyone writes to them.

import { LoaderError, show } from '../errors.js';
import { type DType, type StorageOf, inferDType } from '../tensor/dtype.js';
import { gatherRows } from '../tensor/gather.js';
import { Tensor, trustedTensor } from '../tensor/tensor.js';
import { ArraySource, kColumns } from './arrays-source.js';
import { type AnyDataset, type BatchDataset, type Dataset, type ReadContext, type SampleValue, isBatchDataset } from './dataset.js';
import { type FieldSpec, type Schema, batchColumns, checkField, describeValue, sampleFields, schemaOf, schemaOfColumns } from './schema.js';

/** Rows of one batch, batch dimension first, in the order they were asked for. */
export interface StagedBatch {
  readonly tensors: readonly Tensor[];
  /** True when the tensors live in memory from the caller's allocator (fresh, never aliased). */
  readonly owned: boolean;
}

export type Allocate = <D extends DType>(dtype: D, length: number) => StorageOf[D];

export class SourceReader {
  readonly schema: Schema;
  readonly #ds: AnyDataset;

  private constructor(ds: AnyDataset, schema: Schema) {
    this.#ds = ds;
    this.schema = schema;
  }

  /** Learn the schema from sample 0 (one dataset read, as flodl's build-time probe). */
  static async open(ds: AnyDataset, context: ReadContext): Promise<SourceReader> {
    if (ds instanceof ArraySource) {
      const { tensors, keys } = ds[kColumns];
      return new SourceReader(ds, schemaOfColumns(tensors, keys));
    }
    if (isBatchDataset(ds)) {
      const cols = await ds.getBatch([0], context);
      const { tensors, keys } = batchColumns(cols, 1, undefined, 'dataset.getBatch([0])');
      return new SourceReader(ds, schemaOfColumns(tensors, keys));
    }
    const sample = await ds.get(0, context);
    return new SourceReader(ds, schemaOf(sampleFields(sample, undefined, 'dataset.get(0)'), 'dataset.get(0)'));
  }

  /** The whole dataset as columns, for resident mode. Never copies in-memory columns. */
  async readAll(context: ReadContext, alloc: Allocate): Promise<StagedBatch> {
    const ds = this.#ds;
    if (ds instanceof ArraySource) return { tensors: ds[kColumns].tensors, owned: false };
    const ids = Array.from({ length: ds.length }, (_, i) => i);
    return this.read(ids, context, alloc);
  }

  read(ids: ArrayLike<number>, context: ReadContext, alloc: Allocate): StagedBatch | Promise<StagedBatch> {
    const ds = this.#ds;
    if (ds instanceof ArraySource) return this.#gatherColumns(ds, ids, alloc);
    if (isBatchDataset(ds)) return this.#readBatch(ds, ids, context);
    return this.#readSamples(ds, ids, context, alloc);
  }

  #gatherColumns(ds: ArraySource, ids: ArrayLike<number>, alloc: Allocate): StagedBatch {
    const n = ids.length;
    const tensors = ds[kColumns].tensors.map((t) => {
      const out = alloc(t.dtype, n * t.rowSize);
      gatherRows(t.data, t.rowSize, ids, 0, n, out);
      return trustedTensor(t.dtype, out, [n, ...t.shape.slice(1)]);
    });
    return { tensors, owned: true };
  }

  async #readBatch(ds: BatchDataset, ids: ArrayLike<number>, context: ReadContext): Promise<StagedBatch> {
    const cols = await ds.getBatch(Array.from(ids), context);
    const { tensors } = batchColumns(cols, ids.length, this.schema, 'dataset.getBatch');
    return { tensors, owned: false };
  }

  #readSamples(ds: Dataset, ids: ArrayLike<number>, context: ReadContext, alloc: Allocate): StagedBatch | Promise<StagedBatch> {
    const { fields, keys } = this.schema;
    const n = ids.length;
    const outs = fields.map((f) => alloc(f.dtype, n * f.rowSize));
    const pending: { row: number; value: Promise<unknown> }[] = [];
    for (let row = 0; row < n; row++) {
      const id = ids[row]!;
      const got = ds.get(id, context);
      if (isPromise(got)) pending.push({ row, value: got });
      else writeSample(got, id, row, fields, keys, outs);
    }
    const finish = (): StagedBatch => ({
      tensors: fields.map((f, i) => trustedTensor(f.dtype, outs[i]!, [n, ...f.shape])),
      owned: true,
    });
    if (pending.length === 0) return finish();
    return Promise.all(pending.map((p) => p.value)).then((samples) => {
      samples.forEach((s, k) => {
        const row = pending[k]!.row;
        writeSample(s, ids[row]!, row, fields, keys, outs);
      });
      return finish();
    });
  }
}

function writeSample(sample: unknown, id: number, row: number, fields: readonly FieldSpec[], keys: readonly string[] | undefined, outs: StorageOf[DType][]): void {
  const where = `dataset.get(${id})`;
  const { values } = sampleFields(sample as never, keys, where);
  if (values.length !== fields.length) {
    throw new LoaderError('ERR_SAMPLE_MISMATCH', `${where}: sample ${id} has ${values.length} tensors, expected ${fields.length} (same as sample 0)`);
  }
  for (let f = 0; f < fields.length; f++) {
    const spec = fields[f]!;
    const value = values[f]!;
    const out = outs[f]! as unknown as { [i: number]: unknown; set(a: ArrayLike<unknown>, o: number): void };
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
    else out.set(data, base);
  }
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

