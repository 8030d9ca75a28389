// Column stores over byte ranges of files: the shared back end of the NPY and safetensors sources.
// A column is a C-order array of `shape` (`shape[0]` = rows) stored at `[offset, offset + bytes)`
// of a file. Loaded into SharedArrayBuffers it becomes an `ArraySource` (resident mode and reader
// workers share it without copies); left on disk, each batch reads its rows with positioned reads
// into fresh, aligned memory, one read per run of consecutive ids. The rule: the parser that builds
// the columns has already checked every range against the file's size, and a positioned source
// re-checks the size at each open, so a file that changed under it is refused, never misread.

import { totalmem } from 'node:os';
import { badFile, indexOutOfRange, invalidDatasetError, invalidOption } from '../../../errors.js';
import { type DType, type Storage, type TypedArray, allocStorage, elementSize, storageView } from '../../../tensor/dtype.js';
import { Tensor, trustedTensor } from '../../../tensor/tensor.js';
import { ArraySource } from '../../arrays-source.js';
import type { BatchDataset, ReadContext } from '../../dataset.js';
import { type Reopenable, type SourceSpec, kSourceSpec } from '../../source-spec.js';
import { PositionedFile } from '../file.js';

/**
 * How a file-backed source holds its data.
 * - `'memory'`: read every column once into shared memory (an `ArraySource`).
 * - `'positioned'`: keep the data on disk; each batch reads its rows.
 * - `'auto'` (default): memory when the selected data is at most `inMemoryBytes`, else positioned.
 */
export type LoadMode = 'auto' | 'memory' | 'positioned';

export interface LoadOptions {
  /** Default `'auto'`: small files are cheapest in memory, large ones must not be loaded whole. */
  readonly load?: LoadMode;
  /**
   * The largest total, in bytes, that `load: 'auto'` reads into memory. Default: the smaller of
   * 1 GiB and 1/8 of the machine's RAM, so that loading never crowds out the loader's own tiers.
   */
  readonly inMemoryBytes?: number;
}

/** One column: a C-order array stored contiguously in a file. */
export interface FileColumn {
  /** The path as the user gave it (for messages). */
  readonly path: string;
  /** Size of the file when its header was checked; a later open that finds another size is refused. */
  readonly fileSize: number;
  /** Byte offset of row 0. */
  readonly offset: number;
  readonly dtype: DType;
  /** Full shape, rows first (at least one dimension). */
  readonly shape: readonly number[];
  /** The data is big-endian: bytes of each element are reversed after reading. */
  readonly swap: boolean;
  /**
   * The bytes are booleans (NumPy `b1`, safetensors BOOL): any non-zero byte reads as 1, as NumPy
   * reads it, because `arr.view(bool)` writes whatever bytes the viewed array held (255, 2, 128).
   */
  readonly bool: boolean;
  /** Names the data region in messages ("the data", "tensor \"x\""). */
  readonly what: string;
}

const GiB = 2 ** 30;
/** Node refuses single reads above 2 GiB − 1; larger ranges are read in slices of this size. */
const READ_SLICE = GiB;

export function defaultInMemoryBytes(): number {
  return Math.min(GiB, Math.floor(totalmem() / 8));
}

/** Validate the `load` and `inMemoryBytes` options (ERR_INVALID_OPTION naming the knob). */
export function resolveLoad(options: LoadOptions | undefined): { load: LoadMode; inMemoryBytes: number } {
  const load = options?.load ?? 'auto';
  if (load !== 'auto' && load !== 'memory' && load !== 'positioned') {
    throw invalidOption('load', "'auto', 'memory' or 'positioned'", load);
  }
  const inMemoryBytes = options?.inMemoryBytes ?? defaultInMemoryBytes();
  if (typeof inMemoryBytes !== 'number' || !Number.isSafeInteger(inMemoryBytes) || inMemoryBytes < 0) {
    throw invalidOption('inMemoryBytes', 'an integer number of bytes ≥ 0', inMemoryBytes);
  }
  return { load, inMemoryBytes };
}

export function columnBytes(c: FileColumn): number {
  let n = elementSize(c.dtype);
  for (const d of c.shape) n *= d;
  return n;
}

function rowBytes(c: FileColumn): number {
  let n = elementSize(c.dtype);
  for (let i = 1; i < c.shape.length; i++) n *= c.shape[i]!;
  return n;
}

/**
 * Build the dataset over `columns` (already checked: same first dimension, ranges inside their
 * files). `keys` names the columns (a record of tensors) or is undefined (a list). `spec` is how
 * reader workers reopen the positioned form; the in-memory form is an `ArraySource`, which carries
 * its own spec over the shared buffers.
 */
export function columnsDataset(
  columns: readonly FileColumn[],
  keys: readonly string[] | undefined,
  options: { load: LoadMode; inMemoryBytes: number },
  spec: SourceSpec,
): ArraySource | FileColumnsSource {
  const total = columns.reduce((a, c) => a + columnBytes(c), 0);
  const memory = options.load === 'memory' || (options.load === 'auto' && total <= options.inMemoryBytes);
  return memory ? loadColumns(columns, keys) : new FileColumnsSource(columns, keys, spec);
}

