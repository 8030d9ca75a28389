// Tokenization of text fields where samples are read (the source's get(i), so in reader workers),
// with Hugging Face's tokenizers library itself — the Rust crate, through its Node binding (npm
// `tokenizers`, a prebuilt addon) — from a local `tokenizer.json`: the ids are the ones Python's
// `Tokenizer.from_file(path).encode(text)` gives. The rule: nothing is downloaded, ever — the file
// path is given, and each thread loads it once (cached by path). Tokenizing is a pure function of
// the text, so the caches that freeze a sample's first read stay right.
//
// Threads. The addon is loaded by the thread that resolves the options (the main thread, at open)
// before any reader worker loads it: on glibc Linux the thread that loads a native addon first
// should outlive its other users (see image-decode.ts). `encode` runs on libuv's thread pool
// (UV_THREADPOOL_SIZE, default 4), shared by the whole process and its worker threads: that pool's
// size, not the reader count, bounds how many texts tokenize at once.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import type * as Tokenizers from 'tokenizers';
import { badFile, fileAccess, invalidDatasetError, invalidOption } from '../../../errors.js';

export interface TokenizerOptions {
  /** A Hugging Face `tokenizer.json` (the file `tokenizer.save()` writes; one per model on the Hub). */
  readonly path: string;
  /** Add the post-processor's special tokens (`<s> … </s>`, `[CLS] … [SEP]`). Default true, as Hugging Face's `encode`. */
  readonly addSpecialTokens?: boolean;
  /** Keep at most this many ids (the first ones, special tokens included); the field's `raggedMax`. Default: no limit. */
  readonly maxLength?: number;
}

/** Internal: validated options, with an absolute path, as reader workers receive them. */
export interface ResolvedTokenizer {
  readonly path: string;
  readonly addSpecialTokens: boolean;
  readonly maxLength: number | undefined;
}

const KNOWN = ['path', 'addSpecialTokens', 'maxLength'];

/** Check `tokenizer` options (`knob` names them in messages) and load the tokenizer once to fail early. */
export function resolveTokenizer(tokenizer: unknown, knob = 'tokenizer'): ResolvedTokenizer {
  if (tokenizer === null || typeof tokenizer !== 'object' || Array.isArray(tokenizer)) throw invalidOption(knob, "an object { path: 'tokenizer.json', addSpecialTokens?, maxLength? }", tokenizer);
  const t = tokenizer as Partial<TokenizerOptions> & { config?: unknown };
  if (t.config !== undefined) {
    throw invalidOption(`${knob}.config`, 'absent: tokenizer_config.json is not read', t.config, "Hugging Face's tokenizers library encodes from tokenizer.json alone; remove `config`");
  }
  for (const k of Object.keys(t)) if (!KNOWN.includes(k)) throw invalidOption(`${knob}.${k}`, `one of ${KNOWN.join(', ')}`, k, 'Remove it');
  if (typeof t.path !== 'string' || t.path.length === 0) throw invalidOption(`${knob}.path`, 'the path of a tokenizer.json file', t.path);
  if (t.addSpecialTokens !== undefined && typeof t.addSpecialTokens !== 'boolean') throw invalidOption(`${knob}.addSpecialTokens`, 'a boolean', t.addSpecialTokens);
  if (t.maxLength !== undefined && (!Number.isSafeInteger(t.maxLength) || t.maxLength < 1)) throw invalidOption(`${knob}.maxLength`, 'an integer ≥ 1', t.maxLength);
  const resolved: ResolvedTokenizer = { path: resolve(t.path), addSpecialTokens: t.addSpecialTokens ?? true, maxLength: t.maxLength };
  loadTokenizer(resolved);
  return resolved;
}

const require = createRequire(import.meta.url);
let lib: typeof Tokenizers | undefined;

function tokenizers(): typeof Tokenizers {
  if (lib !== undefined) return lib;
  try {
    lib = require('tokenizers') as typeof Tokenizers;
  } catch (cause) {
    throw invalidDatasetError(
      `tokenizing text needs the package "tokenizers" (Hugging Face's tokenizers library, a prebuilt addon), which failed to load: ${(cause as Error)?.message ?? String(cause)}. Reinstall it with npm install tokenizers, on a platform it ships a binary for (Linux, macOS, Windows; x64 or arm64)`,
      cause,
    );
  }
  return lib;
}

/** Per thread: one loaded tokenizer per tokenizer.json. */
const loaded = new Map<string, Tokenizers.Tokenizer>();

function loadTokenizer(t: ResolvedTokenizer): Tokenizers.Tokenizer {
  let tok = loaded.get(t.path);
  if (tok !== undefined) return tok;
  let text: string;
  try {
    text = readFileSync(t.path, 'utf8');
  } catch (cause) {
    throw fileAccess(t.path, 'read the tokenizer.json', cause);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (cause) {
    throw badFile(t.path, 0, `the tokenizer.json is not valid JSON: ${(cause as Error).message}`);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw badFile(t.path, 0, 'the tokenizer.json is not a JSON object');
  const { Tokenizer } = tokenizers();
  try {
    tok = Tokenizer.fromString(text);
  } catch (cause) {
    throw badFile(t.path, 0, `not a tokenizer Hugging Face's tokenizers library can load: ${(cause as Error).message}`, 'Pass the tokenizer.json that tokenizer.save() writes (models: BPE, WordPiece, Unigram, WordLevel)');
  }
  loaded.set(t.path, tok);
  return tok;
}

/** The ids of `text` as int32, truncated to `maxLength` (callers check that `text` is a string of whole code points). */
export async function tokenize(t: ResolvedTokenizer, text: string): Promise<Int32Array> {
  const ids = (await loadTokenizer(t).encode(text, null, { addSpecialTokens: t.addSpecialTokens })).getIds();
  const n = t.maxLength === undefined ? ids.length : Math.min(ids.length, t.maxLength);
  const out = new Int32Array(n);
  for (let k = 0; k < n; k++) out[k] = ids[k]!;
  return out;
}
