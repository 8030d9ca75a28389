// Internal: not exported from the package entry.
// The listing of an image folder, made once and shared: `sources.imageFolder` lists on the main
// thread (or reads the listing cached on disk), and the listing travels to reader workers as
// shared memory — the relative paths packed as bytes with their ends, the labels — so a worker
// neither lists the folder nor copies a million strings (NOTE [one listing]).
//
// NOTE [one listing] PyTorch's ImageFolder pickles its list of (path, label) into every worker
// (20 s and more is reported for ImageNet). Here the listing is three shared arrays: `names` (every
// relative path's bytes, concatenated, in sample order), `ends` (the end of each in `names`) and
// `labels`; structured clone shares SharedArrayBuffers instead of copying them, and a path is
// decoded only when a read needs it. The listing is cached on disk (beside the tar and JSONL
// indexes: `$XDG_CACHE_HOME/stoker/folder-index/`, else ~/.cache/stoker/…, else a private temp
// dir), keyed by the folder's absolute path and the extensions, and trusted only while the
// modification time of every directory it walked is unchanged (adding, removing or renaming an
// entry changes its directory's mtime). A cache that cannot be read or written is skipped.
// `listFolder` walks in this thread; `listFolderAsync` (sources.imageFolderAsync) walks the class
// folders on worker threads while this thread awaits, to the same bytes (NOTE [parallel walk]).
//
// The walk follows torchvision: class folders sorted by name give label indices 0, 1, …; inside a
// class, files are taken from the whole subtree (folders sorted by path, files sorted by name within
// a folder, symbolic links followed, cycles skipped) when their extension is one of `extensions`
// (case-insensitive). Names that start with "." are skipped; files directly in the root are ignored;
// a class folder with no image is refused. Names are kept as the bytes on disk (NOTE [names as
// bytes] in image-folder.ts) and sorted by their bytes.