/** Read every column into shared memory (one open per file) and wrap them in an `ArraySource`. */
export function loadColumns(columns: readonly FileColumn[], keys: readonly string[] | undefined): ArraySource {
  const files = new Map<string, PositionedFile>();
  try {
    const tensors = columns.map((c) => {
      const bytes = columnBytes(c);
      let buffer: SharedArrayBuffer;
      try {
        buffer = new SharedArrayBuffer(bytes);
      } catch (cause) {
        throw invalidDatasetError(`${c.path}: cannot allocate ${bytes} bytes of shared memory to load ${c.what} (load: 'memory'). Pass load: 'positioned' to read rows from the file per batch`, cause);
      }
      const file = openChecked(files, c);
      readInto(file, c.offset, bytes, c.what, new Uint8Array(buffer), 0);
      if (c.swap) swapBytes(new Uint8Array(buffer), elementSize(c.dtype));
      if (c.bool) normalizeBooleans(new Uint8Array(buffer));
      const length = bytes / elementSize(c.dtype);
      return new Tensor(storageView(c.dtype, buffer, 0, length) as TypedArray, c.shape, c.dtype);
    });
    return new ArraySource(keys === undefined ? tensors : Object.fromEntries(keys.map((k, i) => [k, tensors[i]!])));
  } finally {
    for (const f of files.values()) f.close();
  }
}

/**
 * A column store left on disk. `getBatch` opens each file it needs, checks its size is the one the
 * header was validated against, reads every run of consecutive ids with one positioned read per
 * column straight into the output's bytes, and closes the file again: no descriptor outlives a
 * call, so reader workers that end leave nothing open.
 */
export class FileColumnsSource implements BatchDataset, Reopenable {
  readonly length: number;
  /** Always 'positioned' (an in-memory load is an `ArraySource`). */
  readonly load = 'positioned' as const;
  readonly #columns: readonly FileColumn[];
  readonly #keys: readonly string[] | undefined;
  readonly #rowBytes: readonly number[];
  readonly #spec: SourceSpec;

  constructor(columns: readonly FileColumn[], keys: readonly string[] | undefined, spec: SourceSpec) {
    if (columns.length === 0) throw invalidDatasetError('a file column store needs at least one column');
    this.#columns = columns;
    this.#keys = keys;
    this.#rowBytes = columns.map(rowBytes);
    this.#spec = spec;
    this.length = columns[0]!.shape[0]!;
  }

  /** Columns as (name or index, dtype, shape), for inspection. */
  get columns(): readonly { readonly name: string; readonly dtype: DType; readonly shape: readonly number[] }[] {
    return this.#columns.map((c, i) => ({ name: this.#keys?.[i] ?? String(i), dtype: c.dtype, shape: c.shape }));
  }

  [kSourceSpec](): SourceSpec {
    return this.#spec;
  }

  getBatch(indices: readonly number[], context?: ReadContext): Tensor[] | Record<string, Tensor> {
    const n = indices.length;
    for (const i of indices) {
      if (!Number.isInteger(i) || i < 0 || i >= this.length) {
        throw indexOutOfRange(this.#columns[0]!.path, 'row', i, this.length);
      }
    }
    const files = new Map<string, PositionedFile>();
    try {
      const out = this.#columns.map((c, f) => {
        const rb = this.#rowBytes[f]!;
        const elem = elementSize(c.dtype);
        const data: Storage = allocStorage(c.dtype, (n * rb) / elem);
        const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
        if (rb > 0 && n > 0) {
          const file = openChecked(files, c);
          let r = 0;
          while (r < n) {
            context?.signal.throwIfAborted();
            let end = r + 1;
            while (end < n && indices[end] === indices[end - 1]! + 1) end++;
            readInto(file, c.offset + indices[r]! * rb, (end - r) * rb, c.what, bytes, r * rb);
            r = end;
          }
          if (c.swap) swapBytes(bytes, elem);
          if (c.bool) normalizeBooleans(bytes);
        }
        return trustedTensor(c.dtype, data, [n, ...c.shape.slice(1)]);
      });
      return this.#keys === undefined ? out : Object.fromEntries(this.#keys.map((k, i) => [k, out[i]!]));
    } finally {
      for (const file of files.values()) file.close();
    }
  }
}

/** Open `c.path` once per call (cached in `files`) and refuse it when its size changed. */
function openChecked(files: Map<string, PositionedFile>, c: FileColumn): PositionedFile {
  let file = files.get(c.path);
  if (file === undefined) {
    file = new PositionedFile(c.path);
    files.set(c.path, file);
    if (file.size !== c.fileSize) {
      throw badFile(c.path, 0, `the file changed size since its header was read (${c.fileSize} bytes then, ${file.size} now)`, 'Open the source again after rewriting a file');
    }
  }
  return file;
}

/** A positioned read of any length (Node caps one read at 2 GiB − 1, so long ranges go in slices). */
function readInto(file: PositionedFile, offset: number, length: number, what: string, into: Uint8Array, intoOffset: number): void {
  file.checkRange(offset, length, what);
  for (let done = 0; done < length; done += READ_SLICE) {
    const len = Math.min(READ_SLICE, length - done);
    file.read(offset + done, len, what, into, intoOffset + done);
  }
}

/** Reverse the bytes of every `size`-byte element in place (big-endian data to the host's order). */
export function swapBytes(bytes: Uint8Array, size: number): void {
  if (size === 1) return;
  for (let i = 0; i + size <= bytes.length; i += size) {
    for (let a = i, b = i + size - 1; a < b; a++, b--) {
      const t = bytes[a]!;
      bytes[a] = bytes[b]!;
      bytes[b] = t;
    }
  }
}

/** Booleans to 0/1 in place: a non-zero byte is true (NumPy's and safetensors' reading of a bool byte). */
export function normalizeBooleans(bytes: Uint8Array): void {
  for (let i = 0; i < bytes.length; i++) if (bytes[i]! > 1) bytes[i] = 1;
}
