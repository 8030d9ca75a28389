// `sources.arrays`: an in-memory dataset over columns of typed arrays (or tensors), all with the
// same number of rows. A batch is one gather per column. The rule: the columns are read, never
// written, so the caller must not mutate them while a loader uses them.

import { indexOutOfRange, invalidDatasetError, show } from '../errors.js';
import { type DType, type TypedArray, allocStorage, elementSize, storageView } from '../tensor/dtype.js';
import { gatherRows } from '../tensor/gather.js';
import { Tensor } from '../tensor/tensor.js';
import { kColumns } from './capabilities.js';
import type { BatchDataset, ReadContext } from './dataset.js';
import { type Reopenable, type SourceSpec, kSourceSpec } from './source-spec.js';

// The in-memory columns capability (ColumnsSource, under kColumns) is declared with the others in capabilities.ts.
export { type ColumnsSource, hasColumns, kColumns } from './capabilities.js';

export type ArrayColumns = readonly (Tensor | TypedArray)[] | { readonly [name: string]: Tensor | TypedArray };

export class ArraySource implements BatchDataset, Reopenable {
  readonly length: number;
  readonly [kColumns]: { readonly tensors: readonly Tensor[]; readonly keys: readonly string[] | undefined };

  constructor(columns: ArrayColumns) {
    const isList = Array.isArray(columns);
    if (!isList && (columns === null || typeof columns !== 'object' || ArrayBuffer.isView(columns) || columns instanceof Tensor)) {
      throw invalidDatasetError(`sources.arrays(columns): columns must be an array or a record of tensors or typed arrays, got ${show(columns)}`);
    }
    const keys = isList ? undefined : Object.keys(columns);
    const values = isList ? (columns as readonly unknown[]) : keys!.map((k) => (columns as Record<string, unknown>)[k]);
    if (values.length === 0) throw invalidDatasetError('sources.arrays(columns): give at least one column');
    const tensors = values.map((v, i) => {
      const label = `sources.arrays: column ${keys ? show(keys[i]) : i}`;
      if (v instanceof Tensor) {
        if (v.shape.length === 0) throw invalidDatasetError(`${label} is a scalar; its first dimension must be the row count`);
        return v;
      }
      if (ArrayBuffer.isView(v)) return new Tensor(v as TypedArray);
      throw invalidDatasetError(`${label} is ${show(v)}; expected a Tensor or a typed array`);
    });
    const rows = tensors[0]!.shape[0]!;
    tensors.forEach((t, i) => {
      if (t.shape[0] !== rows) {
        throw invalidDatasetError(
          `sources.arrays: column ${keys ? show(keys[i]) : i} has ${t.shape[0]} rows but column ${keys ? show(keys[0]) : 0} has ${rows}. All columns need the same first dimension`,
        );
      }
    });
    this.length = rows;
    this[kColumns] = { tensors, keys };
  }

  #spec: SourceSpec | undefined;

  /**
   * How reader workers open these columns: as SharedArrayBuffer views, shared, not copied per
   * worker. Columns not already in shared memory are copied there once, on first use.
   */
  [kSourceSpec](): SourceSpec {
    if (this.#spec === undefined) {
      const { tensors, keys } = this[kColumns];
      const columns = tensors.map((t) => {
        let data = t.data;
        if (!(data.buffer instanceof SharedArrayBuffer)) {
          const shared = allocSharedStorage(t.dtype, t.size);
          (shared as unknown as { set(a: unknown): void }).set(data);
          data = shared;
        }
        return { data, shape: t.shape, dtype: t.dtype };
      });
      this.#spec = { module: import.meta.url, export: 'openArrays', options: { columns, keys } };
    }
    return this.#spec;
  }

  getBatch(indices: readonly number[], _context?: ReadContext): Tensor[] | Record<string, Tensor> {
    const { tensors, keys } = this[kColumns];
    for (const i of indices) {
      if (!Number.isInteger(i) || i < 0 || i >= this.length) {
        throw indexOutOfRange('sources.arrays', 'index', i, this.length);
      }
    }
    const out = tensors.map((t) => {
      const data = allocStorage(t.dtype, indices.length * t.rowSize);
      gatherRows(t.data, t.rowSize, indices, 0, indices.length, data);
      return new Tensor(data as TypedArray, [indices.length, ...t.shape.slice(1)], t.dtype);
    });
    if (keys === undefined) return out;
    return Object.fromEntries(keys.map((k, i) => [k, out[i]!]));
  }
}

/** Worker-side factory of `sources.arrays` (see ArraySource[kSourceSpec]). */
export function openArrays(options: { columns: { data: TypedArray; shape: number[]; dtype: DType }[]; keys: string[] | undefined }): ArraySource {
  const tensors = options.columns.map((c) => new Tensor(c.data, c.shape, c.dtype));
  return new ArraySource(options.keys === undefined ? tensors : Object.fromEntries(options.keys.map((k, i) => [k, tensors[i]!])));
}

function allocSharedStorage(dtype: DType, length: number) {
  return storageView(dtype, new SharedArrayBuffer(length * elementSize(dtype)), 0, length);
}
