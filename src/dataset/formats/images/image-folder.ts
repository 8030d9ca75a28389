// `sources.imageFolder`: a folder of images laid out as torchvision's ImageFolder, `dir/<class>/…/
// <file>`, decoded with sharp to a fixed size. Sample i is `{ image: uint8 [C, H, W] (or [H, W, C]),
// label: int32 scalar }`. The rule: the folder is listed once, when the source is made (or its
// listing read from the on-disk cache, folder-listing.ts); reader workers get that listing in the
// spec as shared memory and never list again, so every thread sees the same files in the same order
// even if the folder changes while the loader runs (NOTE [one listing]).
//
// The listing follows torchvision: class folders sorted by name (code point order) give label
// indices 0, 1, …; inside a class, files are taken from the whole subtree (sorted paths, symbolic
// links followed, cycles skipped) and kept when their extension is one of `extensions`
// (case-insensitive). Unlike torchvision, names that start with "." (`.ipynb_checkpoints`,
// `.DS_Store`) are skipped, so editor and OS leftovers never become a class. Files directly in
// `dir` are ignored (they belong to no class). A class folder with no image is refused, as
// torchvision does, because its label index would silently hold no samples. Names that are not
// valid UTF-8 are read by their bytes (NOTE [names as bytes]).
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
// copy (image-decoding.ts). Pool sizing per copy and 'auto' are shared with the other image
// sources: NOTE [decode processes per copy] and NOTE [decode: 'auto'] in image-decoding.ts.

import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { fileAccess, indexOutOfRange, invalidOption, show } from '../../../errors.js';
import { Tensor } from '../../../tensor/tensor.js';
import type { Dataset, ReadContext } from '../../dataset.js';
import { type Reopenable, type SourceSpec, kSourceSpec } from '../../source-spec.js';
import { DEFAULT_MAX_INPUT_PIXELS, type ImageChannels, type ImageFit, type ImageLayout, type ImageNormalize, type ImageOutput, checkDecodeOptions, directRoute, loadImageDecoder, outputOf } from '../../../image/image-decode.js';
import { type EncodedImages, kEncodedImages } from './encoded-images.js';
import { type ImageViewShare, imageViewShare, keyedView } from '../../../image/image-view.js';
import { type FolderIndexMode, type FolderListing, type ListingOrigin, listFolder, listFolderAsync, pathBytes, pathString } from './folder-listing.js';
import type { ViewOption } from '../../../image/crop-box.js';
import { type ImageDecodeMode, type ImageDecodeShare, ImageDecoding, imageDecodeShare, prefetchFor, readerThreadsFor } from '../../../image/processes/image-decoding.js';

