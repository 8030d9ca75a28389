// `sources.tarShards`: WebDataset-style tar shards as a random-access dataset. A sample is a run of
// consecutive tar entries sharing a key (`dir/000123.jpg` and `dir/000123.cls` are fields `jpg`
// and `cls` of sample `dir/000123`); each field is decoded by its extension into a tensor. The
// rule: every shard is indexed once, on the main thread, before any read (see tar-index.ts), and
// the index travels to reader workers in the source spec as shared typed arrays, so workers only
// do positioned reads of the fields' bytes and never parse tar headers. A shard that changes after
// it was indexed is refused at read time; create the source again to re-index it.
//
// Shards are named by a list of paths (used in the order given) or one pattern: WebDataset brace
// ranges (`train-{000000..000099}.tar`, zero-padded like bash; `{a,b}` alternatives) and `*` / `?`
// wildcards in the file name (matches sorted; a leading dot is matched only by a leading dot).
//
// Image fields are decoded in this thread or in child processes (`decode`; image-decoding.ts): each
// dataset copy sends the field's bytes to its own lazily started pool, closed by `close()`.

import { partAt } from '../part-index.js';
import { isUtf8 } from 'node:buffer';
import { readdirSync, statSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { basename, dirname, join, resolve, sep } from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { braceExpand } from '../../../base/brace-expand.js';
import { LoaderError, badFile, emptyDatasetError, fileAccess, indexOutOfRange, invalidOption, show } from '../../../errors.js';
import type { ReadPlan } from '../../capabilities.js';
import { RemoteFileSet, type RemoteSetSpec } from '../../../remote/file-set.js';
import { type ManifestName, manifestName, readManifest, writeManifest } from '../../../remote/manifest.js';
import { type RemoteOptions, checkRemoteOptions } from '../../../remote/remote.js';
import type { ObjectInfo } from '../../../remote/store.js';
import { Tensor } from '../../../tensor/tensor.js';
import type { Dataset, ReadContext } from '../../dataset.js';
import { type Reopenable, type SourceSpec, kSourceSpec } from '../../source-spec.js';
import { PositionedFile, fsPath } from '../file.js';
import { parseNpyBytes } from '../columns/npy.js';
import { type DecodeImageOptions, checkDecodeOptions, loadImageDecoder } from '../../../image/image-decode.js';
import { type ImageDecodeMode, type ImageDecodeShare, ImageDecoding, imageDecodeShare, largestSize, prefetchFor, readerThreadsFor } from '../../../image/processes/image-decoding.js';
import { type ShardIndex, type TarIndexMode, buildIndex, shardIndex } from './tar-index.js';
import { imageViewShare, keyedView } from '../../../image/image-view.js';
import type { View, ViewOption } from '../../../image/crop-box.js';

export type { TarIndexMode } from './tar-index.js';
export { braceExpand } from '../../../base/brace-expand.js';

/**
 * How images are decoded: output `size` [height, width] (required), `channels`, `layout`, `fit`,
 * `maxInputPixels`, `normalize`, `output` — see `decodeImage` — and a decode-time `view` per pick
 * (as `sources.imageFolder`'s: 'train', 'eval' or { randomResizedCrop, centerCrop, flip }; the source
 * is then keyed, NOTE [keyed reads] in dataset.ts).
 */
export type TarImageOptions = Omit<DecodeImageOptions, 'source' | 'view'> & { readonly view?: ViewOption };
/** An image field's options once checked: the view resolved. */
type TarImageDecode = Omit<DecodeImageOptions, 'source' | 'view'> & { readonly view?: View | undefined };

/**
 * How one field's bytes become a tensor:
 * - `'int'`: an ASCII integer (surrounding whitespace allowed) → an int32 scalar;
 * - `'float'`: an ASCII decimal number (`nan`, `inf` as Python writes them) → a float32 scalar;
 * - `'json-number'`: a JSON number → a float64 scalar;
 * - `'raw'`: the bytes → a uint8 tensor [size]; every sample's field must have the same size;
 * - `'npy'`: an .npy file → its array as a tensor (dtype and shape from its header, the same in every sample);
 * - `'image'` (uses the `image` option) or `{ image: {...} }` (its own options): a decoded image.
 */
export type TarFieldDecoder = 'int' | 'float' | 'json-number' | 'raw' | 'npy' | 'image' | { readonly image: TarImageOptions };

export interface TarShardsOptions {
  /**
   * The fields to read, in output order. Default: the fields of the first sample, in archive
   * order; every sample must then have exactly those. With `fields`, every sample must have these
   * and may have others, which are not read.
   */
  readonly fields?: readonly string[];
  /**
   * Decoders by field name. Defaults: `cls`, `label`, `idx`, `index` → 'int'; `jpg`, `jpeg`,
   * `png`, `webp` → 'image'. Any other field needs a decoder here (or to be left out of `fields`).
   */
  readonly decoders?: { readonly [field: string]: TarFieldDecoder };
  /** Image decoding for 'image' fields; required when there is one (the output size cannot be guessed). */
  readonly image?: TarImageOptions;
  /**
   * Where each shard's index is cached (see TarIndexMode). Default 'auto': the per-user cache
   * directory, `$XDG_CACHE_HOME/stoker/tar-index/` or `~/.cache/stoker/tar-index/` (0700, one file
   * per shard version, named by a hash of its absolute path, size and mtime), else a private temp
   * dir; the shards' folder is written to only with 'beside' (`.<shard name>.stoker-idx.json`,
   * hidden so shard globs skip it), because a data folder is the user's, often shared or read-only.
   * 'cache', 'temp' and 'beside' use only that place and fail when it cannot be written; 'off'
   * indexes every time and writes nothing.
   */
  readonly index?: TarIndexMode;
  /**
   * Where image fields are decoded. 'processes': in child processes (see `decodeProcesses`), the
   * way to use many cores — sharp decodes within one process contend inside libvips and stop
   * scaling at ~2.5 cores. 'threads': in the thread that reads the dataset. Default 'auto':
   * 'processes' on machines with more than one core when the largest image output is at least
   * 64 × 64, else 'threads'. The same bytes and errors either way.
   */
  readonly decode?: ImageDecodeMode;
  /**
   * With decode 'processes': most child processes per dataset copy, started on demand. Default:
   * one per core on the main thread; in a reader worker, the cores divided among the workers'
   * copies, rounded, at least 1.
   */
  readonly decodeProcesses?: number;
  /**
   * Remote shards (`s3://`, `http(s)://`): the node cache and the store — `dir`, `bytes`, `s3`
   * (endpoint, region, credentials…), `retry` (see docs/remote.md). Default: the environment's
   * (the cacheDir and cacheBytes switches of docs/env.md, AWS_*). With `index: 'beside'`, the manifest of the
   * shards' indexes is also written beside them (an S3 PUT), where every node finds it.
   */
  readonly remote?: RemoteOptions;
}

type Decoder =
  | { readonly kind: 'int' | 'float' | 'json-number' | 'npy' }
  | { readonly kind: 'raw'; readonly bytes: number }
  | { readonly kind: 'image'; readonly image: TarImageDecode };

/** What a reader worker needs to open the same dataset: structured-cloneable, its big arrays shared. */
export interface TarShardsSpec {
  readonly shards: readonly string[];
  /** Per shard, its path's bytes when the name is not valid UTF-8 (`shards` shows it with U+FFFD), else null. */
  readonly rawShards: readonly (Uint8Array | null)[];
  readonly sizes: readonly number[];
  readonly mtimes: readonly string[];
  /** Sample id where each shard starts, plus the total: length shards + 1. */
  readonly starts: Float64Array;
  readonly fields: readonly string[];
  readonly decoders: readonly Decoder[];
  /** Per sample, per field: data offset, then size (SharedArrayBuffer-backed). */
  readonly table: Float64Array;
  /** Sample keys as UTF-8, back to back, and where each ends (SharedArrayBuffer-backed). */
  readonly keyBytes: Uint8Array;
  readonly keyEnds: Float64Array;
  /** Where image fields are decoded (shared by every copy). */
  readonly imageDecode: ImageDecodeShare;
  /** Remote shards: where they are and the node cache (`shards` are their places in it); absent for local files. */
  readonly remote?: RemoteSetSpec;
  /** Remote shards: the manifest's content hash (`contentId`). */
  readonly contentId?: string;
}

const DEFAULT_DECODERS: Readonly<Record<string, 'int' | 'image' | 'npy'>> = {
  cls: 'int', label: 'int', idx: 'int', index: 'int', npy: 'npy',
  jpg: 'image', jpeg: 'image', png: 'image', webp: 'image',
};
const DECODER_NAMES = "'int', 'float', 'json-number', 'raw', 'npy', 'image' or { image: { size: [h, w] } }";
const INDEX_MODES: readonly string[] = ['auto', 'cache', 'beside', 'temp', 'off'];
/** Shards open at once per dataset instance (each reader worker has its own). */
const MAX_OPEN = 32;
/** Fields closer together than this are read with one read (the headers between them are cheap to skip). */
const GAP = 4 * 1024;

/**
 * A dataset over WebDataset tar shards: `await tarShardsSource('/data/train-{000000..000099}.tar',
 * { image: { size: [224, 224] } })`. Indexes each shard (or loads its cached index) now, on this
 * thread; samples are numbered across shards in shard order, then archive order.
 */
export async function tarShardsSource(shards: string | readonly string[], options: TarShardsOptions = {}): Promise<TarShardsSource> {
  const mode = checkTarOptions(options);
  const imageDecode = imageDecodeShare(options);
  const paths = expandShardPaths(shards);
  const indexes: ShardIndex[] = [];
  for (const { path, raw } of paths) {
    indexes.push(shardIndex(path, mode, raw ?? path));
    await yieldToLoop();
  }
  const spec = { ...buildSpec(indexes, options, imageDecode), rawShards: paths.map((p) => (p.raw === undefined ? null : Uint8Array.from(p.raw))) };
  if (spec.decoders.some((d) => d.kind === 'image')) loadImageDecoder();
  return new TarShardsSource(spec);
}

/**
 * Tar shards in object storage or on an HTTP server (`objects`: their URLs, sizes and ETags): the
 * shards' indexes come from the dataset's manifest (the node cache's, else one published beside the
 * shards, else built now by downloading each shard once and kept; `index: 'beside'` publishes it),
 * and a shard is downloaded into the node cache when the plan reaches it (remote/file-set.ts), so
 * opening reads no shard once a manifest exists.
 */
export async function remoteTarShardsSource(objects: readonly ObjectInfo[], options: TarShardsOptions = {}): Promise<TarShardsSource> {
  const mode = checkTarOptions(options);
  const cacheOptions = options.remote ?? {};
  const imageDecode = imageDecodeShare(options);
  const files = new RemoteFileSet({ objects: [...objects], options: cacheOptions });
  const name = manifestName('tar', objects);
  // 'off': index every time and keep nothing, as for local shards.
  const kept = mode === 'off' ? undefined : fromManifest(await readManifest(files.cache, name), name, files);
  const indexes = kept ?? (await indexRemote(files, name, mode));
  const spec = { ...buildSpec(indexes, options, imageDecode), rawShards: objects.map(() => null), remote: files.spec, contentId: name.id };
  if (spec.decoders.some((d) => d.kind === 'image')) loadImageDecoder();
  return new TarShardsSource(spec);
}

/** Download and index every shard (four downloads ahead of the indexing), then keep the manifest. */
async function indexRemote(files: RemoteFileSet, name: ManifestName, mode: TarIndexMode): Promise<ShardIndex[]> {
  const ahead: Promise<string>[] = [];
  const indexes: ShardIndex[] = [];
  for (let i = 0; i < files.length; i++) {
    for (let j = ahead.length; j < Math.min(files.length, i + 5); j++) {
      const p = files.ensure(j);
      p.catch(() => {}); // awaited in its turn; a failure before it (a damaged shard) must not leave it unhandled
      ahead.push(p);
    }
    let path = await ahead[i]!;
    for (let attempt = 0; ; attempt++) {
      try {
        files.cache.pin(path);
        try {
          indexes.push(buildIndex(path));
        } finally {
          files.cache.unpin(path);
        }
        break;
      } catch (error) {
        // Evicted by another process between its download and its indexing: fetch it again.
        if (attempt >= 2 || !(error instanceof LoaderError && error.code === 'ERR_FILE_ACCESS')) throw error;
        path = await files.ensure(i);
      }
    }
    await yieldToLoop();
  }
  if (mode !== 'off') await writeManifest(files.cache, name, toManifest(indexes, name, files.spec.objects), mode === 'beside');
  return indexes;
}

interface ManifestShard {
  /** The shard's name relative to the dataset's folder (the manifest's hash covers it, so a moved dataset keeps its manifest). */
  readonly name: string;
  readonly size: number;
  readonly keys: readonly string[];
  readonly fields: readonly string[];
  readonly table: readonly number[];
  readonly headers: readonly number[];
}

function toManifest(indexes: readonly ShardIndex[], name: ManifestName, objects: readonly ObjectInfo[]): { format: string; shards: ManifestShard[] } {
  return {
    format: 'stoker-tar-manifest',
    shards: indexes.map((ix, i) => ({ name: objects[i]!.url.slice(name.folder.length), size: ix.size, keys: ix.keys, fields: ix.fields, table: Array.from(ix.table), headers: Array.from(ix.headers) })),
  };
}

/** The shards' indexes from a manifest's body, or undefined when it is not one for these files (then they are indexed again). */
function fromManifest(body: unknown, name: ManifestName, files: RemoteFileSet): ShardIndex[] | undefined {
  const m = body as { format?: unknown; shards?: ManifestShard[] } | undefined;
  const objects = files.spec.objects;
  if (m?.format !== 'stoker-tar-manifest' || !Array.isArray(m.shards) || m.shards.length !== objects.length) return undefined;
  if (m.shards.some((s, i) => s?.name !== objects[i]!.url.slice(name.folder.length) || s.size !== objects[i]!.size)) return undefined;
  return m.shards.map((s, i) => ({ path: files.paths[i]!, size: s.size, mtimeNs: '', keys: s.keys, fields: s.fields, table: Float64Array.from(s.table), headers: Float64Array.from(s.headers) }));
}

function checkTarOptions(options: TarShardsOptions): TarIndexMode {
  if (options === null || typeof options !== 'object') throw invalidOption('options', 'an object', options);
  const mode = options.index ?? 'auto';
  if (!INDEX_MODES.includes(mode as string)) throw invalidOption('index', "'auto', 'cache', 'beside', 'temp' or 'off'", mode);
  if (options.fields !== undefined) checkFieldList(options.fields);
  if (options.image !== undefined) checkDecodeOptions(options.image, 'image.size');
  if (options.decoders !== undefined && (options.decoders === null || typeof options.decoders !== 'object' || Array.isArray(options.decoders))) {
    throw invalidOption('decoders', `a record of field name → ${DECODER_NAMES}`, options.decoders);
  }
  if (options.remote !== undefined) checkRemoteOptions(options.remote, 'remote');
  return mode;
}

/** Worker-side factory of `sources.tarShards` (see TarShardsSource[kSourceSpec]). */
export function openTarShards(spec: TarShardsSpec): TarShardsSource {
  return new TarShardsSource(spec, !isMainThread);
}

export class TarShardsSource implements Dataset, Reopenable {
  readonly length: number;
  /** The field names of every sample, in output order. */
  readonly fields: readonly string[];
  /** The shards' absolute paths, in sample order. */
  readonly shards: readonly string[];
  readonly #spec: TarShardsSpec;
  readonly #async: boolean;
  readonly #open = new Map<number, PositionedFile>();
  readonly #text = new TextDecoder();
  /** This copy's image decoding; absent without image fields. */
  readonly #images: ImageDecoding | undefined;
  /** True when an image field has a `view`: reads take the pick's key (NOTE [keyed reads], dataset.ts). */
  readonly keyed: boolean;
  /** Remote shards: fetched into the node cache as reads need them. */
  readonly #remote: RemoteFileSet | undefined;
  /** Remote shards being fetched and opened by this copy, by shard. */
  readonly #opening = new Map<number, Promise<PositionedFile>>();

  /** Use `tarShardsSource` (this thread) or `openTarShards` (a reader worker). */
  constructor(spec: TarShardsSpec, inWorker = false) {
    this.#spec = spec;
    this.length = spec.starts[spec.starts.length - 1]!;
    this.fields = spec.fields;
    this.shards = spec.shards;
    const sizes = spec.decoders.flatMap((d) => (d.kind === 'image' ? [d.image.size] : []));
    this.#async = sizes.length > 0;
    this.#images = this.#async ? new ImageDecoding(spec.imageDecode, largestSize(sizes), inWorker) : undefined;
    this.keyed = spec.decoders.some((d) => d.kind === 'image' && d.image.view !== undefined);
    this.#remote = spec.remote === undefined ? undefined : new RemoteFileSet(spec.remote);
  }

  /** Remote shards: the manifest's content hash, which a resume state names (a changed dataset is refused). */
  get contentId(): string | undefined {
    return this.#spec.contentId;
  }

  /** Remote shards: download each shard ahead of the reads of this epoch's plan (`PlannedReads`). */
  followPlan(plan: ReadPlan): void {
    this.#remote?.follow(plan, (id) => this.#shardIndex(id));
  }

  /** Where this copy decodes image fields ('auto' resolved); undefined without image fields. */
  get decode(): 'threads' | 'processes' | undefined {
    return this.#images?.mode;
  }

  /** Process ids of this copy's decode processes alive now (none in 'threads' mode or before the first image). */
  get decodePids(): number[] {
    return this.#images?.pids ?? [];
  }

  /** Reader threads this source works best with when the loader's `workers` is not set (NOTE [reader threads with decode processes]). */
  get readerWorkers(): number | undefined {
    return readerThreadsFor(this.decode);
  }

  /** Batches in flight this source works best with on the CPU when the loader's `prefetch` is not set (NOTE [a window for decode processes]). */
  get prefetch(): number | undefined {
    return prefetchFor(this.decode);
  }

  [kSourceSpec](): SourceSpec {
    return { module: import.meta.url, export: 'openTarShards', options: this.#spec };
  }

  /** The WebDataset key of sample `index` (`dir/000123`). */
  key(index: number): string {
    this.#check(index);
    const { keyBytes, keyEnds } = this.#spec;
    return this.#text.decode(keyBytes.subarray(index === 0 ? 0 : keyEnds[index - 1], keyEnds[index]));
  }

  /** Each shard's first sample id (the block shuffle's blocks: HasParts, capabilities.ts). */
  partStarts(): Float64Array {
    return this.#spec.starts.subarray(0, this.#spec.starts.length - 1);
  }

  /** The shard that holds sample `index`. */
  shardOf(index: number): string {
    this.#check(index);
    return this.#spec.shards[this.#shardIndex(index)]!;
  }

  get(index: number, context?: ReadContext): Record<string, Tensor> | Promise<Record<string, Tensor>> {
    this.#check(index);
    const s = this.#shardIndex(index);
    const open = this.#open.get(s);
    if (this.#remote !== undefined && open === undefined) return this.#openRemote(s, context?.signal).then((file) => this.#read(index, file, context));
    return this.#read(index, open ?? this.#file(s), context);
  }

  #read(index: number, file: PositionedFile, context: ReadContext | undefined): Record<string, Tensor> | Promise<Record<string, Tensor>> {
    const spec = this.#spec;
    const key = this.key(index);
    const nf = spec.fields.length;
    const base = index * nf * 2;
    let lo = Infinity;
    let hi = 0;
    let total = 0;
    for (let f = 0; f < nf; f++) {
      const at = spec.table[base + 2 * f]!;
      const len = spec.table[base + 2 * f + 1]!;
      lo = Math.min(lo, at);
      hi = Math.max(hi, at + len);
      total += len;
    }
    const bytes: Uint8Array[] = [];
    if (hi - lo <= total + GAP * nf) {
      const span = file.read(lo, hi - lo, `sample ${show(key)}`);
      for (let f = 0; f < nf; f++) {
        const at = spec.table[base + 2 * f]! - lo;
        bytes.push(span.subarray(at, at + spec.table[base + 2 * f + 1]!));
      }
    } else {
      for (let f = 0; f < nf; f++) bytes.push(file.read(spec.table[base + 2 * f]!, spec.table[base + 2 * f + 1]!, `field ${show(spec.fields[f])} of sample ${show(key)}`));
    }
    const where = (f: number) => `sample ${show(key)} field ${show(spec.fields[f])}`;
    const offset = (f: number) => spec.table[base + 2 * f]!;
    if (!this.#async) {
      const out: Record<string, Tensor> = {};
      for (let f = 0; f < nf; f++) out[spec.fields[f]!] = decodeScalar(spec.decoders[f] as Exclude<Decoder, { kind: 'image' }>, bytes[f]!, file.path, offset(f), spec.fields[f]!, where(f));
      return out;
    }
    return Promise.all(
      spec.decoders.map((d, f) =>
        d.kind === 'image'
          ? this.#images!.decode(bytes[f]!, { ...d.image, view: keyedView(d.image.view, index, context?.key), source: `${file.path}: ${where(f)} (data at byte ${offset(f)})` }, context?.signal)
          : decodeScalar(d, bytes[f]!, file.path, offset(f), spec.fields[f]!, where(f)),
      ),
    ).then((tensors) => Object.fromEntries(spec.fields.map((name, f) => [name, tensors[f]!])));
  }

  /**
   * Close the shards this instance has open and stop its decode processes, waiting until they are
   * gone (reads reopen the shards and start new processes). Reader workers call it on their copies
   * when the loader closes; call it on a source you made once you are done with it.
   */
  close(): Promise<void> {
    this.#remote?.stop();
    for (const file of this.#open.values()) file.close();
    this.#open.clear();
    return this.#images?.close() ?? Promise.resolve();
  }

  #check(index: number): void {
    if (!Number.isInteger(index) || index < 0 || index >= this.length) {
      throw indexOutOfRange('sources.tarShards', 'index', index, this.length);
    }
  }

  #shardIndex(index: number): number {
    const starts = this.#spec.starts;
    return partAt(starts, index, starts.length - 2);
  }

  /**
   * A remote shard, fetched into the node cache when it is not there (once per node) and opened. An
   * open file stays readable when the cache evicts it (its bytes go when it is closed); one that went
   * between its fetch and its open is fetched again.
   */
  #openRemote(s: number, signal: AbortSignal | undefined): Promise<PositionedFile> {
    let p = this.#opening.get(s);
    if (p === undefined) {
      p = (async () => {
        for (let attempt = 0; ; attempt++) {
          const path = await this.#remote!.ensure(s, signal);
          try {
            return this.#file(s, path);
          } catch (error) {
            if (attempt >= 2 || !(error instanceof LoaderError && error.code === 'ERR_FILE_ACCESS')) throw error;
          }
        }
      })().finally(() => this.#opening.delete(s));
      this.#opening.set(s, p);
    }
    return p;
  }

  /** An open shard, checked against the size and mtime it was indexed at; at most MAX_OPEN stay open. */
  #file(s: number, remotePath?: string): PositionedFile {
    const hit = this.#open.get(s);
    if (hit !== undefined) {
      this.#open.delete(s);
      this.#open.set(s, hit);
      return hit;
    }
    if (remotePath !== undefined) return this.#keep(s, PositionedFile.openSized(remotePath, this.#spec.sizes[s]!));
    const path = this.#spec.shards[s]!;
    const openAs = this.#spec.rawShards[s] ?? path;
    const file = new PositionedFile(path, openAs);
    let mtime: string;
    try {
      mtime = statSync(fsPath(openAs), { bigint: true }).mtimeNs.toString();
    } catch (cause) {
      file.close();
      throw fileAccess(path, 'read the shard', cause);
    }
    if (file.size !== this.#spec.sizes[s] || mtime !== this.#spec.mtimes[s]) {
      file.close();
      throw badFile(path, 0, `the shard changed since it was indexed (${this.#spec.sizes[s]} bytes then, ${file.size} now)`, 'Create the source again: tarShardsSource re-indexes changed shards');
    }
    return this.#keep(s, file);
  }

  #keep(s: number, file: PositionedFile): PositionedFile {
    if (this.#open.size >= MAX_OPEN) {
      const [oldest, f] = this.#open.entries().next().value as [number, PositionedFile];
      f.close();
      this.#open.delete(oldest);
    }
    this.#open.set(s, file);
    return file;
  }
}

