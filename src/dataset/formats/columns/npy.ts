// `sources.npy`: NumPy `.npy` files (format versions 1.0, 2.0 and 3.0) as dataset columns, one
// file per column, zipped by row. The rule: every header is parsed strictly and checked against
// its file before anything is allocated — the shape times the item size must equal the bytes after
// the header exactly — and anything this reader does not understand (Fortran order, object or
// structured dtypes, dtypes Stoker has no storage for) is refused with the fix, never guessed at.
// Big-endian files (`>f4`) are read and byte-swapped into the host's order (a cheap pass per batch).
//
// Layout (numpy.lib.format): `\x93NUMPY`, major and minor version bytes, the header length (u16
// little-endian in 1.0, u32 in 2.0 and 3.0), then the header: a Python dict literal such as
// `{'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }` padded with spaces and
// ending in `\n` (latin-1 in 1.0 and 2.0, UTF-8 in 3.0), then the raw C-order data.

import { basename, extname, resolve } from 'node:path';
import { LoaderError, badFile, invalidDatasetError, show } from '../../../errors.js';
import { type DType, type TypedArray, allocStorage, elementSize } from '../../../tensor/dtype.js';
import { Tensor } from '../../../tensor/tensor.js';
import type { ArraySource } from '../../arrays-source.js';
import type { SourceSpec } from '../../source-spec.js';
import { type FileColumn, FileColumnsSource, type LoadOptions, columnsDataset, normalizeBooleans, resolveLoad, swapBytes } from './columns-file.js';
import { PositionedFile, headerInt } from '../file.js';

export type NpyOptions = LoadOptions;

/** What an NPY header says, checked against its file. */
export interface NpyHeader {
  readonly version: readonly [number, number];
  readonly dtype: DType;
  /** The header's `descr`, as written ('<f4'). */
  readonly descr: string;
  readonly shape: readonly number[];
  readonly bigEndian: boolean;
  /** Byte offset of the data (it need not be aligned to the element size). */
  readonly dataOffset: number;
  readonly fileSize: number;
}

const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY
/** A header longer than this is refused before it is read (numpy's own reader stops at 10 000). */
const MAX_HEADER = 1 << 20;

/** NPY type codes ('f4', 'u1', …) Stoker stores, and the dtype each becomes. Booleans are uint8 0/1. */
const KINDS: Record<string, DType> = {
  b1: 'uint8', u1: 'uint8', i1: 'int8',
  i2: 'int16', u2: 'uint16', i4: 'int32', u4: 'uint32', i8: 'int64',
  f2: 'float16', f4: 'float32', f8: 'float64',
};

/**
 * A dataset over `.npy` files, one column per file, zipped by row (every file's first dimension is
 * the row count and must agree):
 * - `npySource('data/x.npy')`: one column named after the file's stem (`x`);
 * - `npySource(['x.npy', 'y.npy'])`: positional columns, in that order;
 * - `npySource({ image: 'x.npy', label: 'y.npy' })`: named columns.
 *
 * Small data (≤ `inMemoryBytes`, or `load: 'memory'`) is read once into shared memory and returned
 * as an `ArraySource`; larger data stays on disk and each batch reads its rows (`load: 'positioned'`).
 */
export function npySource(paths: string | readonly string[] | Readonly<Record<string, string>>, options?: NpyOptions): ArraySource | FileColumnsSource {
  const { list, keys } = normalizePaths(paths);
  return openNpy({ paths: list, keys, options });
}

