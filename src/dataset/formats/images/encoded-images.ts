// Internal: not exported from the package entry.
// The capability an image source exposes so that its batches can be decoded on the device (the
// DecodeAssembler, src/pipeline/assemble/decode/decode.ts): the encoded bytes of sample i's image, its
// other (small) fields, and the output the decoder must write — size, layout, dtype, normalization
// and the decode-time view or fit. The rule: a row the device decodes from these is the same crop of
// the same pick as the source's own `get(i)` cuts (the same box from crop-box.ts), within the
// resampling tolerance of docs/gpu-decode.md; the loader finds the capability by `kEncodedImages`,
// never by the source's class.

import type { Tensor } from '../../../tensor/tensor.js';
import type { View } from '../../../image/crop-box.js';
import type { ImageFit, ImageLayout, ImageNormalize, ImageOutput } from '../../../image/image-decode.js';
import type { GpuDecodeRequest } from '../../../image/processes/image-decoding.js';
import { hasEncodedImages, kEncodedImages } from '../../capabilities.js';

// The capability's key and guard are declared with the others in capabilities.ts.
export { kEncodedImages } from '../../capabilities.js';

export interface EncodedImages {
  /** The `decode` option as the loader acts on it: 'gpu', 'auto' (GPU when the device can) or 'off'. */
  readonly request: GpuDecodeRequest;
  /** The sample's key holding the image (the other keys are read by `fields`). */
  readonly imageKey: string;
  readonly size: readonly [number, number];
  readonly channels: number;
  readonly layout: ImageLayout;
  readonly output: ImageOutput;
  readonly normalize: ImageNormalize | undefined;
  /** The decode-time view (keyed per pick), or undefined: `fit` decides the box. */
  readonly view: View | undefined;
  readonly fit: ImageFit;
  /** Images with more pixels are refused (as the source's own decoder refuses them). */
  readonly maxInputPixels: number;
  /** The file holding sample `index`'s encoded image: a path, or a Buffer of its bytes when the name is not UTF-8 (opens with node:fs either way). */
  path(index: number): string | Buffer;
  /** Sample `index`'s fields other than the image, by key. */
  fields(index: number): Record<string, Tensor>;
  /** Where sample `index` comes from, for messages (its path). */
  where(index: number): string;
}

export function encodedImagesOf(ds: unknown): EncodedImages | undefined {
  return hasEncodedImages<EncodedImages>(ds) ? ds[kEncodedImages]() : undefined;
}
