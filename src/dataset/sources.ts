// Built-in sources: datasets Stoker knows how to read. Each returns a dataset object to pass to
// `DataLoader.create`; every one of them can be reopened by reader workers. The rule: each factory
// checks its options' names first (source-options.ts), so a misspelt option is refused, not ignored.

import { type ArrayColumns, ArraySource } from './arrays-source.js';
import { type ConcatSource, concatSource } from './concat-source.js';
import type { AnyDataset } from './dataset.js';
import { type ArrowOptions, type ArrowSource, arrowSource } from './formats/arrow/arrow.js';
import { type ArrowRaggedOptions, type ArrowRaggedSource, arrowRaggedSource } from './formats/arrow/arrow-ragged.js';
import type { FileColumnsSource } from './formats/columns/columns-file.js';
import { type ImageFolder, type ImageFolderOptions, imageFolderSource, imageFolderSourceAsync } from './formats/images/image-folder.js';
import { type NpyOptions, npySource } from './formats/columns/npy.js';
import { type SafetensorsOptions, safetensorsSource } from './formats/columns/safetensors.js';
import { type TarShardsOptions, type TarShardsSource, remoteTarShardsSource, tarShardsSource } from './formats/tar/tar-shards.js';
import { type MixOptions, type MixPart, type MixSource, mixSource } from './mix-source.js';
import { type JsonlOptions, type JsonlSource, jsonlSource } from './formats/text/jsonl.js';
import { type ParquetOptions, type ParquetSource, parquetSource } from './formats/text/parquet.js';
import { type MegatronTokens, type TokenWindows, type TokensOptions, tokensSource } from './formats/text/token-file.js';
import { moduleSource } from './source-spec.js';
import { checkSourceOptions } from './source-options.js';
import { LoaderError } from '../errors.js';
import { checkRemoteOptions, isRemote, remoteFiles, remoteObjects } from '../remote/remote.js';
import type { ObjectInfo } from '../remote/store.js';

/**
 * A synchronous source given a remote path: refused, naming the fix (its files must be downloaded
 * first, which takes an await). The async sources (tarShards, parquet, imageFolderAsync) take them.
 */
function refuseRemote(fn: string, paths: unknown): void {
  const list = typeof paths === 'string' ? [paths] : Array.isArray(paths) ? paths : paths !== null && typeof paths === 'object' ? Object.values(paths) : [];
  const remote = list.find(isRemote);
  if (remote === undefined) return;
  const fix =
    fn === 'imageFolder'
      ? `await sources.imageFolderAsync(${JSON.stringify(remote)}, ...)`
      : `sources.${fn}((await remoteFiles(${JSON.stringify(remote)})).files${fn === 'npy' || fn === 'arrow' ? '' : '[0]'}, ...)`;
  throw new LoaderError(
    'ERR_INVALID_OPTION',
    `sources.${fn}: ${remote} is remote, and sources.${fn} reads local files without waiting: download it into the node cache first, ${fix} (docs/remote.md)`,
  );
}

/** The local files (or folder) of a path that may be remote. */
async function localOf(paths: string | readonly string[]): Promise<string | readonly string[]> {
  const list = typeof paths === 'string' ? [paths] : paths;
  if (!Array.isArray(list) || !list.some(isRemote)) return paths;
  const r = await remoteFiles(paths);
  return r.folder ?? (typeof paths === 'string' && r.files.length === 1 ? r.files[0]! : r.files);
}

/** `sources.tokens`: Megatron's documents with `index`, nanoGPT's windows without (the type says which). */
function tokens(path: string, options: TokensOptions & { readonly index: string | true }): MegatronTokens;
function tokens(path: string, options?: TokensOptions & { readonly index?: undefined }): TokenWindows;
function tokens(path: string, options?: TokensOptions): TokenWindows | MegatronTokens;
function tokens(path: string, options?: TokensOptions): TokenWindows | MegatronTokens {
  checkSourceOptions('tokens', options);
  refuseRemote('tokens', path);
  return tokensSource(path, options);
}

