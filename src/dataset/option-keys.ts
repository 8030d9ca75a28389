// Internal: not exported from the package entry.
// The one check of option names for sources (source-options.ts, mix-source.ts): a key an options
// object does not know is refused with the nearest known key. The rule: a key table is written as a
// record over its options type's keys (`keysOf`), so the compiler fails when an option is added to a
// type but not to its table, or a table names an option the type does not have.

import { unknownOption } from '../errors.js';

/** Every key of `T`, each once: the compiler refuses a table that misses one of them or adds another. */
export type KeyTable<T> = { readonly [K in keyof Required<T>]: true };

export function keysOf<T>(table: KeyTable<T>): readonly string[] {
  return Object.freeze(Object.keys(table));
}

/** Refuse a key of `options` that is not one of `known`; `where` names the object in messages (`sources.npy`, `sources.tarShards image`). */
export function checkKeys(where: string, options: object, known: readonly string[]): void {
  for (const key of Object.keys(options)) if (!known.includes(key)) throw unknownOption(where, key, known);
}
