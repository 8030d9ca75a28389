// `stoker inspect <path>`: open a path with the source its format calls for and describe what the
// loader would see — sample count, columns with dtype and per-sample shape, bytes per sample. The
// rule: the description comes from the same code path the loader uses (the source, then the probe
// of sample 0), so what inspect prints is what training gets. Images decode in this thread (one
// sample: no decode processes), and the source is closed after the probe.

import { openSync, readSync, closeSync, readdirSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { LoaderError, fileAccess, show } from '../../errors.js';
import { elementSize } from '../../tensor/dtype.js';
import { type AnyDataset, closeDataset } from '../dataset.js';
import { SourceReader } from '../source-reader.js';
import { arrowSource } from './arrow.js';
import { loadImageDecoder } from './image-decode.js';
import { DEFAULT_IMAGE_EXTENSIONS, imageFolderSource } from './image-folder.js';
import { npySource } from './npy.js';
import { safetensorsSource } from './safetensors.js';
import { tarShardsSource } from './tar-shards.js';

export type SourceFormat = 'npy' | 'safetensors' | 'arrow' | 'image-folder' | 'tar-shards';

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
}

export interface InspectOptions {
  /** Decode images to this [height, width] (default: an image folder's first image's own size; 224 × 224 for tar shards). */
  readonly size?: readonly [number, number];
}

/** Which source a path calls for: by extension, then by magic bytes; a directory by its contents. */
export function detectFormat(path: string): SourceFormat {
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
    throw new LoaderError('ERR_INVALID_DATASET', `${path}: a folder with neither class sub-folders (an image folder) nor .tar shards; nothing to inspect`);
  }
  const ext = extname(path).toLowerCase();
  if (ext === '.npy') return 'npy';
  if (ext === '.safetensors') return 'safetensors';
  if (ext === '.arrow' || ext === '.feather' || ext === '.ipc' || ext === '.arrows') return 'arrow';
  if (ext === '.tar') return 'tar-shards';
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
  throw new LoaderError('ERR_INVALID_DATASET', `${path}: unknown format (expected .npy, .safetensors, .arrow, .tar, or a folder of class folders or .tar shards)`);
}

export async function openPath(path: string, options: InspectOptions = {}): Promise<{ format: SourceFormat; dataset: AnyDataset; details: Record<string, unknown> }> {
  const format = detectFormat(path);
  switch (format) {
    case 'npy':
      return { format, dataset: npySource(path), details: {} };
    case 'safetensors':
      return { format, dataset: safetensorsSource(path), details: {} };
    case 'arrow':
      return { format, dataset: arrowSource(path), details: {} };
    case 'image-folder': {
      const size = options.size ?? (await firstImageSize(path));
      const ds = imageFolderSource(path, { size, decode: 'threads' });
      return { format, dataset: ds, details: { classes: ds.classes.length, classNames: ds.classes.slice(0, 20), decodedTo: `${size[0]}×${size[1]}` } };
    }
    case 'tar-shards': {
      const isDir = statSync(path).isDirectory();
      const ds = await tarShardsSource(isDir ? join(path, '*.tar') : path, { image: { size: options.size ?? [224, 224] }, decode: 'threads' });
      return { format, dataset: ds, details: { shards: ds.shards.length, fields: ds.fields } };
    }
  }
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
  return { path, format, length: dataset.length, columns, bytesPerSample: schema.sampleBytes, details };
}

async function firstImageSize(dir: string): Promise<[number, number]> {
  const classes = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort();
  for (const c of classes) {
    const files = readdirSync(join(dir, c)).filter((f) => DEFAULT_IMAGE_EXTENSIONS.includes(extname(f).toLowerCase())).sort();
    if (files.length === 0) continue;
    const file = join(dir, c, files[0]!);
    const meta = await loadImageDecoder()(file).metadata();
    if (meta.width === undefined || meta.height === undefined) throw new LoaderError('ERR_BAD_FILE', `${file}: at byte 0: cannot read the image size`);
    return [meta.height, meta.width];
  }
  throw new LoaderError('ERR_INVALID_DATASET', `${dir}: no ${DEFAULT_IMAGE_EXTENSIONS.join(' ')} images in its class folders ${show(classes.slice(0, 5))}`);
}