export const sources = {
  /**
   * A dataset reader workers can open: `sources.module(new URL('./my-data.ts', import.meta.url),
   * 'openMyData', options)` — the module's export is called with `options` in each thread.
   */
  module: moduleSource,
  /**
   * An in-memory dataset over columns that share their first dimension (the row count):
   * `sources.arrays({ image: tensor(u8, [n, 3, 32, 32]), label: new Int32Array(n) })`.
   * A batch is one gather per column; resident mode holds the columns without copying them.
   */
  arrays(columns: ArrayColumns): ArraySource {
    return new ArraySource(columns);
  },
  /**
   * NumPy `.npy` files as columns: one path (a column named after the file's stem: `x.npy` →
   * `x`), a list (positional columns) or a record (named columns); all share their first dimension. Loaded into shared memory when small enough
   * (`load`, `inMemoryBytes`), else read with positioned reads per batch.
   */
  npy(paths: string | readonly string[] | Readonly<Record<string, string>>, options?: NpyOptions): ArraySource | FileColumnsSource {
    checkSourceOptions('npy', options);
    refuseRemote('npy', paths);
    return npySource(paths, options);
  },
  /** A safetensors file, one named column per tensor (`tensors` selects and orders them); all share dim 0. */
  safetensors(path: string, options?: SafetensorsOptions): ArraySource | FileColumnsSource {
    checkSourceOptions('safetensors', options);
    refuseRemote('safetensors', path);
    return safetensorsSource(path, options);
  },
  /**
   * An Arrow IPC file or stream (Hugging Face `datasets` `.arrow` cache files): numeric and
   * fixed-size-list columns as tensors, binary/image columns through `decoders`. Record batches are
   * read on demand, never the whole file. `decode`: where image columns are decoded, as for
   * imageFolder ('processes', 'threads' or 'auto'). A list of paths (`data-0000k-of-n.arrow`
   * shards) is one dataset over them all, in order (see `concat`). `ragged: { text: { tokenizer },
   * ids: 'values' }` reads string / list columns as ragged fields (token ids, list values, bytes).
   */
  arrow(paths: string | readonly string[], options?: ArrowOptions | ArrowRaggedOptions): ArrowSource | ArrowRaggedSource | ConcatSource {
    checkSourceOptions('arrow', options);
    refuseRemote('arrow', paths);
    // `ragged` columns (strings, lists) make a per-sample dataset: see arrow-ragged.ts.
    const open = (p: string) => (options !== undefined && 'ragged' in options ? arrowRaggedSource(p, options) : arrowSource(p, options));
    if (Array.isArray(paths)) {
      const opened: (ArrowSource | ArrowRaggedSource)[] = [];
      try {
        for (const p of paths as readonly string[]) opened.push(open(p));
        return concatSource(opened);
      } catch (error) {
        for (const ds of opened) void ds.close();
        throw error;
      }
    }
    return open(paths as string);
  },
  /**
   * One dataset over several opened datasets (shards), in order: sample i is in the part whose
   * cumulative offset is the last ≤ i. Per-batch when every part is; reopenable by reader workers
   * when every part is; `close()` closes every part.
   */
  concat(parts: readonly AnyDataset[]): ConcatSource {
    return concatSource(parts);
  },
  /**
   * A weighted mixture: `sources.mix([{ dataset: web, weight: 3 }, { dataset: code, weight: 1 }], { window })`.
   * Its order interleaves the parts so that every window of `window` picks (default: the loader's
   * batchSize) holds exactly the largest-remainder shares of the weights; each part cycles through
   * its own shuffled epochs. An epoch is `length` picks (default: the sum of the parts' lengths).
   * `loader.state()` holds each part's position; a resume may change the weights (from the resume
   * point on). See docs/text.md, "Mixtures and token budgets".
   */
  mix(parts: readonly MixPart[], options?: MixOptions): MixSource {
    checkSourceOptions('mix', options);
    return mixSource(parts, options);
  },
  /**
   * An ImageFolder tree (`dir/<class>/<image>`, classes sorted → labels 0…), JPEG/PNG/WebP decoded
   * with sharp to `size` (resized or centre-cropped): samples `{ image: uint8 [C, H, W], label: int32 }`.
   * `decode`: 'processes' (child processes: what scales, libvips contends within one process),
   * 'threads', or 'auto' (processes on multi-core machines for images of 64 × 64 and more). A folder
   * listed cold is walked by worker threads while this thread blocks (NOTE [blocking parallel walk]).
   */
  imageFolder(dir: string, options: ImageFolderOptions): ImageFolder {
    checkSourceOptions('imageFolder', options);
    refuseRemote('imageFolder', dir);
    return imageFolderSource(dir, options);
  },
  /**
   * `imageFolder`, the folder listed by worker threads while this thread awaits (the event loop runs
   * on): the same dataset (same listing, cache and errors), the cache written off this thread — `await
   * sources.imageFolderAsync('train', { size: 224 })` (NOTE [parallel walk] in folder-listing.ts).
   */
  async imageFolderAsync(dir: string, options: ImageFolderOptions): Promise<ImageFolder> {
    checkSourceOptions('imageFolder', options, 'imageFolderAsync');
    return imageFolderSourceAsync((await localOf(dir)) as string, options);
  },
  /**
   * WebDataset-style tar shards (a glob with `{000..099}` ranges or `*`, or a list): entries sharing
   * a basename are one sample, fields by extension. Indexed once (the index cached beside the shards
   * or in a private temp dir), then read by sample id with positioned reads. `decode`: where image
   * fields are decoded, as for imageFolder ('processes', 'threads' or 'auto').
   */
  async tarShards(shards: string | readonly string[], options?: TarShardsOptions): Promise<TarShardsSource> {
    checkSourceOptions('tarShards', options);
    const list = typeof shards === 'string' ? [shards] : shards;
    if (!Array.isArray(list) || !list.some(isRemote)) return tarShardsSource(shards, options);
    // A remote folder's shards are its .tar objects; a pattern's, what it names. Remote shards are
    // fetched as the plan reaches them (remoteTarShardsSource); a list mixing local and remote paths
    // is fetched whole now.
    if (options?.remote !== undefined) checkRemoteOptions(options.remote, 'remote');
    const { entries, folder } = await remoteObjects(shards, options?.remote);
    const objects = entries.filter((e): e is ObjectInfo => typeof e !== 'string');
    if (objects.length === entries.length) return remoteTarShardsSource(folder === undefined ? objects : objects.filter((o) => o.url.toLowerCase().endsWith('.tar')), options);
    return tarShardsSource((await remoteFiles(shards, options?.remote)).files, options);
  },
  /**
   * Flat token files. nanoGPT's `.bin` (raw little-endian uint16/uint32 ids) as fixed windows:
   * `sources.tokens('train.bin', { contextLength: 1024 })` gives samples `{ tokens: [1025] }`, input
   * `tokens[0..1024)`, target `tokens[1..1025)`. With Megatron's index (`index: true` for `x.idx`
   * beside `x.bin`, or its path), samples are documents `{ tokens: [len] }`, a ragged field.
   */
  tokens,
  /**
   * A JSON Lines file, one record per non-blank line: `sources.jsonl('data.jsonl', { fields: {
   * label: 'int64' }, text: 'text', tokenizer: { path: 'tokenizer.json' } })`. The line index is
   * built once and cached; each sample is one positioned read. Arrays and tokenized text are
   * ragged fields. A corrupt line fails only its sample's batch.
   */
  jsonl(path: string, options?: JsonlOptions): JsonlSource {
    checkSourceOptions('jsonl', options);
    refuseRemote('jsonl', path);
    return jsonlSource(path, options);
  },
  /**
   * A Parquet file, one row per sample, read with hyparquet (pure JavaScript): `await
   * sources.parquet('train.parquet', { columns: ['input_ids', 'label'] })`. Numbers are scalars,
   * list<number> columns ragged fields, strings token ids through `tokenizer`. Row groups are read
   * by position; each reader keeps the last one it decoded.
   */
  async parquet(path: string, options?: ParquetOptions): Promise<ParquetSource> {
    checkSourceOptions('parquet', options);
    return parquetSource((await localOf(path)) as string, options);
  },
};
