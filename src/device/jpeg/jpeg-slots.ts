// Internal: not exported from the package entry.
// The decode slots of a GPU JPEG decoder: N of them (default 2), each a worker thread running its
// jobs (jpeg-jobs.ts: nvJPEG's blocking calls on CUDA, the CPU decoder on sim), so the decode of
// batch i runs while the main thread reads batch i + 1 and hands out batch i − 1. The rules:
// - A batch holds one slot from its decode to its rows (acquire … release); slots are handed out
//   in the order they were asked for (a FIFO: `acquire` queues synchronously), one batch per slot,
//   so each slot's state (and its device scratch, owned by the decoder) serves one batch at a time.
//   A caller may take its place in that order early (`reserve`: a ticket, queued synchronously) and
//   claim the slot later (`take`), or give the place up (`cancel`, which passes a granted slot on).
// - A slot whose thread died fails its jobs with the thread's error; the others go on.
// - The decoder owns what the slots use (nvJPEG states, device scratch) and releases it itself once
//   no slot is held (`whenIdle`); `close` then ends the threads. Env switch `jpegWorkers` 0 runs the same
//   jobs inline on the main thread (no overlap).

import type { SlotTicket as DeviceSlotTicket } from '../device.js';
import { Worker } from 'node:worker_threads';
import { revivedError } from '../../errors.js';
import { workerBoot } from '../../base/worker-boot.js';
import { readSwitch } from '../../base/env.js';
import { type JpegJob, type JpegReply, jpegJobs } from './jpeg-jobs.js';
import { warn } from '../../base/warnings.js';

const WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? './jpeg-worker.ts' : './jpeg-worker.js', import.meta.url);

/** Decode slots a decoder opens unless told otherwise: two batches in flight (double buffering). */
export const DEFAULT_JPEG_SLOTS = 2;

export interface JpegSlot {
  /** Slot number, 0 … count − 1 (the decoder keys its per-slot scratch by it). */
  readonly index: number;
  run<R extends JpegReply>(job: JpegJob, transfer?: ArrayBuffer[]): Promise<R>;
}

let liveThreads = 0;

/** Decode-slot threads started and not yet exited in this process (leak checks). */
export function liveJpegThreads(): number {
  return liveThreads;
}

/**
 * Whether slots run on worker threads or inline on the calling thread: env switch `jpegWorkers` 1 or 0,
 * else the decoder's default — threads for nvJPEG and sim. On the H200 (run 13, with slot tickets
 * and the read-ahead bound) threads gave 15.4 k images/s end to end against 10.4 k inline, whose
 * main thread was 100 % busy; before the tickets (runs 10 and 11) inline was ahead, 12.5–14.4 k
 * against 9.4–10.4 k. On sim the slots run sharp, which would block the main thread.
 */
export function slotThreads(byDefault: boolean, env: NodeJS.ProcessEnv = process.env): boolean {
  return readSwitch('jpegWorkers', env) ?? byDefault;
}

/** A ticket of these slots (the device interface's SlotTicket, NOTE in device.ts). */
export type SlotTicket = DeviceSlotTicket<JpegSlot>;

export class JpegSlots {
  readonly #slots: (WorkerSlot | InlineSlot)[];
  readonly #free: (WorkerSlot | InlineSlot)[];
  readonly #waiting: ((slot: JpegSlot) => void)[] = [];
  #held = 0;
  #idle: (() => void)[] = [];
  #closed = false;