/** Worker-side factory (and the common path of `npySource`): `paths` in column order, `keys` names them. */
export function openNpy(spec: { paths: readonly string[]; keys: readonly string[] | undefined; options?: NpyOptions }): ArraySource | FileColumnsSource {
  const { paths, keys } = spec;
  if (!Array.isArray(paths) || paths.length === 0 || !paths.every((p) => typeof p === 'string' && p.length > 0) || (keys !== undefined && (!Array.isArray(keys) || keys.length !== paths.length))) {
    throw invalidDatasetError(`openNpy: expected { paths: non-empty file paths, keys: one name per path or undefined }, got paths ${show(paths)} and keys ${show(keys)}`);
  }
  const load = resolveLoad(spec.options);
  const columns = paths.map((path): FileColumn => {
    const file = new PositionedFile(path);
    try {
      const h = readNpyHeader(file);
      if (h.shape.length === 0) {
        throw invalidDatasetError(`${path}: holds a 0-d array (a scalar); a column needs a first dimension, the row count. Save an array with one row per sample (np.save(path, arr.reshape(1)) for a single sample)`);
      }
      return { path, fileSize: h.fileSize, offset: h.dataOffset, dtype: h.dtype, shape: h.shape, swap: h.bigEndian && h.dtype !== 'uint8' && h.dtype !== 'int8', bool: isBool(h), what: `the ${h.descr} data` };
    } finally {
      file.close();
    }
  });
  const rows = columns[0]!.shape[0]!;
  columns.forEach((c) => {
    if (c.shape[0] !== rows) {
      const first = columns[0]!;
      throw invalidDatasetError(
        `sources.npy: ${c.path} has ${c.shape[0]} rows (shape ${tuple(c.shape)}) but ${first.path} has ${rows} (shape ${tuple(first.shape)}). Every file is a column and needs one row per sample: the same first dimension`,
      );
    }
  });
  const workerSpec: SourceSpec = { module: import.meta.url, export: 'openNpy', options: { paths: paths.map((p) => resolve(p)), keys, options: { load: 'positioned' } } };
  return columnsDataset(columns, keys, load, workerSpec);
}

function normalizePaths(paths: unknown): { list: string[]; keys: string[] | undefined } {
  const bad = () => invalidDatasetError(`sources.npy(paths): paths must be a file path, an array of paths or a record of named paths, got ${show(paths)}`);
  if (typeof paths === 'string') return { list: [checkPath(paths, 'paths')], keys: [fileStem(paths)] };
  if (Array.isArray(paths)) {
    if (paths.length === 0) throw invalidDatasetError('sources.npy(paths): give at least one .npy file');
    return { list: paths.map((p, i) => checkPath(p, `paths[${i}]`)), keys: undefined };
  }
  if (paths === null || typeof paths !== 'object') throw bad();
  const keys = Object.keys(paths);
  if (keys.length === 0) throw invalidDatasetError('sources.npy(paths): give at least one named .npy file');
  return { list: keys.map((k) => checkPath((paths as Record<string, unknown>)[k], `paths.${k}`)), keys };
}

/** A lone file's column name: its name without the extension (`data/x.npy` → `x`; `x` when it has none). */
function fileStem(path: string): string {
  const name = basename(path);
  const ext = extname(name);
  return ext === '' ? name : name.slice(0, -ext.length);
}

function checkPath(p: unknown, where: string): string {
  if (typeof p !== 'string' || p.length === 0) throw invalidDatasetError(`sources.npy: ${where} must be a non-empty file path, got ${show(p)}`);
  return p;
}

/** Parse and check the header of an open `.npy` file (ERR_BAD_FILE naming the file and offset). */
/** What the header reader needs: a file, or bytes in memory (an .npy field inside a tar shard). */
type NpySource = Pick<PositionedFile, 'path' | 'size' | 'read'>;

