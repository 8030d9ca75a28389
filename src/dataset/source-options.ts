// Internal: not exported from the package entry.
// The option names each built-in source knows, and the check every `sources.*` factory runs before
// it touches a file: a key it does not know (`chanels` for `channels`) is refused naming the
// source, the key and the nearest known key, instead of being ignored. The rule: every table is a
// `keysOf` record over its options type (option-keys.ts), checked by the compiler against the type.

import { invalidOption } from '../errors.js';
import { checkKeys, keysOf } from './option-keys.js';
import type { ArrowRaggedField, ArrowRaggedOptions } from './formats/arrow/arrow-ragged.js';
import type { ArrowCodesDecoder, ArrowImageDecoder, ArrowModuleDecoder } from './formats/arrow/arrow-decoders.js';
import type { ImageFolderOptions } from './formats/images/image-folder.js';
import type { NpyOptions } from './formats/columns/npy.js';
import type { SafetensorsOptions } from './formats/columns/safetensors.js';
import type { TarFieldDecoder, TarImageOptions, TarShardsOptions } from './formats/tar/tar-shards.js';
import { MIX_OPTION_KEYS } from './mix-source.js';
import type { JsonlOptions } from './formats/text/jsonl.js';
import type { ParquetOptions } from './formats/text/parquet.js';
import type { TokensOptions } from './formats/text/token-file.js';

const IMAGE_KEYS = keysOf<TarImageOptions>({ size: true, channels: true, layout: true, fit: true, maxInputPixels: true, view: true, normalize: true, output: true });
/** A tar field's decoder given as an object (`{ image: {...} }`), and an Arrow ragged column read through a tokenizer. */
const TAR_DECODER_KEYS = keysOf<Extract<TarFieldDecoder, object>>({ image: true });
const ARROW_RAGGED_KEYS = keysOf<Exclude<ArrowRaggedField, string>>({ tokenizer: true });

/** The option keys of each `sources.*` factory that takes an options object (`module`'s are the user's own). */
export const SOURCE_OPTION_KEYS = {
  npy: keysOf<NpyOptions>({ load: true, inMemoryBytes: true }),
  safetensors: keysOf<SafetensorsOptions>({ load: true, inMemoryBytes: true, tensors: true }),
  arrow: keysOf<ArrowRaggedOptions>({ columns: true, decoders: true, cacheBatches: true, cacheBytes: true, rowReads: true, decode: true, decodeProcesses: true, ragged: true }),
  mix: MIX_OPTION_KEYS,
  imageFolder: keysOf<ImageFolderOptions>({
    size: true, channels: true, layout: true, fit: true, extensions: true, index: true, maxInputPixels: true, decode: true, decodeProcesses: true, view: true, normalize: true, output: true,
  }),
  tarShards: keysOf<TarShardsOptions>({ fields: true, decoders: true, image: true, index: true, decode: true, decodeProcesses: true, remote: true }),
  tokens: keysOf<TokensOptions>({ dtype: true, contextLength: true, stride: true, index: true }),
  jsonl: keysOf<JsonlOptions>({ fields: true, text: true, tokenizer: true, index: true }),
  parquet: keysOf<ParquetOptions>({ columns: true, tokenizer: true }),
} as const;

const ARROW_DECODER_KEYS: Readonly<Record<string, readonly string[]>> = {
  image: keysOf<ArrowImageDecoder>({ kind: true, size: true, channels: true, layout: true, fit: true, maxInputPixels: true, view: true, normalize: true, output: true }),
  module: keysOf<ArrowModuleDecoder>({ kind: true, module: true, export: true }),
  codes: keysOf<ArrowCodesDecoder>({ kind: true }),
};

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The check `sources.<source>(…, options)` runs first: options left out (a source that requires them
 * says so itself), or an object whose keys — and those of the decoders nested in it — the source
 * knows. `fn` names the factory in messages when it is not `source` (`imageFolderAsync`).
 */
export function checkSourceOptions(source: keyof typeof SOURCE_OPTION_KEYS, options: unknown, fn: string = source): void {
  if (options === undefined) return;
  const where = `sources.${fn}`;
  if (!isRecord(options)) throw invalidOption(`${where}(…, options)`, 'an object of options', options, source === 'imageFolder' ? 'Pass e.g. { size: 224 }' : undefined);
  checkKeys(where, options, SOURCE_OPTION_KEYS[source]);
  const decoders = options.decoders;
  if (source === 'tarShards') {
    if (isRecord(options.image)) checkKeys(`${where} image`, options.image, IMAGE_KEYS);
    if (isRecord(decoders)) {
      for (const [field, d] of Object.entries(decoders)) {
        if (!isRecord(d)) continue;
        checkKeys(`${where} decoders.${field}`, d, TAR_DECODER_KEYS);
        if (isRecord(d.image)) checkKeys(`${where} decoders.${field}.image`, d.image, IMAGE_KEYS);
      }
    }
  }
  if (source === 'arrow') {
    if (isRecord(decoders)) {
      for (const [column, d] of Object.entries(decoders)) {
        const known = isRecord(d) && typeof d.kind === 'string' && Object.hasOwn(ARROW_DECODER_KEYS, d.kind) ? ARROW_DECODER_KEYS[d.kind]! : undefined;
        if (known !== undefined) checkKeys(`${where} decoders.${column}`, d as Record<string, unknown>, known);
      }
    }
    if (isRecord(options.ragged)) {
      for (const [column, how] of Object.entries(options.ragged)) if (isRecord(how)) checkKeys(`${where} ragged.${column}`, how, ARROW_RAGGED_KEYS);
    }
  }
}