export { AUTO_PROCESSES_ABOVE, AUTO_PROCESSES_MIN_PIXELS, type ImageDecodeMode, READS_IN_FLIGHT } from '../../../image/processes/image-decoding.js';

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
  /**
   * The on-disk cache of the folder's listing (NOTE [one listing] in folder-listing.ts): 'auto'
   * (default) reads it while every directory's mtime is unchanged and writes it after a walk;
   * 'off' walks the folder every time and writes nothing.
   */
  readonly index?: FolderIndexMode;
  /** Refuse images with more input pixels than this (decompression bombs). Default 0x3FFF² ≈ 268 M. */
  readonly maxInputPixels?: number;
  /**
   * Where images are decoded. 'processes': in child processes (see `decodeProcesses`), the way to
   * use many cores — sharp decodes within one process contend inside libvips and stop scaling at
   * ~2.5 cores. 'threads': in the thread that reads the dataset (the main thread, or each reader
   * worker). 'cpu': either, chosen as 'auto' chooses. 'gpu': on the device's JPEG decoder (nvJPEG on
   * CUDA, the CPU behind `sim`; docs/gpu-decode.md) — the readers only read the files. Default
   * 'auto': 'gpu' when the device is CUDA and nvJPEG loads, else 'threads' for a `view` of plain
   * JPEGs (the folder's first file; one reader thread per core, each decoding straight into the
   * batch: NOTE [decoding in a reader thread]), else 'processes' when the machine has more than one
   * core, else 'threads' (NOTE [decode: 'auto']). The same bytes and errors either way on the CPU;
   * the GPU's rows are the same crops within resampling tolerance.
   */
  readonly decode?: ImageDecodeMode;
  /**
   * With decode 'processes': most child processes per dataset copy, started on demand. Default:
   * one per core for a copy on the main thread (a loader with workers: 0); in a reader worker, the
   * cores divided among the workers' copies, rounded, at least 1 (NOTE [decode processes per copy]).
   */
  readonly decodeProcesses?: number;
  /**
   * A decode-time view per pick (docs/images.md): 'train' (RandomResizedCrop with torchvision's
   * defaults + random flip), 'eval' (Resize(256) + CenterCrop(224): torchvision's pixels), or
   * `{ randomResizedCrop: { scale, ratio } | true, centerCrop: { resize, crop } | true, flip }`.
   * The box is cut and resized to `size` by the decoder, from the pick's key, so each epoch (and
   * each `augment` repeat) gets its own crop; the loader then bypasses its sample caches for this
   * source (NOTE [keyed reads], dataset.ts). Replaces `fit`. Default: none (`fit` decides).
   */
  readonly view?: ViewOption;
  /**
   * Per-channel mean and std on the [0, 1] scale, applied by the decoder (needs a float `output`):
   * v = (x / 255 − mean) / std. One value per channel, or one for every channel (as torchvision's
   * Normalize broadcasts a list of one); another length is refused, naming `normalize.mean` or `.std`.
   */
  readonly normalize?: ImageNormalize;
  /** 'uint8' (default without normalize), 'float32' (default with it), 'float16' or 'bfloat16': the image field's dtype, made by the decoder. */
  readonly output?: ImageOutput;
}

/** What reader workers receive: the listing made on the main thread, and the decode settings. */
export interface ImageFolderSpecOptions extends ImageDecodeShare, ImageViewShare {
  readonly dir: string;
  /** Classes, relative paths and labels, in shared memory (NOTE [one listing]). */
  readonly listing: FolderListing;
  /** Where the main thread's listing came from. */
  readonly origin: ListingOrigin;
  readonly size: readonly [number, number];
  readonly channels: ImageChannels;
  readonly layout: ImageLayout;
  readonly fit: ImageFit;
  readonly maxInputPixels: number | undefined;
}

/** One sample of an image folder. */
export type ImageFolderSample = {
  /** uint8, or the `output` dtype. */
  readonly image: Tensor;
  readonly label: Tensor<'int32'>;
};

export class ImageFolder implements Dataset, Reopenable {
  readonly length: number;
  /** The folder, absolute. */
  readonly dir: string;
  /** Class names, sorted; a sample's label is its class's index here. */
  readonly classes: readonly string[];
  /** Label of each sample. */
  readonly labels: Int32Array;
  /** 'walked': this source listed the folder; 'cached': it read the listing from the on-disk cache. */
  readonly listing: ListingOrigin;
  /** Where this copy decodes: 'auto' resolved. */
  readonly decode: 'threads' | 'processes';
  /** True with a `view`: reads take the pick's key (NOTE [keyed reads], dataset.ts). */
  readonly keyed: boolean;
  readonly #options: ImageFolderSpecOptions;
  readonly #images: ImageDecoding;
  readonly #raw: ReadonlySet<number>;
  #files: readonly string[] | undefined;

  /** Internal: made by `imageFolderSource` (main thread) or `openImageFolder` (workers). */
  constructor(options: ImageFolderSpecOptions, inWorker = false) {
    this.#options = options;
    this.dir = options.dir;
    this.classes = Object.freeze([...options.listing.classes]);
    this.labels = options.listing.labels;
    this.length = options.listing.ends.length;
    this.listing = options.origin;
    this.#raw = new Set(options.listing.raw);
    this.#images = new ImageDecoding(options, options.size, inWorker);
    this.decode = this.#images.mode;
    this.keyed = options.view !== undefined;
  }

