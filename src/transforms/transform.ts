// The Transform type: what `options.transform` is and what `transforms.*` build. The rule: a transform
// is a pure function of (rows, keys), so the same (seed, epoch, sample) gives the same view on every
// device and on every resume.

import type { AnyTensor } from '../device/device-tensor.js';
import type { PickKey } from '../sampler/pick-key.js';
import type { Tensor } from '../tensor/tensor.js';

/**
 * A delivery transform: `(rows, keys) → rows`, one key per row. It runs on every delivery, on fresh
 * rows that never alias cached data, so it may write into them. It must be a pure function of
 * (rows, keys) — randomness only from `key.rng()` — and return as many tensors as it was given, each
 * with the same number of rows (shapes and dtypes may change: a cast or a crop is fine).
 */
export type Transform<T extends AnyTensor = Tensor> = (rows: readonly T[], keys: readonly PickKey[]) => readonly T[] | Promise<readonly T[]>;
