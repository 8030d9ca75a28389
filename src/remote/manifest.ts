// Internal: not exported from the package entry.
// A remote dataset's manifest: what opening it learns from its files' bytes (for tar shards, every
// shard's index), kept so that the next open — by another rank, another process, a resumed job —
// reads one small file instead of downloading the dataset. The rules:
// - A manifest is named by the content it describes: a hash of its kind and of every file's name
//   (relative to the dataset's folder), size and ETag. A changed file changes the name, so a stale
//   manifest is never read; a moved bucket keeps it, so a resume state naming it (`contentId`) still
//   resumes there.
// - It is kept in the node cache (`<cache>/manifests/`), shared by every rank of the node, and may be
//   published beside the data (`<folder>/.stoker/<name>`, hidden from listings and patterns), where
//   every node finds it: an open looks in the node cache, then beside the data, then builds.

import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { NodeCache } from './node-cache.js';
import type { ObjectInfo } from './store.js';

const VERSION = 1;

export interface ManifestName {
  /** The content hash (hex, 32 digits): the dataset's identity in a resume state. */
  readonly id: string;
  /** The file name: `<kind>-<id>.json`. */
  readonly file: string;
  /** The folder URL the files' names are relative to (ends in `/`). */
  readonly folder: string;
}

export function manifestName(kind: string, objects: readonly ObjectInfo[]): ManifestName {
  const urls = objects.map((o) => o.url);
  let folder = urls[0]!.slice(0, urls[0]!.lastIndexOf('/') + 1);
  for (const u of urls) while (!u.startsWith(folder)) folder = folder.slice(0, folder.slice(0, -1).lastIndexOf('/') + 1);
  const h = createHash('sha256').update(`stoker-manifest ${VERSION} ${kind}\n`);
  for (const o of objects) h.update(`${o.url.slice(folder.length)}\0${o.size}\0${o.etag ?? ''}\n`);
  const id = h.digest('hex').slice(0, 32);
  return { id, file: `${kind}-${id}.json`, folder };
}

function localManifest(cache: NodeCache, name: ManifestName): string {
  return join(cache.dir, 'manifests', name.file);
}

/** The manifest's body from the node cache or from beside the data; undefined when neither has it. */
export async function readManifest(cache: NodeCache, name: ManifestName, signal?: AbortSignal): Promise<unknown> {
  const local = localManifest(cache, name);
  try {
    return JSON.parse(await readFile(local, 'utf8'));
  } catch {
    // not in the node cache (or unreadable): look beside the data
  }
  let text: string;
  try {
    text = await readFile(await cache.ensure(`${name.folder}.stoker/${name.file}`, undefined, signal), 'utf8');
  } catch {
    return undefined; // none published (a 404), or the store refuses: build it
  }
  try {
    const body = JSON.parse(text) as unknown;
    await writeLocal(local, text);
    return body;
  } catch {
    return undefined;
  }
}

/** Keep a manifest in the node cache and, with `publish`, beside the data (an S3 PUT). */
export async function writeManifest(cache: NodeCache, name: ManifestName, body: unknown, publish: boolean, signal?: AbortSignal): Promise<void> {
  const text = JSON.stringify(body);
  await writeLocal(localManifest(cache, name), text);
  if (publish) await cache.put(`${name.folder}.stoker/${name.file}`, Buffer.from(text), signal);
}

async function writeLocal(path: string, text: string): Promise<void> {
  await mkdir(join(path, '..'), { recursive: true });
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, text);
  await rename(tmp, path);
}
