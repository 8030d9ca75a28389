// Remote datasets: `s3://` and `http(s)://` paths made local through the node cache (node-cache.ts).
// The rule: a remote path names the same files a local path would — one object, a brace pattern
// (`train-{000..099}.tar`), a wildcard in the last segment (`train-*.tar`, by listing), or a folder
// (`s3://bucket/train/`, by listing: an image folder, a folder of shards) — and each format's own
// reader then reads the cached copy, so a remote dataset gives the bytes the local copy gives.

import { invalidOption, unknownOption } from '../errors.js';
import { braceExpand } from '../base/brace-expand.js';
import { NodeCache, type NodeCacheOptions, type RemoteCounters, defaultCacheDir } from './node-cache.js';
import type { ObjectInfo } from './store.js';
import { StoreError } from './store.js';
import { isRemote, parseRemote, remoteDir } from './url.js';

export { isRemote } from './url.js';
export type { NodeCacheOptions as RemoteOptions, RemoteCounters } from './node-cache.js';

const REMOTE_KEYS = ['dir', 'bytes', 's3', 'retry', 'concurrency'];
const S3_KEYS = ['endpoint', 'region', 'addressing', 'profile', 'credentials'];
const RETRY_KEYS = ['deadlineMs', 'baseDelayMs', 'maxDelayMs', 'stallMs'];

/**
 * Check the node cache's and the store's options (`remoteFiles(…, options)`, `sources.tarShards(…,
 * { remote })`) where they are given, naming each bad key as `<where>.<key>`.
 */
export function checkRemoteOptions(o: unknown, where: string): NodeCacheOptions {
  const record = (v: unknown, knob: string, keys: readonly string[]): Record<string, unknown> => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw invalidOption(knob, 'an object', v);
    for (const k of Object.keys(v)) if (!keys.includes(k)) throw unknownOption(knob, k, keys);
    return v as Record<string, unknown>;
  };
  const text = (v: unknown, knob: string) => {
    if (v !== undefined && (typeof v !== 'string' || v === '')) throw invalidOption(knob, 'a non-empty string', v);
  };
  const count = (v: unknown, knob: string, least: number) => {
    if (v !== undefined && (typeof v !== 'number' || !Number.isSafeInteger(v) || v < least)) throw invalidOption(knob, `an integer ≥ ${least}`, v);
  };
  const r = record(o, where, REMOTE_KEYS);
  text(r.dir, `${where}.dir`);
  count(r.bytes, `${where}.bytes`, 1);
  count(r.concurrency, `${where}.concurrency`, 1);
  if (r.retry !== undefined) {
    const retry = record(r.retry, `${where}.retry`, RETRY_KEYS);
    for (const k of RETRY_KEYS) count(retry[k], `${where}.retry.${k}`, 1);
  }
  if (r.s3 !== undefined) {
    const s3 = record(r.s3, `${where}.s3`, S3_KEYS);
    text(s3.endpoint, `${where}.s3.endpoint`);
    if (typeof s3.endpoint === 'string' && !URL.canParse(s3.endpoint)) throw invalidOption(`${where}.s3.endpoint`, 'a URL such as http://127.0.0.1:9000', s3.endpoint);
    text(s3.region, `${where}.s3.region`);
    text(s3.profile, `${where}.s3.profile`);
    if (s3.addressing !== undefined && s3.addressing !== 'path' && s3.addressing !== 'virtual') throw invalidOption(`${where}.s3.addressing`, "'path' or 'virtual'", s3.addressing);
    if (s3.credentials !== undefined) {
      const c = record(s3.credentials, `${where}.s3.credentials`, ['accessKeyId', 'secretAccessKey', 'sessionToken']);
      text(c.accessKeyId, `${where}.s3.credentials.accessKeyId`);
      text(c.secretAccessKey, `${where}.s3.credentials.secretAccessKey`);
      text(c.sessionToken, `${where}.s3.credentials.sessionToken`);
      if (c.accessKeyId === undefined || c.secretAccessKey === undefined) throw invalidOption(`${where}.s3.credentials`, 'an object with accessKeyId and secretAccessKey', s3.credentials);
    }
  }
  return r as NodeCacheOptions;
}

const caches = new Map<string, NodeCache>();

/** This thread's node cache for these options (one per cache folder and store configuration). */
export function nodeCache(options: NodeCacheOptions = {}): NodeCache {
  // The folder as the environment names it now (the cacheDir switch): a cache made under another folder is another cache.
  const dir = options.dir ?? defaultCacheDir();
  const key = JSON.stringify([dir, options.s3 ?? null, options.bytes ?? null, options.retry ?? null]);
  let c = caches.get(key);
  if (c === undefined) {
    c = new NodeCache({ ...options, dir });
    caches.set(key, c);
  }
  return c;
}