// --- decoding ----------------------------------------------------------------------------------

const INT = /^[+-]?\d{1,10}$/;
const FLOAT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$|^[+-]?(?:inf|infinity|nan)$/i;
/** Longest text a number field may hold (refused before it is turned into a string). */
const MAX_NUMBER_TEXT = 1024;

function decodeScalar(d: Exclude<Decoder, { kind: 'image' }>, bytes: Uint8Array, path: string, offset: number, field: string, where: string): Tensor {
  if (d.kind === 'raw') return new Tensor(bytes, [bytes.length], 'uint8');
  if (d.kind === 'npy') return parseNpyBytes(bytes, `${path}: ${where} (data at byte ${offset})`);
  const fix = `Fix the shard, or give the field another decoder (decoders: { ${field}: 'raw' })`;
  if (bytes.length > MAX_NUMBER_TEXT) throw badFile(path, offset, `${where} holds ${bytes.length} bytes, too many for a ${d.kind} number`, fix);
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1').trim();
  if (d.kind === 'int') {
    const n = INT.test(text) ? Number(text) : Number.NaN;
    if (!(n >= -(2 ** 31) && n < 2 ** 31)) throw badFile(path, offset, `${where} is ${show(text.slice(0, 40))}, not an int32 integer in ASCII`, fix);
    return new Tensor(Int32Array.of(n), [], 'int32');
  }
  if (d.kind === 'float') {
    if (!FLOAT.test(text)) throw badFile(path, offset, `${where} is ${show(text.slice(0, 40))}, not a decimal number in ASCII`, fix);
    const lower = text.toLowerCase().replace(/^\+/, '');
    const v = lower.endsWith('nan') ? Number.NaN : lower.endsWith('inf') || lower.endsWith('infinity') ? (lower.startsWith('-') ? -Infinity : Infinity) : Number(text);
    return new Tensor(Float32Array.of(v), [], 'float32');
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    v = undefined;
  }
  if (typeof v !== 'number') throw badFile(path, offset, `${where} is ${show(text.slice(0, 40))}, not a JSON number`, fix);
  return new Tensor(Float64Array.of(v), [], 'float64');
}

