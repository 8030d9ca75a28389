// Internal: not exported from the package entry.
// A pool of child processes that decode images with sharp, so that image decoding scales with
// cores: libvips pipelines contend within one process (16–32 cores give 2.3–2.6× one decode's
// throughput however many threads decode), while separate processes scale (16 give ~12×). The rule:
// a decode through the pool gives the same bytes, and the same typed errors naming the source, as
// `decodeImage` in this thread — the children run that very function.
//
// NOTE [Decode pool protocol]
// - A child is `decode-child.{ts,js}`, spawned with a socket on fd 3 (no IPC channel, no JSON of
//   pixels): frames of [u32 payload length][u32 id][u32 kind][payload], little-endian. The child
//   answers `ready` once sharp is loaded, then answers every request with exactly one frame
//   (pixels, or an error), one request at a time, in order.
// - Dispatch: first in, first out; a request goes to the ready child holding the fewest (at most
//   PER_CHILD, so that a child always has its next image waiting). Children are spawned on demand,
//   up to `size`, when the requests waiting and held outnumber the slots of the children alive.
//   Two bench knobs, read from the environment by the parent and its children alike: `decodeHeld`
//   sets PER_CHILD (1–8), `decodeNice` starts the children that much nicer than the parent
//   (0–19), so that a reader thread waiting for a CPU behind them gets it first. Neither is the
//   default: on the H200 host at 16 cores (docs/benchmarks/history.md, run 19c) nice 10 cut the reader's wait for a
//   CPU from 0.33 to 0.20 of the wall and 3 held requests changed nothing, both within the host's drift.
// - Every request settles exactly once: pixels, the child's error, abort (its signal), close(), or
//   the death of the child holding it (ERR_WORKER_DIED; the child is replaced on demand). A reply
//   for a request already settled (aborted) is read and dropped.
// - Death is observed on the child's 'close' event (after its exit and after its socket was read to
//   the end), so a reply written before a crash is still delivered.
// - Start-up: a child that exits, fails to spawn or stays silent for START_TIMEOUT_MS before it is
//   ready stops all further spawning (never a respawn loop). If no child is left, the pool decodes
//   in this process from then on, with one warning; the bytes are the same, only slower.
// - Lifetime: children and their sockets are ref'd only while requests are outstanding, so an idle
//   pool never holds the process open. close() rejects what is outstanding, SIGKILLs the children
//   and waits (bounded) until they are reaped. At process exit every child still alive is
//   SIGKILLed; a child whose parent died sees its socket end and exits.
//
// NOTE [idle children retire] With `idleMs`, a ready child that holds nothing for that long is killed
// and forgotten at once (so nothing is sent to it while it dies); a later decode starts another on
// demand, like the replacement of a child that died, and its start-up is not a failure. Why: the
// main thread's copy of an image source decodes sample 0 for the loader's probe, then, when reader
// workers do the reading, nothing more — its one child sat idle for the whole run, a Node process of
// RAM (~50 MB) for nothing. A pool that has stopped spawning (a child failed to start) retires none:
// nothing could replace them. Reader workers' copies keep their children (no `idleMs`): they are busy
// while an epoch runs, and restarting them between epochs would delay the next epoch's first batch.
//
// NOTE [pixels into their row] A decode may be given the memory its pixels go to (`decode(…, into)`):
// the reader's staging row for the sample (ReadContext.rows, dataset.ts). The slab's pread then
// lands in the row itself — no buffer of its own per image, no copy into staging after, no garbage
// for the collector — and the tensor answered is a view of the row, which the reader recognizes and
// does not copy (writeSample). A reply on the socket is copied as before.
//
// NOTE [pixels through a slab] Where the machine has a RAM file system (/dev/shm), each child gets a
// slab: a file there, created by the parent (mode 0600), opened by the child at start-up and unlinked
// by the parent once the child is ready (so nothing is left behind, whoever dies). The child writes
// each reply's pixels into the slab (one pwrite) and sends only a 20-byte frame naming the region;
// the parent reads them with one pread, synchronously, in the frame's handler. The socket would cut
// a 600 KB float32 reply into ~10 reads of 64 KB chunks, each a fresh buffer and an event, then
// copy them into the output: measured, the parent's CPU per image and its garbage collection are
// where the loader's time went. Regions: reply k of a child goes to region k mod PER_CHILD. That is
// safe because the parent reads a reply before it sends that child another request (#onFrame reads,
// then #pump sends), and a child holds at most PER_CHILD requests: a region is rewritten only by
// a reply to a request sent after the region was read. A failed slab write (ENOSPC: /dev/shm is
// small in some containers) sends that reply's pixels on the socket instead.
//
// Why a socket with binary frames rather than fork()'s IPC channel with 'advanced' serialization:
// the pixels are copied once, out of the socket's chunks into the output array (the IPC channel
// concatenates and deserializes: two copies), and it measured less parent CPU per 150 KB reply
// (80–90 µs against 95–120 µs round trip, 2 loaded cores). Why the child reads the file itself:
// the parent then sends ~150 bytes per image instead of the image. Children start without a
// loader when this runs as compiled JavaScript; from TypeScript sources (tests, benches) they are
// started with tsx (~0.2 s each).

