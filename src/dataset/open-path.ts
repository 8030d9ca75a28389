// `stoker inspect <path>`: open a path with the source its format calls for and describe what the
// loader would see — sample count, columns with dtype and per-sample shape, bytes per sample. The
// rule: the description comes from the same code path the loader uses (the source, then the probe
// of sample 0), so what inspect prints is what training gets. Images decode in this thread (one
// sample: no decode processes), and the source is closed after the probe.

import { existsSync, openSync, readSync, closeSync, readdirSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, extname, join } from 'node:path';
import { Type } from 'apache-arrow';
import { badFile, describeCause, fileAccess, invalidDatasetError, show } from '../errors.js';
import { elementSize } from '../tensor/dtype.js';
import { isRemote, remoteFiles } from '../remote/remote.js';
import { type AnyDataset, closeDataset } from './dataset.js';
import { concatSource } from './concat-source.js';
import { sources } from './sources.js';
import { SourceReader } from './source-reader.js';
import { type ArrowImageDecoder, arrowSource } from './formats/arrow/arrow.js';
import { buildIndex as buildArrowIndex } from './formats/arrow/arrow-index.js';
import { PositionedFile } from './formats/file.js';
import { loadImageDecoder } from '../image/image-decode.js';
import { imageFolderSource } from './formats/images/image-folder.js';
import { jsonlFirstRecord, jsonlSource } from './formats/text/jsonl.js';
import { npySource } from './formats/columns/npy.js';
import { parquetColumns, parquetSource } from './formats/text/parquet.js';
import { safetensorsSource } from './formats/columns/safetensors.js';
import { shardIndex } from './formats/tar/tar-index.js';
import { expandShardPaths, tarShardsSource } from './formats/tar/tar-shards.js';
import { type MegatronTokens, type TokenDType, type TokenWindows, tokensSource } from './formats/text/token-file.js';

export type SourceFormat = 'npy' | 'safetensors' | 'arrow' | 'image-folder' | 'tar-shards' | 'jsonl' | 'parquet' | 'megatron' | 'tokens';

/** The source that reads each format, as a user writes it (what inspect names under "read with"). */
const READ_WITH: Readonly<Record<SourceFormat, (path: string, o: InspectOptions) => string>> = {
  npy: (p) => `sources.npy(${JSON.stringify(p)})`,
  safetensors: (p) => `sources.safetensors(${JSON.stringify(p)})`,
  arrow: (p) => `sources.arrow(${JSON.stringify(p)})`,
  'image-folder': (p, o) => `sources.imageFolder(${JSON.stringify(p)}, { size: [${(o.size ?? ['H', 'W']).join(', ')}] })`,
  'tar-shards': (p) => `await sources.tarShards(${JSON.stringify(shardsOf(p))})`,
  jsonl: (p) => `sources.jsonl(${JSON.stringify(p)}, { fields: [...] })`,
  parquet: (p) => `await sources.parquet(${JSON.stringify(p)})`,
  megatron: (p) => `sources.tokens(${JSON.stringify(binOf(p))}, { index: true })`,
  tokens: (p, o) => `sources.tokens(${JSON.stringify(p)}, { contextLength: ${o.contextLength ?? DEFAULT_CONTEXT}${o.tokenDtype !== undefined && o.tokenDtype !== 'uint16' ? `, dtype: '${o.tokenDtype}'` : ''} })`,
};

/** nanoGPT's default block size: the context length inspect shows a flat token file with unless told. */
const DEFAULT_CONTEXT = 1024;

/** What tarShards takes for a path: a folder's `*.tar`, else the path (a shard or a pattern) as it is. */
function shardsOf(path: string): string {
  return !isShardPattern(path) && statSync(path).isDirectory() ? join(path, '*.tar') : path;
}

/** A Megatron pair's `.bin`, from either of its paths. */
function binOf(path: string): string {
  return path.replace(/\.idx$/, '.bin');
}

export interface ColumnDescription {
  readonly name: string;
  readonly dtype: string;
  /** Shape of one sample's field (no batch dimension). */
  readonly shape: readonly number[];
  readonly bytesPerSample: number;
}