import { createHash } from 'node:crypto';
import { type Dirent, readdirSync, realpathSync, statSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { isUtf8 } from 'node:buffer';
import { type MessagePort, MessageChannel, Worker, receiveMessageOnPort } from 'node:worker_threads';
import { fileAccess, invalidDatasetError, show, workerExited, workerFailed } from '../../../errors.js';
import { readCacheFile, writeCacheFile, writeCacheFileAsync } from '../columns/cache-file.js';
import { indexCacheDir, isPrivateDir } from '../tar/tar-index.js';
import { workerBoot } from '../../../base/worker-boot.js';
import { readSwitch } from '../../../base/env.js';

/** The listing as it travels to reader workers (its arrays shared, not copied). */
export interface FolderListing {
  readonly classes: readonly string[];
  /** Every relative path's bytes, in sample order (shared memory). */
  readonly names: Uint8Array;
  /** End of path i in `names` (shared memory); path i starts at ends[i − 1] (0 for i = 0). */
  readonly ends: Uint32Array;
  /** Label of each sample (shared memory). */
  readonly labels: Int32Array;
  /** Samples whose path is not valid UTF-8 (opened by their bytes). */
  readonly raw: readonly number[];
}

/** Where the listing came from: walked now, or read from the cache. */
export type ListingOrigin = 'walked' | 'cached';

/** 'auto': read and write the cache (default); 'off': walk every time, write nothing. */
export type FolderIndexMode = 'auto' | 'off';

const MAGIC = 'stoker-folder-index 1\n';
const DOT = 0x2e;
const SLASH = Buffer.from('/');
const lossy = new TextDecoder('utf-8');

let walks = 0;

/** How many folders this thread has walked (cache hits do not count). For tests and benches. */
export function folderWalks(): number {
  return walks;
}

/** The cache directory of folder listings, beside the tar indexes. */
export function folderCacheDir(): string {
  return join(dirname(indexCacheDir()), 'folder-index');
}

/** Path `i` of a listing, as bytes (a view into shared memory: copy what you keep). */
export function pathBytes(l: FolderListing, i: number): Uint8Array {
  return l.names.subarray(i === 0 ? 0 : l.ends[i - 1]!, l.ends[i]!);
}

/** Path `i` as a string (U+FFFD for bytes that are not UTF-8). */
export function pathString(l: FolderListing, i: number): string {
  return lossy.decode(pathBytes(l, i));
}

/** The listing of `root` (absolute) for `extensions` (lower case, with the dot): from the cache when it is still valid, else walked (and cached). */
export function listFolder(root: string, extensions: ReadonlySet<string>, mode: FolderIndexMode = 'auto'): { listing: FolderListing; origin: ListingOrigin } {
  const { ext, places } = cachePlaces(root, extensions);
  const hit = mode === 'auto' ? readCaches(places, root, ext) : undefined;
  if (hit !== undefined) return { listing: hit, origin: 'cached' };
  const { listing, dirs } = walkFolderParallelSync(root, extensions);
  if (mode === 'auto') writeCaches(places, root, ext, listing, dirs);
  return { listing, origin: 'walked' };
}

/**
 * `listFolder` with the walk spread over worker threads (NOTE [parallel walk]) while this thread
 * awaits: the same listing, the same cache, the same errors.
 */
export async function listFolderAsync(root: string, extensions: ReadonlySet<string>, mode: FolderIndexMode = 'auto', threads = walkThreads()): Promise<{ listing: FolderListing; origin: ListingOrigin }> {
  const { ext, places } = cachePlaces(root, extensions);
  await writing.get(places[0]!);
  const hit = mode === 'auto' ? readCaches(places, root, ext) : undefined;
  if (hit !== undefined) return { listing: hit, origin: 'cached' };
  const { listing, dirs } = await walkFolderParallel(root, extensions, threads);
  if (mode === 'auto') {
    // Written while the loader starts, not before this returns (NOTE [parallel walk]).
    const write = writeCachesAsync(places, root, ext, listing, dirs).finally(() => {
      if (writing.get(places[0]!) === write) writing.delete(places[0]!);
    });
    writing.set(places[0]!, write);
  }
  return { listing, origin: 'walked' };
}

/** Cache writes under way in this thread, by place: a listing asked for again waits for its write. */
const writing = new Map<string, Promise<void>>();

/** Resolves once `root`'s listing cache written by `listFolderAsync` in this thread is on disk (or failed). For tests. */
export async function folderCacheWritten(root: string, extensions: ReadonlySet<string>): Promise<void> {
  await writing.get(cachePlaces(root, extensions).places[0]!);
}

function cachePlaces(root: string, extensions: ReadonlySet<string>): { ext: string; places: string[] } {
  const ext = [...extensions].sort().join(' ');
  const name = `${createHash('sha256').update(`${root}\0${ext}`).digest('hex').slice(0, 32)}.idx`;
  return { ext, places: [join(folderCacheDir(), name), join(tmpdir(), `stoker-folder-index-${process.getuid?.() ?? 'user'}`, name)] };
}

function readCaches(places: readonly string[], root: string, ext: string): FolderListing | undefined {
  for (const place of places) {
    if (!isPrivateDir(dirname(place))) continue;
    const hit = readCache(place, root, ext);
    if (hit !== undefined) return hit;
  }
  return undefined;
}

async function writeCachesAsync(places: readonly string[], root: string, ext: string, l: FolderListing, dirs: readonly DirStamp[]): Promise<void> {
  for (const place of places) if (await writeCacheFileAsync(place, MAGIC, cacheHead(root, ext, l, dirs), 4, [l.ends, l.labels, l.names])) return;
}

function writeCaches(places: readonly string[], root: string, ext: string, listing: FolderListing, dirs: readonly DirStamp[]): void {
  for (const place of places) if (writeCache(place, root, ext, listing, dirs)) break;
}

interface DirStamp {
  /** Path relative to root ('' for root), as bytes. */
  readonly rel: Buffer;
  readonly mtimeNs: string;
}

function mtimeOf(path: Buffer): string {
  return statSync(path, { bigint: true }).mtimeNs.toString();
}

function joinBytes(a: Buffer, b: Buffer): Buffer {
  return a.length === 0 ? b : Buffer.concat([a, SLASH, b]);
}

/** Walk the folder (see the header for the rules); the stamps of every directory read come with it. */
export function walkFolder(root: string, extensions: ReadonlySet<string>): { listing: FolderListing; dirs: DirStamp[] } {
  walks++;
  const { rootBytes, classes, dirs } = walkTop(root);
  const { paths, labels } = walkClasses(root, rootBytes, classes, 0, extensions, dirs);
  return { listing: pack(classes.map((c) => lossy.decode(c)), paths, labels), dirs };
}

/** The root's own stamp and its class folders, sorted (the first step of a walk). */
function walkTop(root: string): { rootBytes: Buffer; classes: Buffer[]; dirs: DirStamp[] } {
  const rootBytes = Buffer.from(root);
  const dirs: DirStamp[] = [];
  let top;
  try {
    if (!statSync(root).isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
    dirs.push({ rel: Buffer.alloc(0), mtimeNs: mtimeOf(rootBytes) });
    top = readdirSync(root, { withFileTypes: true, encoding: 'buffer' });
  } catch (cause) {
    throw fileAccess(root, 'list the image folder', cause);
  }
  const classes = top
    .filter((e) => e.name[0] !== DOT && (e.isDirectory() || (e.isSymbolicLink() && isDirectory(Buffer.concat([rootBytes, SLASH, e.name])))))
    .map((e) => e.name)
    .sort(Buffer.compare);
  if (classes.length === 0) {
    throw invalidDatasetError(
      `sources.imageFolder(${show(root)}): no class folders in it. An image folder holds one sub-folder per class (dir/<class>/<image>); images directly in dir belong to no class and are ignored`,
    );
  }
  return { rootBytes, classes, dirs };
}

/** The images of class folders `classes` (labels `firstLabel`, `firstLabel` + 1, …), in order; the stamps of the directories read are pushed to `dirs`. */
function walkClasses(root: string, rootBytes: Buffer, classes: readonly Buffer[], firstLabel: number, extensions: ReadonlySet<string>, dirs: DirStamp[]): { paths: (string | Buffer)[]; labels: number[] } {
  const paths: (string | Buffer)[] = [];
  const labels: number[] = [];
  classes.forEach((name, k) => {
    const found: (string | Buffer)[] = [];
    walk(rootBytes, name, extensions, found, new Set(), dirs);
    if (found.length === 0) {
      throw invalidDatasetError(
        `sources.imageFolder(${show(root)}): class folder ${show(lossy.decode(name))} holds no image (extensions looked for: ${[...extensions].join(' ')}). Add images, remove the folder, or pass extensions: [...] to match the files`,
      );
    }
    for (const f of found) {
      paths.push(f);
      labels.push(firstLabel + k);
    }
  });
  return { paths, labels };
}

/**
 * NOTE [parallel walk] A cold walk of 1.28 M names took 1.58 s on one thread (H200 host, run 11):
 * each folder's readdir, the names made into strings, the filter and the sort — all per class, and
 * classes are independent (each has its own cycle set). So `walkFolderParallel` lists the root here,
 * cuts the sorted classes into contiguous chunks, and worker threads (folder-walk-worker.ts) take
 * chunks off a shared counter, walk each with the same `walkClasses` as the one-thread walk and post
 * it packed (shared memory, not a million strings); the chunks are joined in class order, so the
 * listing and the stamps are byte for byte those of `walkFolder`. This thread awaits (the blocking
 * form, for the synchronous `sources.imageFolder`, is NOTE [blocking parallel walk]). A chunk that failed (a folder that
 * cannot be read, a class with no image) makes this thread walk again in order, so the error thrown
 * is the one-thread walk's, for the first failing class. This thread walks chunks too while the
 * workers start (tens of ms each), and the walk ends when every chunk is in, not when every worker
 * has reported: a worker still starting when the chunks ran out holds nothing back. After the walk,
 * `listFolderAsync` writes the cache on libuv's threads (one writev of the shared arrays, no joined
 * copy) while the loader starts; a second `listFolderAsync` of the same folder in this thread waits
 * for that write. The env switch `walkThreads` (base/env.ts) sets the threads (1: the one-thread walk).
 */

/**
 * NOTE [blocking parallel walk] `sources.imageFolder` is synchronous, so its walk (`listFolder`)
 * blocks this thread — and still walks on worker threads: `walkFolderParallelSync` gives each worker
 * its own MessagePort and a shared count; a worker posts a chunk on its port, bumps the count and
 * notifies; this thread, once out of chunks of its own, waits on the count (Atomics.wait) and reads
 * the ports with `receiveMessageOnPort`, which needs no event loop. Nothing can hang it: a worker
 * that fails or never starts only leaves chunks undelivered, and when no chunk arrives for
 * WALK_STALL_MS this thread takes every chunk no worker claimed and walks those claimed but not
 * delivered itself (a late copy from a worker is dropped), so the worst case is the one-thread walk
 * plus WALK_STALL_MS. Run from the TypeScript sources under tsx, a worker's module loading
 * waits for this thread's event loop (the workers delivered nothing while it blocked), so there the
 * blocking walk is the one-thread walk; from the package (dist/*.js) the workers walk while this
 * thread waits (test/package.test.ts checks it).
 */

/** Chunks per walk thread: small enough that the threads finish together when classes differ in size. */
const CHUNKS_PER_THREAD = 8;
/** Walk threads at most (the walk is syscalls and small strings; more threads gain little). */
export const MAX_WALK_THREADS = 8;
const WALK_WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? './folder-walk-worker.ts' : './folder-walk-worker.js', import.meta.url);

/**
 * Threads of a parallel walk: one per core, at most MAX_WALK_THREADS, and 1 (this thread alone) on
 * 2 cores or fewer — a worker costs ~0.05 s of CPU to start and walks slower while its code warms,
 * which on a loaded 2-core machine made the walk slower (0.41 s against 0.32 s for 200 k files);
 * the env switch `walkThreads` (base/env.ts) overrides.
 */
export function walkThreads(): number {
  const env = readSwitch('walkThreads');
  if (env !== undefined) return env;
  const cores = availableParallelism();
  return cores <= 2 ? 1 : Math.min(MAX_WALK_THREADS, cores);
}

/** What a walk worker is given (workerData). */
export interface WalkWorkerData {
  readonly root: string;
  readonly extensions: readonly string[];
  /** The sorted class folder names (bytes). */
  readonly classes: readonly Uint8Array[];
  /** Chunk c is classes [starts[c], starts[c + 1]). */
  readonly starts: readonly number[];
  /** Int32 [next chunk to take], shared by the workers. */
  readonly next: SharedArrayBuffer;
  /** The blocking walk's channel: chunks are posted here, and Int32 [chunks posted] is bumped and notified after each. */
  readonly port?: MessagePort;
  readonly posted?: SharedArrayBuffer;
}

/** A walked chunk, or the note that it failed (this thread then walks again to throw the error). */
export type WalkedChunk =
  | { readonly chunk: number; readonly names: Uint8Array; readonly ends: Uint32Array; readonly labels: Int32Array; readonly raw: readonly number[]; readonly dirs: readonly (readonly [string, string])[] }
  | { readonly chunk: number; readonly failed: true };

/** In a walk worker: take chunks until none is left, posting each (see NOTE [parallel walk]). */
export function walkChunks(data: WalkWorkerData, post: (m: WalkedChunk) => void): void {
  const next = new Int32Array(data.next);
  for (;;) {
    const chunk = Atomics.add(next, 0, 1);
    if (chunk >= data.starts.length - 1) return;
    walkOne(data, chunk, post);
  }
}

/** Walk chunk `chunk` of `data` and post it packed (or its failure). */
function walkOne(data: WalkWorkerData, chunk: number, post: (m: WalkedChunk) => void): void {
  const rootBytes = Buffer.from(data.root);
  const extensions = new Set(data.extensions);
  const first = data.starts[chunk]!;
  const classes = data.classes.slice(first, data.starts[chunk + 1]!).map((c) => Buffer.from(c.buffer, c.byteOffset, c.byteLength));
  const dirs: DirStamp[] = [];
  let walked;
  try {
    walked = walkClasses(data.root, rootBytes, classes, first, extensions, dirs);
  } catch {
    post({ chunk, failed: true });
    return;
  }
  const l = pack([], walked.paths, walked.labels);
  post({ chunk, names: l.names, ends: l.ends, labels: l.labels, raw: l.raw, dirs: dirs.map((d) => [d.rel.toString('latin1'), d.mtimeNs] as const) });
}

/**
 * `walkFolder` over `threads` threads (NOTE [parallel walk]): this one and `threads` − 1 workers
 * (`inThisThread` false: `threads` workers, this thread only awaits; for tests); one thread: `walkFolder`.
 */
export async function walkFolderParallel(root: string, extensions: ReadonlySet<string>, threads = walkThreads(), inThisThread = true): Promise<{ listing: FolderListing; dirs: DirStamp[] }> {
  if (threads <= 1) return walkFolder(root, extensions);
  const plan = planWalk(root, extensions, threads);
  const { data, chunkCount } = plan;
  const chunks: WalkedChunk[] = new Array(chunkCount);
  let received = 0;
  let settle: { resolve: () => void; reject: (e: Error) => void } | undefined;
  let failure: Error | undefined;
  const take = (m: WalkedChunk): void => {
    chunks[m.chunk] = m;
    if (++received === chunkCount) settle?.resolve();
  };
  const fail = (e: Error): void => {
    failure ??= e;
    settle?.reject(e);
  };
  const workers: Worker[] = [];
  try {
    // This thread is one of the walkers: the workers' start (tens of ms each) is not lost time.
    for (let w = 0; w < Math.min(threads, chunkCount) - (inThisThread ? 1 : 0); w++) {
      const worker = new Worker(workerBoot(WALK_WORKER_URL), { eval: true, workerData: data, stdout: false, stderr: false });
      workers.push(worker);
      let done = false;
      worker.on('message', (m: WalkedChunk | 'done') => {
        if (m === 'done') done = true;
        else take(m);
      });
      worker.on('error', (error) => fail(workerFailed(`sources.imageFolder(${show(root)}): a folder-walk worker`, error)));
      worker.on('exit', (code) => {
        if (!done && received < chunkCount) fail(workerExited(`sources.imageFolder(${show(root)}): a folder-walk worker`, code));
      });
    }
    if (inThisThread) walkChunks(data, take);
    // The rest is in the workers: wait for every chunk, not for every worker (one still starting
    // when the chunks ran out has nothing to give).
    if (failure !== undefined) throw failure;
    if (received < chunkCount) {
      await new Promise<void>((resolve, reject) => {
        settle = { resolve, reject };
      });
    }
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return finishWalk(plan, chunks);
}

/** The first step of a parallel walk: the root listed here, its classes cut into chunks for the workers. */
function planWalk(root: string, extensions: ReadonlySet<string>, threads: number) {
  walks++;
  const { rootBytes, classes, dirs } = walkTop(root);
  const chunkCount = Math.min(classes.length, threads * CHUNKS_PER_THREAD);
  const starts = Array.from({ length: chunkCount + 1 }, (_, c) => Math.floor((c * classes.length) / chunkCount));
  const data: WalkWorkerData = { root, extensions: [...extensions], classes, starts, next: new SharedArrayBuffer(4) };
  return { root, extensions, rootBytes, dirs, chunkCount, data };
}

/** The last step: every chunk in, joined in class order — or, if one failed, the one-thread walk's error. */
function finishWalk(plan: ReturnType<typeof planWalk>, chunks: readonly (WalkedChunk | undefined)[]): { listing: FolderListing; dirs: DirStamp[] } {
  const { root, extensions, rootBytes, dirs, data } = plan;
  if (chunks.some((c) => c !== undefined && 'failed' in c)) {
    // Walk again here, in order: the one-thread walk's error, for the first class that fails.
    walkClasses(root, rootBytes, data.classes as Buffer[], 0, extensions, []);
    throw invalidDatasetError(`sources.imageFolder(${show(root)}): the folder changed while it was listed (a class folder failed in a walk thread, not in this one); open it again`);
  }
  const names = data.classes.map((c) => lossy.decode(c));
  return { listing: join_(names, chunks as Extract<WalkedChunk, { names: Uint8Array }>[], dirs), dirs };
}

/** How a blocking parallel walk went (for tests and benches). */
export interface SyncWalkReport {
  /** Chunks whose walk a worker delivered first. */
  byWorkers: number;
  /** Chunks a worker claimed that this thread walked again because no worker delivered for `stallMs`. */
  rewalked: number;
}

/** A blocking walk with no word from any worker for this long walks every missing chunk itself. */
export const WALK_STALL_MS = 250;

/**
 * `walkFolderParallel` for the synchronous `listFolder` (sources.imageFolder): the same listing and
 * errors, this thread blocking (NOTE [blocking parallel walk]). `inThisThread` false: this thread
 * takes no chunk off the counter (it still walks chunks no worker delivered within `stallMs`);
 * `workerEntry` replaces the walk worker's module (tests: one that never answers).
 */
export function walkFolderParallelSync(
  root: string, extensions: ReadonlySet<string>, threads = walkThreads(),
  { inThisThread = true, stallMs = WALK_STALL_MS, workerEntry = WALK_WORKER_URL, report }: { inThisThread?: boolean; stallMs?: number; workerEntry?: URL; report?: SyncWalkReport } = {},
): { listing: FolderListing; dirs: DirStamp[] } {
  // Run from TypeScript sources (tsx), a worker's imports wait on this thread: blocked, it would walk alone anyway.
  if (threads <= 1 || (workerEntry === WALK_WORKER_URL && WALK_WORKER_URL.pathname.endsWith('.ts'))) return walkFolder(root, extensions);
  const plan = planWalk(root, extensions, threads);
  const { chunkCount } = plan;
  const posted = new Int32Array(new SharedArrayBuffer(4));
  const base: WalkWorkerData = { ...plan.data, posted: posted.buffer as SharedArrayBuffer };
  const chunks: (WalkedChunk | undefined)[] = new Array(chunkCount);
  let received = 0;
  let byWorkers = 0;
  let rewalked = 0;
  const take = (m: WalkedChunk, fromWorker: boolean): void => {
    if (chunks[m.chunk] !== undefined) return; // walked twice (a late worker after this thread's walk): the first stands
    chunks[m.chunk] = m;
    received++;
    if (fromWorker) byWorkers++;
  };
  const workers: Worker[] = [];
  const ports: MessagePort[] = [];
  try {
    for (let w = 0; w < Math.min(threads, chunkCount) - (inThisThread ? 1 : 0); w++) {
      const { port1, port2 } = new MessageChannel();
      ports.push(port1);
      try {
        const worker = new Worker(workerBoot(workerEntry), { eval: true, workerData: { ...base, port: port2 }, transferList: [port2], stdout: false, stderr: false });
        // Its errors show as missing chunks, which this thread walks (no listener: nothing may throw later).
        worker.on('error', () => {});
        worker.unref();
        workers.push(worker);
      } catch {
        break; // no worker: this thread walks what is left
      }
    }
    if (inThisThread) walkChunks(base, (m) => take(m, false));
    const drain = () => {
      for (const port of ports) for (let m; (m = receiveMessageOnPort(port)) !== undefined; ) take(m.message as WalkedChunk, true);
    };
    drain();
    while (received < chunkCount) {
      const seen = Atomics.load(posted, 0);
      const woke = Atomics.wait(posted, 0, seen, stallMs);
      const before = received;
      drain();
      if (woke === 'timed-out' && received === before && received < chunkCount) {
        // No worker delivered for stallMs: this thread takes the chunks no worker claimed, then walks
        // those claimed but not delivered (idempotent: a worker's later copy is dropped).
        walkChunks(base, (m) => take(m, false));
        for (let c = 0; c < chunkCount; c++) {
          if (chunks[c] !== undefined) continue;
          walkOne(base, c, (m) => take(m, false));
          rewalked++;
        }
      }
    }
  } finally {
    for (const w of workers) void w.terminate();
    for (const p of ports) p.close();
  }
  if (report !== undefined) {
    report.byWorkers = byWorkers;
    report.rewalked = rewalked;
  }
  return finishWalk(plan, chunks);
}

/** The walked chunks as one listing, in chunk (class) order; their stamps are appended to `dirs`. */
function join_(classes: readonly string[], chunks: readonly Extract<WalkedChunk, { names: Uint8Array }>[], dirs: DirStamp[]): FolderListing {
  let count = 0;
  let bytes = 0;
  for (const c of chunks) {
    count += c.ends.length;
    bytes += c.names.length;
  }
  const names = new Uint8Array(new SharedArrayBuffer(bytes));
  const ends = new Uint32Array(new SharedArrayBuffer(4 * count));
  const labels = new Int32Array(new SharedArrayBuffer(4 * count));
  const raw: number[] = [];
  let at = 0;
  let base = 0;
  for (const c of chunks) {
    names.set(c.names, base);
    for (let i = 0; i < c.ends.length; i++) ends[at + i] = base + c.ends[i]!;
    labels.set(c.labels, at);
    for (const r of c.raw) raw.push(at + r);
    for (const [rel, mtimeNs] of c.dirs) dirs.push({ rel: Buffer.from(rel, 'latin1'), mtimeNs });
    at += c.ends.length;
    base += c.names.length;
  }
  return { classes, names, ends, labels, raw };
}

function pack(classes: readonly string[], paths: readonly (string | Buffer)[], labelList: readonly number[]): FolderListing {
  let total = 0;
  for (const p of paths) total += typeof p === 'string' ? Buffer.byteLength(p, 'utf8') : p.length;
  const names = new Uint8Array(new SharedArrayBuffer(total));
  const into = Buffer.from(names.buffer, names.byteOffset, names.length);
  const ends = new Uint32Array(new SharedArrayBuffer(4 * paths.length));
  const labels = new Int32Array(new SharedArrayBuffer(4 * paths.length));
  const raw: number[] = [];
  let at = 0;
  paths.forEach((p, i) => {
    if (typeof p === 'string') at += into.write(p, at, 'utf8');
    else {
      names.set(p, at);
      at += p.length;
      if (!isUtf8(p)) raw.push(i);
    }
    ends[i] = at;
    labels[i] = labelList[i]!;
  });
  return { classes, names, ends, labels, raw };
}

function isDirectory(path: Buffer): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** The names of one folder holding images: strings when every name is valid UTF-8 (NOTE [names as strings]), else bytes. */
type FolderNames = { readonly rel: Buffer; readonly names: string[]; readonly bytes?: undefined } | { readonly rel: Buffer; readonly names?: undefined; readonly bytes: Buffer[] };

/**
 * Image files under `root/rel`, as paths relative to root, in torchvision's order: folders sorted by
 * path, files sorted by name within a folder. Follows links, never the same folder twice. A path is
 * a string when it is valid UTF-8 (all of it), else its bytes.
 */
function walk(root: Buffer, rel: Buffer, extensions: ReadonlySet<string>, out: (string | Buffer)[], seen: Set<string>, dirs: DirStamp[]): void {
  const folders = new Map<string, FolderNames>();
  collect(root, rel, extensions, folders, seen, dirs);
  for (const folder of [...folders.values()].sort((a, b) => Buffer.compare(a.rel, b.rel))) {
    if (folder.names !== undefined && isUtf8(folder.rel)) {
      const prefix = `${folder.rel.toString('utf8')}/`;
      for (const name of sortCodePoints(folder.names)) out.push(prefix + name);
    } else {
      const names = folder.bytes ?? folder.names!.map((n) => Buffer.from(n, 'utf8'));
      for (const name of names.sort(Buffer.compare)) out.push(joinBytes(folder.rel, name));
    }
  }
}

/**
 * Strings sorted by code point, which is the order of their UTF-8 bytes (what Buffer.compare gives,
 * and Python's sort of str): the default sort compares UTF-16 units, which agrees unless a string
 * holds a surrogate pair (a character above U+FFFF), and only then is the slower comparison used.
 */
function sortCodePoints(names: string[]): string[] {
  if (!names.some((n) => /[\uD800-\uDFFF]/.test(n))) return names.sort();
  return names.sort((a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
}

function nameBytes(name: string | Buffer): Buffer {
  return typeof name === 'string' ? Buffer.from(name, 'utf8') : name;
}

/** Whether a file name (bytes or string) ends in one of `extensions` (lower case, with the dot), case-insensitively. */
function hasExtension(name: string | Buffer, extensions: ReadonlySet<string>): boolean {
  const dot = typeof name === 'string' ? name.lastIndexOf('.') : name.lastIndexOf(DOT);
  if (dot <= 0) return false;
  const ext = typeof name === 'string' ? name.slice(dot) : lossy.decode(name.subarray(dot));
  return extensions.has(ext) || extensions.has(ext.toLowerCase());
}

/**
 * NOTE [names as strings] A folder's entries are read as strings first (a million Buffers, one per
 * name, and their copies into joined paths were most of a cold walk's time: measured on 1.28 M
 * files); Node turns bytes that are not UTF-8 into U+FFFD, so a folder with a U+FFFD in a name is
 * read again as bytes and keeps the byte path (NOTE [names as bytes] in image-folder.ts).
 */
function collect(root: Buffer, rel: Buffer, extensions: ReadonlySet<string>, folders: Map<string, FolderNames>, seen: Set<string>, dirs: DirStamp[]): void {
  const abs = Buffer.concat([root, SLASH, rel]);
  let entries: Dirent<string>[] | Dirent<Buffer>[];
  try {
    // realpathSync.native: the JS realpath turns a Buffer path into a string (lossily).
    const real = realpathSync.native(abs, { encoding: 'buffer' }).toString('latin1');
    if (seen.has(real)) return;
    seen.add(real);
    dirs.push({ rel, mtimeNs: mtimeOf(abs) });
    entries = readdirSync(abs, { withFileTypes: true, encoding: 'utf8' }) as unknown as Dirent<string>[];
    if (entries.some((e) => e.name.includes('\uFFFD'))) entries = readdirSync(abs, { withFileTypes: true, encoding: 'buffer' });
  } catch (cause) {
    throw fileAccess(lossy.decode(abs), 'list the class folder', cause);
  }
  const strings: string[] = [];
  const bytes: Buffer[] = [];
  for (const e of entries) {
    const name = e.name;
    if (typeof name === 'string' ? name.charCodeAt(0) === DOT : name[0] === DOT) continue;
    let isDir = e.isDirectory();
    let isFile = e.isFile();
    if (e.isSymbolicLink()) {
      try {
        const st = statSync(Buffer.concat([abs, SLASH, nameBytes(name)]));
        isDir = st.isDirectory();
        isFile = st.isFile();
      } catch {
        continue; // a dangling link is not an image
      }
    }
    if (isDir) collect(root, joinBytes(rel, nameBytes(name)), extensions, folders, seen, dirs);
    else if (isFile && hasExtension(name, extensions)) {
      if (typeof name === 'string') strings.push(name);
      else bytes.push(name);
    }
  }
  if (strings.length > 0) folders.set(rel.toString('latin1'), { rel, names: strings });
  else if (bytes.length > 0) folders.set(rel.toString('latin1'), { rel, bytes });
}

// The cache file: MAGIC, one JSON line (root, extensions, classes, the walked directories with their
// mtimes, counts), padding to 4 bytes, then ends (u32 × n), labels (i32 × n) and the names' bytes.

interface CacheHead {
  readonly root: string;
  readonly ext: string;
  readonly classes: readonly string[];
  /** [relative path as base64, mtimeNs] per directory walked. */
  readonly dirs: readonly (readonly [string, string])[];
  readonly count: number;
  readonly nameBytes: number;
  readonly raw: readonly number[];
}

function readCache(place: string, root: string, ext: string): FolderListing | undefined {
  const file = readCacheFile(place, MAGIC, 4);
  if (file === undefined) return undefined;
  try {
    const head = file.head as CacheHead;
    const { count, nameBytes } = head;
    if (head.root !== root || head.ext !== ext || !Number.isSafeInteger(count) || !Number.isSafeInteger(nameBytes) || !Array.isArray(head.dirs) || !Array.isArray(head.classes)) return undefined;
    const body = file.body;
    if (body.length !== 8 * count + nameBytes) return undefined;
    const rootBytes = Buffer.from(root);
    for (const [rel, mtimeNs] of head.dirs) {
      const relBytes = Buffer.from(rel, 'base64');
      const abs = relBytes.length === 0 ? rootBytes : Buffer.concat([rootBytes, SLASH, relBytes]);
      if (mtimeOf(abs) !== mtimeNs) return undefined;
    }
    const ends = new Uint32Array(new SharedArrayBuffer(4 * count));
    const labels = new Int32Array(new SharedArrayBuffer(4 * count));
    const names = new Uint8Array(new SharedArrayBuffer(nameBytes));
    new Uint8Array(ends.buffer).set(body.subarray(0, 4 * count));
    new Uint8Array(labels.buffer).set(body.subarray(4 * count, 8 * count));
    names.set(body.subarray(8 * count));
    let previous = 0;
    for (let i = 0; i < count; i++) {
      if (ends[i]! <= previous && i > 0) return undefined;
      if (labels[i]! < 0 || labels[i]! >= head.classes.length) return undefined;
      previous = ends[i]!;
    }
    if (count > 0 && ends[count - 1] !== nameBytes) return undefined;
    return { classes: head.classes, names, ends, labels, raw: head.raw };
  } catch {
    // A directory gone (stat failed), or a damaged header: walk again.
    return undefined;
  }
}

/** False when it cannot (the folder is then walked at each open). */
function writeCache(place: string, root: string, ext: string, l: FolderListing, dirs: readonly DirStamp[]): boolean {
  return writeCacheFile(place, MAGIC, cacheHead(root, ext, l, dirs), 4, [l.ends, l.labels, l.names]);
}

function cacheHead(root: string, ext: string, l: FolderListing, dirs: readonly DirStamp[]): CacheHead {
  return {
    root, ext, classes: l.classes, dirs: dirs.map((d) => [d.rel.toString('base64'), d.mtimeNs] as const),
    count: l.ends.length, nameBytes: l.names.length, raw: l.raw,
  };
}