// --- fields and decoders -----------------------------------------------------------------------

function checkFieldList(fields: unknown): void {
  if (!Array.isArray(fields) || fields.length === 0 || !fields.every((f) => typeof f === 'string' && f.length > 0) || new Set(fields).size !== fields.length) {
    throw invalidOption('fields', 'a non-empty array of distinct field names (extensions such as "jpg")', fields);
  }
}

function buildSpec(indexes: readonly ShardIndex[], options: TarShardsOptions, imageDecode: ImageDecodeShare): Omit<TarShardsSpec, 'rawShards'> {
  const n = indexes.reduce((a, ix) => a + ix.keys.length, 0);
  if (n === 0) {
    throw emptyDatasetError(`sources.tarShards: the shards hold no samples (${indexes.map((ix) => ix.path).join(', ')}). Check the shard paths`);
  }
  const first = indexes.find((ix) => ix.keys.length > 0)!;
  const fieldsOf = (ix: ShardIndex, s: number) => ix.fields.filter((_, f) => ix.table[(s * ix.fields.length + f) * 2] !== -1);
  const wanted = options.fields ?? fieldsOf(first, 0);
  if (options.fields !== undefined) {
    const everywhere = new Set(indexes.flatMap((ix) => ix.fields));
    const unknown = wanted.filter((f) => !everywhere.has(f));
    if (unknown.length > 0) throw invalidOption('fields', `fields the shards have (${[...everywhere].map((f) => show(f)).join(', ')})`, options.fields, `No shard has ${unknown.map((f) => show(f)).join(', ')}`);
  }
  const decoders = wanted.map((field) => resolveDecoder(field, options));
  const nf = wanted.length;
  const table = new Float64Array(new SharedArrayBuffer(n * nf * 2 * 8));
  const starts = new Float64Array(indexes.length + 1);
  let id = 0;
  indexes.forEach((ix, k) => {
    starts[k] = id;
    const cols = wanted.map((f) => ix.fields.indexOf(f));
    const inf = ix.fields.length;
    for (let s = 0; s < ix.keys.length; s++, id++) {
      if (options.fields === undefined && ix.fields.filter((_, f) => ix.table[(s * inf + f) * 2] !== -1).length !== nf) {
        throw badFile(
          ix.path,
          ix.headers[s]!,
          `sample ${show(ix.keys[s])} has fields ${show(fieldsOf(ix, s))} but sample ${show(first.keys[0])} of ${first.path} has ${show(wanted)}`,
          `Every sample needs the same fields: pass fields: [...] to read only those every sample has`,
        );
      }
      cols.forEach((c, f) => {
        const at = c < 0 ? -1 : ix.table[(s * inf + c) * 2]!;
        if (at === -1) {
          throw badFile(ix.path, ix.headers[s]!, `sample ${show(ix.keys[s])} has no field ${show(wanted[f])} (it has ${show(fieldsOf(ix, s))})`, 'Every sample needs every field read: choose the fields with fields: [...]');
        }
        table[(id * nf + f) * 2] = at;
        table[(id * nf + f) * 2 + 1] = ix.table[(s * inf + c) * 2 + 1]!;
      });
    }
  });
  starts[indexes.length] = n;
  // A raw field is a fixed-size tensor: every sample's bytes must have the same length.
  decoders.forEach((d, f) => {
    if (d.kind !== 'raw') return;
    const size = table[f * 2 + 1]!;
    for (let i = 1; i < n; i++) {
      if (table[(i * nf + f) * 2 + 1] !== size) {
        const k = shardOfId(starts, i);
        const ix = indexes[k]!;
        const s = i - starts[k]!;
        throw badFile(
          ix.path,
          table[(i * nf + f) * 2]!,
          `field ${show(wanted[f])} of sample ${show(ix.keys[s])} holds ${table[(i * nf + f) * 2 + 1]} bytes but sample ${show(first.keys[0])} holds ${size}; a 'raw' field must have the same size in every sample`,
          'Give the field a decoder that yields a fixed shape, or leave it out with fields: [...]',
        );
      }
    }
    (d as { bytes: number }).bytes = size;
  });
  const { keyBytes, keyEnds } = packKeys(indexes.flatMap((ix) => ix.keys));
  return {
    shards: indexes.map((ix) => ix.path),
    sizes: indexes.map((ix) => ix.size),
    mtimes: indexes.map((ix) => ix.mtimeNs),
    starts,
    fields: [...wanted],
    decoders,
    table,
    keyBytes,
    keyEnds,
    imageDecode,
  };
}

