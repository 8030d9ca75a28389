// Internal: not exported from the package entry.
// The decode route's knobs read from the environment, its read-ahead gate, and its per-batch timing
// (env switch `decodeTiming`, like `serveTiming` in serve/session.ts; base/env.ts): where a batch's time goes,
// logged to stderr at each epoch's end. The rules:
// - A phase's figure is the mean wall time a batch spent in it. Batches overlap (reads of one run
//   while another decodes), so the phases of one batch add up to its own time (`total`), not to the
//   epoch's time per batch (`wall`); the main thread's busy share says whether it is the bound.
// - The gate hands its places out in the order they were asked for (FIFO), and `enter` calls its
//   `granted` callback synchronously at the hand-over, so what the caller does there (take its place
//   in the decoder's slot order) keeps that order too.

import { performance } from 'node:perf_hooks';
import { readSwitch } from '../../../base/env.js';
import type { JpegBatchTiming } from '../../../device/jpeg/jpeg-batch.js';

/** Batches whose files the route reads or holds at once unless told otherwise (env switch `decodeAhead`). */
export const DEFAULT_DECODE_AHEAD = 4;

export interface DecodeRouteKnobs {
  /** Batches that may be reading or holding their files at once; 0: no bound (every launched batch). */
  readonly ahead: number;
  /** The route as of H200 run 12 (the launch-turn chain, no read-ahead bound, the sticky 192 KiB guess): for A/B runs. */
  readonly legacy: boolean;
  readonly timing: boolean;
}

/** The env switches `decodeAhead` (0 … 64, default 4), `decodeLegacy`, `decodeTiming` (base/env.ts). */
export function decodeRouteKnobs(env: NodeJS.ProcessEnv = process.env): DecodeRouteKnobs {
  const legacy = readSwitch('decodeLegacy', env);
  const ahead = readSwitch('decodeAhead', env) ?? (legacy ? 0 : DEFAULT_DECODE_AHEAD);
  const timing = readSwitch('decodeTiming', env);
  return { ahead, legacy, timing };
}

/** A FIFO gate of `places` places (0: unbounded). */
export class AheadGate {
  readonly #places: number;
  #used = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(places: number) {
    this.#places = places;
  }

  /** Places in use (tests). */
  get used(): number {
    return this.#used;
  }

  /**
   * A place: `granted` runs synchronously when it is handed over (now, or at an earlier holder's `leave`).
   * NOTE: a full gate waits for an earlier batch's `leave`, which the decode route makes in a `finally`
   * once that batch is decoded, failed or abandoned (its reads see the epoch's abort).
   */
  enter(granted: () => void): Promise<void> | undefined {
    if (this.#places === 0 || (this.#used < this.#places && this.#waiting.length === 0)) {
      this.#used++;
      granted();
      return undefined;
    }
    return new Promise<void>((resolve) => {
      this.#waiting.push(() => {
        granted();
        resolve();
      });
    });
  }

  /** Gives a place back: to the first waiter, if any (the count stays: the place changes hands). */
  leave(): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next();
    else this.#used--;
  }
}

/** One batch's figures (ms); the decoder's and decodeBatch's phases are added by them. */
export interface BatchFigures extends JpegBatchTiming {
  aheadMs: number;
  filesMemoryMs: number;
  /** fileMemory calls over 1 ms: buffers made and page-locked rather than reused. */
  slowFileMemory: number;
  readMs: number;
  turnMs: number;
  totalMs: number;
}

const PHASES = [
  ['ahead', 'aheadMs'], ['files memory', 'filesMemoryMs'], ['reads', 'readMs'], ['turn', 'turnMs'], ['slot', 'slotMs'], ['prep', 'prepMs'],
  ['probe', 'probeMs'], ['decode', 'decodeMs'], ['hand-off', 'handoffMs'], ['launch', 'launchMs'], ['cpu fallback', 'cpuMs'],
] as const;

export function newFigures(): BatchFigures {
  return { aheadMs: 0, filesMemoryMs: 0, slowFileMemory: 0, readMs: 0, turnMs: 0, slotMs: 0, prepMs: 0, probeMs: 0, decodeMs: 0, handoffMs: 0, launchMs: 0, cpuMs: 0, totalMs: 0 };
}

export class DecodeTiming {
  #sum = newFigures();
  #batches = 0;
  #start = performance.now();
  #elu = performance.eventLoopUtilization();

  begin(): void {
    this.#sum = newFigures();
    this.#batches = 0;
    this.#start = performance.now();
    this.#elu = performance.eventLoopUtilization();
  }

  /** A finished batch's figures (decoded or failed). */
  add(f: BatchFigures): void {
    this.#batches++;
    const s = this.#sum as unknown as Record<string, number>;
    for (const [k, v] of Object.entries(f)) s[k] = (s[k] ?? 0) + v;
  }

  /** One line: the epoch's time per batch, the main thread's busy share, then the mean of each phase. */
  report(epoch: number, consumerWaitMs: number, knobs: DecodeRouteKnobs): string {
    const n = Math.max(1, this.#batches);
    const wall = performance.now() - this.#start;
    const busy = performance.eventLoopUtilization(this.#elu).utilization;
    const ms = (v: number) => `${(v / n).toFixed(2)}`;
    const s = this.#sum;
    const phases = PHASES.map(([name, key]) => `${name} ${ms(s[key])}`).join(', ');
    const how = knobs.legacy ? 'legacy (turn chain)' : `ahead ${knobs.ahead === 0 ? 'unbounded' : knobs.ahead}`;
    return `stoker decode timing: epoch ${epoch} [${how}]: ${this.#batches} batches, ${ms(wall)} ms a batch, main thread busy ${(busy * 100).toFixed(0)} %, consumer waited ${ms(consumerWaitMs)}; a batch's own ms: ${phases}; total ${ms(s.totalMs)}; new file buffers ${s.slowFileMemory}`;
  }
}
