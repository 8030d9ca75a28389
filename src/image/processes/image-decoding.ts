// Internal: where a file source decodes its images — in this thread, or in child processes through a
// DecodePool — shared by sources.imageFolder, sources.tarShards and sources.arrow. The rule: both
// ways give the same bytes and the same typed errors (the children run `decodeImage`); the choice
// only changes how decoding scales with cores.
//
// A source validates its `decode` / `decodeProcesses` options into an ImageDecodeShare, which
// travels in its source spec to reader workers (the `workerCopies` counter is shared memory), and
// gives each dataset copy an ImageDecoding: the copy's lazily started pool, sized per copy (NOTE
// [decode processes per copy]), closed at the copy's `close()`, at garbage collection, or at
// process exit.
//
// NOTE [decode processes per copy] A copy on the main thread starts up to one child per core; a
// copy in a reader worker up to (cores − copies) / copies (cores / copies on machines of at most
// FREE_CORES_ABOVE cores: NOTE [reader threads with decode processes]), the reader-worker copies
// counted in shared memory when the copy starts its pool (all workers have opened their copies by then). So the loader's default,
// workers: 'auto' (cores − 1), gives one child per worker on most machines, and workers: 0 gives
// one per core on the main thread. Reader workers are the better default: the parent's share of the
// work (dispatch, pixels in from the socket, copy into staging) is spread over threads instead of
// piling onto the main thread. Measured on 2 cores (shared, loaded), 224² JPEGs, CPU time per
// image in the parent: workers 1 → 40 µs main thread + 180–270 µs reader thread; workers 0 → 270–
// 330 µs main thread + 200–350 µs GC helpers; children ~2.9 ms, the same as the one-core sharp
// loop. The main-thread copy of a loader with reader workers decodes only the probe: one idle
// child, gone with `close()`. A reader worker that dies never decrements the count, so its
// replacement's share is one copy smaller.
//
// NOTE [decode: 'auto'] 'processes' on machines with more than AUTO_PROCESSES_ABOVE core whose
// images decode to at least AUTO_PROCESSES_MIN_PIXELS, else 'threads'. In one process, sharp stops
// scaling at 2.3–2.6× one decode however many threads decode (measured on 16 and 32 cores), while
// processes scale with cores; on 2 quiet cores (bench sources, 2048 JPEGs → 224², 3 rounds) the
// image folder reached 1.92× the one-core loop with processes and 1.51× with threads. A reply from
// a child costs the parent ~100 µs, more than decoding a small image: for the demo's 32 × 32 PNGs
// threads are faster (epoch 1: 1 550 vs 1 306 images/s), hence the size floor. A source whose
// images take the direct route (`ImageDecodeShare.direct`: a view of plain 8-bit JPEGs, libjpeg-turbo
// and WebAssembly loaded) decodes in its reader threads whatever the machine: NOTE [decoding in a
// reader thread].
//
// NOTE [decoding in a reader thread] The direct route (NOTE [crop decode], NOTE [resample in
// WebAssembly]) never touches libvips: libjpeg-turbo's handle and the WebAssembly instance are per
// thread and every call is synchronous, so reader threads decode side by side without the contention
// that made sharp need processes. In a reader thread the file is read synchronously into the thread's
// scratch and the view is decoded, resampled and cast, then copied from the module's memory straight
// into the sample's staging row (ReadContext.rows) — one copy, no message, no array per image — and
// the batch then adopts its staging slot (NOTE [lent slots], reader-pool.ts): no copy on the main
// thread either. Measured on the 2-core VM (bench images, RandomResizedCrop 224 + flip + normalize,
// float32, one core, CPU ms an image of every thread and child): 1 reader × 1 decode process 3.48–4.0
// (decode process 2.75–3.1, reader 0.55–0.72, main 0.03–0.19), 1 reader decoding in its thread 2.47
// (reader 2.31, main 0.01; the decoder alone, the bench's ceiling: 1.23–1.33). Sources that are not
// direct (sharp's formats and conversions) keep 'processes' under 'auto'.
//
// In 'threads' mode on the main thread a path input is read asynchronously, at most READS_IN_FLIGHT
// at a time per copy: a slow store is served with many requests in flight, and a loader that asks
// for a whole folder at once never runs out of file descriptors. A reader thread reads each file
// synchronously (NOTE [decoding in a reader thread]); in 'processes' mode each child reads one file
// at a time.

