// `sources.mix`: a weighted mixture of datasets. The data is a concat of the parts (sample i lives
// in the part whose offset is the last ≤ i, and reader workers open it as they open a concat); what
// makes it a mixture is its order, which the loader takes from the mixture instead of its sampler
// (NOTE [Mixture order], sampler/mix-sampler.ts). The rule: the proportions are exact per window of
// `window` picks (default: the loader's batchSize, so each batch of a full step is one window), and
// each part cycles through its own shuffled epochs, independently of the others. Every part has a
// weight > 0, and the loader checks at create that the parts give the same fields (checkMixParts).

import { describeCause, invalidDatasetError, invalidOption, sampleMismatchError, show } from '../errors.js';
import type { LoaderState } from '../distributed/resume.js';
import { MixSampler } from '../sampler/mix-sampler.js';
import { type U64, toU64 } from '../sampler/rng.js';
import { type ConcatSource, concatSource, openConcat } from './concat-source.js';
import { isMixture, kMixture } from './capabilities.js';
import type { AnyDataset, ReadContext } from './dataset.js';
import type { FieldSpec, Schema } from './schema.js';
import { checkKeys, keysOf } from './option-keys.js';
import { SourceReader } from './source-reader.js';
import { type SourceSpec, isSourceSpec } from './source-spec.js';

export interface MixPart<D = AnyDataset> {
  readonly dataset: D;
  /** This part's share of every window: weight / sum of weights. A finite number > 0 (a part of weight 0 would never be drawn). */
  readonly weight: number;
}

/** The keys of one part (`sources.mix` checks them, option-keys.ts). */
const PART_KEYS = keysOf<MixPart>({ dataset: true, weight: true });

export interface MixOptions {
  /** Seed of the parts' shuffles and of the windows' interleaving. Default: the loader's `seed`. */
  readonly seed?: number | bigint;
  /** Picks per window, the span over which proportions are exact. Default: the loader's `batchSize`. */
  readonly window?: number;
  /**
   * Picks per mixture epoch. Default: the sum of the parts' lengths (× augment), so that an epoch is
   * as long as one pass over every part would be — though a heavy small part repeats within it and a
   * light large one is not finished.
   */
  readonly length?: number;
  /** Shuffle each part's epochs and each window's slots. Default: the loader's `shuffle`. */
  readonly shuffle?: boolean;
}

/** The keys of `MixOptions` (checked by `sources.mix`, option-keys.ts). */
export const MIX_OPTION_KEYS = keysOf<MixOptions>({ seed: true, window: true, length: true, shuffle: true });

/** What the loader reads off a mixture dataset. */
export interface Mixture {
  readonly weights: readonly number[];
  readonly options: MixOptions;
  /** Part lengths, in order. */
  readonly lengths: readonly number[];
}

// The capability's key and guard are declared with the others in capabilities.ts.
export { kMixture } from './capabilities.js';

export type MixSource = ConcatSource & { readonly [kMixture]: Mixture };

export function mixtureOf(ds: unknown): Mixture | undefined {
  return isMixture(ds) ? ds[kMixture] : undefined;
}

/** Options of the worker-side factory `openMix`: parts may be source specs. */
export interface OpenMixOptions extends MixOptions {
  readonly parts: readonly MixPart<SourceSpec | AnyDataset>[];
}

/**
 * A mixture of opened datasets: `sources.mix([{ dataset: web, weight: 3 }, { dataset: code, weight: 1 }])`.
 * Reopenable by reader workers when every part is; `close()` closes every part.
 */
export function mixSource(parts: readonly MixPart[], options: MixOptions = {}): MixSource {
  const weights = checkParts(parts);
  return attach(concatSource(parts.map((p) => p.dataset)), weights, options);
}

/** `mixSource` whose parts may be source specs (opened with their factories, as `openConcat` does). */
export async function openMix(options: OpenMixOptions): Promise<MixSource> {
  const weights = checkParts(options?.parts);
  const { parts: _, ...rest } = options;
  return attach(await openConcat({ parts: options.parts.map((p) => p.dataset) }), weights, rest);
}

function checkParts(parts: unknown): number[] {
  if (!Array.isArray(parts) || parts.length === 0) throw invalidDatasetError(`sources.mix(parts): parts must be a non-empty array of { dataset, weight }, got ${show(parts)}`);
  return parts.map((p: Partial<MixPart> | null, i) => {
    if (p === null || typeof p !== 'object' || p.dataset === undefined || isSourceSpec(p) || typeof (p as { get?: unknown }).get === 'function') {
      throw invalidDatasetError(`sources.mix: part ${i} is ${show(p)}; each part is { dataset, weight }`);
    }
    checkKeys(`sources.mix parts[${i}]`, p, PART_KEYS);
    const w = p.weight;
    if (typeof w !== 'number' || !Number.isFinite(w) || w <= 0) {
      throw invalidOption(`sources.mix(parts)[${i}].weight`, 'a finite number > 0', w, w === 0 ? 'A part of weight 0 is never drawn: drop it from the parts' : undefined);
    }
    return w;
  });
}

