// `sources.jsonl`: a JSON Lines file as a dataset, one record (non-blank line) per sample. The line
// index is built once and cached (jsonl-index.ts); each sample is then one positioned read of its
// line and one JSON.parse, in the thread that reads it (reader workers) — Python's NaN, Infinity
// and -Infinity, which json.dumps writes by default, read as those floats (python-json.ts). Fields:
// numbers become scalars of their dtype, arrays of numbers ragged fields, text fields token ids
// through a Hugging Face tokenizer.json (tokenizer.ts) — or, without a tokenizer, a typed error at
// open that points at the option. The rule: a record that is not valid JSON, or whose field does
// not fit the kind the first record set (NaN in an integer field, say), fails its sample's read (so
// its batch, under the loader's `errors`), never the open and never silently.

import { resolve } from 'node:path';
import { LoaderError, badFile, badFileError, emptyFile, indexOutOfRange, invalidOption, invalidSourcePath, notRaggedField, show, tokenizerWithoutText } from '../../../errors.js';
import type { Tensor } from '../../../tensor/tensor.js';
import type { Dataset } from '../../dataset.js';
import { type Reopenable, type SourceSpec, kSourceSpec } from '../../source-spec.js';
import { PositionedFile } from '../file.js';
import { type At, type FieldKind, fieldDtypes, kindOf, textNeedsTokenizer, toField } from './jsonl-fields.js';
import { type JsonlIndex, type JsonlIndexMode, jsonlIndex } from './jsonl-index.js';
import { parsePythonJson } from './python-json.js';
import { stampOf } from '../tar/tar-index.js';
import { type CountsLengths, countInFlight, lengthsField, memoLengths, textLengths } from './text-lengths.js';
import { type ResolvedTokenizer, type TokenizerOptions, resolveTokenizer } from './tokenizer.js';

export interface JsonlOptions {
  /**
   * Numeric fields: names (read as float32) or a record of name → dtype (`{ label: 'int64', x:
   * 'float32' }`). A number is a scalar; an array of numbers (nested arrays: fixed trailing shape)
   * is a ragged field, its first dimension free to vary.
   */
  readonly fields?: readonly string[] | { readonly [name: string]: string };
  /** Text fields, tokenized with `tokenizer` into int32 ids (ragged fields). */
  readonly text?: string | readonly string[];
  /** The tokenizer for `text` fields: `{ path: 'tokenizer.json', addSpecialTokens?, maxLength? }`. */
  readonly tokenizer?: TokenizerOptions;
  /** Where the line index is kept: 'auto' (default: cached per user, see jsonl-index.ts), 'off' (rebuilt each open). */
  readonly index?: JsonlIndexMode;
}

/** Internal: what reader workers receive. */
export interface JsonlSpec {
  readonly path: string;
  readonly kinds: readonly FieldKind[];
  readonly tokenizer: ResolvedTokenizer | undefined;
  readonly index: JsonlIndex;
}

const KNOWN = ['fields', 'text', 'tokenizer', 'index'];

export class JsonlSource implements Dataset, Reopenable, CountsLengths {
  readonly length: number;
  readonly path: string;
  /** Fields whose first dimension varies: array and text fields. */
  readonly ragged: readonly string[];
  /** Tokenized text fields with a tokenizer `maxLength`: that bound. */
  readonly raggedMax: { readonly [field: string]: number };
  readonly #spec: JsonlSpec;
  readonly #decoder = new TextDecoder('utf-8', { fatal: true });
  #file: PositionedFile | undefined;
  readonly #lengths = new Map<string, Promise<Uint32Array>>();

  constructor(spec: JsonlSpec) {
    this.#spec = spec;
    this.path = spec.path;
    this.length = spec.index.lines.length / 2;
    this.ragged = Object.freeze(spec.kinds.filter((k) => k.kind !== 'scalar').map((k) => k.name));
    const max = spec.tokenizer?.maxLength;
    this.raggedMax = Object.freeze(max === undefined ? {} : Object.fromEntries(spec.kinds.filter((k) => k.kind === 'text').map((k) => [k.name, max])));
  }