import { closeSync, openSync, readSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { fileAccess, invalidOption } from '../../errors.js';
import type { Tensor } from '../../tensor/tensor.js';
import { type DecodeInput, DecodePool } from './decode-pool.js';
import { type DecodeImageOptions, decodeImage } from '../image-decode.js';

/**
 * Where a source decodes its images: child processes, the reading thread, or chosen by machine and
 * size ('cpu' and, for a source without a GPU route, 'auto'); 'gpu' on the device's JPEG decoder
 * (sources.imageFolder; docs/gpu-decode.md), 'auto' there when the device is CUDA and nvJPEG loads.
 */
export type ImageDecodeMode = 'gpu' | 'cpu' | 'threads' | 'processes' | 'auto';

/** Whether the loader should assemble a source's batches with the device's JPEG decoder (NOTE [decode: 'gpu']). */
export type GpuDecodeRequest = 'gpu' | 'auto' | 'off';

/** 'auto' decodes in processes on machines with more cores than this (NOTE [decode: 'auto']). */
export const AUTO_PROCESSES_ABOVE = 1;
/** …and when images are decoded to at least this many pixels (64 × 64); see NOTE [decode: 'auto']. */
export const AUTO_PROCESSES_MIN_PIXELS = 64 * 64;
/** Reads (open file descriptors) one copy keeps in flight at most in 'threads' mode. */
export const READS_IN_FLIGHT = 64;

/**
 * NOTE [reader threads with decode processes] When children decode, a reader thread only
 * dispatches paths and reads the children's pixels into staging (NOTE [pixels into their row]);
 * the children do the work. A source decoding in processes asks for one reader thread per
 * CORES_PER_READER cores (at least one) when the user sets none, and its copies start cores − readers
 * decode processes in all on machines of more than FREE_CORES_ABOVE cores (every core on smaller
 * ones, where one process more is a large share and the reader is light): the reader threads and
 * the main thread keep a core. Measured on the H200 host (16 cores, bench images, RandomResizedCrop
 * 224 bf16, run 16d/16c after the parent's copies were removed): 1 reader × 15 processes
 * 3 758–3 826 images/s, 1 × 16 2 983, 2 × 8 2 557–3 080, 3 × 5 3 060–3 133, 5 × 3 2 650–2 906,
 * 8 × 2 (the former default) 2 630–2 887. (Before those changes, on 32 cores with 224² JPEGs, 2–8
 * threads were within 5 % of each other and 31 threads 22 % behind: more readers than needed only
 * split each batch thinner.)
 */
export const CORES_PER_READER = 16;
/** See NOTE [reader threads with decode processes]. */
export const FREE_CORES_ABOVE = 4;

/**
 * The reader threads a source asks for (`Dataset.readerWorkers`): see NOTE [reader threads with
 * decode processes]; decoding in the reader threads, one per core (NOTE [decoding in a reader
 * thread]: the main thread's share is a message a batch).
 */
export function readerThreadsFor(mode: 'threads' | 'processes' | undefined, cores = availableParallelism()): number | undefined {
  if (mode === 'threads') return Math.max(1, cores);
  return mode === 'processes' ? Math.max(1, Math.min(cores - 1, Math.ceil(cores / CORES_PER_READER))) : undefined;
}

/**
 * NOTE [a window for decode processes] On the CPU the loader keeps two batches in flight (flodl's
 * double buffer for a device without a memory probe). With decode processes that is too shallow:
 * when the oldest batch completes, the next is usually mostly done, and until the consumer has
 * taken the batch and the next read reaches the children (the main thread's upload copy, a message
 * to the reader, a busy core), children run dry. Measured on the H200 host (16 cores, bench images,
 * the default 1 reader × 15 processes, RandomResizedCrop 224 bf16, 3 epochs, run 18b): prefetch 2
 * 3 650–3 680 images/s with the children 0.74–0.75 busy, 4 3 847–4 161 (0.77–0.82), 8 4 255–4 357
 * (0.84–0.85), 16 3 864–4 278 (0.78–0.84); run 18d, the two alternating three times on another
 * host: 2 5 040–5 598 (0.79–0.80 busy), 8 5 620–5 868 (0.83–0.86). So a source decoding in
 * processes asks for PROCESS_DECODE_PREFETCH batches (`Dataset.prefetch`); the staging ring's
 * RAM bound still caps it (8 batches of 64 bf16 224² images are 154 MB), and `prefetch` set on the
 * loader wins.
 */
export const PROCESS_DECODE_PREFETCH = 8;

/** The window a source asks for (`Dataset.prefetch`): see NOTE [a window for decode processes]. */
export function prefetchFor(mode: 'threads' | 'processes' | undefined): number | undefined {
  return mode === 'processes' ? PROCESS_DECODE_PREFETCH : undefined;
}

/** Decode processes a copy starts when `decodeProcesses` is not set: see NOTE [decode processes per copy]. */
export function defaultDecodeProcesses(inWorker: boolean, copies: number, cores = availableParallelism()): number {
  if (!inWorker) return cores;
  const total = cores > FREE_CORES_ABOVE ? cores - Math.max(1, copies) : cores;
  return Math.max(1, Math.floor(total / Math.max(1, copies)));
}

/** The decode options a source takes (`decode`, `decodeProcesses`), as documented on each source. */
export interface ImageDecodeOptions {
  readonly decode?: ImageDecodeMode;
  readonly decodeProcesses?: number;
}

/** What a source's spec carries to reader workers: the validated options and the shared copy counter. */
export interface ImageDecodeShare {
  /** The CPU placement ('gpu' and 'cpu' are 'auto' here: where the probe and a CPU route decode). */
  readonly decode: 'threads' | 'processes' | 'auto';
  /** The GPU route asked for: 'gpu', 'auto' (GPU when the device can), 'off' (the CPU only). */
  readonly gpu: GpuDecodeRequest;
  readonly decodeProcesses: number | undefined;
  /**
   * The source's images take the direct route (a plain 8-bit JPEG's view through libjpeg-turbo and
   * the WebAssembly resample, all in the calling thread): 'auto' then decodes in the reader threads
   * (NOTE [decoding in a reader thread]). Set by the source on the main thread, from its first file.
   */
  readonly direct?: boolean;
  /** Live copies opened by reader workers (shared memory, one int32): how 'processes' divides the cores among them. */
  readonly workerCopies: Int32Array;
}

/**
 * Validate `decode` / `decodeProcesses` (typed errors naming the knob) and make the share a source's
 * copies use. `gpuRoute`: the source can hand its encoded files to the device's decoder (only then
 * is 'gpu' accepted, and 'auto' may resolve to it).
 */
export function imageDecodeShare(options: ImageDecodeOptions | undefined, gpuRoute = false): ImageDecodeShare {
  const mode = checkDecodeMode(options?.decode, gpuRoute);
  return {
    decode: mode === 'gpu' || mode === 'cpu' ? 'auto' : mode,
    gpu: mode === 'gpu' ? 'gpu' : mode === 'auto' && gpuRoute ? 'auto' : 'off',
    decodeProcesses: checkDecodeProcesses(options?.decodeProcesses),
    workerCopies: new Int32Array(new SharedArrayBuffer(4)),
  };
}

export function checkDecodeMode(mode: unknown, gpuRoute = false): ImageDecodeMode {
  if (mode === undefined) return 'auto';
  if (mode === 'gpu' && !gpuRoute) {
    throw invalidOption('decode', "'cpu', 'threads', 'processes' or 'auto' for this source", mode, "GPU decoding reads image files: use sources.imageFolder with decode: 'gpu', or decode: 'cpu' here");
  }
  if (mode !== 'gpu' && mode !== 'cpu' && mode !== 'threads' && mode !== 'processes' && mode !== 'auto') throw invalidOption('decode', `${gpuRoute ? "'gpu', " : ''}'cpu', 'threads', 'processes' or 'auto'`, mode);
  return mode;
}

export function checkDecodeProcesses(n: unknown): number | undefined {
  if (n === undefined) return undefined;
  if (!Number.isSafeInteger(n) || (n as number) < 1) throw invalidOption('decodeProcesses', 'an integer ≥ 1', n, 'Pass e.g. decodeProcesses: 4, or leave it out for one per core');
  return n as number;
}

/** 'auto' resolved for outputs of `size` (the largest a source decodes), `direct` the share's; see NOTE [decode: 'auto']. */
export function resolveDecodeMode(mode: 'threads' | 'processes' | 'auto', size: readonly [number, number], direct = false): 'threads' | 'processes' {
  if (mode === 'auto') return !direct && availableParallelism() > AUTO_PROCESSES_ABOVE && size[0] * size[1] >= AUTO_PROCESSES_MIN_PIXELS ? 'processes' : 'threads';
  return mode;
}

/** The largest output size among `sizes` (by pixels), for `resolveDecodeMode`. */
export function largestSize(sizes: readonly (readonly [number, number])[]): readonly [number, number] {
  let best: readonly [number, number] = [0, 0];
  for (const s of sizes) if (s[0] * s[1] > best[0] * best[1]) best = s;
  return best;
}

/** A copy dropped without close(): its decode processes go with it. */
const poolsOfCollected = new FinalizationRegistry<DecodePool>((pool) => void pool.close());

/** How long the decode processes of a main-thread copy may sit idle before they stop (NOTE [idle children retire], decode-pool.ts). */
export const MAIN_COPY_IDLE_MS = 5_000;

/**
 * One dataset copy's image decoding. Counts itself among the reader-worker copies when made in a
 * worker (until `close()`); in 'processes' mode starts its pool on the first decode.
 */
export class ImageDecoding {
  /** Where this copy decodes: 'auto' resolved. */
  readonly mode: 'threads' | 'processes';
  readonly #share: ImageDecodeShare;
  readonly #inWorker: boolean;
  readonly #reads = new Gate(READS_IN_FLIGHT);
  #pool: DecodePool | undefined;
  #closed = false;

  /** `size`: the largest output size the copy decodes to (resolves 'auto'); `inWorker`: the copy is a reader worker's. */
  constructor(share: ImageDecodeShare, size: readonly [number, number], inWorker: boolean) {
    this.#share = share;
    this.mode = resolveDecodeMode(share.decode, size, share.direct === true);
    this.#inWorker = inWorker;
    if (inWorker) Atomics.add(share.workerCopies, 0, 1);
  }

  /** Process ids of this copy's decode processes alive now (none in 'threads' mode or before the first decode). */
  get pids(): number[] {
    return this.#pool?.pids ?? [];
  }

  /**
   * Decode encoded bytes, or the file at `{ path }`: the same tensor and the same typed errors
   * (ERR_BAD_FILE naming `options.source`, ERR_FILE_ACCESS for an unreadable path) either way.
   * Rejects with the signal's reason when it aborts first.
   */
  decode(input: DecodeInput, options: DecodeImageOptions & { readonly output?: 'uint8'; readonly normalize?: undefined }, signal?: AbortSignal, into?: Uint8Array): Promise<Tensor<'uint8'>>;
  decode(input: DecodeInput, options: DecodeImageOptions, signal?: AbortSignal, into?: Uint8Array): Promise<Tensor>;
  /** `into`: where a decode process may read the pixels to (NOTE [pixels into their row], decode-pool.ts). */
  async decode(input: DecodeInput, options: DecodeImageOptions, signal?: AbortSignal, into?: Uint8Array): Promise<Tensor> {
    if (this.mode === 'processes') return this.#decodePool().decode(input, options, signal, into);
    if (input instanceof Uint8Array) {
      signal?.throwIfAborted();
      return decodeImage(input, options, false, into);
    }
    let bytes: Uint8Array;
    if (this.#inWorker) {
      // NOTE [decoding in a reader thread]: read here, synchronously, into this thread's scratch, then
      // decode straight into the row.
      signal?.throwIfAborted();
      try {
        bytes = readWhole(input.path);
      } catch (cause) {
        throw fileAccess(input.path, 'read the image', cause);
      }
      return decodeImage(bytes, options, false, into, true);
    }
    await this.#reads.enter();
    try {
      signal?.throwIfAborted();
      bytes = await readFile(input.path, signal === undefined ? undefined : { signal });
    } catch (cause) {
      if ((cause as Error)?.name === 'AbortError' || signal?.aborted) throw cause;
      throw fileAccess(input.path, 'read the image', cause);
    } finally {
      this.#reads.leave();
    }
    return decodeImage(bytes, options, false, into);
  }

  /** Stop the decode processes (waiting until they are gone); decodes still waiting for them fail. A later decode starts new ones. */
  async close(): Promise<void> {
    if (this.#inWorker && !this.#closed) Atomics.sub(this.#share.workerCopies, 0, 1);
    this.#closed = true;
    const pool = this.#pool;
    this.#pool = undefined;
    if (pool !== undefined) {
      poolsOfCollected.unregister(this);
      await pool.close();
    }
  }

  /** See NOTE [decode processes per copy]. */
  #decodePool(): DecodePool {
    if (this.#pool === undefined) {
      const copies = Math.max(1, Atomics.load(this.#share.workerCopies, 0));
      const size = this.#share.decodeProcesses ?? defaultDecodeProcesses(this.#inWorker, copies);
      // NOTE [idle children retire] (decode-pool.ts): the main thread's copy often decodes only the probe.
      this.#pool = new DecodePool({ size, idleMs: this.#inWorker ? undefined : MAIN_COPY_IDLE_MS });
      poolsOfCollected.register(this, this.#pool, this);
    }
    return this.#pool;
  }
}

/**
 * One buffer for every file a reader thread reads in 'threads' mode, grown to the largest: each is
 * decoded (or copied, for sharp) before the next read (`decodeImage`'s `borrowed`), so a fresh
 * ~110 KB buffer per image, and the collector's work on it, buys nothing. Per thread (module state).
 */
let scratch: Buffer | undefined;

/**
 * The whole file at `path`, as a view of `scratch` valid until the next call: read to its end (no
 * fstat and its Stats object per file), the scratch doubled when a file fills it.
 */
function readWhole(path: string): Uint8Array {
  const fd = openSync(path, 'r');
  try {
    scratch ??= Buffer.allocUnsafeSlow(1 << 20);
    let done = 0;
    for (;;) {
      if (done === scratch.length) {
        const larger = Buffer.allocUnsafeSlow(2 * scratch.length);
        scratch.copy(larger, 0, 0, done);
        scratch = larger;
      }
      const n = readSync(fd, scratch, done, scratch.length - done, done);
      if (n === 0) return scratch.subarray(0, done);
      done += n;
    }
  } finally {
    closeSync(fd);
  }
}

/** A counting semaphore with a FIFO queue that stays O(1) per call however many wait. */
export class Gate {
  #free: number;
  #queue: (() => void)[] = [];
  #head = 0;

  constructor(limit: number) {
    this.#free = limit;
  }

  /** NOTE: a full gate waits for a holder's `leave`, which every user makes in a `finally` after one file read. */
  enter(): Promise<void> | undefined {
    if (this.#free > 0) {
      this.#free--;
      return undefined;
    }
    return new Promise<void>((resolve) => this.#queue.push(resolve));
  }

  leave(): void {
    if (this.#head < this.#queue.length) {
      const next = this.#queue[this.#head]!;
      this.#queue[this.#head++] = undefined as never;
      if (this.#head === this.#queue.length) {
        this.#queue = [];
        this.#head = 0;
      }
      next();
    } else this.#free++;
  }
}
