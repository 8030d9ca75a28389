// Internal: not exported from the package entry.
// The decode-time view options every image source takes (`view`, `normalize`, `output`), checked
// once into the plain data that travels in a source spec to reader workers and decode processes,
// and the per-read `KeyedView` made from a read's PickKey. The rule: a read with a key cuts that
// pick's box; a read without one (the loader's shape probe, a direct `get(i)`) cuts the box of
// (sample i, repeat 0, epoch 0, seed 0), so the shape and dtype are the same either way.

import { invalidOption } from '../errors.js';
import type { PickKey } from '../sampler/pick-key.js';
import { type View, type ViewOption, viewFrom } from './crop-box.js';
import type { ImageFit, ImageNormalize, ImageOutput, KeyedView } from './image-decode.js';

/** What a source keeps of the view options (plain data: it crosses to workers by structured clone and to decode processes as JSON). */
export interface ImageViewShare {
  readonly view: View | undefined;
  readonly normalize: ImageNormalize | undefined;
  readonly output: ImageOutput | undefined;
}

/** Check `view` (`prefix` names the knob's parent, e.g. 'fields.jpg.'); `normalize` and `output` are checked with the other decode options. */
export function imageViewShare(options: { readonly view?: ViewOption; readonly fit?: ImageFit; readonly normalize?: ImageNormalize; readonly output?: ImageOutput }, prefix: string): ImageViewShare {
  const view = options.view === undefined ? undefined : viewFrom(options.view, `${prefix}view`);
  if (view !== undefined && options.fit !== undefined) {
    throw invalidOption(`${prefix}fit`, 'left out with a view', options.fit, `The view's box replaces fit: drop ${prefix}fit, or drop ${prefix}view`);
  }
  return { view, normalize: options.normalize, output: options.output };
}

const ZERO_SEED = { hi: 0, lo: 0 };

/** The view of one read: the pick's, or (without a key) that of (index, 0, 0, seed 0). */
export function keyedView(view: View | undefined, index: number, key: PickKey | undefined): KeyedView | undefined {
  if (view === undefined) return undefined;
  if (key === undefined) return { view, sample: index, repeat: 0, epoch: 0, seed: ZERO_SEED };
  return { view, sample: key.sample, repeat: key.repeat, epoch: key.epoch, seed: key.seed };
}
