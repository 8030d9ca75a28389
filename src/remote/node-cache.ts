// Internal: not exported from the package entry (remote.ts is the public face).
// One cache of remote files per node, shared by every rank, thread and process on it. The rules:
// - A remote object lives at a path that mirrors its URL (`<dir>/s3/<endpoint>/<bucket>/<key>`,
//   `<dir>/http/<host>/<path>`), so file names, extensions and folder structure are the store's and
//   every local reader (tar index, Arrow footer, image folder walk) reads it as it reads a local file.
// - A file is published only whole and checked: downloaded to a private part file, its size checked
//   against the store's and its MD5 against a plain (non-multipart) ETag, then renamed into place,
//   then its sidecar (`.<name>.stoker.json`: url, size, etag) written by rename. A file without a
//   sidecar that matches the store's size and ETag is never read as a hit.
// - One download per object per node: the downloader holds `.<name>.stoker.lock` (created with O_EXCL,
//   holding host and pid, touched every second while bytes arrive); everyone else waits for the
//   sidecar (NOTE [Waiting for another downloader]).
// - Evicting under a byte budget removes whole files, those whose next use is furthest away first
//   (Belady's rule, given the plan's next use: `nextUse`), else the least recently used; never a file
//   this process holds open (`pin`), never anything but a file the cache itself published.