  /**
   * Image paths relative to `dir`, in sample order (class by class, sorted within a class); names
   * that are not UTF-8 shown with U+FFFD. Made on first use (a million paths cost ~100 ms).
   */
  get files(): readonly string[] {
    this.#files ??= Object.freeze(Array.from({ length: this.length }, (_, i) => pathString(this.#options.listing, i)));
    return this.#files;
  }

  /** Process ids of this copy's decode processes alive now (none in 'threads' mode or before the first read). */
  get decodePids(): number[] {
    return this.#images.pids;
  }

  /** Reader threads this source works best with when the loader's `workers` is not set (NOTE [reader threads with decode processes]). */
  get readerWorkers(): number | undefined {
    return readerThreadsFor(this.decode);
  }

  /** Batches in flight this source works best with on the CPU when the loader's `prefetch` is not set (NOTE [a window for decode processes]). */
  get prefetch(): number | undefined {
    return prefetchFor(this.decode);
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

  /**
   * The absolute path of sample `index`'s file: a string, or a Buffer of its bytes when its name is
   * not valid UTF-8 (NOTE [names as bytes]); either opens it with `node:fs`.
   */
  pathOf(index: number): string | Buffer {
    this.#check(index);
    const l = this.#options.listing;
    return this.#raw.has(index) ? Buffer.concat([Buffer.from(this.dir), Buffer.from('/'), pathBytes(l, index)]) : join(this.dir, pathString(l, index));
  }

  /** Read and decode sample `index`. A file that cannot be read or decoded rejects with its path. */
  async get(index: number, context?: ReadContext): Promise<ImageFolderSample> {
    this.#check(index);
    const o = this.#options;
    const path = join(o.dir, pathString(o.listing, index));
    const label = new Tensor(Int32Array.of(o.listing.labels[index]!), [], 'int32');
    // A name that is not UTF-8 cannot travel to a decode process as JSON: read its bytes here.
    const input = !this.#raw.has(index) ? { path } : await readRaw(this.pathOf(index) as Buffer, path, context?.signal);
    const image = await this.#images.decode(input, {
      size: o.size, channels: o.channels, layout: o.layout, fit: o.fit, maxInputPixels: o.maxInputPixels, source: path,
      view: keyedView(o.view, index, context?.key), normalize: o.normalize, output: o.output,
    }, context?.signal, context?.rows?.of('image'));
    return { image, label };
  }

  /** The encoded files and the output spec, for decoding on the device (encoded-images.ts). */
  [kEncodedImages](): EncodedImages {
    const o = this.#options;
    return {
      request: o.gpu, imageKey: 'image', size: o.size, channels: o.channels, layout: o.layout, output: outputOf(o), normalize: o.normalize,
      view: o.view, fit: o.fit, maxInputPixels: o.maxInputPixels ?? DEFAULT_MAX_INPUT_PIXELS,
      path: (index) => this.pathOf(index),
      fields: (index) => ({ label: new Tensor(Int32Array.of(o.listing.labels[index]!), [], 'int32') }),
      where: (index) => join(o.dir, pathString(o.listing, index)),
    };
  }

  #check(index: number): void {
    if (!Number.isInteger(index) || index < 0 || index >= this.length) {
      throw indexOutOfRange(`sources.imageFolder(${show(this.dir)})`, 'index', index, this.length);
    }
  }

  /**
   * Stop this copy's decode processes (waiting until they are gone); reads still waiting for them
   * fail. A later read starts new ones. Reader workers call it on their copies when the loader
   * closes; call it on a dataset you made once you are done with it (an unclosed one's processes
   * never hold the process open, and end with it).
   */
  close(): Promise<void> {
    return this.#images.close();
  }
}