import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readSync, unlinkSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { availableParallelism, getPriority, setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import { LoaderError, badFile, describeCause, fileAccess, invalidOption, loaderClosedError, revivedError, workerDiedError } from '../../errors.js';
import { Tensor } from '../../tensor/tensor.js';
import { parseSwitch, readSwitch, switchName } from '../../base/env.js';
import { type DecodeImageOptions, type ImageOutput, checkDecodeOptions, decodeImage, outputOf } from '../image-decode.js';
import { warn } from '../../base/warnings.js';

/** The environment variable that sets PER_CHILD (benches only: `bench images` compares depths with it). */
export const HELD_ENV = switchName('decodeHeld');

/** PER_CHILD from `value` (HELD_ENV): 2 when unset, else an integer 1–8; the parent and its children read the same environment. */
export function heldPerChild(value?: string): number {
  return value === undefined ? readSwitch('decodeHeld') : parseSwitch('decodeHeld', value);
}

/** Requests one child holds at once: the one it decodes and the next, so that it never waits for the parent. */
export const PER_CHILD = heldPerChild();

/** The environment variable that sets CHILD_NICE (benches only). */
export const NICE_ENV = switchName('decodeNice');

/** CHILD_NICE from `value` (NICE_ENV): 0 when unset, else an integer 0–19. */
export function childNice(value?: string): number {
  return value === undefined ? readSwitch('decodeNice') : parseSwitch('decodeNice', value);
}

/** How much nicer than this process its decode children run. */
export const CHILD_NICE = childNice();
/** A child that has not said ready by then is killed and counts as failed at start-up. */
export const START_TIMEOUT_MS = 30_000;
/** How long close() waits for killed children to be reaped. */
const CLOSE_WAIT_MS = 5_000;

// ---------------------------------------------------------------------------------------------
// Wire format (shared with decode-child)

/** Frame kinds, parent → child. */
export const ToChild = Object.freeze({
  /** Payload: JSON { path, options }. The child reads the file. */
  DecodePath: 1,
  /** Payload: [u32 JSON length][JSON { options }][encoded bytes]. */
  DecodeBytes: 2,
});

/** Frame kinds, child → parent. */
export const FromChild = Object.freeze({
  Ready: 0,
  /** Payload: the decoded pixels, in the requested layout. */
  Pixels: 1,
  /** Payload: JSON WireError. */
  Error: 2,
  /** Payload: [u32 pixel bytes][u32 region]: the pixels are in the child's slab at region × SLAB_REGION (NOTE [pixels through a slab]). */
  PixelsInSlab: 3,
});

/** The spacing of a slab's regions: larger than any reply (MAX_FRAME). */
export const SLAB_REGION = 2 ** 31;
/** The environment variable that names a child's slab file. */
export const SLAB_ENV = switchName('decodeSlab');

/** An error crossing the socket. */
export interface WireError {
  /** LoaderError code, or null for any other error. */
  readonly code: string | null;
  readonly message: string;
  /** The underlying system error's code (ENOENT, EACCES…) and message, for `cause`. */
  readonly causeCode?: string;
  readonly causeMessage?: string;
}

/** Decode options as they cross the socket (`source` included). */
export type WireOptions = DecodeImageOptions;

const HEADER = 12;
/** No frame is larger: the largest image output (16384² × 4 bytes = 1 GiB) and then some. */
export const MAX_FRAME = 2 ** 31 - 1;

/** One frame: header and payload in one buffer (one write). */
export function encodeFrame(id: number, kind: number, payload: Uint8Array | string = ''): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
  const frame = Buffer.allocUnsafe(HEADER + body.length);
  frame.writeUInt32LE(body.length, 0);
  frame.writeUInt32LE(id, 4);
  frame.writeUInt32LE(kind, 8);
  frame.set(body, HEADER);
  return frame;
}

/** The header of a frame whose payload is written separately (large pixels: no copy into one buffer). */
export function frameHeader(id: number, kind: number, length: number): Buffer {
  const header = Buffer.allocUnsafe(HEADER);
  header.writeUInt32LE(length, 0);
  header.writeUInt32LE(id, 4);
  header.writeUInt32LE(kind, 8);
  return header;
}

/**
 * Cuts a byte stream into frames. Each payload is copied once, out of the stream's chunks, into an
 * array of its own exact size.
 */
