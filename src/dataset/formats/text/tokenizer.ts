// Tokenization of text fields where samples are read (the source's get(i), so in reader workers),
// with Hugging Face's JavaScript tokenizers (`@huggingface/tokenizers`, pure JS) from a local
// `tokenizer.json`. The rule: nothing is downloaded, ever — the file path is given, and each
// thread loads it once (cached by path). Tokenizing is a pure function of the text, so the caches
// that freeze a sample's first read stay right.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { badFile, fileAccess, invalidOption } from '../../../errors.js';

export interface TokenizerOptions {
  /** A Hugging Face `tokenizer.json` (the file `tokenizer.save()` writes; one per model on the Hub). */
  readonly path: string;
  /**
   * The tokenizer's `tokenizer_config.json`, for the settings it keeps outside tokenizer.json (eos
   * token of Unigram models, `remove_space`, …). Default: the one beside `path` when there is one.
   */
  readonly config?: string;
  /** Add the post-processor's special tokens (`<s> … </s>`, `[CLS] … [SEP]`). Default true, as Hugging Face's `encode`. */
  readonly addSpecialTokens?: boolean;
  /** Keep at most this many ids (the first ones, special tokens included); the field's `raggedMax`. Default: no limit. */
  readonly maxLength?: number;
}

/** Internal: validated options, with absolute paths, as reader workers receive them. */
export interface ResolvedTokenizer {
  readonly path: string;
  readonly config: string | undefined;
  readonly addSpecialTokens: boolean;
  readonly maxLength: number | undefined;
}

const KNOWN = ['path', 'config', 'addSpecialTokens', 'maxLength'];

/** Check `tokenizer` options (`knob` names them in messages) and load the tokenizer once to fail early. */
export function resolveTokenizer(tokenizer: unknown, knob = 'tokenizer'): ResolvedTokenizer {
  if (tokenizer === null || typeof tokenizer !== 'object' || Array.isArray(tokenizer)) throw invalidOption(knob, "an object { path: 'tokenizer.json', addSpecialTokens?, maxLength? }", tokenizer);
  const t = tokenizer as Partial<TokenizerOptions>;
  for (const k of Object.keys(t)) if (!KNOWN.includes(k)) throw invalidOption(`${knob}.${k}`, `one of ${KNOWN.join(', ')}`, k, 'Remove it');
  if (typeof t.path !== 'string' || t.path.length === 0) throw invalidOption(`${knob}.path`, 'the path of a tokenizer.json file', t.path);
  if (t.config !== undefined && (typeof t.config !== 'string' || t.config.length === 0)) throw invalidOption(`${knob}.config`, 'the path of a tokenizer_config.json file', t.config);
  if (t.addSpecialTokens !== undefined && typeof t.addSpecialTokens !== 'boolean') throw invalidOption(`${knob}.addSpecialTokens`, 'a boolean', t.addSpecialTokens);
  if (t.maxLength !== undefined && (!Number.isSafeInteger(t.maxLength) || t.maxLength < 1)) throw invalidOption(`${knob}.maxLength`, 'an integer ≥ 1', t.maxLength);
  const path = resolve(t.path);
  const beside = join(dirname(path), 'tokenizer_config.json');
  const resolved: ResolvedTokenizer = {
    path,
    config: t.config !== undefined ? resolve(t.config) : existsSync(beside) ? beside : undefined,
    addSpecialTokens: t.addSpecialTokens ?? true,
    maxLength: t.maxLength,
  };
  loadTokenizer(resolved);
  return resolved;
}

/** Per thread: one loaded tokenizer per (tokenizer.json, config). */
const loaded = new Map<string, Tokenizer>();

function loadTokenizer(t: ResolvedTokenizer): Tokenizer {
  const key = `${t.path}\0${t.config ?? ''}`;
  let tok = loaded.get(key);
  if (tok !== undefined) return tok;
  const json = readJson(t.path, 'tokenizer.json');
  const config = t.config === undefined ? {} : readJson(t.config, 'tokenizer_config.json');
  try {
    tok = new Tokenizer(json, config);
  } catch (cause) {
    throw badFile(t.path, 0, `not a tokenizer Hugging Face's JavaScript tokenizers can load: ${(cause as Error).message}`, 'Pass the tokenizer.json that tokenizer.save() writes (models: BPE, WordPiece, Unigram)');
  }
  loaded.set(key, tok);
  return tok;
}

function readJson(path: string, what: string): object {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (cause) {
    throw fileAccess(path, `read the ${what}`, cause);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (cause) {
    throw badFile(path, 0, `the ${what} is not valid JSON: ${(cause as Error).message}`);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw badFile(path, 0, `the ${what} is not a JSON object`);
  return json;
}

/** The ids of `text` as int32, truncated to `maxLength` (callers check that `text` is a string). */
export function tokenize(t: ResolvedTokenizer, text: string): Int32Array {
  const ids = loadTokenizer(t).encode(text, { add_special_tokens: t.addSpecialTokens }).ids;
  const n = t.maxLength === undefined ? ids.length : Math.min(ids.length, t.maxLength);
  const out = new Int32Array(n);
  for (let k = 0; k < n; k++) out[k] = ids[k]!;
  return out;
}