function shardOfId(starts: Float64Array, id: number): number {
  let k = 0;
  while (starts[k + 1]! <= id) k++;
  return k;
}

function resolveDecoder(field: string, options: TarShardsOptions): Decoder {
  const given = options.decoders && Object.hasOwn(options.decoders, field) ? options.decoders[field] : undefined;
  const d = given ?? DEFAULT_DECODERS[field];
  const knob = `decoders.${field}`;
  if (d === undefined) {
    throw invalidOption(
      knob,
      DECODER_NAMES,
      undefined,
      `Field ${show(field)} has no default decoder (defaults: ${Object.keys(DEFAULT_DECODERS).join(', ')}): pass decoders: { ${field}: ... }, or leave the field out with fields: [...]`,
    );
  }
  if (d === 'int' || d === 'float' || d === 'json-number' || d === 'npy') return { kind: d };
  if (d === 'raw') return { kind: 'raw', bytes: -1 };
  if (d === 'image') {
    if (options.image === undefined) {
      throw invalidOption('image', 'the image decoding options, e.g. { size: [224, 224] }', undefined, `Field ${show(field)} is decoded as an image and the output size cannot be guessed`);
    }
    return { kind: 'image', image: checkTarImage(options.image, 'image') };
  }
  if (d !== null && typeof d === 'object' && (d as { image?: unknown }).image !== null && typeof (d as { image?: unknown }).image === 'object') {
    return { kind: 'image', image: checkTarImage({ ...options.image, ...(d as { image: TarImageOptions }).image }, `${knob}.image`) };
  }
  throw invalidOption(knob, DECODER_NAMES, d);
}