export function readNpyHeader(file: NpySource): NpyHeader {
  const path = file.path;
  if (file.size < 10) throw badFile(path, 0, `the file holds ${file.size} bytes, too few for an NPY header`, 'Write it with np.save');
  const pre = file.read(0, Math.min(12, file.size), 'the NPY preamble');
  if (!MAGIC.every((b, i) => pre[i] === b)) {
    const zip = pre[0] === 0x50 && pre[1] === 0x4b;
    throw badFile(path, 0, 'not an NPY file: it does not start with the magic string \\x93NUMPY', zip ? 'This looks like an .npz archive (np.savez): save each array with np.save, or unzip it' : 'Write arrays with np.save');
  }
  const major = pre[6]!;
  const minor = pre[7]!;
  if ((major !== 1 && major !== 2 && major !== 3) || minor !== 0) throw badFile(path, 6, `NPY format version ${major}.${minor} is not supported (1.0, 2.0 and 3.0 are)`);
  let headerStart: number;
  let headerLen: number;
  if (major === 1) {
    headerStart = 10;
    headerLen = pre[8]! | (pre[9]! << 8);
  } else {
    if (file.size < 12) throw badFile(path, 8, `the file ends inside the header length field (${file.size} bytes)`);
    headerStart = 12;
    headerLen = (pre[8]! | (pre[9]! << 8) | (pre[10]! << 16)) + pre[11]! * 2 ** 24;
  }
  if (headerLen > MAX_HEADER) throw badFile(path, 8, `the header length is ${headerLen} bytes, more than the ${MAX_HEADER} this reader accepts; the file is corrupt`);
  const raw = file.read(headerStart, headerLen, 'the NPY header');
  let text: string;
  if (major === 3) {
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
    } catch {
      throw badFile(path, headerStart, 'the header is not valid UTF-8');
    }
  } else {
    text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('latin1');
  }
  const dict = parseHeaderDict(text, (at, what) => badFile(path, headerStart + at, `NPY header: ${what}`));
  const { descr, fortran_order: fortran, shape: dims } = dict;
  const order = descr[0]!;
  const code = descr.slice(1);
  const dtype = Object.hasOwn(KINDS, code) ? KINDS[code] : undefined;
  if (dtype === undefined || (order !== '<' && order !== '>' && order !== '|') || (order === '|' && code[1] !== '1')) {
    throw badFile(path, headerStart, `dtype ${show(descr)} is not one Stoker reads`, unsupportedFix(descr));
  }
  const shape = dims.map((d, i) => headerInt(path, headerStart, `shape[${i}]`, d));
  const dataOffset = headerStart + headerLen;
  const itemSize = Number(code.slice(1));
  const dataBytes = file.size - dataOffset;
  let need = itemSize;
  for (const d of shape) need *= d;
  if (need !== dataBytes) {
    throw badFile(
      path,
      dataOffset,
      `the header's shape ${tuple(shape)} of ${descr} needs ${need} data bytes but the file holds ${dataBytes} after the header`,
      need > dataBytes ? 'The file is truncated: save it again' : 'The file has bytes the header does not describe: save it again with np.save',
    );
  }
  if (fortran && shape.filter((d) => d !== 1).length > 1) {
    throw badFile(path, headerStart, `the array is stored in Fortran (column-major) order, shape ${tuple(shape)}`, 'Save a C-order copy: np.save(path, np.ascontiguousarray(arr))');
  }
  return { version: [major, minor], dtype, descr, shape, bigEndian: order === '>', dataOffset, fileSize: file.size };
}

function unsupportedFix(descr: string): string {
  const code = descr.slice(1);
  if (code === 'O') return 'Object arrays hold Python objects, not numbers: convert to a numeric array (np.stack, arr.astype(...)) before np.save';
  if (code === 'u8') return "Stoker has no uint64: save with arr.astype('<i8') when the values fit";
  if (/^[cV]/.test(code)) return "Save a numeric array (complex and void dtypes are not supported): for example arr.astype('<f4')";
  if (/^[USa]/.test(code)) return 'Strings are not tensors: encode them as integers before np.save';
  if (/^[mM]/.test(code)) return "Save dates and durations as integers: arr.astype('<i8')";
  if (descr[0] === '=' || (descr[0] === '|' && code[1] !== '1')) return "Write the byte order explicitly: arr.astype('<f4') (numpy's np.save does)";
  return `Supported: ${Object.keys(KINDS).map((k) => (k.endsWith('1') ? `|${k}` : `<${k}`)).join(' ')} (and big-endian '>'): convert with arr.astype(...)`;
}

function tuple(shape: readonly number[]): string {
  return shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
}

interface HeaderDict {
  descr: string;
  fortran_order: boolean;
  shape: bigint[];
}

type Fail = (at: number, what: string) => LoaderError;

/**
 * A strict parser for the one dict literal an NPY header holds: exactly the keys 'descr' (a
 * string), 'fortran_order' (True or False) and 'shape' (a tuple of integers), quoted with ' or ",
 * an optional trailing comma, then only whitespace. Python 2's `3L` integers are accepted (old
 * numpy wrote them). A list for 'descr' is a structured dtype, refused by name.
 */
