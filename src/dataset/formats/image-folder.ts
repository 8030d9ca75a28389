// `sources.imageFolder`: a folder of images laid out as torchvision's ImageFolder, `dir/<class>/…/
// <file>`, decoded with sharp to a fixed size. Sample i is `{ image: uint8 [C, H, W] (or [H, W, C]),
// label: int32 scalar }`. The rule: the folder is listed once, when the source is made; reader
// workers get that listing in the spec and never list again, so every thread sees the same files in
// the same order even if the folder changes while the loader runs.
//
// The listing follows torchvision: class folders sorted by name (code point order) give label
// indices 0, 1, …; inside a class, files are taken from the whole subtree (sorted paths, symbolic
// links followed, cycles skipped) and kept when their extension is one of `extensions`
// (case-insensitive). Unlike torchvision, names that start with "." (`.ipynb_checkpoints`,
// `.DS_Store`) are skipped, so editor and OS leftovers never become a class. Files directly in
// `dir` are ignored (they belong to no class). A class folder with no image is refused, as
// torchvision does, because its label index would silently hold no samples.
//
// Decoding (`decode`): 'processes' sends each file's path to a pool of child processes that read and
// decode it (decode-pool.ts: libvips decodes contend inside one process, separate processes scale
// with cores); 'threads' reads the file here and decodes it in this thread's sharp. Both give the
// same bytes and the same errors. Each dataset copy has its own pool: it starts its children on
// demand and kills them at `close()` (or when the copy is garbage-collected, or at process exit).
// With the loader's default reader workers, each worker's copy gets its share of the cores
// (NOTE [decode processes per copy]).
//
// In 'threads' mode files are read asynchronously, at most READS_IN_FLIGHT at a time per dataset
// copy: a slow store (a network file system) is served with many requests in flight, and a loader
// that asks for the whole folder at once (resident mode) never runs out of file descriptors. In
// 'processes' mode each child reads one file at a time.
//
// NOTE [decode processes per copy] A copy on the main thread starts up to one child per core; a
// copy in a reader worker up to round(cores / reader-worker copies), counted in shared memory when
// the copy starts its pool (all workers have opened their copies by then). So the loader's default,
// workers: 'auto' (cores − 1), gives one child per worker on most machines, and workers: 0 gives
// one per core on the main thread. Reader workers are the better default: the parent's share of the
// work (dispatch, pixels in from the socket, copy into staging) is spread over threads instead of
// piling onto the main thread. Measured on 2 cores (shared, loaded), 224² JPEGs, CPU time per
// image in the parent: workers 1 → 40 µs main thread + 180–270 µs reader thread; workers 0 → 270–
// 330 µs main thread + 200–350 µs GC helpers; children ~2.9 ms, the same as the one-core sharp
// loop. The main-thread copy of a loader with reader workers decodes only sample 0 (the probe):
// one idle child, gone with `close()`. A reader worker that dies never decrements the count, so its
// replacement's share is one copy smaller.
//
// NOTE [decode: 'auto'] 'processes' on machines with more than AUTO_PROCESSES_ABOVE core whose
// images decode to at least AUTO_PROCESSES_MIN_PIXELS, else 'threads'. In one process, sharp stops
// scaling at 2.3–2.6× one decode however many threads decode (measured on 16 and 32 cores), while
// processes scale with cores; on 2 quiet cores (bench sources, 2048 JPEGs → 224², 3 rounds) the
// image folder reached 1.92× the one-core loop with processes and 1.51× with threads. A reply from
// a child costs the parent ~100 µs, more than decoding a small image: for the demo's 32 × 32 PNGs
// threads are faster (epoch 1: 1 550 vs 1 306 images/s), hence the size floor.