function checkTarImage(image: TarImageOptions, knob: string): TarImageDecode {
  const views = imageViewShare(image, `${knob}.`);
  const { view: _option, ...rest } = image;
  checkDecodeOptions(rest, `${knob}.size`);
  return views.view === undefined ? rest : { ...rest, view: views.view };
}

function packKeys(keys: readonly string[]): { keyBytes: Uint8Array; keyEnds: Float64Array } {
  const keyEnds = new Float64Array(new SharedArrayBuffer(keys.length * 8));
  let total = 0;
  keys.forEach((k, i) => {
    total += Buffer.byteLength(k);
    keyEnds[i] = total;
  });
  const keyBytes = new Uint8Array(new SharedArrayBuffer(total));
  const encoder = new TextEncoder();
  keys.forEach((k, i) => encoder.encodeInto(k, keyBytes.subarray(i === 0 ? 0 : keyEnds[i - 1]!, keyEnds[i])));
  return { keyBytes, keyEnds };
}

// --- shard lists -------------------------------------------------------------------------------

/**
 * The absolute shard paths named by `shards`: a list (in the order given) or one pattern with
 * brace ranges / alternatives and `*` `?` wildcards in the file name (matches sorted).
 */
export function expandShards(shards: string | readonly string[]): string[] {
  return expandShardPaths(shards).map((p) => p.path);
}

