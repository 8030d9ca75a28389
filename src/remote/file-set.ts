// Internal: not exported from the package entry.
// The remote files of one dataset (its tar shards), fetched when the plan reaches them instead of at
// open. The rules:
// - A read asks for its file (`ensure`): from the node cache when it is there, else downloaded once
//   for the node (node-cache.ts), so a read never sees a partial file, in any thread or process.
// - On the main thread, the loader hands each epoch's plan to `follow`, which downloads the files the
//   next reads need, in the order they are needed, ahead of the reads — bounded by half the cache's
//   budget and AHEAD_FILES files — and tells the cache when each file is next needed, so that the cache
//   evicts the file whose next read is furthest away (Belady's rule, exact because the order is known).
//   The first batch then waits for its own files, not for the dataset.
// - `follow` is a hint: a download it fails leaves the file to the read that needs it, which retries
//   and, if the store stays unreachable, fails only its batch (the loader's `errors` policy).

import { existsSync } from 'node:fs';
import { NodeCache, type NodeCacheOptions } from './node-cache.js';
import { nodeCache } from './remote.js';
import type { ObjectInfo } from './store.js';

/** What a reader worker needs to reach the same files: structured-cloneable. */
export interface RemoteSetSpec {
  readonly objects: readonly ObjectInfo[];
  readonly options: NodeCacheOptions;
}

/** An epoch's reads in order and how far the consumer got (the loader's `ReadPlan`, dataset/capabilities.ts). */
export interface ReadPlan {
  readonly samples: Uint32Array;
  consumed(): number;
  readonly signal: AbortSignal;
}

/** Most files downloaded ahead of the reads (beyond the ones being read). */
const AHEAD_FILES = 32;
/** Downloads at once ahead of the reads. */
const AHEAD_LANES = 8;
/** How often the follower looks at the consumer's progress when nothing else wakes it. */
const TICK_MS = 25;
/** Most runs of the plan one look ahead walks (a global shuffle over few files has a run per read). */
const SCAN_RUNS = 4096;

export class RemoteFileSet {
  readonly spec: RemoteSetSpec;
  readonly cache: NodeCache;
  /** Each file's place in the node cache. */
  readonly paths: readonly string[];
  readonly #byPath: Map<string, number>;
  #following: AbortController | undefined;

  /** `spec.options.dir` unset: the cache folder the environment names now, kept in the spec so reader workers use the same. */
  constructor(spec: RemoteSetSpec) {
    this.cache = nodeCache(spec.options);
    this.spec = { ...spec, options: { ...spec.options, dir: this.cache.dir } };
    this.paths = spec.objects.map((o) => this.cache.localPath(o.url));
    this.#byPath = new Map(this.paths.map((p, i) => [p, i]));
  }

  get length(): number {
    return this.paths.length;
  }

  /** The local path of file `i`, whole and checked (downloaded now when the cache does not hold it). */
  ensure(i: number, signal?: AbortSignal): Promise<string> {
    const o = this.spec.objects[i]!;
    return this.cache.ensure(o.url, o, signal);
  }

  /**
   * Follow an epoch's plan: `fileOf(sample)` is the file a sample's read needs. Replaces the previous
   * epoch's follower; downloads stop when the consumer passes the last run or the plan's signal
   * aborts, and eviction follows the plan until the abort.
   */
  follow(plan: ReadPlan, fileOf: (sample: number) => number): void {
    this.#following?.abort();
    const stop = new AbortController();
    this.#following = stop;
    const signal = AbortSignal.any([stop.signal, plan.signal]);
    const runs = fileRuns(plan.samples, fileOf, this.length);
    // Eviction follows this plan until the epoch ends (or the next one replaces it), its tail included.
    const unfollow = this.cache.followNextUse((path) => {
      const f = this.#byPath.get(path);
      return f === undefined ? Number.POSITIVE_INFINITY : runs.nextUse(f, plan.consumed());
    });
    if (signal.aborted) unfollow();
    else signal.addEventListener('abort', unfollow, { once: true });
    void this.#ahead(plan, runs, signal);
  }

  /** Stop following the plan (the dataset closes). */
  stop(): void {
    this.#following?.abort();
  }

  /** Download the files of the next reads, in the order of their first read, within the bounds. */
  async #ahead(plan: ReadPlan, runs: FileRuns, signal: AbortSignal): Promise<void> {
    const sizes = this.spec.objects.map((o) => o.size);
    const limit = this.cache.budget() / 2;
    const state = new Uint8Array(this.length); // 0: not asked, 1: in flight, 2: published (maybe evicted since), 3: failed
    let inFlight = 0;
    let wake: (() => void) | undefined;
    const onAbort = () => wake?.();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      let r = 0;
      while (!signal.aborted) {
        const consumed = plan.consumed();
        while (r < runs.count && runs.end[r]! <= consumed) r++;
        if (r >= runs.count) return;
        // The files of the runs from the consumer on, in order of first read, within the bounds.
        let bytes = 0;
        let files = 0;
        const seen = new Set<number>();
        for (let k = r; k < runs.count && k < r + SCAN_RUNS && inFlight < AHEAD_LANES; k++) {
          const f = runs.file[k]!;
          if (seen.has(f)) continue;
          seen.add(f);
          bytes += sizes[f]!;
          if (files++ > AHEAD_FILES || (files > 1 && bytes > limit)) break;
          // A file published earlier in the epoch may have been evicted since (a small cache, an order
          // that comes back to it): fetched again when it is among the next reads' once more.
          if (state[f] === 1 || state[f] === 3 || (state[f] === 2 && existsSync(this.paths[f]!))) continue;
          state[f] = 1;
          inFlight++;
          void this.ensure(f, signal)
            .then(
              () => (state[f] = 2),
              () => (state[f] = 3), // the read that needs it retries and reports (module comment)
            )
            .finally(() => {
              inFlight--;
              wake?.();
            });
        }
        // NOTE: waits for a download to end, the abort, or TICK_MS (the consumer's progress is polled).
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, TICK_MS);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }
}

/** The plan as runs of consecutive reads of one file, and each file's runs for its next use. */
interface FileRuns {
  readonly count: number;
  /** Per run: its file, and the read after its last. */
  readonly file: Uint32Array;
  readonly end: Float64Array;
  /** The position of file f's next read at or after `position` (0 runs: Infinity). */
  nextUse(f: number, position: number): number;
}

function fileRuns(samples: Uint32Array, fileOf: (sample: number) => number, files: number): FileRuns {
  const file: number[] = [];
  const start: number[] = [];
  for (let i = 0; i < samples.length; i++) {
    const f = fileOf(samples[i]!);
    if (file.length === 0 || file[file.length - 1] !== f) {
      file.push(f);
      start.push(i);
    }
  }
  const count = file.length;
  const end = new Float64Array(count);
  for (let k = 0; k < count; k++) end[k] = k + 1 < count ? start[k + 1]! : samples.length;
  // Per file, its runs in order (indices into the run arrays).
  const byFile: number[][] = Array.from({ length: files }, () => []);
  for (let k = 0; k < count; k++) byFile[file[k]!]!.push(k);
  return {
    count,
    file: Uint32Array.from(file),
    end,
    nextUse(f, position) {
      const list = byFile[f];
      if (list === undefined || list.length === 0) return Number.POSITIVE_INFINITY;
      // The first run of f that ends after `position`.
      let lo = 0;
      let hi = list.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (end[list[mid]!]! <= position) lo = mid + 1;
        else hi = mid;
      }
      return lo === list.length ? Number.POSITIVE_INFINITY : Math.max(position, start[list[lo]!]!);
    },
  };
}