import { readdirSync, realpathSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { LoaderError, fileAccess, invalidOption, show } from '../../errors.js';
import { Tensor } from '../../tensor/tensor.js';
import type { Dataset, ReadContext } from '../dataset.js';
import { type Reopenable, type SourceSpec, kSourceSpec } from '../source-spec.js';
import { DecodePool } from './decode-pool.js';
import { type ImageChannels, type ImageFit, type ImageLayout, checkDecodeOptions, decodeImage, loadImageDecoder } from './image-decode.js';

/** Reads (open file descriptors) one dataset copy keeps in flight at most. */
export const READS_IN_FLIGHT = 64;

/** The extensions looked for when none are given. */
export const DEFAULT_IMAGE_EXTENSIONS: readonly string[] = Object.freeze(['.jpg', '.jpeg', '.png', '.webp']);

export interface ImageFolderOptions {
  /** Output size: a side (square output) or [height, width]. Required: a batch needs one shape. */
  readonly size: number | readonly [number, number];
  /** 1, 3 (default) or 4 channels; inputs are converted (see `decodeImage`). */
  readonly channels?: ImageChannels;
  /** 'chw' (default, what `transforms.image` takes) or 'hwc'. */
  readonly layout?: ImageLayout;
  /** 'center-crop' (default: keep the aspect ratio, crop the centre — torchvision's Resize + CenterCrop) or 'resize' (stretch). */
  readonly fit?: ImageFit;
  /** File extensions to read, case-insensitive. Default .jpg .jpeg .png .webp. */
  readonly extensions?: readonly string[];
  /** Refuse images with more input pixels than this (decompression bombs). Default 0x3FFF² ≈ 268 M. */
  readonly maxInputPixels?: number;
  /**
   * Where images are decoded. 'processes': in child processes (see `decodeProcesses`), the way to
   * use many cores — sharp decodes within one process contend inside libvips and stop scaling at
   * ~2.5 cores. 'threads': in the thread that reads the dataset (the main thread, or each reader
   * worker). Default 'auto': 'processes' when the machine has more than 2 cores, else 'threads'
   * (NOTE [decode: 'auto']). The same bytes and errors either way.
   */
  readonly decode?: ImageDecodeMode;
  /**
   * With decode 'processes': most child processes per dataset copy, started on demand. Default:
   * one per core for a copy on the main thread (a loader with workers: 0); in a reader worker, the
   * cores divided among the workers' copies, rounded, at least 1 (NOTE [decode processes per copy]).
   */
  readonly decodeProcesses?: number;
}

/** Where an image folder decodes its images; see `ImageFolderOptions.decode`. */
export type ImageDecodeMode = 'threads' | 'processes' | 'auto';

/** 'auto' decodes in processes on machines with more cores than this (NOTE [decode: 'auto']). */
export const AUTO_PROCESSES_ABOVE = 1;
/** …and when images are decoded to at least this many pixels (64 × 64); see NOTE [decode: 'auto']. */
export const AUTO_PROCESSES_MIN_PIXELS = 64 * 64;

/** What reader workers receive: the listing made on the main thread, and the decode settings. */
export interface ImageFolderSpecOptions {
  readonly dir: string;
  readonly classes: readonly string[];
  /** Paths relative to `dir`, in sample order. */
  readonly files: readonly string[];
  /** Label of each file (index into `classes`). */
  readonly labels: Int32Array;
  readonly size: readonly [number, number];
  readonly channels: ImageChannels;
  readonly layout: ImageLayout;
  readonly fit: ImageFit;
  readonly maxInputPixels: number | undefined;
  readonly decode: ImageDecodeMode;
  readonly decodeProcesses: number | undefined;
  /** Live copies opened by reader workers (shared memory, one int32): how 'processes' divides the cores among them. */
  readonly workerCopies: Int32Array;
}

/** One sample of an image folder. */
export type ImageFolderSample = {
  readonly image: Tensor<'uint8'>;
  readonly label: Tensor<'int32'>;
};

export class ImageFolder implements Dataset, Reopenable {
  readonly length: number;
  /** The folder, absolute. */
  readonly dir: string;
  /** Class names, sorted; a sample's label is its class's index here. */
  readonly classes: readonly string[];
  /** Image paths relative to `dir`, in sample order (class by class, sorted within a class). */
  readonly files: readonly string[];
  /** Label of each sample. */
  readonly labels: Int32Array;
  /** Where this copy decodes: 'auto' resolved. */
  readonly decode: 'threads' | 'processes';
  readonly #options: ImageFolderSpecOptions;
  readonly #reads = new Gate(READS_IN_FLIGHT);
  readonly #inWorker: boolean;
  #pool: DecodePool | undefined;
  #closed = false;

  /** Internal: made by `imageFolderSource` (main thread) or `openImageFolder` (workers). */
  constructor(options: ImageFolderSpecOptions, inWorker = false) {
    this.#options = options;
    this.dir = options.dir;
    this.classes = Object.freeze([...options.classes]);
    this.files = Object.freeze([...options.files]);
    this.labels = options.labels;
    this.length = options.files.length;
    this.decode = resolveDecodeMode(options.decode, options.size);
    this.#inWorker = inWorker;
    if (inWorker) Atomics.add(options.workerCopies, 0, 1);
  }

  /** Process ids of this copy's decode processes alive now (none in 'threads' mode or before the first read). */
  get decodePids(): number[] {
    return this.#pool?.pids ?? [];
  }

  /** Files per class, in class order. */
  get counts(): number[] {
    const counts = new Array<number>(this.classes.length).fill(0);
    for (const l of this.labels) counts[l]!++;
    return counts;
  }

  [kSourceSpec](): SourceSpec {
    return { module: import.meta.url, export: 'openImageFolder', options: this.#options };
  }

  /** Read and decode sample `index`. A file that cannot be read or decoded rejects with its path. */
  async get(index: number, context?: ReadContext): Promise<ImageFolderSample> {
    if (!Number.isInteger(index) || index < 0 || index >= this.length) {
      throw new LoaderError('ERR_INVALID_DATASET', `sources.imageFolder(${show(this.dir)}): index ${show(index)} is out of range [0, ${this.length})`);
    }
    const o = this.#options;
    const path = join(o.dir, o.files[index]!);
    const label = new Tensor(Int32Array.of(o.labels[index]!), [], 'int32');
    if (this.decode === 'processes') {
      const image = await this.#decodePool().decode({ path }, { size: o.size, channels: o.channels, layout: o.layout, fit: o.fit, maxInputPixels: o.maxInputPixels, source: path }, context?.signal);
      return { image, label };
    }
    let bytes: Uint8Array;
    await this.#reads.enter();
    try {
      context?.signal.throwIfAborted();
      bytes = await readFile(path, context === undefined ? undefined : { signal: context.signal });
    } catch (cause) {
      if ((cause as Error)?.name === 'AbortError' || context?.signal.aborted) throw cause;
      throw fileAccess(path, 'read the image', cause);
    } finally {
      this.#reads.leave();
    }
    const image = await decodeImage(bytes, { size: o.size, channels: o.channels, layout: o.layout, fit: o.fit, maxInputPixels: o.maxInputPixels, source: path });
    return { image, label };
  }

  /**
   * Stop this copy's decode processes (waiting until they are gone); reads still waiting for them
   * fail. A later read starts new ones. Reader workers call it on their copies when the loader
   * closes; call it on a dataset you made once you are done with it (an unclosed one's processes
   * never hold the process open, and end with it).
   */
  async close(): Promise<void> {
    if (this.#inWorker && !this.#closed) Atomics.sub(this.#options.workerCopies, 0, 1);
    this.#closed = true;
    const pool = this.#pool;
    this.#pool = undefined;
    if (pool !== undefined) {
      poolsOfCollected.unregister(this);
      await pool.close();
    }
  }

  /** See NOTE [decode processes per copy]. */
  #decodePool(): DecodePool {
    if (this.#pool === undefined) {
      const copies = Math.max(1, Atomics.load(this.#options.workerCopies, 0));
      const size = this.#options.decodeProcesses ?? (this.#inWorker ? Math.max(1, Math.round(availableParallelism() / copies)) : availableParallelism());
      this.#pool = new DecodePool({ size });
      poolsOfCollected.register(this, this.#pool, this);
    }
    return this.#pool;
  }
}

/** A copy dropped without close(): its decode processes go with it. */
const poolsOfCollected = new FinalizationRegistry<DecodePool>((pool) => void pool.close());

function resolveDecodeMode(mode: ImageDecodeMode, size: readonly [number, number]): 'threads' | 'processes' {
  if (mode === 'auto') return availableParallelism() > AUTO_PROCESSES_ABOVE && size[0] * size[1] >= AUTO_PROCESSES_MIN_PIXELS ? 'processes' : 'threads';
  return mode;
}

function checkDecodeMode(mode: unknown): ImageDecodeMode {
  if (mode === undefined) return 'auto';
  if (mode !== 'threads' && mode !== 'processes' && mode !== 'auto') throw invalidOption('decode', "'threads', 'processes' or 'auto'", mode);
  return mode;
}

function checkDecodeProcesses(n: unknown): number | undefined {
  if (n === undefined) return undefined;
  if (!Number.isSafeInteger(n) || (n as number) < 1) throw invalidOption('decodeProcesses', 'an integer ≥ 1', n, 'Pass e.g. decodeProcesses: 4, or leave it out for one per core');
  return n as number;
}

/** A counting semaphore with a FIFO queue that stays O(1) per call however many wait. */
class Gate {
  #free: number;
  #queue: (() => void)[] = [];
  #head = 0;

  constructor(limit: number) {
    this.#free = limit;
  }

  enter(): Promise<void> | undefined {
    if (this.#free > 0) {
      this.#free--;
      return undefined;
    }
    return new Promise<void>((resolve) => this.#queue.push(resolve));
  }

  leave(): void {
    if (this.#head < this.#queue.length) {
      const next = this.#queue[this.#head]!;
      this.#queue[this.#head++] = undefined as never;
      if (this.#head === this.#queue.length) {
        this.#queue = [];
        this.#head = 0;
      }
      next();
    } else this.#free++;
  }
}

/**
 * An image folder as a dataset: `dir/<class>/<file>`, classes sorted by name as labels, each image
 * decoded with sharp to `size` (see the file header for the listing rules). Lists the folder now,
 * once; reader workers reuse the listing.
 */
export function imageFolderSource(dir: string, options: ImageFolderOptions): ImageFolder {
  if (typeof dir !== 'string' || dir.length === 0) throw invalidOption('sources.imageFolder(dir)', 'a folder path', dir);
  if (options === null || typeof options !== 'object') throw invalidOption('sources.imageFolder(dir, options)', 'an object with at least size', options, 'Pass e.g. { size: 224 }');
  const size: readonly [number, number] = typeof options.size === 'number' ? [options.size, options.size] : options.size;
  checkDecodeOptions({ ...options, size }, 'size');
  const extensions = checkExtensions(options.extensions);
  const decode = checkDecodeMode(options.decode);
  const decodeProcesses = checkDecodeProcesses(options.decodeProcesses);
  const root = resolve(dir);
  const { classes, files, labels } = listImageFolder(root, extensions);
  // sharp must be loaded by the main thread before reader workers use it (see image-decode.ts).
  loadImageDecoder();
  return new ImageFolder({
    dir: root, classes, files, labels, size: [size[0], size[1]],
    channels: options.channels ?? 3, layout: options.layout ?? 'chw', fit: options.fit ?? 'center-crop', maxInputPixels: options.maxInputPixels,
    decode, decodeProcesses, workerCopies: new Int32Array(new SharedArrayBuffer(4)),
  });
}

/** Worker-side factory of `sources.imageFolder` (see ImageFolder[kSourceSpec]): no listing, no checks beyond the constructor. */
export function openImageFolder(options: ImageFolderSpecOptions): ImageFolder {
  return new ImageFolder(options, !isMainThread);
}

function checkExtensions(extensions: readonly string[] | undefined): Set<string> {
  if (extensions === undefined) return new Set(DEFAULT_IMAGE_EXTENSIONS);
  if (!Array.isArray(extensions) || extensions.length === 0 || !extensions.every((e) => typeof e === 'string' && /^\.?[^./\\]+$/.test(e))) {
    throw invalidOption('extensions', 'a non-empty list of file extensions', extensions, "Pass e.g. extensions: ['.jpg', '.png']");
  }
  return new Set(extensions.map((e) => (e.startsWith('.') ? e : `.${e}`).toLowerCase()));
}

/** Compare by Unicode code point, as Python's `sorted` does (JS's default compares UTF-16 units). */
export function compareCodePoints(a: string, b: string): number {
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done || y.done) return x.done && y.done ? 0 : x.done ? -1 : 1;
    const d = x.value.codePointAt(0)! - y.value.codePointAt(0)!;
    if (d !== 0) return d;
  }
}

function fastCompare(a: string, b: string): number {
  // Equal to compareCodePoints unless a surrogate pair is involved.
  if (/[\ud800-\udfff]/.test(a) || /[\ud800-\udfff]/.test(b)) return compareCodePoints(a, b);
  return a < b ? -1 : a > b ? 1 : 0;
}

function listImageFolder(root: string, extensions: Set<string>): { classes: string[]; files: string[]; labels: Int32Array } {
  let top;
  try {
    if (!statSync(root).isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
    top = readdirSync(root, { withFileTypes: true });
  } catch (cause) {
    throw fileAccess(root, 'list the image folder', cause);
  }
  const looked = [...extensions].join(' ');
  const classes = top
    .filter((e) => !e.name.startsWith('.') && (e.isDirectory() || (e.isSymbolicLink() && isDirectory(join(root, e.name)))))
    .map((e) => e.name)
    .sort(fastCompare);
  if (classes.length === 0) {
    throw new LoaderError(
      'ERR_INVALID_DATASET',
      `sources.imageFolder(${show(root)}): no class folders in it. An image folder holds one sub-folder per class (dir/<class>/<image>); images directly in dir belong to no class and are ignored`,
    );
  }
  const files: string[] = [];
  const labels: number[] = [];
  classes.forEach((name, label) => {
    const found: string[] = [];
    walk(root, name, extensions, found, new Set());
    if (found.length === 0) {
      throw new LoaderError(
        'ERR_INVALID_DATASET',
        `sources.imageFolder(${show(root)}): class folder ${show(name)} holds no image (extensions looked for: ${looked}). Add images, remove the folder, or pass extensions: [...] to match the files`,
      );
    }
    for (const f of found) {
      files.push(f);
      labels.push(label);
    }
  });
  return { classes, files, labels: Int32Array.from(labels) };
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Image files under `root/rel`, as paths relative to root, in torchvision's order: folders sorted by
 * path, files sorted by name within a folder. Follows links, never the same folder twice.
 */
function walk(root: string, rel: string, extensions: Set<string>, out: string[], seen: Set<string>): void {
  const folders = new Map<string, string[]>();
  collect(root, rel, extensions, folders, seen);
  for (const folder of [...folders.keys()].sort(fastCompare)) {
    for (const name of folders.get(folder)!.sort(fastCompare)) out.push(`${folder}/${name}`);
  }
}

function collect(root: string, rel: string, extensions: Set<string>, folders: Map<string, string[]>, seen: Set<string>): void {
  const abs = join(root, rel);
  let entries;
  try {
    const real = realpathSync(abs);
    if (seen.has(real)) return;
    seen.add(real);
    entries = readdirSync(abs, { withFileTypes: true });
  } catch (cause) {
    throw fileAccess(abs, 'list the class folder', cause);
  }
  const names: string[] = [];
  for (const e of entries) {
    if (e.name.startsWith('.')) continue;
    let isDir = e.isDirectory();
    let isFile = e.isFile();
    if (e.isSymbolicLink()) {
      try {
        const st = statSync(join(abs, e.name));
        isDir = st.isDirectory();
        isFile = st.isFile();
      } catch {
        continue; // a dangling link is not an image
      }
    }
    if (isDir) collect(root, `${rel}/${e.name}`, extensions, folders, seen);
    else if (isFile) {
      const dot = e.name.lastIndexOf('.');
      if (dot > 0 && extensions.has(e.name.slice(dot).toLowerCase())) names.push(e.name);
    }
  }
  if (names.length > 0) folders.set(rel, names);
}