/**
 * Internal: `expandShards` with, for a wildcard match whose name is not valid UTF-8, the path's
 * bytes (`raw`), which open it; `path` shows it with U+FFFD. A string listing would give a
 * U+FFFD name that does not exist.
 */
export function expandShardPaths(shards: string | readonly string[]): { path: string; raw?: Buffer }[] {
  let paths: { path: string; raw?: Buffer }[];
  if (typeof shards === 'string') {
    if (shards.length === 0) throw invalidOption('shards', 'a shard path, a pattern or a list of paths', shards);
    paths = braceExpand(shards, { count: 0 }).flatMap(globFile);
  } else if (Array.isArray(shards)) {
    if (shards.length === 0 || !shards.every((p) => typeof p === 'string' && p.length > 0)) {
      throw invalidOption('shards', 'a non-empty list of shard paths', shards);
    }
    paths = shards.map((p) => ({ path: resolve(p) }));
  } else {
    throw invalidOption('shards', 'a shard path, a pattern or a list of paths', shards);
  }
  const seen = new Set<string>();
  for (const { path, raw } of paths) {
    const key = raw === undefined ? path : `bytes:${raw.toString('hex')}`;
    if (seen.has(key)) throw invalidOption('shards', 'distinct shards', path, 'The same shard is named twice: its samples would be read twice per epoch');
    seen.add(key);
  }
  return paths;
}

