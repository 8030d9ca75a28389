// Internal: not exported from the package entry.
// Record values (a JSONL line's fields, a Parquet row's columns) to sample fields. The rule: a
// field's kind — a number (a scalar of its dtype), an array of numbers (ragged along its first
// dimension, the rest of its shape fixed), or text (token ids through the tokenizer) — is set once
// from the first record; any later record whose value does not fit that kind fails its read with a
// typed error naming the file, the record and the field.

import { LoaderError, badFile, invalidOption, show } from '../../../errors.js';
import { type DType, type Storage, allocStorage, isDType } from '../../../tensor/dtype.js';
import { type Tensor, trustedTensor } from '../../../tensor/tensor.js';
import { type ResolvedTokenizer, tokenize } from './tokenizer.js';

export type FieldKind =
  | { readonly kind: 'scalar'; readonly name: string; readonly dtype: DType }
  /** `rest`: the fixed trailing dimensions (none for a list of numbers). */
  | { readonly kind: 'array'; readonly name: string; readonly dtype: DType; readonly rest: readonly number[] }
  | { readonly kind: 'text'; readonly name: string };

/** Where a value came from, for messages. */
export interface At {
  readonly path: string;
  readonly offset: number;
  readonly record: number;
}

/** `fields` as given: names (float32) or a record of name → dtype. */
export function fieldDtypes(fields: unknown, knob: string): [string, DType][] {
  if (fields === undefined) return [];
  if (Array.isArray(fields)) {
    if (!fields.every((f) => typeof f === 'string' && f.length > 0)) throw invalidOption(knob, 'field names, or a record of name → dtype', fields);
    if (new Set(fields).size !== fields.length) throw invalidOption(knob, 'names without repeats', fields);
    return fields.map((f) => [f as string, 'float32']);
  }
  if (fields === null || typeof fields !== 'object') throw invalidOption(knob, "field names, or a record of name → dtype ({ label: 'int64' })", fields);
  return Object.entries(fields).map(([name, dtype]) => {
    if (!isDType(dtype) || dtype === 'float16' || dtype === 'bfloat16') throw invalidOption(`${knob}.${name}`, 'a dtype (float32, float64, int64, int32, uint8, …; not float16: values are read as numbers)', dtype);
    return [name, dtype];
  });
}

/** The kind of field `name` from its value in the first record. */
export function kindOf(name: string, dtype: DType, value: unknown, at: At, textKnob: string): FieldKind {
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return { kind: 'scalar', name, dtype };
  if (Array.isArray(value) || ArrayBuffer.isView(value)) {
    const rest: number[] = [];
    let v: unknown = Array.isArray(value) ? value[0] : undefined;
    while (Array.isArray(v)) {
      rest.push(v.length);
      v = v[0];
    }
    return { kind: 'array', name, dtype, rest };
  }
  if (typeof value === 'string') throw textNeedsTokenizer(at.path, name, textKnob);
  throw badFile(at.path, at.offset, `record ${at.record}: field ${show(name)} is ${value === undefined ? 'missing' : show(value)}; a field must be a number, an array of numbers, or text`);
}

export function textNeedsTokenizer(path: string, name: string, textKnob: string): LoaderError {
  return invalidOption(
    'tokenizer',
    `given to read text field ${show(name)} of ${path}`,
    undefined,
    `Text is not a tensor: pass ${textKnob}: [${show(name)}] with tokenizer: { path: 'tokenizer.json' } to tokenize it where samples are read, or pretokenize the file`,
  );
}

/** The sample field for `value` of kind `k`: a text field's ids come later (tokenizing runs off the thread). */
export function toField(k: FieldKind, value: unknown, at: At, tokenizer: ResolvedTokenizer | undefined): Tensor | Int32Array | Promise<Int32Array> {
  const bad = (what: string) => badFile(at.path, at.offset, `record ${at.record}: field ${show(k.name)} ${what}`);
  if (value === undefined || value === null) throw bad('is missing or null');
  if (k.kind === 'text') {
    if (typeof value !== 'string') throw bad(`is ${show(value)}, not text`);
    // A JSON string may hold a lone surrogate (\ud800); it is not Unicode, and the tokenizers library
    // (like Python's str.encode) refuses it rather than tokenizing a replacement character.
    const lone = LONE_SURROGATE.exec(value);
    if (lone !== null) throw bad(`holds a lone surrogate (U+${lone[0].charCodeAt(0).toString(16).toUpperCase()} at character ${lone.index}): not Unicode text, so not tokenized`);
    return tokenize(tokenizer!, value);
  }
  if (k.kind === 'scalar') {
    if (typeof value !== 'number' && typeof value !== 'boolean' && typeof value !== 'bigint') throw bad(`is ${show(value)}, not a number`);
    const out = allocStorage(k.dtype, 1);
    put(out, 0, value, k.dtype, bad);
    return trustedTensor(k.dtype, out, []);
  }
  if (!Array.isArray(value) && !ArrayBuffer.isView(value)) throw bad(`is ${show(value)}, not an array`);
  const rows = (value as ArrayLike<unknown>).length;
  const rowSize = k.rest.reduce((a, b) => a * b, 1);
  const out = allocStorage(k.dtype, rows * rowSize);
  let at2 = 0;
  const walk = (v: unknown, depth: number): void => {
    if (depth === k.rest.length + 1) {
      put(out, at2++, v, k.dtype, bad);
      return;
    }
    const want = depth === 0 ? rows : k.rest[depth - 1]!;
    if (!(Array.isArray(v) || (ArrayBuffer.isView(v) && depth === k.rest.length)) || (v as ArrayLike<unknown>).length !== want) {
      throw bad(`has a part of shape other than [${k.rest.join(', ')}] per row (first seen in record 0); only the first dimension may vary`);
    }
    const a = v as ArrayLike<unknown>;
    for (let j = 0; j < a.length; j++) walk(a[j], depth + 1);
  };
  walk(value, 0);
  return trustedTensor(k.dtype, out, [rows, ...k.rest]);
}

const LONE_SURROGATE = /\p{Cs}/u;

const RANGES: Partial<Record<DType, [number, number]>> = {
  uint8: [0, 255], int8: [-128, 127], int16: [-32768, 32767], uint16: [0, 65535], int32: [-(2 ** 31), 2 ** 31 - 1], uint32: [0, 2 ** 32 - 1],
};

function put(out: Storage, k: number, v: unknown, dtype: DType, bad: (what: string) => LoaderError): void {
  if (typeof v === 'boolean') v = v ? 1 : 0;
  if (dtype === 'int64') {
    if (typeof v === 'bigint') (out as BigInt64Array)[k] = v;
    else if (typeof v === 'number' && Number.isSafeInteger(v)) (out as BigInt64Array)[k] = BigInt(v);
    else throw bad(`holds ${show(v)}, not an int64`);
    return;
  }
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number') throw bad(`holds ${show(v)}, not a number`);
  const range = RANGES[dtype];
  if (range !== undefined && !(Number.isInteger(n) && n >= range[0] && n <= range[1])) throw bad(`holds ${show(v)}, not a ${dtype}`);
  (out as Float64Array)[k] = n;
}
