// `sources.tokens`: flat token files as language-model datasets, read with positioned reads (never
// the whole file). Two layouts:
// - nanoGPT's `.bin`: little-endian uint16 (or uint32) token ids, nothing else. Sample i is window i:
//   `contextLength + 1` tokens starting at token `i × stride` (stride defaults to `contextLength`,
//   so consecutive windows share one token). The extra token is the target shift: train on
//   `input = tokens[0 .. contextLength)` and `target = tokens[1 .. contextLength]`, as nanoGPT's
//   get_batch does with `x = data[i:i+block]`, `y = data[i+1:i+1+block]`. The tail that fills no
//   whole window is never read.
// - Megatron's `.bin` + `.idx` (MMIDIDX, token-file-idx.ts): sample i is document i, its tokens a
//   ragged field (`ragged: ['tokens']`, `raggedMax` the longest document, from the index), of the
//   index's dtype (any of Megatron's eight), its sequences read at their pointers as given.
// The rule: the files must not change while a loader reads them; each reopen (reader workers)
// checks their sizes against those seen at open and refuses a file that changed.

import { endianness } from 'node:os';
import { resolve } from 'node:path';
import { badFile, emptyDatasetError, indexOutOfRange, invalidOption, invalidSourcePath, show } from '../../../errors.js';
import { type StorageOf, allocStorage, elementSize, storageView } from '../../../tensor/dtype.js';
import type { Dataset } from '../../dataset.js';
import { type Reopenable, type SourceSpec, kSourceSpec } from '../../source-spec.js';
import { PositionedFile } from '../file.js';
import { type MegatronIndex, readMegatronIndex } from './token-file-idx.js';

/**
 * Token dtypes. Flat files: 'uint16' (nanoGPT's), 'uint32' or 'int32'. Megatron indexes: the
 * index's own, any of Megatron's codes (uint8, int8, int16, int32, int64, float64, float32, uint16;
 * its writer picks uint16 under 65 500 ids, else int32).
 */
export type TokenDType = 'uint8' | 'int8' | 'int16' | 'uint16' | 'int32' | 'uint32' | 'int64' | 'float32' | 'float64';

/** The dtypes of a flat (nanoGPT) file. */
const FLAT_DTYPES: readonly TokenDType[] = ['uint16', 'uint32', 'int32'];
const ALL_DTYPES: readonly TokenDType[] = ['uint8', 'int8', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'float32', 'float64'];

export interface TokensOptions {
  /**
   * Width of one token in the `.bin`: 'uint16' (default: nanoGPT's, for vocabularies under 65 536),
   * 'uint32' or 'int32'. With `index` the index's own dtype, which this must match when given.
   */
  readonly dtype?: TokenDType;
  /** Flat files: tokens a model sees per sample; each sample holds `contextLength + 1` (the target shift). */
  readonly contextLength?: number;
  /** Flat files: tokens between the starts of consecutive windows (default `contextLength`: windows tile the file). */
  readonly stride?: number;
  /**
   * Megatron's document index: the `.idx` path, or `true` for the `.bin` path with `.idx` in place
   * of `.bin`. Samples are then documents, of varying length.
   */
  readonly index?: string | true;
}

type TokenArray = StorageOf[TokenDType];

const KNOWN = ['dtype', 'contextLength', 'stride', 'index'];
const LITTLE = endianness() === 'LE';

/** Internal: what reader workers receive (validated, with the sizes seen at open). */
export interface TokenWindowsSpec {
  readonly path: string;
  readonly dtype: TokenDType;
  readonly contextLength: number;
  readonly stride: number;
  readonly fileSize: number;
}

export interface MegatronSpec {
  readonly path: string;
  readonly index: MegatronIndex;
}

/** A flat token file as fixed windows of `contextLength + 1` tokens. */
export class TokenWindows implements Dataset, Reopenable {
  readonly length: number;
  readonly path: string;
  readonly dtype: TokenDType;
  readonly contextLength: number;
  readonly stride: number;
  /** Tokens in the file. */
  readonly tokens: number;
  readonly #spec: TokenWindowsSpec;
  #file: PositionedFile | undefined;

  constructor(spec: TokenWindowsSpec) {
    this.#spec = spec;
    this.path = spec.path;
    this.dtype = spec.dtype;
    this.contextLength = spec.contextLength;
    this.stride = spec.stride;
    this.tokens = Math.floor(spec.fileSize / elementSize(spec.dtype));
    const window = spec.contextLength + 1;
    this.length = this.tokens < window ? 0 : Math.floor((this.tokens - window) / spec.stride) + 1;
  }