  /** The fields and their kinds, in sample order. */
  get fields(): readonly FieldKind[] {
    return this.#spec.kinds;
  }

  /** Record `i`'s fields (a promise: text fields tokenize off the thread). */
  async get(i: number): Promise<Record<string, Tensor | Int32Array>> {
    const record = this.record(i);
    const at = this.#at(i);
    const out: Record<string, Tensor | Int32Array> = {};
    for (const k of this.#spec.kinds) out[k.name] = await toField(k, record[k.name], at, this.#spec.tokenizer);
    return out;
  }

  /** Record `i` parsed (an object), or ERR_BAD_FILE naming the file, the record and its byte offset. */
  record(i: number): Record<string, unknown> {
    if (!Number.isInteger(i) || i < 0 || i >= this.length) throw indexOutOfRange(this.path, 'record', i, this.length);
    if (this.#file === undefined) {
      const f = new PositionedFile(this.path);
      if (f.size !== this.#spec.index.size) {
        f.close();
        throw badFile(this.path, 0, `the file changed size since it was indexed (${this.#spec.index.size} bytes then, ${f.size} now)`, 'Open the source again after rewriting the file');
      }
      this.#file = f;
    }
    const { lines } = this.#spec.index;
    const start = lines[2 * i]!;
    const bytes = this.#file.read(start, lines[2 * i + 1]! - start, `record ${i}`);
    let value: unknown;
    try {
      value = parsePythonJson(this.#decoder.decode(bytes));
    } catch (cause) {
      throw badFile(this.path, start, `record ${i} is not valid JSON: ${(cause as Error).message}`, 'Fix or remove that line (a record is one JSON object per line)');
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw badFile(this.path, start, `record ${i} is ${show(value)}, not a JSON object`);
    return value as Record<string, unknown>;
  }

  /**
   * Every record's length of ragged field `field` (default: the one ragged field), as `get(i)` gives
   * it: a text field's token count (counted by a pool of worker threads and cached on disk, see
   * text-lengths.ts), an array field's first dimension (parsed here: no tokenizer involved).
   */
  async loadLengths(field?: string): Promise<Uint32Array> {
    return memoLengths(this.#lengths, lengthsField(this.path, this.ragged, field), (name) => this.#computeLengths(name));
  }

  async #computeLengths(name: string): Promise<Uint32Array> {
    const kind = this.#spec.kinds.find((k) => k.name === name)!;
    if (kind.kind === 'text') {
      const { index } = this.#spec;
      return textLengths({ path: this.path, stamp: index, field: name, tokenizer: this.#spec.tokenizer!, count: this.length, spec: this[kSourceSpec]() }, () => stampOf(this.path));
    }
    const out = new Uint32Array(this.length);
    await this.countLengths(name, 0, this.length, out);
    return out;
  }

  /** Lengths of `field` for records [start, end) into out[start…end), through get(i)'s own conversion; a bad record names its line. */
  async countLengths(field: string, start: number, end: number, out: Uint32Array): Promise<void> {
    const kind = this.#spec.kinds.find((k) => k.name === field);
    if (kind === undefined || kind.kind === 'scalar') throw notRaggedField(this.path, 'field', field);
    await countInFlight(start, end, out, async (i) => {
      try {
        const v = await toField(kind, this.record(i)[field], this.#at(i), this.#spec.tokenizer);
        return v instanceof Int32Array ? v.length : v.shape[0]!;
      } catch (error) {
        if (!(error instanceof LoaderError) || error.code !== 'ERR_BAD_FILE') throw error;
        throw badFileError(`${error.message} (line ${this.#lineOf(i)} of the file)`, error);
      }
    });
  }

  /** The 1-based line number of record i (blank lines count as lines): newlines before its start, counted. */
  #lineOf(i: number): number {
    const start = this.#spec.index.lines[2 * i]!;
    const f = new PositionedFile(this.path);
    try {
      let lines = 1;
      const CHUNK = 4 * 2 ** 20;
      for (let at = 0; at < start; at += CHUNK) {
        const buf = f.read(at, Math.min(CHUNK, start - at), 'the lines before a record');
        for (let k = 0; k < buf.length; k++) if (buf[k] === 10) lines++;
      }
      return lines;
    } finally {
      f.close();
    }
  }

  #at(i: number): At {
    return { path: this.path, offset: this.#spec.index.lines[2 * i]!, record: i };
  }

  [kSourceSpec](): SourceSpec {
    return { module: import.meta.url, export: 'openJsonl', options: this.#spec };
  }

  close(): void {
    this.#file?.close();
    this.#file = undefined;
  }
}

/** Open a JSONL file: index it (or find its cached index) and learn the fields' kinds from record 0. */
export function jsonlSource(path: string, options: JsonlOptions = {}): JsonlSource {
  if (typeof path !== 'string' || path.length === 0) throw invalidSourcePath('sources.jsonl', path);
  if (options === null || typeof options !== 'object') throw invalidOption('sources.jsonl options', 'an object', options);
  for (const k of Object.keys(options)) if (!KNOWN.includes(k)) throw invalidOption(`sources.jsonl ${k}`, `one of ${KNOWN.join(', ')}`, k, 'Remove it');
  const numeric = fieldDtypes(options.fields, 'fields');
  const text = options.text === undefined ? [] : typeof options.text === 'string' ? [options.text] : options.text;
  if (!Array.isArray(text) || !text.every((t) => typeof t === 'string' && t.length > 0)) throw invalidOption('text', 'a field name or a list of them', options.text);
  const clash = text.find((t) => numeric.some(([n]) => n === t));
  if (clash !== undefined) throw invalidOption('text', 'names not also in `fields`', clash);
  if (numeric.length + text.length === 0) throw invalidOption('fields', "the fields to read (`fields: ['x']`, `text: ['text']`)", options.fields);
  if (options.index !== undefined && options.index !== 'auto' && options.index !== 'off') throw invalidOption('index', "'auto' or 'off'", options.index);
  const abs = resolve(path);
  if (text.length > 0 && options.tokenizer === undefined) throw textNeedsTokenizer(abs, text[0]!, 'text');
  if (text.length === 0 && options.tokenizer !== undefined) throw tokenizerWithoutText(abs);
  const tokenizer = options.tokenizer === undefined ? undefined : resolveTokenizer(options.tokenizer);
  const index = jsonlIndex(abs, options.index ?? 'auto');
  if (index.lines.length === 0) throw emptyFile(path, 'records (no non-blank lines)');
  // Record 0 sets each field's kind; a text field given as `fields` is refused here, pointing at `text`.
  const probe = new JsonlSource({ path: abs, kinds: [], tokenizer, index });
  let first: Record<string, unknown>;
  try {
    first = probe.record(0);
  } finally {
    probe.close();
  }
  const at: At = { path: abs, offset: index.lines[0]!, record: 0 };
  const kinds: FieldKind[] = numeric.map(([name, dtype]) => kindOf(name, dtype, first[name], at, 'text'));
  for (const name of text) kinds.push({ kind: 'text', name });
  return new JsonlSource({ path: abs, kinds, tokenizer, index });
}

/** Record 0 of `path`, parsed (for `stoker inspect`, which reads the fields it finds there). */
export function jsonlFirstRecord(path: string): Record<string, unknown> {
  const abs = resolve(path);
  const index = jsonlIndex(abs);
  if (index.lines.length === 0) throw emptyFile(path, 'records (no non-blank lines)');
  const probe = new JsonlSource({ path: abs, kinds: [], tokenizer: undefined, index });
  try {
    return probe.record(0);
  } finally {
    probe.close();
  }
}

/** Worker-side factory. */
export function openJsonl(spec: JsonlSpec): JsonlSource {
  return new JsonlSource(spec);
}
