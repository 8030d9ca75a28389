// `sources.safetensors`: a safetensors file as a dataset, one column per tensor, zipped by row.
// The rule: the header is validated as strictly as the reference implementation does before
// anything is read or allocated from it — size at most 100 MB and inside the file, JSON, every
// tensor's byte range inside the buffer and exactly shape × item size long, and the ranges tiling
// the buffer with no overlap and no hole.
//
// Layout: a u64 little-endian header size N, N bytes of UTF-8 JSON
// `{ "name": { "dtype": "F32", "shape": [..], "data_offsets": [begin, end] }, "__metadata__": {..} }`
// (optionally padded with spaces), then the byte buffer; offsets are relative to the buffer.
// Data is little-endian and C-order. Columns come in `tensors` order when it is given, else sorted
// by tensor name (code-point order), so a file's columns do not depend on how its writer laid it out.

import { resolve } from 'node:path';
import { badFile, invalidDatasetError, invalidOption, invalidSourcePath, show } from '../../../errors.js';
import type { DType } from '../../../tensor/dtype.js';
import type { ArraySource } from '../../arrays-source.js';
import type { SourceSpec } from '../../source-spec.js';
import { type FileColumn, FileColumnsSource, type LoadOptions, columnsDataset, resolveLoad } from './columns-file.js';
import { PositionedFile } from '../file.js';

export interface SafetensorsOptions extends LoadOptions {
  /** Tensors to read, as columns in this order. Default: every tensor, sorted by name. */
  readonly tensors?: readonly string[];
}

/** One tensor of the header, checked against the file. */
export interface SafetensorsEntry {
  readonly name: string;
  /** The file's dtype name ("F32"). */
  readonly fileDtype: string;
  /** Stoker's dtype, or undefined when Stoker has no storage for it (refused only if selected). */
  readonly dtype: DType | undefined;
  readonly shape: readonly number[];
  /** Absolute byte range in the file. */
  readonly begin: number;
  readonly end: number;
}

export interface SafetensorsHeader {
  readonly entries: ReadonlyMap<string, SafetensorsEntry>;
  readonly metadata: Readonly<Record<string, string>> | undefined;
  readonly fileSize: number;
}

/** The reference implementation's limit on the header size. */
const MAX_HEADER = 100_000_000;

/** Every dtype of the format, with its size in bits and the Stoker dtype it is read as (if any). */
const DTYPES: Record<string, { bits: number; dtype?: DType }> = {
  BOOL: { bits: 8, dtype: 'uint8' },
  U8: { bits: 8, dtype: 'uint8' },
  I8: { bits: 8, dtype: 'int8' },
  I16: { bits: 16, dtype: 'int16' },
  U16: { bits: 16, dtype: 'uint16' },
  F16: { bits: 16, dtype: 'float16' },
  BF16: { bits: 16, dtype: 'bfloat16' },
  I32: { bits: 32, dtype: 'int32' },
  U32: { bits: 32, dtype: 'uint32' },
  F32: { bits: 32, dtype: 'float32' },
  I64: { bits: 64, dtype: 'int64' },
  F64: { bits: 64, dtype: 'float64' },
  U64: { bits: 64 },
  C64: { bits: 64 },
  F8_E5M2: { bits: 8 },
  F8_E4M3: { bits: 8 },
  F8_E8M0: { bits: 8 },
  F6_E2M3: { bits: 6 },
  F6_E3M2: { bits: 6 },
  F4: { bits: 4 },
};

/**
 * A dataset over the tensors of a safetensors file: each selected tensor is a named column, and all
 * must share their first dimension (the row count). Small data (≤ `inMemoryBytes`, or
 * `load: 'memory'`) is read once into shared memory and returned as an `ArraySource`; larger data
 * stays on disk and each batch reads its rows (`load: 'positioned'`).
 */
export function safetensorsSource(path: string, options?: SafetensorsOptions): ArraySource | FileColumnsSource {
  return openSafetensors({ path, options });
}

