// Decoders for the binary and string columns of an Arrow source (and `codes`, which lets a
// dictionary-encoded column through as its integer codes): data, not functions, because they
// travel to reader workers by structured clone. `image` decodes PNG/JPEG/WebP/… bytes through the
// source copy's ImageDecoding (this thread's sharp or child processes: the same bytes); `module` imports a user function in each thread. The rule: every row of a
// decoded column must give the same dtype and shape (a batch is one tensor per column).

import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';
import { invalidDatasetError, invalidOption, moduleExport, moduleImport, show } from '../../../errors.js';
import { type TypedArray, allocStorage, inferDType } from '../../../tensor/dtype.js';
import { Tensor, trustedTensor } from '../../../tensor/tensor.js';
import type { PickKey } from '../../../sampler/pick-key.js';
import type { View, ViewOption } from '../../../image/crop-box.js';
import { type ImageChannels, type ImageFit, type ImageLayout, type ImageNormalize, type ImageOutput, checkDecodeOptions } from '../../../image/image-decode.js';
import type { ImageDecoding } from '../../../image/processes/image-decoding.js';
import { imageViewShare, keyedView } from '../../../image/image-view.js';

/** Decode encoded images to a uint8 tensor [C, H, W] (or [H, W, C]) through sharp; see `decodeImage`. */
export interface ArrowImageDecoder {
  readonly kind: 'image';
  /** Output [height, width]. */
  readonly size: readonly [number, number];
  /** Default 3. */
  readonly channels?: ImageChannels;
  /** Default 'chw' (what `transforms.image` takes). */
  readonly layout?: ImageLayout;
  /** Default 'center-crop' (aspect ratio kept). */
  readonly fit?: ImageFit;
  /** Images with more pixels are refused before decoding (default: sharp's 268 M). */
  readonly maxInputPixels?: number;
  /** A decode-time view per pick, as `sources.imageFolder`'s `view`; the source is then keyed (NOTE [keyed reads], dataset.ts). Replaces `fit`. */
  readonly view?: ViewOption;
  /** Per-channel mean and std on the [0, 1] scale, applied by the decoder (needs a float `output`). */
  readonly normalize?: ImageNormalize;
  /** Output dtype: 'uint8' (default without normalize), 'float32' (default with it), 'float16', 'bfloat16'. */
  readonly output?: ImageOutput;
}

/** An image decoder after validation: its view resolved. */
export type ResolvedImageDecoder = Omit<ArrowImageDecoder, 'view'> & { readonly view?: View | undefined };

/**
 * A user function, imported in each thread: `export function decode(bytes: Uint8Array, row: number):
 * Tensor | TypedArray | Promise<Tensor | TypedArray>`. `bytes` is a read-only view of the row's bytes
 * (valid during the call: copy what you keep); `row` is the dataset row.
 */
export interface ArrowModuleDecoder {
  readonly kind: 'module';
  /** An absolute path or URL (`file:`, `data:`, a package name) that every thread can import. */
  readonly module: string | URL;
  readonly export: string;
}

/**
 * A dictionary-encoded column's integer codes (each row's index into the column's dictionary), as
 * the codes' own integer type. Asked for by name, because a code is not the value it stands for.
 */
export interface ArrowCodesDecoder {
  readonly kind: 'codes';
}

export type ArrowDecoder = ArrowImageDecoder | ArrowModuleDecoder | ArrowCodesDecoder;

/** A decoder after validation: cloneable (module URLs as strings). */
export type ResolvedDecoder = ResolvedImageDecoder | { readonly kind: 'module'; readonly module: string; readonly export: string } | ArrowCodesDecoder;
/** The decoders that read a bytes column. */
export type BytesDecoder = Exclude<ResolvedDecoder, ArrowCodesDecoder>;

/** Validate one decoder option; `knob` names it in messages (`decoders.image`). */
export function resolveDecoder(knob: string, d: unknown): ResolvedDecoder {
  const o = d as Partial<ArrowDecoder> | null;
  if (o === null || typeof o !== 'object') throw invalidOption(knob, "{ kind: 'image', size: [h, w] }, { kind: 'module', module, export } or { kind: 'codes' }", d);
  if (o.kind === 'codes') return { kind: 'codes' };
  if (o.kind === 'image') {
    const { size, channels, layout, fit, maxInputPixels, normalize, output } = o as ArrowImageDecoder;
    const { view } = imageViewShare(o as ArrowImageDecoder, `${knob}.`);
    checkDecodeOptions({ size, channels, layout, fit, maxInputPixels, normalize, output }, `${knob}.size`);
    return { kind: 'image', size: [size[0], size[1]], channels, layout, fit, maxInputPixels, normalize, output, ...(view === undefined ? {} : { view }) };
  }
  if (o.kind === 'module') {
    const m = o as ArrowModuleDecoder;
    let specifier = m.module instanceof URL ? m.module.href : m.module;
    if (typeof specifier !== 'string' || specifier.length === 0) throw invalidOption(`${knob}.module`, 'an absolute path or a URL', m.module);
    if (isAbsolute(specifier)) specifier = pathToFileURL(specifier).href;
    if (specifier.startsWith('.')) throw invalidOption(`${knob}.module`, 'an absolute path or a URL (workers resolve from elsewhere)', specifier, `Pass new URL(${show(specifier)}, import.meta.url)`);
    if (typeof m.export !== 'string' || m.export.length === 0) throw invalidOption(`${knob}.export`, 'the name of an exported function', m.export);
    return { kind: 'module', module: specifier, export: m.export };
  }
  throw invalidOption(`${knob}.kind`, "'image', 'module' or 'codes'", o.kind);
}

