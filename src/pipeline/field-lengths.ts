// Internal: not exported from the package entry.
// Each sample's lengths, per ragged field, read once at create: what packing and token budgets plan
// with, and the capacity of a ragged field that no option or source bounds (NOTE [ragged rows],
// dataset/schema.ts).
// NOTE [per-field lengths] Lengths belong to a field. The `lengths` option and a source's declared
// `lengths` are one number per sample, so they describe one field: `pack.field`, else the dataset's
// only ragged field. Every other field's lengths are its own, computed by the source
// (`loadLengths(field)`), or it has none (then its collate must give a capacity). So one field never
// gets another's longest length, and nothing depends on the order of the `collate` keys. Token
// budgets and packing plan with the option, else the declared lengths, else the described field's
// computed ones.

import { canLoadLengths, hasLengths, hasRaggedFields, hasRaggedMax } from '../dataset/capabilities.js';
import type { AnyDataset } from '../dataset/dataset.js';
import { LoaderError, describeCause, invalidDatasetError, invalidOption, show } from '../errors.js';
import type { ResolvedOptions } from '../options.js';
import { resolveLengths } from '../sampler/token-batches.js';

export class FieldLengths {
  /** The field the `lengths` option and declared lengths describe; undefined with several ragged fields and no `pack.field`. */
  readonly field: string | undefined;
  readonly #given: unknown;
  readonly #count: number;
  readonly #loaded: ReadonlyMap<string, Uint32Array>;
  readonly #ragged: readonly string[];
  readonly #by: 'option' | 'dataset';
  #resolved: Uint32Array | undefined;

  private constructor(field: string | undefined, given: unknown, count: number, loaded: ReadonlyMap<string, Uint32Array>, ragged: readonly string[], by: 'option' | 'dataset') {
    this.field = field;
    this.#by = by;
    this.#ragged = ragged;
    this.#given = given;
    this.#count = count;
    this.#loaded = loaded;
  }

  /**
   * Read what packing, token budgets and unbounded collates need, awaiting the source's length
   * passes (one per field, each using every core) for the fields the option and declared lengths
   * do not cover.
   */
  static async load(ds: AnyDataset, names: readonly string[], opts: ResolvedOptions, count: number): Promise<FieldLengths> {
    const declared: unknown = hasLengths(ds) ? ds.lengths : undefined;
    const option = opts.tokens?.lengths ?? opts.lengths;
    const given = option ?? declared;
    const ragged = raggedFields(ds, names, opts);
    const field = opts.pack !== undefined ? (opts.pack.field ?? (ragged.length === 1 ? ragged[0] : undefined)) : ragged.length === 1 ? ragged[0] : undefined;
    if (opts.lengths !== undefined && opts.tokens === undefined && opts.pack === undefined && field === undefined) {
      throw invalidOption(
        'lengths',
        'given for a dataset with one ragged field (or with batchTokens)',
        opts.lengths,
        `Lengths are per field, and this dataset has the ragged fields ${ragged.map(show).join(', ')}: drop \`lengths\`, and give each field a capacity (collate.<field>.pad.maxLength) or a source that computes them`,
      );
    }
    const wanted = new Set(unboundedFields(ds, opts.collate));
    if (field !== undefined && (opts.pack !== undefined || opts.tokens !== undefined)) wanted.add(field);
    if (given !== undefined && field !== undefined) wanted.delete(field);
    const loaded = new Map<string, Uint32Array>();
    if (canLoadLengths(ds)) {
      for (const name of [...wanted].sort()) {
        try {
          loaded.set(name, await ds.loadLengths(name));
        } catch (cause) {
          if (cause instanceof LoaderError) throw cause;
          throw invalidDatasetError(`DataLoader: computing the lengths of field ${show(name)} (for ${opts.pack !== undefined ? 'pack' : opts.tokens !== undefined ? 'batchTokens' : `collate.${name}`}) failed: ${describeCause(cause)}`, cause);
        }
      }
    }
    const out = new FieldLengths(field, given, count, loaded, ragged, option !== undefined ? 'option' : 'dataset');
    if (opts.pack !== undefined && option !== undefined && declared !== undefined) checkAgainstDeclared(out.plan(), resolveLengths(declared, undefined, count, Number.MAX_SAFE_INTEGER));
    return out;
  }

  /** Who gave the lengths `plan()` returns: the `lengths` option, or the dataset (declared or computed). */
  get by(): 'option' | 'dataset' {
    return this.#by;
  }

  /**
   * The lengths packing or token budgets plan with: the option, else the declared ones, else the
   * computed lengths of `field`. None: a typed error naming `lengths`.
   */
  plan(): Uint32Array {
    if (this.#given !== undefined) return (this.#resolved ??= resolveLengths(this.#given, undefined, this.#count, Number.MAX_SAFE_INTEGER));
    const own = this.field === undefined ? undefined : this.#loaded.get(this.field);
    if (own !== undefined) return own;
    if (this.field === undefined && this.#ragged.length > 1) {
      throw invalidOption(
        'lengths',
        'given with batchTokens for a dataset of several ragged fields',
        undefined,
        `Each of ${this.#ragged.map(show).join(', ')} has its own lengths: pass the token count the budget should count, one per sample`,
      );
    }
    return resolveLengths(undefined, undefined, this.#count, Number.MAX_SAFE_INTEGER);
  }

  /** Field `name`'s own lengths (NOTE [per-field lengths]); undefined when nothing gives them. */
  of(name: string): Uint32Array | undefined {
    if (name === this.field && this.#given !== undefined) return this.plan();
    return this.#loaded.get(name);
  }
}

/**
 * Packing lays out tokens by the lengths: an option that says otherwise than the lengths the source
 * declares (known without reading, as Megatron's index) is refused at create, not met mid-epoch.
 */
function checkAgainstDeclared(option: Uint32Array, declared: Uint32Array): void {
  const at = option.findIndex((n, i) => n !== declared[i]);
  if (at < 0) return;
  throw invalidOption(
    'lengths',
    `the lengths the dataset declares (sample ${at} has ${declared[at]} tokens)`,
    `${option[at]} for sample ${at}`,
    "Packing places each document's tokens by its length: drop `lengths`, the source knows them",
  );
}

/** The dataset's ragged fields: declared by the source, or named by `collate` / `pack.field`. */
function raggedFields(ds: AnyDataset, names: readonly string[], opts: ResolvedOptions): string[] {
  const declared = hasRaggedFields(ds) ? ds.ragged.filter((n) => typeof n === 'string' && names.includes(n)) : [];
  const named = [...Object.keys(opts.collate ?? {}), ...(opts.pack?.field !== undefined ? [opts.pack.field] : [])].filter((n) => names.includes(n));
  return [...new Set([...declared, ...named])];
}

/**
 * The collated fields with no capacity from the option (`maxLength`, a fixed pad `to`) nor the
 * source (`raggedMax`): each one's capacity is the longest of its own lengths.
 */
function unboundedFields(ds: AnyDataset, collate: Record<string, unknown> | undefined): string[] {
  if (collate === undefined) return [];
  const max: Readonly<Record<string, unknown>> = hasRaggedMax(ds) ? ds.raggedMax : {};
  return Object.entries(collate)
    .filter(([field, raw]) => {
      if (typeof raw === 'function' || typeof max[field] === 'number') return false;
      const body = raw !== null && typeof raw === 'object' ? (Object.values(raw as object)[0] as Record<string, unknown> | undefined) : undefined;
      return !(body !== undefined && (typeof body.maxLength === 'number' || typeof body.to === 'number'));
    })
    .map(([field]) => field);
}