export class FrameReader {
  readonly #onFrame: (id: number, kind: number, payload: Uint8Array) => void;
  readonly #header = Buffer.alloc(HEADER);
  #headerFill = 0;
  #payload: Uint8Array | undefined;
  #payloadFill = 0;
  #id = 0;
  #kind = 0;

  constructor(onFrame: (id: number, kind: number, payload: Uint8Array) => void) {
    this.#onFrame = onFrame;
  }

  /** Feed a chunk; throws on a frame longer than MAX_FRAME (a broken stream). */
  push(chunk: Uint8Array): void {
    let p = 0;
    while (p < chunk.length) {
      if (this.#payload === undefined) {
        const take = Math.min(HEADER - this.#headerFill, chunk.length - p);
        this.#header.set(chunk.subarray(p, p + take), this.#headerFill);
        this.#headerFill += take;
        p += take;
        if (this.#headerFill < HEADER) return;
        this.#headerFill = 0;
        const length = this.#header.readUInt32LE(0);
        if (length > MAX_FRAME) throw new Error(`a frame of ${length} bytes is over the limit of ${MAX_FRAME}`);
        this.#id = this.#header.readUInt32LE(4);
        this.#kind = this.#header.readUInt32LE(8);
        this.#payload = new Uint8Array(length);
        this.#payloadFill = 0;
      }
      const payload = this.#payload;
      const take = Math.min(payload.length - this.#payloadFill, chunk.length - p);
      payload.set(chunk.subarray(p, p + take), this.#payloadFill);
      this.#payloadFill += take;
      p += take;
      if (this.#payloadFill === payload.length) {
        this.#payload = undefined;
        this.#onFrame(this.#id, this.#kind, payload);
      }
    }
  }
}

/** The error a WireError describes, as the child had it (same class for LoaderErrors, same code and message). */
export function fromWire(e: WireError): Error {
  const cause = e.causeMessage === undefined ? undefined : Object.assign(new Error(e.causeMessage), e.causeCode === undefined ? {} : { code: e.causeCode });
  if (e.code !== null && e.code.startsWith('ERR_')) return revivedError(e.code, e.message, cause);
  return new Error(e.message, cause === undefined ? undefined : { cause });
}

export function toWire(error: unknown): WireError {
  const code = error instanceof LoaderError ? error.code : null;
  const cause = (error as { cause?: unknown } | null)?.cause;
  const causeCode = (cause as { code?: unknown } | null)?.code;
  return {
    code,
    message: describeCause(error),
    ...(cause instanceof Error ? { causeMessage: cause.message } : {}),
    ...(typeof causeCode === 'string' ? { causeCode } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// The pool

/** What to decode: encoded bytes, or a file the child reads itself (no copy through the parent). */
export type DecodeInput = Uint8Array | { readonly path: string };

export interface DecodePoolOptions {
  /**
   * Most child processes. Default `os.availableParallelism()`: the children do the decoding, the
   * parent only dispatches and receives pixels. Children are started on demand, up to this.
   */
  readonly size?: number;
  /** Called once, when the pool stops spawning or falls back to decoding in this process. Default: process.emitWarning. */
  readonly warn?: (message: string) => void;
  /** Internal, for tests: the module a child runs (default decode-child). */
  readonly entry?: URL;
  /** Internal, for tests: START_TIMEOUT_MS. */
  readonly startTimeoutMs?: number;
  /** Internal, for tests and benches: false sends every reply's pixels on the socket (NOTE [pixels through a slab]). Default true. */
  readonly slab?: boolean;
  /**
   * Stop a child once it has had nothing to do for this many milliseconds (a later decode starts
   * one again). Default: never. See NOTE [idle children retire].
   */
  readonly idleMs?: number;
}

interface Request {
  readonly id: number;
  readonly frame: Buffer;
  readonly input: DecodeInput;
  readonly options: DecodeImageOptions;
  readonly shape: readonly number[];
  readonly dtype: ImageOutput;
  readonly bytes: number;
  readonly resolve: (t: Tensor) => void;
  readonly reject: (e: unknown) => void;
  readonly signal: AbortSignal | undefined;
  /** Where the pixels go when given (NOTE [pixels into their row]): `bytes` long, aligned for the dtype. */
  readonly into: Uint8Array | undefined;
  settled: boolean;
  /** In the parent's queue (not yet sent to a child). */
  queued: boolean;
}

interface Child {
  readonly proc: ChildProcess;
  readonly socket: Socket;
  readonly pid: number | undefined;
  ready: boolean;
  /** Requests sent to this child, by id, in the order sent. */
  readonly held: Map<number, Request>;
  startTimer: NodeJS.Timeout | undefined;
  /** Armed while it holds nothing (`idleMs`): it then retires. */
  idleTimer?: NodeJS.Timeout;
  gone: boolean;
  /** Why the parent killed it, when it did (a broken stream). */
  failure?: string;
  /** Its slab (NOTE [pixels through a slab]): the parent's descriptor, and the path until it is unlinked. */
  slab: { fd: number; path: string | undefined } | undefined;
}

/** Where slabs go: a RAM file system, or none (replies then come on the socket). */
const SLAB_DIR = process.platform === 'linux' && existsSync('/dev/shm') ? '/dev/shm' : undefined;
let slabCount = 0;

/** A new slab file for a child, or undefined when there is no RAM file system or it cannot be made. */
function makeSlab(): { fd: number; path: string } | undefined {
  if (SLAB_DIR === undefined) return undefined;
  const path = join(SLAB_DIR, `stoker-decode-${process.pid}-${++slabCount}-${randomBytes(4).toString('hex')}`);
  try {
    return { fd: openSync(path, 'wx+', 0o600), path };
  } catch {
    return undefined;
  }
}

function dropSlab(child: Child): void {
  const slab = child.slab;
  if (slab === undefined) return;
  child.slab = undefined;
  if (slab.path !== undefined) {
    try {
      unlinkSync(slab.path);
    } catch {
      // Already gone.
    }
  }
  try {
    closeSync(slab.fd);
  } catch {
    // Already closed.
  }
}

const CHILD_URL = new URL(import.meta.url.endsWith('.ts') ? './decode-child.ts' : './decode-child.js', import.meta.url);

/**
 * Extra Node/V8 flags for every decode child, from CHILD_FLAGS_ENV (space-separated,
 * each starting with `--`; e.g. `--single-threaded-gc --v8-pool-size=1`), read at each spawn: the
 * knob `bench decode-scaling` measures the child's GC/platform threads with (issue 17).
 */
export const CHILD_FLAGS_ENV = switchName('decodeChildFlags');

export function childFlags(value?: string): string[] {
  return value === undefined ? readSwitch('decodeChildFlags') : parseSwitch('decodeChildFlags', value);
}

/** Node flags for a child: CHILD_FLAGS_ENV's, plus the tsx loader when running from TypeScript sources. */
function childExecArgv(): string[] {
  const flags = childFlags();
  if (!import.meta.url.endsWith('.ts')) return flags;
  return [...flags, '--import', import.meta.resolve('tsx')];
}

const livePools = new Set<DecodePool>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const pool of livePools) pool.killNow();
  });
}

/** The pixels of a reply as the output dtype (a frame's payload is an array of its own: offset 0, aligned). */
function typedView(payload: Uint8Array, dtype: ImageOutput): Uint8Array | Float32Array | Uint16Array {
  if (dtype === 'uint8') return payload;
  const size = dtype === 'float32' ? 4 : 2;
  return dtype === 'float32' ? new Float32Array(payload.buffer, payload.byteOffset, payload.length / size) : new Uint16Array(payload.buffer, payload.byteOffset, payload.length / size);
}

/** Output shape of a decode, from its options. */
function outputShape(o: DecodeImageOptions): number[] {
  const [h, w] = o.size;
  const c = o.channels ?? 3;
  return o.layout === 'hwc' ? [h, w, c] : [c, h, w];
}

export class DecodePool {
  /** Most children alive at once. */
  readonly size: number;
  readonly #warn: (message: string) => void;
  readonly #entry: URL;
  readonly #startTimeoutMs: number;
  readonly #idleMs: number | undefined;
  readonly #slab: boolean;
  readonly #children: Child[] = [];
  /** Requests not yet sent to a child, first in first out. */
  #queue: (Request | undefined)[] = [];
  #head = 0;
  #nextId = 1;
  /** Requests outstanding (queued or held, not yet settled). */
  #outstanding = 0;
  /** Requests in the queue, not settled (the queue may also hold settled ones, skipped when reached). */
  #waiting = 0;
  #refd = false;
  /** A child failed at start-up: spawn no more. */
  #spawnStopped = false;
  /** No child can be started: decode in this process. */
  #inProcess = false;
  /** Why the first child failed at start-up. */
  #startFailure: string | undefined;
  #warned = false;
  #closed: Promise<void> | undefined;
  /** One abort listener per signal (an epoch's signal covers hundreds of requests), with the requests it covers. */
  readonly #watched = new Map<AbortSignal, { readonly requests: Set<Request>; readonly listener: () => void }>();

  constructor(options: DecodePoolOptions = {}) {
    const size = options.size ?? availableParallelism();
    if (!Number.isSafeInteger(size) || size < 1) throw invalidOption('decodeProcesses', 'an integer ≥ 1', size, 'Pass e.g. decodeProcesses: 4, or leave it out for one per core');
    this.size = size;
    this.#warn = options.warn ?? ((message) => warn('generic', message));
    this.#entry = options.entry ?? CHILD_URL;
    this.#startTimeoutMs = options.startTimeoutMs ?? START_TIMEOUT_MS;
    this.#slab = options.slab ?? true;
    const idle = options.idleMs;
    if (idle !== undefined && !(Number.isFinite(idle) && idle > 0)) throw new TypeError(`DecodePool: idleMs must be a positive number of milliseconds, got ${String(idle)}`);
    this.#idleMs = idle;
  }

  /** Children alive whose replies come through a slab (NOTE [pixels through a slab]). */
  get slabs(): number {
    return this.#children.filter((c) => !c.gone && c.slab !== undefined).length;
  }

  /** Process ids of the children alive (started or starting). */
  get pids(): number[] {
    return this.#children.filter((c) => !c.gone && c.pid !== undefined).map((c) => c.pid!);
  }

  /** True once no child could be started and the pool decodes in this process. */
  get inProcess(): boolean {
    return this.#inProcess;
  }

  /**
   * Decode in a child process: the same result, and the same typed errors (ERR_BAD_FILE naming
   * `options.source`, ERR_FILE_ACCESS for a path that cannot be read), as `decodeImage` here.
   * Rejects with ERR_WORKER_DIED when the child decoding it dies, with the signal's reason when
   * `signal` aborts first.
   */
  decode(input: DecodeInput, options: DecodeImageOptions & { readonly output?: 'uint8'; readonly normalize?: undefined }, signal?: AbortSignal, into?: Uint8Array): Promise<Tensor<'uint8'>>;
  decode(input: DecodeInput, options: DecodeImageOptions, signal?: AbortSignal, into?: Uint8Array): Promise<Tensor>;
  /**
   * `into`, when given, is where the pixels may be read to (NOTE [pixels into their row]): the
   * tensor is then a view of it. Memory of another length or alignment is not used.
   */
  decode(input: DecodeInput, options: DecodeImageOptions, signal?: AbortSignal, into?: Uint8Array): Promise<Tensor> {
    if (this.#closed !== undefined) return Promise.reject(poolClosed());
    if (signal?.aborted) return Promise.reject(signal.reason);
    try {
      checkDecodeOptions(options);
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.#inProcess) return decodeHere(input, options, signal);
    const wire: WireOptions = {
      size: [options.size[0], options.size[1]], channels: options.channels, layout: options.layout, fit: options.fit,
      maxInputPixels: options.maxInputPixels, source: options.source, view: options.view, normalize: options.normalize, output: options.output,
    };
    const id = this.#nextId;
    this.#nextId = this.#nextId >= 0xffff_fff0 ? 1 : this.#nextId + 1;
    let frame: Buffer;
    if (input instanceof Uint8Array) {
      const json = Buffer.from(JSON.stringify({ options: wire }), 'utf8');
      const length = 4 + json.length + input.length;
      if (length > MAX_FRAME) return Promise.reject(badFile(options.source, 0, `cannot decode the image: ${input.length} bytes are more than a decode process takes (${MAX_FRAME})`));
      frame = Buffer.allocUnsafe(HEADER + length);
      frame.set(frameHeader(id, ToChild.DecodeBytes, length), 0);
      frame.writeUInt32LE(json.length, HEADER);
      frame.set(json, HEADER + 4);
      frame.set(input, HEADER + 4 + json.length);
    } else {
      frame = encodeFrame(id, ToChild.DecodePath, JSON.stringify({ path: input.path, options: wire }));
    }
    const shape = outputShape(options);
    return new Promise<Tensor>((resolve, reject) => {
      const dtype = outputOf(options);
      const size = dtype === 'uint8' ? 1 : dtype === 'float32' ? 4 : 2;
      const bytes = shape[0]! * shape[1]! * shape[2]! * size;
      const fits = into !== undefined && into.byteLength === bytes && into.byteOffset % size === 0;
      const request: Request = { id, frame, input, options, shape, dtype, bytes, resolve, reject, signal, into: fits ? into : undefined, settled: false, queued: true };
      if (signal !== undefined) this.#watch(signal, request);
      this.#outstanding++;
      this.#waiting++;
      this.#queue.push(request);
      this.#setRef();
      this.#pump();
    });
  }

  /** Reject what is outstanding, kill the children and wait until they are gone. Idempotent. Part of step 11 of NOTE [Loader shutdown] (loader.ts). */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    livePools.delete(this);
    const error = poolClosed();
    for (let i = this.#head; i < this.#queue.length; i++) if (this.#queue[i] !== undefined) this.#settle(this.#queue[i]!, error, undefined);
    this.#queue = [];
    this.#head = 0;
    const exits: Promise<void>[] = [];
    for (const child of this.#children) {
      for (const r of child.held.values()) this.#settle(r, error, undefined);
      if (child.gone) continue;
      exits.push(new Promise<void>((resolve) => child.proc.once('close', () => resolve())));
      // Held open until reaped, so that whoever awaits close() sees the children gone.
      child.proc.ref();
      this.#kill(child);
    }
    if (exits.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(exits), new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS).unref()))]);
      clearTimeout(timer);
    }
  }