export interface SourceDescription {
  readonly path: string;
  readonly format: SourceFormat;
  /** Samples. */
  readonly length: number;
  readonly columns: readonly ColumnDescription[];
  readonly bytesPerSample: number;
  /** Format-specific facts (classes of an image folder, shards of a tar set, …). */
  readonly details: Readonly<Record<string, unknown>>;
  /** The source call that reads it in a program. */
  readonly readWith: string;
}

export interface InspectOptions {
  /**
   * Decode images to this [height, width]. Default: the first image's own size, for every image
   * source (an image folder's first file; a tar shard's first sample's image fields; an Arrow image
   * column's row 0), as a loader given that size would deliver it.
   */
  readonly size?: readonly [number, number];
  /** A flat token file's window (default 1024, nanoGPT's block size). */
  readonly contextLength?: number;
  /** A flat token file's token width (default 'uint16', nanoGPT's). */
  readonly tokenDtype?: TokenDType;
}

/** A WebDataset shard pattern (`train-{000..009}.tar`, `shards/*.tar`) naming no file of its own: tarShards expands it. */
function isShardPattern(path: string): boolean {
  return /\.tar$/i.test(path) && /[*?{]/.test(basename(path)) && !existsSync(path);
}

/** Tar fields decoded as images by default (tar-shards.ts DEFAULT_DECODERS). */
const TAR_IMAGE_FIELDS: readonly string[] = ['jpg', 'jpeg', 'png', 'webp'];

/** Which source a path calls for: by extension, then by magic bytes; a directory by its contents. */
export function detectFormat(path: string): SourceFormat {
  if (isShardPattern(path)) return 'tar-shards';
  let st;
  try {
    st = statSync(path);
  } catch (cause) {
    throw fileAccess(path, 'inspect it', cause);
  }
  if (st.isDirectory()) {
    const entries = readdirSync(path, { withFileTypes: true });
    if (entries.some((e) => e.isFile() && e.name.toLowerCase().endsWith('.tar'))) return 'tar-shards';
    if (entries.some((e) => e.isDirectory())) return 'image-folder';
    throw invalidDatasetError(`${path}: a folder with neither class sub-folders (an image folder) nor .tar shards; nothing to inspect`);
  }
  const ext = extname(path).toLowerCase();
  if (ext === '.npy') return 'npy';
  if (ext === '.safetensors') return 'safetensors';
  if (ext === '.arrow' || ext === '.feather' || ext === '.ipc' || ext === '.arrows') return 'arrow';
  if (ext === '.tar') return 'tar-shards';
  if (ext === '.jsonl' || ext === '.ndjson') return 'jsonl';
  if (ext === '.parquet') return 'parquet';
  if (ext === '.idx') return 'megatron';
  // A token file: Megatron's when its index sits beside it; a flat one (nanoGPT's `train.bin`) only
  // when its bytes start as no other format does (a flat file has no header to recognise).
  if (ext === '.bin' && existsSync(path.slice(0, -4) + '.idx')) return 'megatron';
  const head = new Uint8Array(512);
  let n = 0;
  const fd = openSync(path, 'r');
  try {
    n = readSync(fd, head, 0, 512, 0);
  } finally {
    closeSync(fd);
  }
  const text = (a: number, b: number) => Buffer.from(head.subarray(a, b)).toString('latin1');
  if (n >= 6 && text(0, 6) === '\x93NUMPY') return 'npy';
  if (n >= 6 && text(0, 6) === 'ARROW1') return 'arrow';
  // An IPC stream starts with the continuation marker 0xFFFFFFFF.
  if (n >= 8 && head[0] === 0xff && head[1] === 0xff && head[2] === 0xff && head[3] === 0xff) return 'arrow';
  if (n >= 262 && text(257, 262) === 'ustar') return 'tar-shards';
  if (n >= 9 && head[8] === 0x7b /* { */ && head[5] === 0 && head[6] === 0 && head[7] === 0) return 'safetensors';
  if (n >= 9 && text(0, 9) === 'MMIDIDX\x00\x00') return 'megatron';
  if (n >= 4 && text(0, 4) === 'PAR1') return 'parquet';
  if (ext === '.bin') return 'tokens';
  throw invalidDatasetError(`${path}: unknown format (expected .npy, .safetensors, .arrow, .tar, .jsonl, .parquet, a token file (.bin, with or without its Megatron .idx), or a folder of class folders or .tar shards)`);
}

export async function openPath(path: string, options: InspectOptions = {}): Promise<{ format: SourceFormat; dataset: AnyDataset; details: Record<string, unknown> }> {
  if (isRemote(path)) {
    const local = await remoteLocal(path);
    return typeof local === 'string' ? openPath(local, options) : openPaths(local, options);
  }
  const format = detectFormat(path);
  switch (format) {
    case 'npy':
      return { format, dataset: npySource(path), details: {} };
    case 'safetensors':
      return { format, dataset: safetensorsSource(path), details: {} };
    case 'arrow': {
      const { decoders, details } = await arrowDecoders(path, options);
      return { format, dataset: decoders === undefined ? arrowSource(path) : arrowSource(path, { decoders, decode: 'threads' }), details };
    }
    case 'image-folder': {
      // The listing made for the size is the one decoded: both come from the source itself.
      const probe = imageFolderSource(path, { size: [1, 1], decode: 'threads' });
      const size = options.size ?? (await imageSize(await readBytes(probe.pathOf(0)), displayPath(probe.pathOf(0))));
      const ds = imageFolderSource(path, { size, decode: 'threads' });
      return { format, dataset: ds, details: { classes: ds.classes.length, classNames: ds.classes.slice(0, 20), decodedTo: `${size[0]}×${size[1]}` } };
    }
    case 'jsonl': {
      // Every numeric or array field of record 0; text fields need a tokenizer, so they are listed, not read.
      const first = jsonlFirstRecord(path);
      const fields = Object.keys(first).filter((k) => typeof first[k] === 'number' || Array.isArray(first[k]));
      const text = Object.keys(first).filter((k) => typeof first[k] === 'string');
      const ds = jsonlSource(path, { fields });
      return { format, dataset: ds, details: { records: ds.length, ...raggedDetails(ds), ...(text.length > 0 ? { text } : {}) } };
    }
    case 'parquet': {
      const { readable, text } = await parquetColumns(path);
      const ds = await parquetSource(path, { columns: readable });
      return { format, dataset: ds, details: { rowGroups: ds.numRowGroups, ...raggedDetails(ds), ...(text.length > 0 ? { text } : {}) } };
    }
    case 'megatron': {
      const bin = binOf(path);
      const ds = tokensSource(bin, { index: bin.replace(/\.bin$/, '.idx') }) as MegatronTokens;
      return { format, dataset: ds, details: { dtype: ds.dtype, ...raggedDetails(ds) } };
    }
    case 'tokens': {
      // A flat file has no header: the width is assumed (nanoGPT's uint16) unless given.
      const dtype = options.tokenDtype ?? 'uint16';
      const contextLength = options.contextLength ?? DEFAULT_CONTEXT;
      const ds = tokensSource(path, { contextLength, dtype }) as TokenWindows;
      return { format, dataset: ds, details: { tokens: ds.tokens, dtype: options.tokenDtype === undefined ? `${dtype} (assumed: nanoGPT's; --dtype to change)` : dtype, contextLength } };
    }
    case 'tar-shards':
      return { format, ...(await openShards(shardsOf(path), options)) };
  }
}

/**
 * A remote path's local copy in the node cache: a file, a folder (a remote folder's mirror), or the
 * files a pattern names. A Megatron `.bin` or `.idx` brings its sibling when the store has it.
 */
async function remoteLocal(path: string): Promise<string | string[]> {
  const megatron = /\.(bin|idx)$/i.exec(path);
  if (megatron !== null && !/[*?{]/.test(path)) {
    const stem = path.slice(0, -4);
    const pair = await remoteFiles([`${stem}.bin`, `${stem}.idx`]).catch(() => undefined);
    if (pair !== undefined) return pair.files[megatron[1]!.toLowerCase() === 'bin' ? 0 : 1]!;
  }
  const { files, folder } = await remoteFiles(path);
  return folder ?? (files.length === 1 && !/[*?{]/.test(path) ? files[0]! : [...files]);
}

/**
 * A path opened with its source's own options, as `stoker serve` takes `{"path", ...options}`: an
 * image folder's (view, normalize, output, decode, ...; `size` defaults to the first image's own),
 * checked by the source as `sources.imageFolder` checks them. Other formats take no options here:
 * their source call (or a module spec) does.
 */
export async function openPathWithOptions(path: string, options: Readonly<Record<string, unknown>>): Promise<AnyDataset> {
  if (isRemote(path)) {
    const local = await remoteLocal(path);
    if (typeof local !== 'string') throw invalidDatasetError(`${path}: names ${local.length} files; source options go with one path (an image folder)`);
    path = local;
  }
  const format = detectFormat(path);
  if (format !== 'image-folder') {
    throw invalidDatasetError(
      `${path}: ${format}, which takes no source options here (got ${Object.keys(options).map((k) => JSON.stringify(k)).join(', ')}); ` +
        'only an image folder takes its options beside "path". Open it with its source in a module spec {"module", "export", "options"}',
    );
  }
  const probe = imageFolderSource(path, { size: [1, 1], decode: 'threads' });
  const size = options.size ?? (await imageSize(await readBytes(probe.pathOf(0)), displayPath(probe.pathOf(0))));
  return sources.imageFolder(path, { ...options, size } as unknown as Parameters<typeof sources.imageFolder>[1]);
}

/**
 * Several files as one dataset, as the sources that take several make it (what `stoker serve` and the
 * PyTorch client open for a list or a record of paths):
 * - `.npy` files: columns zipped by row, as `sources.npy` — a list positional, a record named;
 * - tar shards: one set of shards, as `sources.tarShards([...])`;
 * - Arrow files: one dataset over them in order, as `sources.arrow([...])` (image columns decoded to the
 *   first file's sizes unless `size` is given, so that every file's samples have one shape);
 * - files of any other one format (safetensors, JSONL, Parquet, token files, image folders): one dataset
 *   over them in order, as `sources.concat` of each opened as `openPath` opens it.
 * A record names `.npy` columns only; a list mixes no formats (a list with an `.npy` is all columns).
 */
export async function openPaths(paths: readonly string[] | Readonly<Record<string, string>>, options: InspectOptions = {}): Promise<{ format: SourceFormat; dataset: AnyDataset; details: Record<string, unknown> }> {
  const values = Array.isArray(paths) ? paths : typeof paths === 'object' && paths !== null ? Object.values(paths) : [];
  if (values.some(isRemote)) {
    const locals = await Promise.all(values.map(async (p) => (isRemote(p) ? await remoteLocal(p) : p)));
    if (!Array.isArray(paths)) return openPaths(Object.fromEntries(Object.keys(paths).map((k, i) => [k, locals[i] as string])), options);
    return openPaths(locals.flat(), options);
  }
  const named = !Array.isArray(paths);
  const list: string[] = named ? Object.values(paths) : [...(paths as readonly string[])];
  if (list.length === 0 || !list.every((p) => typeof p === 'string' && p !== '')) {
    throw invalidDatasetError(`expected ${named ? 'a record of names to file paths' : 'a list of file paths'} with at least one path, got ${show(paths)}`);
  }
  const formats = list.map(detectFormat);
  const other = (want: SourceFormat, why: string) => {
    const i = formats.findIndex((f) => f !== want);
    return invalidDatasetError(`${list[i]}: ${formats[i]}, where ${why}. ${named ? 'Name .npy files only (other formats name their own columns)' : 'List files of one format'}`);
  };
  if (named || formats.includes('npy')) {
    if (formats.some((f) => f !== 'npy')) throw other('npy', named ? 'a record of paths names the columns of .npy files (sources.npy({ name: path }))' : 'a list with an .npy file zips .npy files as columns (sources.npy([...]))');
    return { format: 'npy', dataset: npySource(paths), details: {} };
  }
  const format = formats[0]!;
  if (formats.some((f) => f !== format)) throw other(format, `the list's first file is ${format}`);
  if (format === 'tar-shards') {
    if (list.some((p) => isShardPattern(p) || statSync(p).isDirectory())) throw invalidDatasetError(`a list of tar shards names shard files, got ${show(list)}; give a folder of shards or a pattern as one path instead`);
    return { format, ...(await openShards(list, options)) };
  }
  if (format === 'arrow') {
    const { decoders, details } = await arrowDecoders(list[0]!, options);
    return { format, dataset: sources.arrow(list, decoders === undefined ? undefined : { decoders, decode: 'threads' }), details };
  }
  const parts: AnyDataset[] = [];
  try {
    for (const p of list) parts.push((await openPath(p, options)).dataset);
    return { format, dataset: concatSource(parts), details: { parts: parts.length } };
  } catch (error) {
    await Promise.all(parts.map((d) => closeDataset(d)));
    throw error;
  }
}

/** An Arrow file's image columns (Hugging Face's image storage) with the decoder each needs: `size`, else its row 0's own size. */
async function arrowDecoders(path: string, options: InspectOptions): Promise<{ decoders?: Record<string, ArrowImageDecoder>; details: Record<string, unknown> }> {
  const images = arrowImageColumns(path);
  if (images.length === 0) return { details: {} };
  const decoders: Record<string, ArrowImageDecoder> = {};
  for (const c of images) decoders[c] = { kind: 'image', size: options.size ?? (await firstArrowImageSize(path, c)) };
  return { decoders, details: { decodedTo: decodedTo(Object.fromEntries(images.map((c) => [c, decoders[c]!.size]))) } };
}

/** Tar shards (a shard, a pattern or a list), image fields decoded to `size`, else to the first sample's own sizes. */
async function openShards(shards: string | readonly string[], options: InspectOptions): Promise<{ dataset: AnyDataset; details: Record<string, unknown> }> {
  const sizes = options.size === undefined ? await firstTarImageSizes(shards) : undefined;
  const decoders = sizes === undefined ? undefined : Object.fromEntries(Object.entries(sizes).map(([f, size]) => [f, { image: { size } }]));
  const ds = await tarShardsSource(shards, { ...(decoders === undefined ? {} : { decoders }), image: { size: options.size ?? [1, 1] }, decode: 'threads' });
  const shown = sizes ?? Object.fromEntries(ds.fields.filter((f) => TAR_IMAGE_FIELDS.includes(f)).map((f) => [f, options.size!]));
  return { dataset: ds, details: { shards: ds.shards.length, fields: ds.fields, ...(Object.keys(shown).length > 0 ? { decodedTo: decodedTo(shown) } : {}) } };
}

/** Open `path` and describe what a loader over it would deliver. */
export async function inspectPath(path: string, options: InspectOptions = {}): Promise<SourceDescription> {
  const { format, dataset, details } = await openPath(path, options);
  let schema;
  try {
    schema = await SourceReader.probe(dataset, { signal: new AbortController().signal });
  } finally {
    await closeDataset(dataset);
  }
  const columns = schema.fields.map((f, i) => ({
    name: schema.keys?.[i] ?? String(i),
    dtype: f.dtype,
    shape: f.shape,
    bytesPerSample: f.rowSize * elementSize(f.dtype),
  }));
  return { path, format, length: dataset.length, columns, bytesPerSample: schema.sampleBytes, details, readWith: READ_WITH[format](path, options) };
}

/** Which fields vary in length (their shape above is sample 0's), and the bounds the source knows. */
function raggedDetails(ds: { readonly ragged: readonly string[]; readonly raggedMax: Readonly<Record<string, number>> }): Record<string, unknown> {
  return ds.ragged.length === 0 ? {} : { ragged: ds.ragged, ...(Object.keys(ds.raggedMax).length > 0 ? { raggedMax: ds.raggedMax } : {}) };
}

/** "32×32", or "image 32×32, thumb 8×8" when image columns or fields differ. */
function decodedTo(sizes: Readonly<Record<string, readonly [number, number]>>): string {
  const entries = Object.entries(sizes);
  const text = (s: readonly [number, number]) => `${s[0]}×${s[1]}`;
  if (entries.every(([, s]) => text(s) === text(entries[0]![1]))) return text(entries[0]![1]);
  return entries.map(([c, s]) => `${c} ${text(s)}`).join(', ');
}

/** [height, width] of encoded image bytes, from its header (nothing is decoded). */
async function imageSize(bytes: Uint8Array, source: string): Promise<[number, number]> {
  let meta;
  try {
    meta = await loadImageDecoder()(bytes).metadata();
  } catch (cause) {
    throw badFile(source, 0, `cannot read the image size: ${describeCause(cause)}`, 'Pass the output size with --size, or fix the image');
  }
  if (meta.width === undefined || meta.height === undefined) throw badFile(source, 0, 'cannot read the image size', 'Pass the output size with --size');
  return [meta.height, meta.width];
}

async function readBytes(path: string | Buffer): Promise<Uint8Array> {
  try {
    return await readFile(path);
  } catch (cause) {
    throw fileAccess(displayPath(path), 'read the first image', cause);
  }
}

/** A path for messages: a byte path (a name that is not UTF-8) shown with U+FFFD. */
function displayPath(path: string | Buffer): string {
  return typeof path === 'string' ? path : path.toString('utf8');
}

/**
 * The own size of each image field of the first sample of the first shard that has one, read from
 * the shard's index (the one tarShardsSource then reuses from the cache).
 */
async function firstTarImageSizes(shards: string | readonly string[]): Promise<Record<string, [number, number]>> {
  for (const { path: shard, raw } of expandShardPaths(shards)) {
    const ix = shardIndex(shard, 'auto', raw ?? shard);
    if (ix.keys.length === 0) continue;
    const out: Record<string, [number, number]> = {};
    const file = new PositionedFile(shard, raw ?? shard);
    try {
      for (const [f, field] of ix.fields.entries()) {
        const at = ix.table[f * 2]!;
        if (at === -1 || !TAR_IMAGE_FIELDS.includes(field)) continue;
        const where = `${shard}: sample ${show(ix.keys[0])} field ${show(field)} (data at byte ${at})`;
        out[field] = await imageSize(file.read(at, ix.table[f * 2 + 1]!, where), where);
      }
    } finally {
      file.close();
    }
    return out;
  }
  return {};
}

/**
 * Columns inspect decodes as images: Hugging Face's image storage, struct<bytes, path>, unless the
 * file's Hugging Face features say the column is something else (Audio has the same storage).
 */
function arrowImageColumns(path: string): string[] {
  const file = new PositionedFile(path);
  let schema;
  try {
    schema = buildArrowIndex(file).schema;
  } finally {
    file.close();
  }
  let features: Record<string, { _type?: unknown }> = {};
  try {
    const hf = JSON.parse(schema.metadata.get('huggingface') ?? '{}') as { info?: { features?: typeof features } };
    features = hf.info?.features ?? {};
  } catch {
    // no usable Hugging Face metadata: go by the storage type alone
  }
  return schema.fields
    .filter((f) => f.type.typeId === Type.Struct && (f.type.children as { name: string }[]).some((c) => c.name === 'bytes'))
    .filter((f) => features[f.name]?._type === undefined || features[f.name]?._type === 'Image')
    .map((f) => f.name);
}

/** Row 0's image size in column `column`: its bytes, or the file its path names, as the source reads them. */
async function firstArrowImageSize(path: string, column: string): Promise<[number, number]> {
  const ds = arrowSource(path, { columns: [column], decoders: { [column]: { kind: 'module', module: import.meta.url, export: 'imageBytes' } } });
  const batch = (await ds.getBatch([0])) as Record<string, { data: Uint8Array }>;
  return imageSize(batch[column]!.data, `${path} column ${show(column)} row 0`);
}

/** Internal: the module decoder that gives a row's encoded bytes as they are (for the size probe). */
export function imageBytes(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes);
}