import { createHash, randomBytes } from 'node:crypto';
import { constants as fsc, existsSync, readdirSync, readFileSync, statSync, statfsSync, unlinkSync } from 'node:fs';
import { mkdir, open, readFile, rename, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import { homedir, hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { BroadcastChannel } from 'node:worker_threads';
import { setTimeout as sleep } from 'node:timers/promises';
import { readSwitch, switchName } from '../base/env.js';
import { LoaderError } from '../errors.js';
import { DEFAULT_RETRY, type RetryPolicy, withRetries } from './retry.js';
import { HttpStore, type ObjectInfo, type ObjectStore, S3Store, type S3Options, StoreError } from './store.js';
import { parseRemote, type RemoteUrl } from './url.js';

export interface NodeCacheOptions {
  /** The cache folder, shared by every process of the node. Default: the `cacheDir` switch (docs/env.md), else `$XDG_CACHE_HOME/stoker` or `~/.cache/stoker`. */
  readonly dir?: string;
  /** Most bytes of files kept. Default: the `cacheBytes` switch, else half the free space of the cache's disk when first used. */
  readonly bytes?: number;
  readonly s3?: S3Options;
  readonly retry?: Partial<RetryPolicy>;
  /** Downloads at once when many files are wanted (default 8). */
  readonly concurrency?: number;
}

export interface RemoteCounters {
  /** HEAD, GET and LIST requests sent (retries included). */
  requests: number;
  /** Bytes downloaded. */
  bytes: number;
  retries: number;
  /** Files found whole in the cache. */
  hits: number;
  /** Files this process downloaded. */
  downloads: number;
  /** Files another process (or thread) was downloading, waited for. */
  waited: number;
  evictions: number;
}

interface Sidecar {
  readonly url: string;
  readonly size: number;
  readonly etag?: string;
}

/** How long a lock may go untouched before its holder counts as dead (it touches it every second while bytes arrive). */
const STALE_LOCK_MS = 30_000;
/** Above this many files in the cache, the bytes held are counted by a walk only when the budget seems reached (NOTE [Counting the budget]). */
const WALK_FILES = 4096;

export function defaultCacheDir(): string {
  const env = readSwitch('cacheDir');
  if (env !== undefined) return env;
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'stoker');
}

export class NodeCache {
  readonly dir: string;
  readonly counters: RemoteCounters = { requests: 0, bytes: 0, retries: 0, hits: 0, downloads: 0, waited: 0, evictions: 0 };
  /** The plan's next use of a local file (smaller: sooner; Infinity: not again), when the loader knows it; set directly, it overrides the plans followed. */
  nextUse: ((path: string) => number) | undefined;
  /** The next-use functions of the plans being followed now (one per remote dataset's epoch: file-set.ts). */
  readonly #plans = new Set<(path: string) => number>();
  readonly #options: NodeCacheOptions;
  readonly #retry: RetryPolicy;
  #s3: S3Store | undefined;
  readonly #http = new HttpStore();
  readonly #inflight = new Map<string, Promise<string>>();
  readonly #pinned = new Map<string, number>();
  readonly #lastUse = new Map<string, number>();
  #budget: number | undefined;
  /** Bytes of published files as last counted, plus this process's downloads since (undefined: not counted yet). */
  #used: number | undefined;

  constructor(options: NodeCacheOptions = {}) {
    this.#options = options;
    this.dir = options.dir ?? defaultCacheDir();
    const deadline = readSwitch('remoteDeadline');
    this.#retry = { ...DEFAULT_RETRY, ...(deadline !== undefined ? { deadlineMs: deadline } : {}), ...options.retry };
  }

  #store(u: RemoteUrl): ObjectStore {
    if (u.kind === 'http') return this.#http;
    return (this.#s3 ??= new S3Store(this.#options.s3));
  }

  /** Where `url` lives in the cache. */
  localPath(url: string): string {
    const u = parseRemote(url);
    if (u.kind === 's3') {
      const endpoint = this.#options.s3?.endpoint ?? process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL;
      return join(this.dir, 's3', endpoint === undefined ? 'aws' : hostTag(endpoint), u.bucket, ...u.key.split('/'));
    }
    const p = new URL(u.url);
    return join(this.dir, 'http', `${p.protocol === 'https:' ? 's-' : ''}${hostTag(p.href)}`, ...decodeURIComponent(p.pathname).replace(/^\//, '').split('/'));
  }

  async stat(url: string, signal?: AbortSignal): Promise<ObjectInfo> {
    const u = parseRemote(url);
    return withRetries(`HEAD ${u.url}`, () => (this.counters.requests++, this.#store(u).stat(u, signal)), this.#retry, this.counters, signal);
  }

  async list(prefix: string, signal?: AbortSignal): Promise<ObjectInfo[]> {
    const u = parseRemote(prefix);
    return withRetries(`LIST ${u.url}`, () => (this.counters.requests++, this.#store(u).list(u, signal)), this.#retry, this.counters, signal);
  }

  /** Follow a plan's next uses for eviction until the returned function is called (several datasets may each follow theirs). */
  followNextUse(nextUse: (path: string) => number): () => void {
    this.#plans.add(nextUse);
    return () => this.#plans.delete(nextUse);
  }

  /** The next use of `path` by the plans followed (the soonest), or undefined when none is followed. */
  #nextUse(): ((path: string) => number) | undefined {
    if (this.nextUse !== undefined) return this.nextUse;
    if (this.#plans.size === 0) return undefined;
    const plans = [...this.#plans];
    return (path) => Math.min(...plans.map((f) => f(path)));
  }

  /** Write a small object whole (with retries), e.g. a manifest beside the data. */
  async put(url: string, body: Uint8Array, signal?: AbortSignal): Promise<void> {
    const u = parseRemote(url);
    await withRetries(`PUT ${u.url}`, () => (this.counters.requests++, this.#store(u).put(u, body, signal)), this.#retry, this.counters, signal);
  }

  /** Keep `path` (a local path this cache gave) from eviction until as many `unpin`s. */
  pin(path: string): void {
    this.#pinned.set(path, (this.#pinned.get(path) ?? 0) + 1);
  }

  unpin(path: string): void {
    const n = (this.#pinned.get(path) ?? 0) - 1;
    if (n > 0) this.#pinned.set(path, n);
    else this.#pinned.delete(path);
  }

  /**
   * The local path of `url`, whole and checked: from the cache when its sidecar matches `info` (the
   * store's size and ETag: a HEAD when not given), else downloaded once for the whole node.
   */
  ensure(url: string, info?: ObjectInfo, signal?: AbortSignal): Promise<string> {
    const canonical = parseRemote(url).url;
    let p = this.#inflight.get(canonical);
    if (p === undefined) {
      p = this.#ensure(canonical, info, signal).finally(() => this.#inflight.delete(canonical));
      this.#inflight.set(canonical, p);
    }
    return p;
  }

  async #ensure(url: string, known: ObjectInfo | undefined, signal?: AbortSignal): Promise<string> {
    const info = known ?? (await this.stat(url, signal));
    const path = this.localPath(url);
    const name = basename(path);
    const dir = dirname(path);
    const sidecar = join(dir, `.${name}.stoker.json`);
    const lock = join(dir, `.${name}.stoker.lock`);
    this.#lastUse.set(path, Date.now());
    if (await isHit(path, sidecar, info)) {
      this.counters.hits++;
      return path;
    }
    await mkdir(dir, { recursive: true });
    // NOTE [Waiting for another downloader]: while another process (or thread) holds the lock, wait
    // for its sidecar, polling (20 ms, growing to 200 ms: a reader may be waiting on it; a thread of
    // this process wakes it at once). The wait ends when the file is published, when the lock goes
    // away (its holder failed: take it), or when the holder is dead (its pid is gone from this host,
    // or the lock went untouched for 30 s): then the lock is broken and taken.
    let waited = false;
    for (let poll = 20; ; poll = Math.min(200, poll * 1.5)) {
      if (await tryLock(lock)) break;
      if (!waited) {
        waited = true;
        this.counters.waited++;
      }
      await publishedOrAfter(path, poll, signal);
      if (await isHit(path, sidecar, info)) return path;
      if (await staleLock(lock)) await unlink(lock).catch(() => {});
    }
    const beat = setInterval(() => void utimes(lock, new Date(), new Date()).catch(() => {}), 1000);
    beat.unref();
    try {
      await removeDeadParts(dir, name);
      if (await isHit(path, sidecar, info)) {
        this.counters.hits++;
        return path; // published by the holder we waited for, between its unlock and our lock
      }
      await this.#makeRoom(info.size, path, signal);
      await writeFile(lock, `${hostname()} ${process.pid} ${info.size}\n`); // the room reserved (NOTE [Counting the budget])
      await this.#download(url, info, path, signal);
      await writeAtomic(sidecar, JSON.stringify({ url, size: info.size, ...(info.etag !== undefined ? { etag: info.etag } : {}) } satisfies Sidecar));
      announce(path);
      this.counters.downloads++;
      return path;
    } finally {
      clearInterval(beat);
      await unlink(lock).catch(() => {});
    }
  }

  async #download(url: string, info: ObjectInfo, path: string, signal?: AbortSignal): Promise<void> {
    const u = parseRemote(url);
    const part = join(dirname(path), `.${basename(path)}.stoker.part.${process.pid}.${randomBytes(4).toString('hex')}`);
    const file = await open(part, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_TRUNC, 0o644);
    const md5 = createHash('md5');
    let done = 0;
    try {
      await withRetries(`GET ${u.url}`, async () => {
        this.counters.requests++;
        // NOTE [A stalled request]: a request that brings no byte for `stallMs` (no answer, or a body
        // that stops with the connection open) is aborted and retried, so neither this download nor
        // the processes waiting on its lock wait forever on a silent server.
        const stall = new AbortController();
        const stalled = () => stall.abort(new StoreError(`GET ${u.url}: no byte for ${this.#retry.stallMs} ms`, undefined, 'TimeoutError'));
        let timer = setTimeout(stalled, this.#retry.stallMs);
        const both = signal === undefined ? stall.signal : AbortSignal.any([signal, stall.signal]);
        try {
          const body = await this.#store(u).read(u, done, info.etag, both);
          for await (const chunk of body) {
            clearTimeout(timer);
            timer = setTimeout(stalled, this.#retry.stallMs);
            const bytes = chunk instanceof Uint8Array ? chunk : Buffer.from(chunk as string);
            if (done + bytes.length > info.size) throw new StoreError(`GET ${u.url}: more than the ${info.size} bytes the store announced`, undefined, 'SizeMismatch');
            await file.write(bytes, 0, bytes.length, done);
            md5.update(bytes);
            done += bytes.length;
            this.counters.bytes += bytes.length;
          }
        } catch (error) {
          if (stall.signal.aborted) throw stall.signal.reason; // the stall, whatever the stream made of the abort
          throw error;
        } finally {
          clearTimeout(timer);
        }
        if (done < info.size) throw new StoreError(`GET ${u.url}: the body ended after ${done} of ${info.size} bytes`, undefined, 'TruncatedBody');
      }, this.#retry, this.counters, signal);
      await file.close();
      if (info.etag !== undefined && /^[0-9a-f]{32}$/i.test(info.etag) && md5.digest('hex') !== info.etag.toLowerCase()) {
        throw new LoaderError('ERR_REMOTE', `GET ${u.url}: the ${done} bytes downloaded do not match the store's MD5 ETag ${info.etag}; the transfer was corrupted or the object changed: open the dataset again`);
      }
      await rename(part, path);
    } catch (error) {
      await file.close().catch(() => {});
      await unlink(part).catch(() => {});
      if ((error as { code?: string }).code === 'ENOSPC') {
        throw new LoaderError('ERR_REMOTE', `${u.url}: the cache's disk is full (${this.dir}); give it room or a smaller ${switchName('cacheBytes')}, or point ${switchName('cacheDir')} at a larger disk`, { cause: error });
      }
      throw error;
    }
  }

  /**
   * Evict published files until `size` more bytes fit the budget (Belady by `nextUse`, else LRU).
   * NOTE [Counting the budget]: the bytes held are the published files plus the downloads in flight,
   * each announced by its lock (which holds its size once its room is found), so downloaders in several
   * threads and processes do not overshoot the budget together: whoever counts after another found
   * room sees its lock (two counting in the same instant may overshoot by one file). A downloader
   * waiting for room reserves none, so two waiters never wait on each other. The count is a walk of
   * the cache; with more than WALK_FILES files a walk per download would cost more than it saves, so
   * the count is kept and walked again only when the budget seems reached (downloads of other
   * processes may then overshoot it by what they hold in flight).
   */
  async #makeRoom(size: number, forPath: string, signal?: AbortSignal): Promise<void> {
    const budget = this.budget();
    if (this.#used !== undefined && this.#used + size <= budget) {
      this.#used += size;
      return;
    }
    // NOTE [Waiting for room]: when what is held beyond the evictable files is downloads in flight,
    // wait for them (published, they can be evicted), polling, until the retry deadline or the abort
    // of the read that asked.
    const t0 = Date.now();
    for (let poll = 20; ; poll = Math.min(500, poll * 1.5)) {
      const room = this.#evictFor(size, forPath, budget);
      if (room === 'fits') return;
      if (room.reserved === 0 || Date.now() - t0 > this.#retry.deadlineMs) {
        this.#used = undefined;
        throw new LoaderError(
          'ERR_REMOTE',
          `${forPath}: ${size} bytes do not fit the node cache's budget of ${budget} bytes beside the ${room.used} bytes held by files in use or being downloaded (${this.dir}); raise ${switchName('cacheBytes')}`,
        );
      }
      await sleep(poll, undefined, signal ? { signal } : undefined);
    }
  }

  /** One pass of #makeRoom: evict what may go; 'fits', or what is still held and how much of it is in flight. */
  #evictFor(size: number, forPath: string, budget: number): 'fits' | { used: number; reserved: number } {
    const { files, reserved } = heldFiles(this.dir, forPath);
    let used = files.reduce((s, f) => s + f.size, 0) + reserved;
    if (used + size <= budget) {
      this.#used = files.length > WALK_FILES ? used + size : undefined;
      return 'fits';
    }
    const next = this.#nextUse();
    const candidates = files
      .filter((f) => f.path !== forPath && !this.#pinned.has(f.path))
      .map((f) => ({ ...f, next: next?.(f.path) ?? Infinity, last: this.#lastUse.get(f.path) ?? f.mtimeMs }))
      .sort((a, b) => b.next - a.next || a.last - b.last);
    for (const f of candidates) {
      if (used + size <= budget) break;
      try {
        unlinkSync(f.sidecar);
        unlinkSync(f.path);
      } catch {
        continue; // another process evicted it first
      }
      used -= f.size;
      this.counters.evictions++;
    }
    if (used + size > budget) return { used, reserved };
    this.#used = files.length > WALK_FILES ? used + size : undefined;
    return 'fits';
  }

  /** The byte budget: the option, the `cacheBytes` switch, else half the free space of the cache's disk when first asked. */
  budget(): number {
    if (this.#budget !== undefined) return this.#budget;
    const env = readSwitch('cacheBytes');
    if (this.#options.bytes !== undefined) this.#budget = this.#options.bytes;
    else if (env !== undefined) this.#budget = env;
    else {
      let d = this.dir;
      while (!existsSync(d) && dirname(d) !== d) d = dirname(d);
      const st = statfsSync(d);
      this.#budget = Math.floor((st.bavail * st.bsize) / 2);
    }
    return this.#budget;
  }

  /** Many files at once, `concurrency` downloads in flight; local paths in the order given. */
  async ensureAll(infos: readonly ObjectInfo[], signal?: AbortSignal): Promise<string[]> {
    const out = new Array<string>(infos.length);
    let next = 0;
    const lanes = Math.max(1, Math.min(this.#options.concurrency ?? 8, infos.length));
    await Promise.all(
      Array.from({ length: lanes }, async () => {
        while (next < infos.length) {
          const i = next++;
          out[i] = await this.ensure(infos[i]!.url, infos[i], signal);
        }
      }),
    );
    return out;
  }

  async close(): Promise<void> {
    await this.#s3?.close();
  }
}

/**
 * Waiters in this process's other threads (reader workers) hear of a publish at once, on a broadcast
 * channel; other processes find it by polling (NOTE [Waiting for another downloader]).
 */
let channel: BroadcastChannel | undefined;
const listeners = new Map<string, Set<() => void>>();

function published(): BroadcastChannel {
  if (channel === undefined) {
    channel = new BroadcastChannel('stoker-node-cache');
    channel.unref();
    channel.onmessage = (event) => {
      for (const wake of listeners.get((event as { data: string }).data) ?? []) wake();
    };
  }
  return channel;
}

function announce(path: string): void {
  published().postMessage(path);
}

/** Resolve after `ms`, or sooner when another thread of this process publishes `path`; rejects when `signal` aborts. */
async function publishedOrAfter(path: string, ms: number, signal?: AbortSignal): Promise<void> {
  published();
  let wake!: () => void;
  const woken = new Promise<void>((resolve) => (wake = resolve));
  const set = listeners.get(path) ?? new Set();
  listeners.set(path, set);
  set.add(wake);
  const stop = new AbortController();
  try {
    await Promise.race([woken, sleep(ms, undefined, { signal: signal === undefined ? stop.signal : AbortSignal.any([signal, stop.signal]) })]);
  } catch (error) {
    if (signal?.aborted) throw error;
  } finally {
    stop.abort();
    set.delete(wake);
    if (set.size === 0) listeners.delete(path);
  }
}

/** `host:port` of a URL as a folder name. */
function hostTag(url: string): string {
  const u = new URL(url);
  return `${u.hostname}${u.port ? `_${u.port}` : ''}`.replace(/[^A-Za-z0-9._-]/g, '_');
}

async function isHit(path: string, sidecar: string, info: ObjectInfo): Promise<boolean> {
  let meta: Sidecar;
  try {
    meta = JSON.parse(await readFile(sidecar, 'utf8')) as Sidecar;
  } catch {
    return false;
  }
  if (meta.size !== info.size || meta.etag !== info.etag) return false;
  try {
    return (await stat(path)).size === info.size;
  } catch {
    return false;
  }
}

async function tryLock(lock: string): Promise<boolean> {
  try {
    const f = await open(lock, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL, 0o644);
    await f.writeFile(`${hostname()} ${process.pid}\n`);
    await f.close();
    return true;
  } catch (error) {
    if ((error as { code?: string }).code === 'EEXIST') return false;
    throw error;
  }
}

/** A lock whose holder is gone: a pid no longer alive on this host, or untouched for STALE_LOCK_MS. */
async function staleLock(lock: string): Promise<boolean> {
  let text: string;
  let mtime: number;
  try {
    [text, mtime] = await Promise.all([readFile(lock, 'utf8'), stat(lock).then((s) => s.mtimeMs)]);
  } catch {
    return false;
  }
  const [host, pidText] = text.trim().split(' ');
  const pid = Number(pidText);
  if (host === hostname() && Number.isInteger(pid) && pid > 0 && !alive(pid)) return true;
  return Date.now() - mtime > STALE_LOCK_MS;
}

/** Part files of `name` left by downloaders of this host that died (their pid is gone). */
async function removeDeadParts(dir: string, name: string): Promise<void> {
  const prefix = `.${name}.stoker.part.`;
  for (const f of readdirSync(dir)) {
    if (!f.startsWith(prefix)) continue;
    const pid = Number(f.slice(prefix.length).split('.')[0]);
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && !alive(pid)) await unlink(join(dir, f)).catch(() => {});
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === 'EPERM';
  }
}

async function writeAtomic(path: string, text: string): Promise<void> {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, text);
  await rename(tmp, path);
}

interface Published {
  readonly path: string;
  readonly sidecar: string;
  readonly size: number;
  readonly mtimeMs: number;
}

/** Every file the cache published (one with a sidecar) under `dir`, and the bytes reserved by downloads in flight (their locks) but `forPath`'s. */
function heldFiles(dir: string, forPath: string): { files: Published[]; reserved: number } {
  const files: Published[] = [];
  let reserved = 0;
  const ownLock = join(dirname(forPath), `.${basename(forPath)}.stoker.lock`);
  const walk = (d: string) => {
    let entries;
    try {
      entries = readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (e.isDirectory()) walk(join(d, e.name));
      else if (e.name.startsWith('.') && e.name.endsWith('.stoker.json')) {
        const path = join(d, e.name.slice(1, -'.stoker.json'.length));
        try {
          const meta = JSON.parse(readFileSync(join(d, e.name), 'utf8')) as Sidecar;
          const st = statSync(path);
          files.push({ path, sidecar: join(d, e.name), size: meta.size, mtimeMs: st.mtimeMs });
        } catch {
          // a sidecar whose file went (evicted by another process): not held
        }
      } else if (e.name.startsWith('.') && e.name.endsWith('.stoker.lock') && join(d, e.name) !== ownLock) {
        try {
          const size = Number(readFileSync(join(d, e.name), 'utf8').trim().split(' ')[2]);
          if (Number.isSafeInteger(size) && size > 0) reserved += size;
        } catch {
          // released meanwhile
        }
      }
    }
  };
  walk(dir);
  return { files, reserved };
}