  /** Internal (process exit): SIGKILL every child now, synchronously. */
  killNow(): void {
    for (const child of this.#children) {
      if (!child.gone) this.#kill(child);
      dropSlab(child);
    }
  }

  #kill(child: Child): void {
    clearTimeout(child.startTimer);
    clearTimeout(child.idleTimer);
    child.socket.destroy();
    try {
      child.proc.kill('SIGKILL');
    } catch {
      // Already gone.
    }
  }

  /** Send queued requests to children with room; start children when demand exceeds their room. */
  #pump(): void {
    while (this.#head < this.#queue.length) {
      const request = this.#queue[this.#head];
      if (request === undefined || request.settled) {
        this.#queue[this.#head++] = undefined;
        continue;
      }
      let best: Child | undefined;
      for (const child of this.#children) {
        if (child.ready && !child.gone && child.held.size < PER_CHILD && (best === undefined || child.held.size < best.held.size)) best = child;
      }
      if (best === undefined) break;
      this.#queue[this.#head++] = undefined;
      request.queued = false;
      this.#waiting--;
      clearTimeout(best.idleTimer);
      best.idleTimer = undefined;
      best.held.set(request.id, request);
      best.socket.write(request.frame);
    }
    if (this.#head === this.#queue.length) {
      this.#queue = [];
      this.#head = 0;
    }
    this.#grow();
  }

  #grow(): void {
    if (this.#closed !== undefined || this.#spawnStopped) return;
    const waiting = this.#waiting;
    if (waiting === 0) return;
    let room = 0;
    let alive = 0;
    for (const child of this.#children) {
      if (child.gone) continue;
      alive++;
      room += PER_CHILD - child.held.size;
    }
    while (waiting > room && alive < this.size && !this.#spawnStopped) {
      if (!this.#spawn()) break;
      alive++;
      room += PER_CHILD;
    }
  }

  #spawn(): boolean {
    installExitHook();
    livePools.add(this);
    let proc: ChildProcess;
    const slab = this.#slab ? makeSlab() : undefined;
    try {
      proc = spawn(process.execPath, [...childExecArgv(), fileURLToPath(this.#entry)], {
        env: slab === undefined ? process.env : { ...process.env, [SLAB_ENV]: slab.path },
        // stdout ignored: a test runner reads the parent's stdout as its protocol. stderr shows crashes.
        stdio: ['ignore', 'ignore', 'inherit', 'pipe'],
        // Not a process group leader of its own: a terminal's Ctrl-C reaches the children too.
        detached: false,
        windowsHide: true,
      });
    } catch (cause) {
      if (slab !== undefined) dropSlab({ slab } as Child);
      this.#startFailed(undefined, `it could not be spawned: ${describeCause(cause)}`);
      return false;
    }
    const socket = proc.stdio[3] as Socket | null;
    if (socket === null || socket === undefined) {
      if (slab !== undefined) dropSlab({ slab } as Child);
      proc.kill('SIGKILL');
      this.#startFailed(undefined, 'it has no pipe on fd 3');
      return false;
    }
    if (CHILD_NICE > 0 && proc.pid !== undefined) {
      try {
        setPriority(proc.pid, Math.min(19, getPriority() + CHILD_NICE));
      } catch {
        // Not ours to renice (it may be gone already): it runs at the parent's priority.
      }
    }
    const child: Child = { proc, socket, pid: proc.pid, ready: false, held: new Map(), startTimer: undefined, gone: false, slab };
    this.#children.push(child);
    child.startTimer = setTimeout(() => {
      if (!child.ready && !child.gone) {
        this.#kill(child);
        this.#startFailed(child, `it did not report ready within ${this.#startTimeoutMs} ms`);
      }
    }, this.#startTimeoutMs).unref();
    if (!this.#refd) {
      proc.unref();
      socket.unref();
    }
    const reader = new FrameReader((id, kind, payload) => this.#onFrame(child, id, kind, payload));
    socket.on('data', (chunk: Buffer) => {
      try {
        reader.push(chunk);
      } catch (error) {
        this.#kill(child);
        child.failure = `its replies are unreadable (${describeCause(error)})`;
      }
    });
    // The child never closes its socket while alive: an end means it is going; make sure.
    socket.on('end', () => this.#kill(child));
    socket.on('error', () => this.#kill(child));
    proc.on('error', (cause) => {
      // Spawning failed (no 'close' follows when the process never ran) or a kill failed.
      if (proc.pid === undefined) this.#gone(child, `it could not be spawned: ${describeCause(cause)}`);
    });
    proc.on('close', (code, signal) => this.#gone(child, signal !== null ? `it was killed by ${signal}` : `it exited with code ${code}`));
    return true;
  }

  #onFrame(child: Child, id: number, kind: number, payload: Uint8Array): void {
    if (kind === FromChild.Ready) {
      child.ready = true;
      if (child.slab?.path !== undefined) {
        // The child opened it before saying ready (or could not, and replies on the socket): the name is no longer needed.
        try {
          unlinkSync(child.slab.path);
        } catch {
          // Gone already.
        }
        child.slab.path = undefined;
      }
      clearTimeout(child.startTimer);
      if (this.#startFailure !== undefined) this.#afterStartEvent();
      else this.#pump();
      this.#armIdle(child);
      return;
    }
    const request = child.held.get(id);
    if (request === undefined) {
      this.#kill(child);
      child.failure = `it answered request ${id}, which it does not hold`;
      return;
    }
    child.held.delete(id);
    if (kind === FromChild.Pixels) {
      if (payload.length !== request.bytes) {
        this.#settle(request, badFile(request.options.source, 0, `cannot decode the image: the decode process gave ${payload.length} bytes where ${request.shape.join('×')} were asked for`), undefined);
      } else this.#settle(request, undefined, new Tensor(typedView(payload, request.dtype) as never, request.shape, request.dtype));
    } else if (kind === FromChild.PixelsInSlab && payload.length === 8 && child.slab !== undefined) {
      const view = Buffer.from(payload.buffer, payload.byteOffset, payload.length);
      const length = view.readUInt32LE(0);
      const region = view.readUInt32LE(4);
      if (request.settled) {
        // Aborted while the child decoded it: nothing reads these pixels, and `into` may be reused already.
      } else if (length !== request.bytes || region >= PER_CHILD) {
        this.#settle(request, badFile(request.options.source, 0, `cannot decode the image: the decode process gave ${length} bytes where ${request.shape.join('×')} were asked for`), undefined);
      } else {
        // Into the row it is for (NOTE [pixels into their row]), else memory of its own: never pooled, so
        // offset 0 (aligned for any dtype), and not zero-filled: every byte is read into.
        const pixels = request.into ?? Buffer.allocUnsafeSlow(length);
        let error: unknown;
        try {
          for (let done = 0; done < length; ) {
            const n = readSync(child.slab.fd, pixels, done, length - done, region * SLAB_REGION + done);
            if (n === 0) throw new Error(`the slab ended after ${done} of ${length} bytes`);
            done += n;
          }
        } catch (cause) {
          error = workerDiedError(`the decode process (pid ${child.pid}) left pixels of ${request.options.source} that cannot be read: ${describeCause(cause)}`);
        }
        if (error !== undefined) this.#settle(request, error, undefined);
        else this.#settle(request, undefined, new Tensor(typedView(new Uint8Array(pixels.buffer, pixels.byteOffset, length), request.dtype) as never, request.shape, request.dtype));
      }
    } else if (kind === FromChild.Error) {
      let error: Error;
      try {
        error = fromWire(JSON.parse(Buffer.from(payload.buffer, payload.byteOffset, payload.length).toString('utf8')) as WireError);
      } catch (cause) {
        error = workerDiedError(`the decode process (pid ${child.pid}) sent an unreadable error for ${request.options.source}: ${describeCause(cause)}`);
      }
      this.#settle(request, error, undefined);
    } else {
      this.#settle(request, workerDiedError(`the decode process (pid ${child.pid}) sent a frame of unknown kind ${kind}`), undefined);
    }
    this.#pump();
    this.#armIdle(child);
  }

  /** NOTE [idle children retire]: a ready child left holding nothing retires after `idleMs`, unless given work first. */
  #armIdle(child: Child): void {
    // Once spawning has stopped (a child failed to start), no child could take a retired one's place.
    if (this.#idleMs === undefined || this.#spawnStopped || child.gone || !child.ready || child.held.size > 0 || child.idleTimer !== undefined || this.#closed !== undefined) return;
    child.idleTimer = setTimeout(() => {
      child.idleTimer = undefined;
      if (child.gone || child.held.size > 0 || this.#closed !== undefined || this.#spawnStopped) return;
      this.#kill(child);
      // Gone now, not at its 'close': nothing is sent to it meanwhile, and a later decode starts another.
      this.#gone(child, 'it retired after being idle');
    }, this.#idleMs).unref();
  }

  /** The child is gone (its 'close', or it never ran): fail what it held, never respawn a child that died starting. */
  #gone(child: Child, how: string): void {
    if (child.gone) return;
    child.gone = true;
    clearTimeout(child.startTimer);
    clearTimeout(child.idleTimer);
    child.socket.destroy();
    dropSlab(child);
    const index = this.#children.indexOf(child);
    if (index >= 0) this.#children.splice(index, 1);
    if (this.#closed !== undefined) return;
    const why = child.failure ?? how;
    if (!child.ready) {
      this.#startFailed(child, why);
      return;
    }
    for (const request of child.held.values()) {
      this.#settle(
        request,
        workerDiedError(
          `the image decode process (pid ${child.pid}) died while decoding ${request.options.source}: ${why}. It is replaced; only the images it held failed`,
        ),
        undefined,
      );
    }
    child.held.clear();
    this.#pump();
  }

  #startFailed(child: Child | undefined, why: string): void {
    if (child !== undefined) {
      const index = this.#children.indexOf(child);
      if (index >= 0) this.#children.splice(index, 1);
      child.gone = true;
      dropSlab(child);
    }
    this.#spawnStopped = true;
    this.#startFailure ??= why;
    this.#afterStartEvent();
  }

  /**
   * After a start-up failure, once the outcome is known: some child got ready (it keeps decoding,
   * no more are started) or none is left (decode here). One warning either way.
   */
  #afterStartEvent(): void {
    if (this.#startFailure === undefined) return;
    const alive = this.#children.filter((c) => !c.gone);
    const ready = alive.filter((c) => c.ready).length;
    if (alive.length === 0) {
      this.#inProcess = true;
      this.#warnOnce(`images are decoded in this process from now on (slower on many cores). Pass decode: 'threads' to choose this and silence the warning`);
      // Whatever waits, decode here.
      const waiting = this.#queue.slice(this.#head).filter((r): r is Request => r !== undefined && !r.settled);
      this.#queue = [];
      this.#head = 0;
      for (const request of waiting) {
        request.queued = false;
        this.#waiting--;
        decodeHere(request.input, request.options, request.signal).then(
          (t) => this.#settle(request, undefined, t),
          (e) => this.#settle(request, e, undefined),
        );
      }
      return;
    }
    if (ready > 0) this.#warnOnce(`no more are started; ${ready} decode${ready === 1 ? 's' : ''}`);
    this.#pump();
  }

  #warnOnce(outcome: string): void {
    if (this.#warned) return;
    this.#warned = true;
    this.#warn(`stoker: an image decode process failed to start (${this.#startFailure}); ${outcome}`);
  }

  #watch(signal: AbortSignal, request: Request): void {
    let entry = this.#watched.get(signal);
    if (entry === undefined) {
      const requests = new Set<Request>();
      const listener = () => {
        for (const r of [...requests]) this.#settle(r, signal.reason, undefined);
      };
      entry = { requests, listener };
      this.#watched.set(signal, entry);
      signal.addEventListener('abort', listener, { once: true });
    }
    entry.requests.add(request);
  }

  #settle(request: Request, error: unknown, value: Tensor | undefined): void {
    if (request.settled) return;
    request.settled = true;
    if (request.queued) {
      request.queued = false;
      this.#waiting--;
    }
    const signal = request.signal;
    if (signal !== undefined) {
      const entry = this.#watched.get(signal);
      if (entry !== undefined && entry.requests.delete(request) && entry.requests.size === 0) {
        signal.removeEventListener('abort', entry.listener);
        this.#watched.delete(signal);
      }
    }
    this.#outstanding--;
    if (this.#outstanding === 0) this.#setRef();
    if (error !== undefined) request.reject(error);
    else request.resolve(value!);
  }

  /** Ref children only while requests are outstanding: an idle pool never holds the process open. */
  #setRef(): void {
    const want = this.#outstanding > 0;
    if (want === this.#refd) return;
    this.#refd = want;
    for (const child of this.#children) {
      if (child.gone) continue;
      if (want) {
        child.proc.ref();
        child.socket.ref();
      } else {
        child.proc.unref();
        child.socket.unref();
      }
    }
  }
}

function poolClosed(): LoaderError {
  return loaderClosedError('the image decode processes were closed (the dataset was closed) while this image waited to be decoded');
}

/** The in-process path, for a pool whose children cannot start. */
async function decodeHere(input: DecodeInput, options: DecodeImageOptions, signal: AbortSignal | undefined): Promise<Tensor> {
  let bytes: Uint8Array;
  if (input instanceof Uint8Array) bytes = input;
  else {
    try {
      signal?.throwIfAborted();
      bytes = await readFile(input.path, signal === undefined ? undefined : { signal });
    } catch (cause) {
      if ((cause as Error)?.name === 'AbortError' || signal?.aborted) throw cause;
      throw fileAccess(input.path, 'read the image', cause);
    }
  }
  return decodeImage(bytes, options);
}
