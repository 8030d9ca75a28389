// What a sampler must do: hand the loader an epoch's picks. The rule: the output is a pure function
// of the epoch (the loader may ask for the same epoch again, e.g. to resume) and is validated on
// every call, because a wrong pick would silently train on the wrong rows.

import { samplerOutputError, show } from '../errors.js';

/**
 * A stream of picks per epoch.
 *
 * # Contract
 * - `length` is fixed: the number of picks every epoch.
 * - `indices(epoch)` returns exactly `length` integers, each in `[0, dataset length)` for a custom
 *   sampler (built-in samplers return picks in `[0, length × augment)`); repeats are allowed.
 * - Called on the main thread, once per epoch, before the first batch of that epoch.
 */
export interface Sampler {
  readonly length: number;
  indices(epoch: number): ArrayLike<number>;
}

/** Copy a custom sampler's output into a Uint32Array, checking its length and every pick. */
export function validatedPicks(sampler: Sampler, epoch: number, datasetLength: number): Uint32Array {
  let raw: ArrayLike<number>;
  try {
    raw = sampler.indices(epoch);
  } catch (cause) {
    throw samplerOutputError(`sampler.indices(${epoch}) threw: ${cause instanceof Error ? cause.message : String(cause)}`, cause);
  }
  if (raw === null || typeof raw !== 'object' || typeof raw.length !== 'number') {
    throw samplerOutputError(`sampler.indices(${epoch}) must return an array of sample ids, got ${show(raw)}`);
  }
  if (raw.length !== sampler.length) {
    throw samplerOutputError(
      `sampler.indices(${epoch}) returned ${raw.length} picks but sampler.length is ${sampler.length}. Return exactly sampler.length ids, or fix sampler.length`,
    );
  }
  const out = new Uint32Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const v = raw[i]!;
    if (!Number.isInteger(v) || v < 0 || v >= datasetLength) {
      throw samplerOutputError(
        `sampler.indices(${epoch})[${i}] is ${show(v)}, outside the dataset's range [0, ${datasetLength}). A custom sampler returns sample ids`,
      );
    }
    out[i] = v;
  }
  return out;
}