/**
 * An image folder as a dataset: `dir/<class>/<file>`, classes sorted by name as labels, each image
 * decoded with sharp to `size` (see the file header for the listing rules). Lists the folder now,
 * once, in this thread; reader workers reuse the listing.
 */
export function imageFolderSource(dir: string, options: ImageFolderOptions): ImageFolder {
  const { root, extensions, index, make } = checkFolderOptions(dir, options);
  const { listing, origin } = listFolder(root, extensions, index);
  return make(listing, origin);
}

/**
 * `imageFolderSource`, the folder walked by worker threads while this thread awaits (NOTE
 * [parallel walk] in folder-listing.ts): the same dataset, sooner on a large cold folder.
 */
export async function imageFolderSourceAsync(dir: string, options: ImageFolderOptions): Promise<ImageFolder> {
  const { root, extensions, index, make } = checkFolderOptions(dir, options);
  const { listing, origin } = await listFolderAsync(root, extensions, index);
  return make(listing, origin);
}

function checkFolderOptions(dir: string, options: ImageFolderOptions): { root: string; extensions: Set<string>; index: FolderIndexMode; make: (listing: FolderListing, origin: ListingOrigin) => ImageFolder } {
  if (typeof dir !== 'string' || dir.length === 0) throw invalidOption('sources.imageFolder(dir)', 'a folder path', dir);
  if (options === null || typeof options !== 'object') throw invalidOption('sources.imageFolder(dir, options)', 'an object with at least size', options, 'Pass e.g. { size: 224 }');
  const size: readonly [number, number] = typeof options.size === 'number' ? [options.size, options.size] : options.size;
  const extensions = checkExtensions(options.extensions);
  const share = imageDecodeShare(options, true);
  const views = imageViewShare(options, '');
  checkDecodeOptions({ ...options, size, ...views }, 'size');
  const root = resolve(dir);
  const index = options.index ?? 'auto';
  if (index !== 'auto' && index !== 'off') throw invalidOption('index', "'auto' or 'off'", index);
  const make = (listing: FolderListing, origin: ListingOrigin): ImageFolder => {
    // sharp must be loaded by the main thread before reader workers use it (see image-decode.ts).
    loadImageDecoder();
    // NOTE [decode: 'auto']: the first file tells whether the folder's images take the direct route.
    const direct = views.view !== undefined && (options.channels ?? 3) !== 4 && listing.ends.length > 0 && !listing.raw.includes(0) && directRoute(join(root, pathString(listing, 0)));
    return new ImageFolder({
      dir: root, listing, origin, size: [size[0], size[1]],
      channels: options.channels ?? 3, layout: options.layout ?? 'chw', fit: options.fit ?? 'center-crop', maxInputPixels: options.maxInputPixels,
      ...share, direct, ...views,
    });
  };
  return { root, extensions, index, make };
}

/** The bytes of a file opened by its byte path; errors name its shown (U+FFFD) path. */
async function readRaw(path: Buffer, shown: string, signal: AbortSignal | undefined): Promise<Uint8Array> {
  try {
    return await readFile(path, signal === undefined ? undefined : { signal });
  } catch (cause) {
    if (signal?.aborted) throw cause;
    throw fileAccess(shown, 'read the image', cause);
  }
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

// NOTE [names as bytes]: the folder is listed with `{ encoding: 'buffer' }`, so a file or folder
// name that is not valid UTF-8 (a Latin-1 `caf\xe9.jpg` from an old archive) is kept as the bytes
// on disk and opened by them, as torchvision opens it; a string listing would turn it into a U+FFFD
// name that does not exist. Names are sorted by their bytes, which for UTF-8 is code point order
// (Python's `sorted`); `classes` and `files` show such names decoded with U+FFFD, and the bytes
// travel to reader workers in the shared listing (folder-listing.ts), opened by their bytes.