  /** `{ tokens }`: `contextLength + 1` token ids starting at token `i × stride`. */
  get(i: number): { tokens: TokenArray } {
    if (!Number.isInteger(i) || i < 0 || i >= this.length) throw indexOutOfRange(this.path, 'window', i, this.length);
    this.#file ??= PositionedFile.openSized(this.path, this.#spec.fileSize);
    const n = this.contextLength + 1;
    return { tokens: readTokens(this.#file, i * this.stride * elementSize(this.dtype), n, this.dtype, `window ${i}`) };
  }

  [kSourceSpec](): SourceSpec {
    return { module: import.meta.url, export: 'openTokenWindows', options: this.#spec };
  }

  close(): void {
    this.#file?.close();
    this.#file = undefined;
  }
}

/** A Megatron `.bin` + `.idx` pair as one ragged sample per document. */
export class MegatronTokens implements Dataset, Reopenable {
  readonly length: number;
  readonly path: string;
  readonly indexPath: string;
  readonly dtype: TokenDType;
  /** The token field varies in length from document to document. */
  readonly ragged: readonly string[] = ['tokens'];
  /** The longest document, in tokens (from the index). */
  readonly raggedMax: { readonly tokens: number };
  /** Tokens per document (from the index): what `batchTokens` budgets with. */
  readonly lengths: Uint32Array;
  readonly #spec: MegatronSpec;
  #bin: PositionedFile | undefined;
  #idx: PositionedFile | undefined;

  constructor(spec: MegatronSpec) {
    this.#spec = spec;
    this.path = spec.path;
    this.indexPath = spec.index.path;
    this.dtype = spec.index.dtype;
    this.length = spec.index.documents;
    this.raggedMax = Object.freeze({ tokens: spec.index.longest });
    this.lengths = spec.index.lengths;
  }

  /** `{ tokens }`: every token of document `i` (possibly none), its sequences in order. */
  get(i: number): { tokens: TokenArray } {
    if (!Number.isInteger(i) || i < 0 || i >= this.length) throw indexOutOfRange(this.path, 'document', i, this.length);
    const ix = this.#spec.index;
    this.#idx ??= PositionedFile.openSized(ix.path, ix.fileSize);
    this.#bin ??= PositionedFile.openSized(this.path, ix.binSize);
    const pair = view(this.#idx.read(ix.documentsAt + i * 8, 16, `the document index of document ${i}`));
    const s0 = Number(pair.getBigInt64(0, true));
    const n = Number(pair.getBigInt64(8, true)) - s0;
    const size = elementSize(this.dtype);
    const out = allocStorage(this.dtype, ix.lengths[i]!);
    const bytes = new Uint8Array(out.buffer, 0, out.byteLength);
    if (n > 0) {
      // Each sequence at its pointer as given (the index was checked to keep them inside the .bin);
      // runs of sequences that lie end to end, as Megatron's writer lays them, are one read.
      const lens = view(this.#idx.read(ix.lengthsAt + s0 * 4, n * 4, `the sequence lengths of document ${i}`));
      const ptrs = view(this.#idx.read(ix.pointersAt + s0 * 8, n * 8, `the sequence pointers of document ${i}`));
      let at = 0;
      for (let k = 0; k < n; ) {
        const from = Number(ptrs.getBigInt64(8 * k, true));
        let run = lens.getInt32(4 * k, true) * size;
        for (k++; k < n && Number(ptrs.getBigInt64(8 * k, true)) === from + run; k++) run += lens.getInt32(4 * k, true) * size;
        if (run > 0) this.#bin.read(from, run, `the tokens of document ${i}`, bytes, at);
        at += run;
      }
    }
    if (!LITTLE) swapInPlace(bytes, size);
    return { tokens: out };
  }

  [kSourceSpec](): SourceSpec {
    return { module: import.meta.url, export: 'openMegatronTokens', options: this.#spec };
  }

  close(): void {
    this.#bin?.close();
    this.#idx?.close();
    this.#bin = this.#idx = undefined;
  }
}

/** Open a token file: windows over a flat `.bin`, or documents with a Megatron `index`. */
export function tokensSource(path: string, options: TokensOptions = {}): TokenWindows | MegatronTokens {
  if (typeof path !== 'string' || path.length === 0) throw invalidSourcePath('sources.tokens', path);
  if (options === null || typeof options !== 'object') throw invalidOption('sources.tokens options', 'an object', options);
  for (const k of Object.keys(options)) if (!KNOWN.includes(k)) throw invalidOption(`sources.tokens ${k}`, `one of ${KNOWN.join(', ')}`, k, 'Remove it');
  const { dtype, contextLength, stride, index } = options;
  if (dtype !== undefined && !ALL_DTYPES.includes(dtype)) throw invalidOption('dtype', "'uint16', 'uint32' or 'int32' (with `index`, the index's own dtype)", dtype, 'nanoGPT writes uint16; vocabularies past 65 536 need uint32');
  const abs = resolve(path);
  if (index !== undefined) {
    if (index !== true && (typeof index !== 'string' || index.length === 0)) throw invalidOption('index', 'the .idx path, or true for the .bin path with .idx in place of .bin', index);
    if (contextLength !== undefined || stride !== undefined) {
      throw invalidOption(contextLength !== undefined ? 'contextLength' : 'stride', 'absent with `index` (documents are samples; pack them into windows with the loader)', contextLength ?? stride, 'Drop `index` to read the .bin as fixed windows, or drop contextLength/stride');
    }
    const idxPath = index === true ? abs.replace(/(\.bin)?$/, '.idx') : resolve(index);
    const ix = readMegatronIndex(idxPath, abs);
    if (dtype !== undefined && dtype !== ix.dtype) throw invalidOption('dtype', `the index's dtype ${show(ix.dtype)}`, dtype, 'Leave dtype out: the index says what the .bin holds');
    return new MegatronTokens({ path: abs, index: ix });
  }
  if (dtype !== undefined && !FLAT_DTYPES.includes(dtype)) throw invalidOption('dtype', "'uint16', 'uint32' or 'int32' for a flat file", dtype, 'nanoGPT writes uint16; vocabularies past 65 536 need uint32; other dtypes come with a Megatron `index`');
  if (contextLength === undefined) throw invalidOption('contextLength', 'an integer ≥ 1 (tokens per window; each sample holds contextLength + 1)', contextLength, 'Or pass `index` to read Megatron documents');
  if (!Number.isSafeInteger(contextLength) || contextLength < 1) throw invalidOption('contextLength', 'an integer ≥ 1', contextLength);
  if (stride !== undefined && (!Number.isSafeInteger(stride) || stride < 1)) throw invalidOption('stride', 'an integer ≥ 1 (tokens between window starts)', stride);
  const d = dtype ?? 'uint16';
  const file = new PositionedFile(abs);
  file.close();
  const size = elementSize(d);
  if (file.size % size !== 0) throw badFile(path, file.size - (file.size % size), `the file holds ${file.size} bytes, not a whole number of ${d} tokens`, `Is dtype ${show(d)} right? nanoGPT writes uint16`);
  if (file.size / size < contextLength + 1) {
    throw emptyDatasetError(`${path}: the file holds ${file.size / size} tokens, fewer than one window of contextLength + 1 = ${contextLength + 1}. Lower contextLength`);
  }
  return new TokenWindows({ path: abs, dtype: d, contextLength, stride: stride ?? contextLength, fileSize: file.size });
}

/** Worker-side factories. */
export function openTokenWindows(spec: TokenWindowsSpec): TokenWindows {
  return new TokenWindows(spec);
}

export function openMegatronTokens(spec: MegatronSpec): MegatronTokens {
  return new MegatronTokens(spec);
}


/** `n` little-endian tokens at byte `offset`, in fresh aligned memory. */
function readTokens(file: PositionedFile, offset: number, n: number, dtype: TokenDType, what: string): TokenArray {
  const out = allocStorage(dtype, n);
  const bytes = new Uint8Array(out.buffer, 0, out.byteLength);
  file.read(offset, bytes.length, `the tokens of ${what}`, bytes);
  if (!LITTLE) swapInPlace(bytes, elementSize(dtype));
  return storageView(dtype, out.buffer, 0, n) as TokenArray;
}

function view(b: Uint8Array): DataView {
  return new DataView(b.buffer, b.byteOffset, b.byteLength);
}

function swapInPlace(b: Uint8Array, size: number): void {
  for (let k = 0; k < b.length; k += size) b.subarray(k, k + size).reverse();
}