/** Worker-side factory (and the common path of `safetensorsSource`). */
export function openSafetensors(spec: { path: string; options?: SafetensorsOptions }): ArraySource | FileColumnsSource {
  const { path, options } = spec;
  if (typeof path !== 'string' || path.length === 0) throw invalidSourcePath('sources.safetensors', path);
  const load = resolveLoad(options);
  const wanted = options?.tensors;
  if (wanted !== undefined) {
    if (!Array.isArray(wanted) || wanted.length === 0 || !wanted.every((t) => typeof t === 'string')) throw invalidOption('tensors', 'a non-empty array of tensor names', wanted);
    if (new Set(wanted).size !== wanted.length) throw invalidOption('tensors', 'names without repeats', wanted);
  }
  const file = new PositionedFile(path);
  let header: SafetensorsHeader;
  try {
    header = readSafetensorsHeader(file);
  } finally {
    file.close();
  }
  const { entries } = header;
  if (entries.size === 0) throw invalidDatasetError(`${path}: the file holds no tensors, so there is nothing to load`);
  let names: string[];
  if (wanted === undefined) {
    names = [...entries.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  } else {
    names = [...wanted];
    const missing = names.filter((n) => !entries.has(n));
    if (missing.length > 0) throw invalidOption('tensors', `names of tensors in ${path}`, wanted, `Not found: ${missing.map(show).join(', ')}. The file holds ${listNames([...entries.keys()].sort())}`);
  }
  const selected = names.map((n) => entries.get(n)!);
  for (const e of selected) {
    if (e.dtype === undefined) {
      throw invalidDatasetError(`${path}: tensor ${show(e.name)} has dtype ${e.fileDtype}, which Stoker has no storage for (it reads ${Object.keys(DTYPES).filter((k) => DTYPES[k]!.dtype).join(' ')}). Convert it when saving, or leave it out with tensors: [...]`);
    }
    if (e.shape.length === 0) {
      throw invalidDatasetError(`${path}: tensor ${show(e.name)} is a scalar; a column needs a first dimension, the row count. Leave it out: tensors: ${show(names.filter((n) => n !== e.name))}`);
    }
  }
  const rows = selected[0]!.shape[0]!;
  const odd = selected.find((e) => e.shape[0] !== rows);
  if (odd !== undefined) {
    const groups = new Map<number, string[]>();
    for (const e of selected) groups.set(e.shape[0]!, [...(groups.get(e.shape[0]!) ?? []), e.name]);
    const best = [...groups.values()].reduce((a, b) => (b.length > a.length ? b : a));
    throw invalidDatasetError(
      `${path}: tensors ${show(selected[0]!.name)} (first dimension ${rows}) and ${show(odd.name)} (first dimension ${odd.shape[0]}) differ; every column needs one row per sample. Select tensors that share it, e.g. tensors: ${show(best)}`,
    );
  }
  const columns = selected.map((e): FileColumn => ({ path, fileSize: header.fileSize, offset: e.begin, dtype: e.dtype!, shape: e.shape, swap: false, bool: e.fileDtype === 'BOOL', what: `tensor ${show(e.name)}` }));
  const workerSpec: SourceSpec = { module: import.meta.url, export: 'openSafetensors', options: { path: resolve(path), options: { tensors: names, load: 'positioned' } } };
  return columnsDataset(columns, names, load, workerSpec);
}

function listNames(names: readonly string[]): string {
  const shown = names.slice(0, 20).map(show).join(', ');
  return names.length > 20 ? `${shown} … (${names.length} in all)` : shown;
}

/** Parse and check the header of an open safetensors file (ERR_BAD_FILE naming the file and offset). */
export function readSafetensorsHeader(file: PositionedFile): SafetensorsHeader {
  const path = file.path;
  if (file.size < 8) throw badFile(path, 0, `the file holds ${file.size} bytes, too few for the 8-byte header size of a safetensors file`);
  const pre = file.read(0, 8, 'the header size');
  const n = new DataView(pre.buffer, pre.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER)) throw badFile(path, 0, `the header size is ${n} bytes, more than the format's limit of ${MAX_HEADER}`, 'Is this a safetensors file?');
  const headerLen = Number(n);
  if (8 + headerLen > file.size) {
    throw badFile(path, 0, `the header size is ${headerLen} bytes but only ${file.size - 8} follow the size field`, 'The file is truncated or not a safetensors file');
  }
  const raw = file.read(8, headerLen, 'the JSON header');
  let json: unknown;
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
    if (!text.startsWith('{')) throw new Error(`it starts with ${JSON.stringify(text.slice(0, 8))}, not '{'`);
    json = JSON.parse(text);
  } catch (cause) {
    throw badFile(path, 8, `the header is not a valid JSON object: ${(cause as Error).message}`);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw badFile(path, 8, 'the header is not a JSON object');
  const bufferStart = 8 + headerLen;
  const bufferLen = file.size - bufferStart;
  let metadata: Record<string, string> | undefined;
  const entries: SafetensorsEntry[] = [];
  for (const [name, value] of Object.entries(json)) {
    if (name === '__metadata__') {
      if (value === null || typeof value !== 'object' || Array.isArray(value) || !Object.values(value).every((v) => typeof v === 'string')) {
        throw badFile(path, 8, '__metadata__ must be an object of string values');
      }
      metadata = value as Record<string, string>;
      continue;
    }
    const bad = (what: string) => badFile(path, 8, `tensor ${show(name)}: ${what}`);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw bad('its entry is not an object');
    const { dtype: fileDtype, shape, data_offsets: offsets } = value as Record<string, unknown>;
    if (typeof fileDtype !== 'string' || !Object.hasOwn(DTYPES, fileDtype)) throw bad(`unknown dtype ${show(fileDtype)}`);
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) throw bad(`shape must be an array of integers ≥ 0, got ${show(shape)}`);
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((d) => Number.isSafeInteger(d) && d >= 0) || offsets[0] > offsets[1]) {
      throw bad(`data_offsets must be [begin, end] with 0 ≤ begin ≤ end, got ${show(offsets)}`);
    }
    const [begin, end] = offsets as [number, number];
    if (end > bufferLen) throw badFile(path, bufferStart + begin, `tensor ${show(name)} ends at buffer byte ${end} but the buffer holds ${bufferLen}`, 'The file is truncated or its header is corrupt');
    let bits = DTYPES[fileDtype]!.bits;
    for (const d of shape as number[]) bits *= d;
    if (bits !== (end - begin) * 8) {
      throw badFile(path, bufferStart + begin, `tensor ${show(name)}: shape ${show(shape)} of ${fileDtype} needs ${bits / 8} bytes but data_offsets span ${end - begin}`);
    }
    entries.push({ name, fileDtype, dtype: DTYPES[fileDtype]!.dtype, shape: shape as number[], begin: bufferStart + begin, end: bufferStart + end });
  }
  // The buffer must be tiled exactly: no overlap (aliasing), no hole (room for a polyglot file).
  const byOffset = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let at = bufferStart;
  let prev: SafetensorsEntry | undefined;
  for (const e of byOffset) {
    if (e.begin < at) throw badFile(path, e.begin, `tensors ${show(prev!.name)} and ${show(e.name)} overlap (buffer bytes [${prev!.begin - bufferStart}, ${prev!.end - bufferStart}) and [${e.begin - bufferStart}, ${e.end - bufferStart}))`);
    if (e.begin > at) throw badFile(path, at, `buffer bytes [${at - bufferStart}, ${e.begin - bufferStart}) belong to no tensor (the format forbids holes)`);
    at = e.end;
    prev = e;
  }
  if (at !== file.size) throw badFile(path, at, `the file has ${file.size - at} bytes after the last tensor's data (the format forbids trailing bytes)`);
  return { entries: new Map(entries.map((e) => [e.name, e])), metadata, fileSize: file.size };
}
