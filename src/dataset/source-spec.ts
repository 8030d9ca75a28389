// Worker-openable datasets. A source spec names a module, an export and structured-cloneable
// options; each reader worker imports the module and calls the export with the options to open its
// own copy of the dataset. The rule: the export must be a function `(options) => dataset` (or a
// promise of one) that gives the same content in every thread.

import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describeCause, invalidDatasetError, moduleExport, moduleImport, show } from '../errors.js';
import { canReopen, kSourceSpec } from './capabilities.js';
import type { AnyDataset } from './dataset.js';

export interface SourceSpec {
  /** An absolute file path or URL (`file:`, `data:`, or a package name) that `import()` accepts from any thread. */
  readonly module: string;
  /** Name of the exported factory. */
  readonly export: string;
  /** Passed to the factory; must survive structured clone (SharedArrayBuffer-backed arrays are shared, not copied). */
  readonly options?: unknown;
}

// The worker-openable capability (Reopenable, under kSourceSpec) is declared with the others in capabilities.ts.
export { kSourceSpec, type Reopenable } from './capabilities.js';

export function isSourceSpec(value: unknown): value is SourceSpec {
  const v = value as Partial<SourceSpec> | null;
  return v !== null && typeof v === 'object' && typeof v.module === 'string' && typeof v.export === 'string' && typeof (value as { get?: unknown }).get !== 'function' && typeof (value as { getBatch?: unknown }).getBatch !== 'function';
}

/** Whether reader workers can open `dataset` (without materializing its spec, which may copy data). */
export function isReopenable(dataset: unknown): boolean {
  return isSourceSpec(dataset) || canReopen(dataset);
}

export function specOf(dataset: unknown): SourceSpec | undefined {
  if (isSourceSpec(dataset)) return dataset;
  return canReopen(dataset) ? dataset[kSourceSpec]() : undefined;
}

/**
 * Describe a dataset that reader workers can open: `sources.module(new URL('./my-data.ts',
 * import.meta.url), 'openMyData', { root: '/data' })`.
 */
export function moduleSource(module: string | URL, exportName: string, options?: unknown): SourceSpec {
  let specifier = module instanceof URL ? module.href : module;
  if (typeof specifier !== 'string' || specifier.length === 0) throw invalidDatasetError(`sources.module: the module must be a path or URL, got ${show(module)}`);
  if (isAbsolute(specifier)) specifier = pathToFileURL(specifier).href;
  if (specifier.startsWith('.')) {
    throw invalidDatasetError(`sources.module: ${show(specifier)} is relative, and workers resolve from elsewhere. Pass new URL(${show(specifier)}, import.meta.url)`);
  }
  if (typeof exportName !== 'string' || exportName.length === 0) throw invalidDatasetError(`sources.module: the export name must be a non-empty string, got ${show(exportName)}`);
  try {
    structuredClone(options);
  } catch (cause) {
    throw invalidDatasetError(`sources.module: options must survive structured clone to reach the workers: ${describeCause(cause)}`, cause);
  }
  return Object.freeze({ module: specifier, export: exportName, options });
}

/** Import the spec's module and call its factory. */
export async function openSource(spec: SourceSpec): Promise<AnyDataset> {
  let mod: Record<string, unknown>;
  try {
    mod = (await import(spec.module)) as Record<string, unknown>;
  } catch (cause) {
    throw moduleImport('source', spec.module, cause);
  }
  const factory = mod[spec.export];
  if (typeof factory !== 'function') {
    throw moduleExport('source', spec.module, spec.export, mod);
  }
  return (await factory(spec.options)) as AnyDataset;
}