  /** `count` slots, each first running `open` (when given) before any other job. */
  constructor(count: number, threads: boolean, open?: (index: number) => JpegJob) {
    this.#slots = Array.from({ length: count }, (_, i) => (threads ? new WorkerSlot(i) : new InlineSlot(i)));
    if (open !== undefined) for (const s of this.#slots) s.start(open(s.index));
    this.#free = [...this.#slots];
  }

  get count(): number {
    return this.#slots.length;
  }

  /** Batches holding a slot or waiting for one. */
  get held(): number {
    return this.#held;
  }

  /** Resolves once every slot's opening job is done; rejects with the first failure. */
  async ready(): Promise<void> {
    await Promise.all(this.#slots.map((s) => s.opened));
  }

  /**
   * A free slot, in request order; the request is queued before this returns.
   * NOTE [what a slot wait waits for]: a holder's `release`, which every decode call makes in a
   * `finally` once its slot's job settled (a worker slot's job settles or its thread's death fails
   * it); close() fails what still waits. So the wait is bounded by one decode.
   */
  acquire(): Promise<JpegSlot> {
    if (this.#closed) return Promise.reject(new Error('this GPU JPEG decoder is closed'));
    this.#held++;
    const slot = this.#free.shift();
    if (slot !== undefined) return Promise.resolve(slot);
    return new Promise<JpegSlot>((resolve) => this.#waiting.push(resolve));
  }

  /**
   * A place in the slot order now (queued before this returns, counted in `held` until it is taken
   * and released, or cancelled): the slot is claimed later with `take`.
   */
  reserve(): SlotTicket {
    if (this.#closed) throw new Error('this GPU JPEG decoder is closed');
    this.#held++;
    let state: 'waiting' | 'granted' | 'taken' | 'cancelled' = 'granted';
    let slot: JpegSlot | undefined = this.#free.shift();
    let resolve: ((slot: JpegSlot) => void) | undefined;
    const granted = slot !== undefined ? Promise.resolve(slot) : new Promise<JpegSlot>((r) => (resolve = r));
    const give = (s: JpegSlot) => {
      slot = s;
      // Taken while it waited: the call that took it has the slot now (and releases it).
      if (state === 'waiting') state = 'granted';
      resolve!(s);
    };
    if (slot === undefined) {
      state = 'waiting';
      this.#waiting.push(give);
    }
    return {
      take: () => {
        if (state === 'taken' || state === 'cancelled') return Promise.reject(new Error(`internal: a decode-slot ticket ${state} twice`));
        state = 'taken';
        return granted;
      },
      cancel: () => {
        if (state === 'taken' || state === 'cancelled') return;
        if (state === 'granted') {
          state = 'cancelled';
          this.release(slot!);
          return;
        }
        state = 'cancelled';
        const at = this.#waiting.indexOf(give);
        if (at >= 0) this.#waiting.splice(at, 1);
        this.#held--;
        if (this.#held === 0) for (const done of this.#idle.splice(0)) done();
      },
    };
  }

  release(slot: JpegSlot): void {
    // `held` counts the batches holding or waiting for a slot.
    this.#held--;
    const next = this.#waiting.shift();
    if (next !== undefined) {
      next(slot);
      return;
    }
    this.#free.push(slot as WorkerSlot | InlineSlot);
    if (this.#held === 0) for (const done of this.#idle.splice(0)) done();
  }

  /** Resolves when no slot is held: waits for the holders' releases (NOTE [what a slot wait waits for]). */
  whenIdle(): Promise<void> {
    if (this.#held === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.#idle.push(resolve));
  }

  /** Ends the threads (call it with no slot held: a thread inside a native call finishes it first). Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const s of this.#slots) s.end();
  }
}

let inlineWarned = false;

class InlineSlot implements JpegSlot {
  readonly index: number;
  readonly #run = jpegJobs();
  #opened: Promise<unknown> = Promise.resolve();

  constructor(index: number) {
    this.index = index;
  }

  get opened(): Promise<unknown> {
    return this.#opened;
  }

  start(job: JpegJob): void {
    this.#opened = this.#run(job);
    this.#opened.catch(() => {});
  }

  async run<R extends JpegReply>(job: JpegJob): Promise<R> {
    await this.#opened;
    return (await this.#run(job)).reply as R;
  }

  end(): void {}
}

interface Pending {
  resolve(reply: JpegReply): void;
  reject(error: unknown): void;
}

class WorkerSlot implements JpegSlot {
  readonly index: number;
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  #next = 0;
  #dead: Error | undefined;
  #opened: Promise<unknown> = Promise.resolve();
  /** Set when the thread could not open the slot: its jobs run here. */
  #inline: InlineSlot | undefined;

  constructor(index: number) {
    this.index = index;
    this.#worker = new Worker(workerBoot(WORKER_URL), { eval: true, stdout: false, stderr: false });
    liveThreads++;
    // Kept alive only while a job is pending (an idle slot never holds the process open).
    this.#worker.unref();
    this.#worker.on('message', (m: { id: number; reply?: JpegReply; error?: { message: string; code?: string; name?: string } }) => {
      const p = this.#pending.get(m.id);
      if (p === undefined) return;
      this.#settled(m.id);
      if (m.error !== undefined) p.reject(rebuild(m.error));
      else p.resolve(m.reply!);
    });
    this.#worker.on('error', (error) => this.#die(error instanceof Error ? error : new Error(String(error))));
    this.#worker.on('exit', (code) => {
      liveThreads--;
      this.#die(new Error(`a GPU JPEG decode thread exited (code ${code})`));
    });
  }

  get opened(): Promise<unknown> {
    return this.#opened;
  }

  start(job: JpegJob): void {
    this.#opened = this.#post(job).catch((error: unknown) => {
      // The thread cannot take the slot (koffi, the driver or nvJPEG refused a worker thread): the
      // slot runs inline on the main thread instead (no overlap), with one warning per process.
      if (!inlineWarned) {
        inlineWarned = true;
        warn('gpuDecodeThread', `stoker: a GPU JPEG decode thread could not start (${(error as Error)?.message ?? error}); decoding on the main thread`);
      }
      const inline = new InlineSlot(this.index);
      inline.start(job);
      this.#inline = inline;
      void this.#worker.terminate();
      return inline.opened;
    });
    this.#opened.catch(() => {});
  }

  async run<R extends JpegReply>(job: JpegJob, transfer?: ArrayBuffer[]): Promise<R> {
    await this.#opened;
    if (this.#inline !== undefined) return this.#inline.run<R>(job);
    return (await this.#post(job, transfer)) as R;
  }

  end(): void {
    this.#die(new Error('this GPU JPEG decoder is closed'));
    void this.#worker.terminate();
  }

  #post(job: JpegJob, transfer?: ArrayBuffer[]): Promise<JpegReply> {
    if (this.#dead !== undefined) return Promise.reject(this.#dead);
    const id = this.#next++;
    return new Promise<JpegReply>((resolve, reject) => {
      if (this.#pending.size === 0) this.#worker.ref();
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ id, job }, transfer ?? []);
    });
  }

  #settled(id: number): void {
    this.#pending.delete(id);
    if (this.#pending.size === 0) this.#worker.unref();
  }

  #die(error: Error): void {
    this.#dead ??= error;
    for (const [id, p] of [...this.#pending]) {
      this.#settled(id);
      p.reject(error);
    }
  }
}

function rebuild(e: { message: string; code?: string; name?: string }): Error {
  if (e.name === 'LoaderError' && e.code !== undefined) return revivedError(e.code, e.message);
  return new Error(e.message);
}