/** A path whose file name may hold `*` and `?`: the matching files of its directory, sorted. */
function globFile(pattern: string): { path: string; raw?: Buffer }[] {
  const abs = resolve(pattern);
  const dir = dirname(abs);
  const name = basename(abs);
  if (/[*?]/.test(dir)) throw invalidOption('shards', 'a pattern with wildcards in the file name only', pattern, 'List the shards, or put them in one directory');
  if (!/[*?]/.test(name)) return [{ path: abs }];
  const re = new RegExp(`^${name.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`, 's');
  let entries: Buffer[];
  try {
    entries = readdirSync(dir, { encoding: 'buffer' });
  } catch (cause) {
    throw fileAccess(dir, `list it for the shard pattern ${show(pattern)}`, cause);
  }
  // Names are matched as shown (a byte that is not UTF-8 is one U+FFFD: `*` and `?` match it), sorted by their bytes.
  const hits = entries.filter((e) => {
    const shown = e.toString('utf8');
    return re.test(shown) && (name.startsWith('.') || !shown.startsWith('.'));
  }).sort(Buffer.compare);
  if (hits.length === 0) throw invalidOption('shards', 'a pattern that matches at least one shard', pattern, `No file in ${dir} matches ${show(name)}`);
  return hits.map((e) => {
    const path = join(dir, e.toString('utf8'));
    return isUtf8(e) ? { path } : { path, raw: Buffer.concat([Buffer.from(dir), Buffer.from(sep), e]) };
  });
}