type DecodeFn = (bytes: Uint8Array, row: number) => unknown;
const imported = new Map<string, Promise<DecodeFn>>();

/** Import a module decoder once per thread. */
function load(d: { module: string; export: string }): Promise<DecodeFn> {
  const key = `${d.module}#${d.export}`;
  let p = imported.get(key);
  if (p === undefined) {
    p = (async () => {
      let mod: Record<string, unknown>;
      try {
        mod = (await import(d.module)) as Record<string, unknown>;
      } catch (cause) {
        throw moduleImport('decoder', d.module, cause);
      }
      const fn = mod[d.export];
      if (typeof fn !== 'function') throw moduleExport('decoder', d.module, d.export, mod);
      return fn as DecodeFn;
    })();
    imported.set(key, p);
    p.catch(() => imported.delete(key));
  }
  return p;
}

/** Most decodes in flight per column and call: enough to keep libuv's pool busy, bounded in memory. */
const IN_FLIGHT = 32;

/**
 * Decode every row of one column and stack the results into a tensor [n, ...shape]. `source(r)`
 * names row r for messages ("file.arrow column "image" row 17"); `images` decodes image columns.
 */
export async function decodeColumn(
  decoder: BytesDecoder, column: string, inputs: readonly Uint8Array[], rows: readonly number[], source: (r: number) => string, images: ImageDecoding | undefined, signal?: AbortSignal,
  keys?: readonly PickKey[],
): Promise<Tensor> {
  if (decoder.kind === 'image' && images === undefined) throw invalidDatasetError(`column ${show(column)} has an image decoder but its source has no image decoding`);
  const n = inputs.length;
  const fn = decoder.kind === 'module' ? await load(decoder) : undefined;
  const outs: Tensor[] = new Array(n);
  let next = 0;
  const worker = async () => {
    while (next < n) {
      signal?.throwIfAborted();
      const r = next++;
      const image = decoder as ResolvedImageDecoder;
      outs[r] = fn === undefined
        ? await images!.decode(inputs[r]!, { ...image, view: keyedView(image.view, rows[r]!, keys?.[r]), source: source(r) }, signal)
        : asTensor(await fn(inputs[r]!, rows[r]!), decoder, column, rows[r]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, n) }, worker));
  return stack(outs, column, rows, decoder);
}

function asTensor(value: unknown, d: BytesDecoder, column: string, row: number): Tensor {
  if (value instanceof Tensor) return value;
  if (ArrayBuffer.isView(value) && !(value instanceof DataView) && inferDType(value) !== undefined) return new Tensor(value as TypedArray);
  const name = d.kind === 'module' ? `${d.module}#${d.export}` : 'image';
  throw invalidDatasetError(`decoder ${name} returned ${show(value)} for column ${show(column)} row ${row}; a decoder returns a Tensor or a typed array`);
}

function stack(outs: readonly Tensor[], column: string, rows: readonly number[], d: BytesDecoder): Tensor {
  const n = outs.length;
  if (n === 0) return trustedTensor('uint8', new Uint8Array(0), [0]);
  const first = outs[0]!;
  const { dtype, shape, size } = first;
  const data = allocStorage(dtype, n * size);
  for (let r = 0; r < n; r++) {
    const t = outs[r]!;
    if (t.dtype !== dtype || t.shape.length !== shape.length || t.shape.some((x, i) => x !== shape[i])) {
      const name = d.kind === 'module' ? `decoder ${d.module}#${d.export}` : 'the image decoder';
      throw invalidDatasetError(`${name} gave ${t.dtype} [${t.shape.join(', ')}] for column ${show(column)} row ${rows[r]} but ${dtype} [${shape.join(', ')}] for row ${rows[0]}; every row of a column needs one dtype and shape`);
    }
    (data as unknown as { set(a: unknown, at: number): void }).set(t.data, r * size);
  }
  return trustedTensor(dtype, data, [n, ...shape]);
}