/** Counters of every node cache of this thread, summed: requests, bytes, retries, hits, downloads, waits, evictions. */
export function remoteStats(): RemoteCounters {
  const out: RemoteCounters = { requests: 0, bytes: 0, retries: 0, hits: 0, downloads: 0, waited: 0, evictions: 0 };
  for (const c of caches.values()) for (const k of Object.keys(out) as (keyof RemoteCounters)[]) out[k] += c.counters[k];
  return out;
}

export interface RemoteFiles {
  /** Local paths of the files, in the order named (a listing's in key order). */
  readonly files: readonly string[];
  /** The local folder of a remote folder (`s3://bucket/train/` → its mirror in the cache); absent for files. */
  readonly folder?: string;
}

/**
 * Download what a remote path names into the node cache (once per node) and give the local paths:
 * `await remoteFiles('s3://bucket/train-{000..009}.tar')`. Local paths pass through unchanged.
 */
export async function remoteFiles(spec: string | readonly string[], options: NodeCacheOptions = {}, signal?: AbortSignal): Promise<RemoteFiles> {
  const cache = nodeCache(checkRemoteOptions(options, 'options'));
  const { entries, folder } = await remoteObjects(spec, options, signal);
  const remote = entries.filter((o): o is ObjectInfo => typeof o !== 'string');
  const local = await cache.ensureAll(remote, signal);
  for (const p of local) cache.pin(p);
  let r = 0;
  const files = entries.map((o) => (typeof o === 'string' ? o : local[r++]!));
  return folder === undefined ? { files } : { files, folder: cache.localPath(folder).replace(/[/\\]$/, '') };
}

/**
 * What a remote path names, without downloading (`options` checked by the caller: checkRemoteOptions): each object's URL, size and ETag (local paths pass
 * through as strings), by HEAD for a named object and by listing for a wildcard or a folder; `folder`
 * is the remote folder's URL when the path was one folder.
 */
export async function remoteObjects(spec: string | readonly string[], options: NodeCacheOptions = {}, signal?: AbortSignal): Promise<{ entries: (ObjectInfo | string)[]; folder?: string }> {
  const cache = nodeCache(options);
  const list = typeof spec === 'string' ? [spec] : spec;
  if (list.length === 0 || !list.every((p) => typeof p === 'string' && p.length > 0)) throw invalidOption('path', 'a path, a pattern or a non-empty list of paths', spec);
  const entries: (ObjectInfo | string)[] = [];
  let folder: string | undefined;
  for (const item of list) {
    if (!isRemote(item)) {
      entries.push(item);
      continue;
    }
    for (const url of braceExpand(item)) {
      const found = await expandOne(cache, url, signal);
      if (found.folder !== undefined && typeof spec === 'string' && list.length === 1) folder = found.folder;
      entries.push(...found.objects);
    }
  }
  return folder === undefined ? { entries } : { entries, folder };
}

/** One expanded remote path: a wildcard's matches, a folder's objects, or the object itself. */
async function expandOne(cache: NodeCache, url: string, signal?: AbortSignal): Promise<{ objects: ObjectInfo[]; folder?: string }> {
  const u = parseRemote(url);
  const name = url.slice(url.lastIndexOf('/') + 1);
  if (/[*?]/.test(remoteDir(url))) throw invalidOption('path', 'a pattern with wildcards in the last segment only', url, 'List the files, or put them under one prefix');
  if (/[*?]/.test(name)) {
    const re = new RegExp(`^${name.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')}$`);
    const dir = remoteDir(url);
    const objects = (await cache.list(dir, signal)).filter((o) => {
      const rest = o.url.slice(dir.length);
      return !rest.includes('/') && re.test(rest);
    });
    if (objects.length === 0) throw invalidOption('path', 'a pattern that matches at least one object', url);
    return { objects };
  }
  if (name === '') return folderOf(cache, url, signal);
  try {
    return { objects: [await cache.stat(url, signal)] };
  } catch (error) {
    // No object by that name on S3: a folder (a common prefix) of that name, when it holds objects.
    const cause = (error as { cause?: unknown }).cause;
    const missing = cause instanceof StoreError && (cause.status === 404 || cause.code === 'NotFound' || cause.code === 'NoSuchKey');
    if (u.kind === 's3' && missing) {
      const found = await folderOf(cache, `${url}/`, signal).catch(() => undefined);
      if (found !== undefined) return found;
    }
    throw error;
  }
}

async function folderOf(cache: NodeCache, url: string, signal?: AbortSignal): Promise<{ objects: ObjectInfo[]; folder: string }> {
  const objects = (await cache.list(url, signal)).filter((o) => !o.url.slice(url.length).split('/').some((s) => s.startsWith('.')));
  if (objects.length === 0) throw invalidOption('path', 'a folder (prefix) that holds objects', url, 'Check the bucket and prefix');
  return { objects, folder: url };
}