export function parseHeaderDict(text: string, fail: Fail): HeaderDict {
  let i = 0;
  const ws = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\n' || text[i] === '\t' || text[i] === '\r')) i++;
  };
  const expect = (c: string, what: string) => {
    ws();
    if (text[i] !== c) throw fail(i, `expected ${what} at character ${i}, found ${near(text, i)}`);
    i++;
  };
  const str = (): string => {
    ws();
    const q = text[i];
    if (q !== "'" && q !== '"') throw fail(i, `expected a quoted string at character ${i}, found ${near(text, i)}`);
    const start = ++i;
    while (i < text.length && text[i] !== q) {
      if (text[i] === '\\' || text[i] === '\n') throw fail(i, `unsupported character in a string at character ${i}`);
      i++;
    }
    if (i >= text.length) throw fail(start - 1, 'unterminated string');
    return text.slice(start, i++);
  };
  const int = (): bigint => {
    ws();
    const start = i;
    if (text[i] === '-' || text[i] === '+') i++;
    while (i < text.length && text[i]! >= '0' && text[i]! <= '9') i++;
    const digits = text.slice(start, i);
    if (!/\d/.test(digits)) throw fail(start, `expected an integer at character ${start}, found ${near(text, start)}`);
    if (digits.length > 24) throw fail(start, `integer ${digits.slice(0, 24)}… is too long`);
    if (text[i] === 'L') i++;
    return BigInt(digits);
  };
  const out: Partial<HeaderDict> = {};
  expect('{', "'{'");
  for (;;) {
    ws();
    if (text[i] === '}') break;
    const keyAt = i;
    const key = str();
    expect(':', "':' after a key");
    ws();
    if (key in out) throw fail(keyAt, `key ${show(key)} appears twice`);
    if (key === 'descr') {
      if (text[i] === '[') throw fail(i, "a structured dtype (a list of fields) is not supported. Save each field as its own .npy file (np.save('x.npy', arr['x'])) and pass them as named columns");
      out.descr = str();
      if (out.descr.length < 2) throw fail(keyAt, `descr ${show(out.descr)} is not a dtype`);
    } else if (key === 'fortran_order') {
      if (text.startsWith('True', i)) (out.fortran_order = true), (i += 4);
      else if (text.startsWith('False', i)) (out.fortran_order = false), (i += 5);
      else throw fail(i, `fortran_order must be True or False, found ${near(text, i)}`);
    } else if (key === 'shape') {
      const at = i;
      expect('(', "'(' opening the shape tuple");
      const dims: bigint[] = [];
      ws();
      let comma = false;
      while (text[i] !== ')') {
        dims.push(int());
        ws();
        comma = text[i] === ',';
        if (comma) i++;
        else if (text[i] !== ')') throw fail(i, `expected ',' or ')' in the shape at character ${i}, found ${near(text, i)}`);
        ws();
        if (dims.length > 64) throw fail(at, 'the shape has more than 64 dimensions');
      }
      if (dims.length === 1 && !comma) throw fail(at, 'shape is a parenthesized integer, not a tuple (a 1-d shape is written (n,))');
      i++;
      out.shape = dims;
    } else {
      throw fail(keyAt, `unexpected key ${show(key)} (an NPY header has exactly 'descr', 'fortran_order' and 'shape')`);
    }
    ws();
    if (text[i] === ',') i++;
    else if (text[i] !== '}') throw fail(i, `expected ',' or '}' at character ${i}, found ${near(text, i)}`);
  }
  i++;
  ws();
  if (i !== text.length) throw fail(i, `unexpected ${near(text, i)} after the header dict`);
  for (const k of ['descr', 'fortran_order', 'shape'] as const) {
    if (out[k] === undefined) throw fail(0, `the header has no ${show(k)} key`);
  }
  return out as HeaderDict;
}

function near(text: string, i: number): string {
  return i >= text.length ? 'the end of the header' : JSON.stringify(text.slice(i, i + 12));
}

/**
 * An .npy file held in memory (a WebDataset field): the whole array as one tensor, checked as
 * `sources.npy` checks a file; `source` names it in errors ("shard.tar: sample 0012 field npy").
 */
export function parseNpyBytes(bytes: Uint8Array, source: string): Tensor {
  const reader: NpySource = {
    path: source,
    size: bytes.length,
    read(offset: number, length: number, what: string): Uint8Array {
      if (offset < 0 || length < 0 || offset + length > bytes.length) {
        throw badFile(source, offset, `${what} needs ${length} bytes but only ${Math.max(bytes.length - offset, 0)} remain (${bytes.length} in all)`);
      }
      return bytes.subarray(offset, offset + length);
    },
  };
  const h = readNpyHeader(reader);
  const count = h.shape.reduce((a, b) => a * b, 1);
  // A fresh, aligned array: the data offset inside the field need not be a multiple of the element size.
  const data = allocStorage(h.dtype, count);
  const out = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  out.set(bytes.subarray(h.dataOffset, h.dataOffset + out.length));
  if (h.bigEndian) swapBytes(out, elementSize(h.dtype));
  if (isBool(h)) normalizeBooleans(out);
  return new Tensor(data as TypedArray, h.shape, h.dtype);
}

/** A boolean array (`|b1`): its bytes are normalized to 0/1 on every read (see FileColumn.bool). */
function isBool(h: NpyHeader): boolean {
  return h.descr.slice(1) === 'b1';
}