/**
 * Read sample 0 of every part after the first (whose sample 0 is the mixture's, probed as `schema`)
 * and refuse parts whose fields differ from it — names, dtypes, shapes (the first dimension of a
 * field `ragged(i)` says is ragged may differ) — so that a mixture fails at create, not at the first
 * batch that draws from the odd part. Called by the loader at create.
 */
export async function checkMixParts(ds: MixSource, schema: Schema, context: ReadContext, ragged: (field: number) => boolean): Promise<void> {
  const names = (s: Schema) => s.keys ?? s.fields.map((_, i) => String(i));
  const want = names(schema);
  const list = (s: Schema) => (s.keys === undefined ? `[${names(s).join(', ')}] (positional)` : `{ ${names(s).join(', ')} }`);
  const describe = (f: FieldSpec) => `${f.dtype} [${f.shape.join(', ')}]`;
  for (let p = 1; p < ds.parts.length; p++) {
    let own: Schema;
    try {
      own = await SourceReader.probe(ds.parts[p]!, context);
    } catch (cause) {
      throw invalidDatasetError(`sources.mix: reading sample 0 of part ${p} to check its fields failed: ${describeCause(cause)}`, cause);
    }
    const got = names(own);
    if ((own.keys === undefined) !== (schema.keys === undefined) || got.length !== want.length || !got.every((n) => want.includes(n))) {
      throw sampleMismatchError(`sources.mix: part ${p} has fields ${list(own)} but part 0 has ${list(schema)}: every part must give the same fields. Select the same columns in every part`);
    }
    want.forEach((name, i) => {
      const a = schema.fields[i]!;
      const b = own.fields[got.indexOf(name)]!;
      const dims = ragged(i) ? 1 : 0;
      const same = a.dtype === b.dtype && a.shape.length === b.shape.length && a.shape.every((d, k) => k < dims || d === b.shape[k]);
      if (!same) {
        throw sampleMismatchError(
          `sources.mix: part ${p}'s field \`${name}\` is ${describe(b)} but part 0's is ${describe(a)}${dims ? ' (a ragged field: its first dimension may differ)' : ''}. Every part must give each field in one dtype and shape`,
        );
      }
    });
  }
}

function attach(concat: ConcatSource, weights: readonly number[], options: MixOptions): MixSource {
  const o = (options ?? {}) as Partial<MixOptions> & Record<string, unknown>;
  checkKeys('sources.mix', o, MIX_OPTION_KEYS);
  if (o.window !== undefined && (!Number.isSafeInteger(o.window) || o.window < 1)) throw invalidOption('sources.mix window', 'an integer ≥ 1', o.window);
  if (o.length !== undefined && (!Number.isSafeInteger(o.length) || o.length < 1 || o.length > 2 ** 32 - 2)) throw invalidOption('sources.mix length', 'an integer in [1, 2^32 − 2]', o.length);
  if (o.shuffle !== undefined && typeof o.shuffle !== 'boolean') throw invalidOption('sources.mix shuffle', 'a boolean', o.shuffle);
  if (o.seed !== undefined) {
    try {
      toU64(o.seed);
    } catch {
      throw invalidOption('sources.mix seed', 'an integer in [0, 2^53) or a bigint in [0, 2^64)', o.seed);
    }
  }
  const lengths = concat.parts.map((p) => p.length);
  const mixture: Mixture = Object.freeze({ weights: Object.freeze([...weights]), options: Object.freeze({ ...o }), lengths: Object.freeze(lengths) });
  Object.defineProperty(concat, kMixture, { value: mixture, enumerable: false });
  // `ragged`, `raggedMax`, `lengths` and `loadLengths` come from the concat (NOTE [ragged parts]), in its layout: a mixture's sample ids.
  return concat as MixSource;
}

/** The loader's side: the mixture's sampler for these loader options (a resume continues its position). */
export function mixSampler(
  mixture: Mixture,
  loader: { seed: U64; shuffle: boolean; augment: number; batchSize: number; resume: LoaderState | undefined },
): MixSampler {
  const o = mixture.options;
  const sizes = mixture.lengths.map((n) => n * loader.augment);
  const length = o.length ?? sizes.reduce((a, b) => a + b, 0);
  const shape = { sizes, length, seed: o.seed !== undefined ? toU64(o.seed) : loader.seed, shuffle: o.shuffle ?? loader.shuffle };
  const window = o.window ?? loader.batchSize;
  const r = loader.resume;
  return r === undefined ? MixSampler.fresh(shape, mixture.weights, window) : MixSampler.resume(shape, r.mix, r.epoch, r.position, mixture.weights, window);
}
