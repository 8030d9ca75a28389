// Internal: not exported from the package entry.
// The shape of a dataset's samples, learned from the probe of sample 0 and enforced on every later
// read, so that a sample that changes shape or dtype fails its batch with a message naming it
// instead of producing a silently wrong batch.

import { emptySampleError, invalidDatasetError, invalidOptionError, sampleMismatchError, show } from '../errors.js';
import { type DType, elementSize, inferDType } from '../tensor/dtype.js';
import { Tensor } from '../tensor/tensor.js';
import type { BatchColumns, Sample, SampleValue } from './dataset.js';

export interface FieldSpec {
  readonly dtype: DType;
  /** Shape of one sample's field (no batch dimension). */
  readonly shape: readonly number[];
  /** Elements per sample. */
  readonly rowSize: number;
}

export interface Schema {
  /** The dataset's fields, then one hidden int32 length field per ragged field (NOTE [ragged rows]). */
  readonly fields: readonly FieldSpec[];
  /** Record keys of the probe sample, in order; undefined for positional samples. */
  readonly keys: readonly string[] | undefined;
  /** Bytes of one sample over all fields. */
  readonly sampleBytes: number;
  /** The dataset's own fields (the first `visible` of `fields`); undefined: all of them. */
  readonly visible?: number;
  /** Ragged fields, in field order; undefined or empty: none. */
  readonly ragged?: readonly RaggedField[];
}

/**
 * NOTE [ragged rows] A field whose first dimension varies from sample to sample travels every tier
 * (reader staging, RAM cache, disk stage, pinned staging, VRAM pool, resident store) as a row of
 * fixed `capacity` positions — the sample's positions first, zeros after — plus its length in a
 * hidden int32 field of the same sample. Every tier sizes its slots from the schema, so none of
 * them changes its sizing law or learns about raggedness; only the writer (writeSample) and the
 * collate at delivery (pipeline/ragged-batch.ts) do. `lengths` is a table of every sample's length
 * (−1 until read), in shared memory so reader threads fill it too (it crosses to them inside the
 * schema): a batch whose rows never came back to the host (VRAM pool, resident on a device) still
 * has its lengths on the host, where output shapes are decided.
 */
export interface RaggedField {
  readonly name: string;
  /** Index of the field in `fields`, and of its hidden length field. */
  readonly field: number;
  readonly lengthField: number;
  /** Positions per row; a longer sample is truncated (`truncate`) or refused with ERR_TOO_LONG. */
  readonly capacity: number;
  readonly truncate: boolean;
  /** Elements per position (the product of the trailing shape). */
  readonly per: number;
  /** Length of sample i's row as written (−1: not read yet), shared memory. */
  readonly lengths: Int32Array;
  /** The lengths the batches were planned with (sequence packing), shared memory: a read of another length is refused. */
  readonly planned?: PlannedLengths;
}

/**
 * Each sample's length as a plan laid it out (sequence packing places tokens by them), and who
 * gave them: the `lengths` option, or the dataset (declared, or computed by `loadLengths`).
 */
export interface PlannedLengths {
  readonly lengths: Uint32Array;
  readonly by: 'option' | 'dataset';
}

/** What the loader decided for one ragged field at create. */
export interface RaggedPlan {
  readonly capacity: number;
  readonly truncate: boolean;
  readonly planned?: PlannedLengths;
}

/**
 * The schema with the ragged fields named in `plans` turned into fixed-capacity rows plus hidden
 * length fields (NOTE [ragged rows]). `names` are the fields' names; `length` the dataset's.
 */
export function raggedSchema(schema: Schema, names: readonly string[], plans: ReadonlyMap<string, RaggedPlan>, length: number): Schema {
  if (plans.size === 0) return schema;
  const fields = [...schema.fields];
  const ragged: RaggedField[] = [];
  for (const [name, plan] of plans) {
    const f = names.indexOf(name);
    const spec = fields[f];
    if (spec === undefined) throw invalidOptionError(`ragged field ${show(name)} is not a field of the dataset (its fields: ${names.map((n) => show(n)).join(', ')})`);
    if (spec.shape.length === 0) {
      throw invalidOptionError(`ragged field ${show(name)} is a scalar in sample 0; a ragged field has a first dimension that varies (shape [len, …])`);
    }
    const per = spec.shape.slice(1).reduce((a, b) => a * b, 1);
    fields[f] = { dtype: spec.dtype, shape: [plan.capacity, ...spec.shape.slice(1)], rowSize: plan.capacity * per };
    const lengths = new Int32Array(new SharedArrayBuffer(Math.max(1, length) * 4)).fill(-1);
    const planned = plan.planned === undefined ? undefined : { lengths: shared(plan.planned.lengths), by: plan.planned.by };
    ragged.push({ name, field: f, lengthField: -1, capacity: plan.capacity, truncate: plan.truncate, per, lengths, ...(planned ? { planned } : {}) });
  }
  ragged.sort((a, b) => a.field - b.field);
  const visible = schema.fields.length;
  const withLengths = ragged.map((r, k) => ({ ...r, lengthField: visible + k }));
  for (let k = 0; k < withLengths.length; k++) fields.push({ dtype: 'int32', shape: [], rowSize: 1 });
  return { fields, keys: schema.keys, sampleBytes: fields.reduce((s, f) => s + f.rowSize * elementSize(f.dtype), 0), visible, ragged: withLengths };
}

/** `a` in shared memory (reader threads check their reads against it without a copy each). */
function shared(a: Uint32Array): Uint32Array {
  if (a.buffer instanceof SharedArrayBuffer) return a;
  const out = new Uint32Array(new SharedArrayBuffer(Math.max(1, a.length) * 4), 0, a.length);
  out.set(a);
  return out;
}

