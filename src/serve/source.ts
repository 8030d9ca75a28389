// Internal: not exported from the package entry.
// What `stoker serve` accepts as a source: a dataset path (as `stoker inspect` opens it), several
// files as the sources that take several make them — a list of paths (`.npy` columns, tar shards,
// Arrow or other files one after another) or a record of names to `.npy` paths (named columns) —, a
// module spec `{module, export, options}`, or a built-in synthetic set `{builtin: 'synthetic', options}`.
// The rule: paths are opened here and closed by the session; a spec is opened (and closed) by the
// loader itself, so its reader workers can reopen it.

import { extname, isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LoaderError, invalidDatasetError, show } from '../errors.js';
import type { AnyDataset } from '../dataset/dataset.js';
import { openPath, openPathWithOptions, openPaths } from '../dataset/open-path.js';
import { moduleSource, type SourceSpec } from '../dataset/source-spec.js';
import { isRemote } from '../remote/remote.js';

/** A local path made absolute; a remote one (s3://, http(s)://) as it is. */
const at = (p: string) => (isRemote(p) ? p : resolve(p));

export interface OpenedSource {
  readonly dataset: AnyDataset | SourceSpec;
  /** True when the session must close `dataset` (a path it opened). */
  readonly owned: boolean;
}

const SYNTHETIC = new URL(`./synthetic${extname(fileURLToPath(import.meta.url))}`, import.meta.url);

export async function openServeSource(source: unknown): Promise<OpenedSource> {
  if (typeof source === 'string' && /^\s*[[{]/.test(source)) {
    try {
      source = JSON.parse(source);
    } catch {
      throw badSource(source);
    }
  }
  if (typeof source === 'string' && source !== '') {
    return { dataset: (await openPath(at(source))).dataset, owned: true };
  }
  if (Array.isArray(source)) {
    if (!source.every((p) => typeof p === 'string' && p !== '')) throw badSource(source);
    return { dataset: (await openPaths(source.map((p: string) => at(p)))).dataset, owned: true };
  }
  const s = source as { path?: unknown; size?: unknown; module?: unknown; export?: unknown; options?: unknown; builtin?: unknown } | null;
  if (s !== null && typeof s === 'object') {
    // {path} alone, or with a size, is one path; any other record of paths names .npy columns (one may be called "path").
    if (typeof s.path === 'string' && Object.keys(s).every((k) => k === 'path' || k === 'size')) {
      const size = typeof s.size === 'number' ? ([s.size, s.size] as const) : Array.isArray(s.size) ? (s.size as [number, number]) : undefined;
      return { dataset: (await openPath(at(s.path), size === undefined ? {} : { size })).dataset, owned: true };
    }
    // {path, ...options}: a path opened with its source's own options (an image folder's view,
    // normalize, output, decode); a record whose every value is an .npy path stays named columns.
    if (typeof s.path === 'string' && !Object.values(s).every((v) => typeof v === 'string' && /\.npy$/i.test(v))) {
      const { path, ...options } = s;
      return { dataset: await openPathWithOptions(at(path as string), options), owned: true };
    }
    if (s.builtin === 'synthetic') return { dataset: moduleSource(SYNTHETIC, 'synthetic', s.options ?? {}), owned: false };
    if (typeof s.module === 'string' && typeof s.export === 'string') {
      const module = isAbsolute(s.module) || /^[a-z]+:/.test(s.module) ? s.module : resolve(s.module);
      return { dataset: moduleSource(module, s.export, s.options), owned: false };
    }
    const named = Object.entries(s);
    if (named.length > 0 && named.every(([, p]) => typeof p === 'string' && p !== '')) {
      return { dataset: (await openPaths(Object.fromEntries(named.map(([k, p]) => [k, at(p as string)])))).dataset, owned: true };
    }
  }
  throw badSource(source);
}

function badSource(source: unknown): LoaderError {
  return invalidDatasetError(
    `stoker serve: the source must be a dataset path, {"path", "size"}, {"path", ...an image folder's options}, a list of paths, a record of names to .npy paths, a module spec {"module", "export", "options"} or {"builtin": "synthetic", "options"}, got ${show(source)}. ` +
      'Pass --source <path> or send one in the open message',
  );
}