/** The dataset's own field count. */
export function visibleCount(schema: Schema): number {
  return schema.visible ?? schema.fields.length;
}

/** A sample's fields in schema order, plus the record keys it came with. */
export interface Fields {
  readonly values: readonly SampleValue[];
  readonly keys: readonly string[] | undefined;
}

export function sampleFields(sample: Sample, schemaKeys: readonly string[] | undefined, where: string): Fields {
  if (Array.isArray(sample)) return { values: sample as readonly SampleValue[], keys: undefined };
  if (sample === null || typeof sample !== 'object' || ArrayBuffer.isView(sample) || sample instanceof Tensor) {
    throw invalidDatasetError(`${where} must be an array of fields or a record of named fields, got ${show(sample)}`);
  }
  const record = sample as { readonly [name: string]: SampleValue };
  const keys = schemaKeys ?? Object.keys(record);
  const values = keys.map((k) => {
    const v = record[k];
    if (v === undefined) throw sampleMismatchError(`${where} has no field ${show(k)}; sample 0 had fields ${show(schemaKeys)}`);
    return v;
  });
  if (schemaKeys !== undefined && Object.keys(record).length !== schemaKeys.length) {
    throw sampleMismatchError(`${where} has fields ${show(Object.keys(record))}; sample 0 had ${show(schemaKeys)}`);
  }
  return { values, keys };
}

/** The dtype and sample shape of one field value. */
export function describeValue(value: SampleValue, where: string): FieldSpec {
  if (value instanceof Tensor) return { dtype: value.dtype, shape: value.shape, rowSize: value.size };
  if (typeof value === 'number') return { dtype: 'float64', shape: [], rowSize: 1 };
  if (typeof value === 'bigint') return { dtype: 'int64', shape: [], rowSize: 1 };
  const dtype = inferDType(value);
  if (dtype === undefined) {
    throw invalidDatasetError(`${where} is ${show(value)}; a field must be a Tensor, a typed array, a number or a bigint`);
  }
  return { dtype, shape: [(value as { length: number }).length], rowSize: (value as { length: number }).length };
}

export function schemaOf(fields: Fields, where: string): Schema {
  if (fields.values.length === 0) {
    throw emptySampleError(`${where} has no fields; a sample needs at least one tensor`);
  }
  const specs = fields.values.map((v, i) => describeValue(v, `${where}, field ${fieldLabel(fields.keys, i)}`));
  return { fields: specs, keys: fields.keys, sampleBytes: specs.reduce((s, f) => s + f.rowSize * elementSize(f.dtype), 0) };
}

export function checkField(spec: FieldSpec, got: FieldSpec, where: string): void {
  if (got.dtype !== spec.dtype || !sameShape(got.shape, spec.shape)) {
    throw sampleMismatchError(
      `${where} is ${got.dtype} [${got.shape.join(', ')}] but sample 0 had ${spec.dtype} [${spec.shape.join(', ')}]. Every sample must have the same dtypes and shapes`,
    );
  }
}

/**
 * Normalize the columns a BatchDataset returned for `rows` rows and check them against `schema`
 * (or derive the schema when none is known yet). Returns tensors with the batch dimension first.
 */
export function batchColumns(cols: BatchColumns, rows: number, schema: Schema | undefined, where: string): { tensors: Tensor[]; keys: readonly string[] | undefined } {
  let values: readonly unknown[];
  let keys: readonly string[] | undefined;
  if (Array.isArray(cols)) {
    values = cols;
  } else if (cols !== null && typeof cols === 'object' && !ArrayBuffer.isView(cols) && !(cols instanceof Tensor)) {
    const record = cols as Record<string, unknown>;
    keys = schema?.keys ?? Object.keys(record);
    values = keys.map((k) => record[k]);
  } else {
    throw invalidDatasetError(`${where} must return an array or a record of columns, got ${show(cols)}`);
  }
  if (values.length === 0) throw emptySampleError(`${where} returned no columns; a batch needs at least one tensor`);
  if (schema !== undefined && values.length !== schema.fields.length) {
    throw sampleMismatchError(`${where} returned ${values.length} columns; the first batch had ${schema.fields.length}`);
  }
  const tensors = values.map((v, i) => {
    const label = `${where}, column ${fieldLabel(keys, i)}`;
    let t: Tensor;
    if (v instanceof Tensor) t = v;
    else if (ArrayBuffer.isView(v) && inferDType(v) !== undefined) t = new Tensor(v as never);
    else throw invalidDatasetError(`${label} is ${show(v)}; a column must be a Tensor or a typed array`);
    if (t.shape.length === 0 || t.shape[0] !== rows) {
      throw sampleMismatchError(`${label} has shape [${t.shape.join(', ')}]; its first dimension must be the ${rows} requested rows`);
    }
    const spec = schema?.fields[i];
    if (spec !== undefined) checkField(spec, { dtype: t.dtype, shape: t.shape.slice(1), rowSize: t.rowSize }, label);
    return t;
  });
  return { tensors, keys };
}

export function schemaOfColumns(tensors: readonly Tensor[], keys: readonly string[] | undefined): Schema {
  const fields = tensors.map((t) => ({ dtype: t.dtype, shape: t.shape.slice(1), rowSize: t.rowSize }));
  return { fields, keys, sampleBytes: fields.reduce((s, f) => s + f.rowSize * elementSize(f.dtype), 0) };
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

function fieldLabel(keys: readonly string[] | undefined, i: number): string {
  return keys?.[i] !== undefined ? show(keys[i]) : String(i);
}
