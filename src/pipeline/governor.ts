// Internal: not exported from the package entry.
// The in-flight governor of a streaming loader: how many batches may be fetched ahead of the
// consumer. The rule: `target` is a soft bound that may change at any moment (the consumer's honest
// resize, the user's setter, an OOM halving); the pipeline re-reads it before every launch.
// Sizing follows NOTE [The budget law] in budget.ts.

import { type Probe, type ReserveSource, BOOTSTRAP_PREFETCH, DOUBLE_BUFFER, MAX_IN_FLIGHT, initialFillTarget, prefetchDepthFromVram } from '../base/budget.js';

export interface GovernorSizing {
  readonly sampleBytes: number;
  readonly batchSize: number;
  readonly probe: Probe;
  readonly vramMaxUsage: number;
  /**
   * The depth the source asks for on a device without a memory probe (`Dataset.prefetch`, NOTE [a
   * window for decode processes]); the double buffer when undefined or smaller.
   */
  readonly hostDepth?: number;
}

/**
 * NOTE [the in-flight bound] Batches in flight never exceed `window` = min(target, capacity), and
 * the window is at least 1: `capacity` is the ceiling (flodl's channel capacity, what `prefetchDepth`
 * reports), `target` the soft bound under it that the honest resize, the user and an out-of-memory
 * halving move. Both change only through the methods below, which keep 1 ≤ target and 1 ≤ capacity.
 */
export class Governor {
  #target: number;
  #capacity: number;
  #consumed = 0;
  #runConsumed = 0;
  #honestResizeDone = false;
  #userOwned: boolean;
  #reserve = 0;
  #reserveSource: ReserveSource = 'bare';
  readonly #sizing: GovernorSizing;

  constructor(sizing: GovernorSizing, prefetch: number | undefined, activationReserve: number | undefined) {
    this.#sizing = sizing;
    this.#userOwned = prefetch !== undefined;
    // `prefetch` is ≥ 1 (checked at create); `setDepth(0)` is flodl's rendezvous, a window of one batch here.
    this.#capacity = prefetch !== undefined ? Math.max(prefetch, 1) : BOOTSTRAP_PREFETCH;
    this.#target = this.#capacity;
    if (activationReserve !== undefined) {
      this.#reserve = activationReserve;
      this.#reserveSource = 'user';
    }
  }

  /** The soft in-flight bound (≥ 1; NOTE [the in-flight bound]). */
  get target(): number {
    return this.#target;
  }

  /** The ceiling on the in-flight window; what `prefetchDepth` reports. */
  get capacity(): number {
    return this.#capacity;
  }

  /** Batches consumed this epoch. */
  get consumed(): number {
    return this.#consumed;
  }

  /** Batches consumed over the whole run. */
  get runConsumed(): number {
    return this.#runConsumed;
  }

  /** Set once, when the consumer has drained its second batch: the probe now sees step memory. */
  get honestResizeDone(): boolean {
    return this.#honestResizeDone;
  }

  /** The user pinned the depth (`prefetch`, `setPrefetchDepth`, `autoResize`): no adaptive sizing. */
  get userOwned(): boolean {
    return this.#userOwned;
  }

  get reserve(): number {
    return this.#reserve;
  }

  get reserveSource(): ReserveSource {
    return this.#reserveSource;
  }

  /** Reference §6.5: halve the target after a device out-of-memory; true when it was already 1 (the route must give memory back). */
  halveAfterOom(): boolean {
    const atFloor = this.#target <= 1;
    this.#target = Math.max(Math.floor(this.#target / 2), 1);
    return atFloor;
  }

  #depth(reserve: number): number {
    const s = this.#sizing;
    if (s.probe === undefined && s.hostDepth !== undefined) return Math.max(DOUBLE_BUFFER, Math.min(s.hostDepth, MAX_IN_FLIGHT));
    return prefetchDepthFromVram(s.sampleBytes, s.batchSize, s.probe, s.vramMaxUsage, reserve);
  }

  /** Size the window for a new epoch (reference §6.2). */
  beginEpoch(): void {
    this.#consumed = 0;
    if (this.#userOwned) {
      this.#target = Math.max(this.#capacity, 1);
      return;
    }
    const full = this.#depth(0);
    this.#target = this.#honestResizeDone ? Math.max(full, 1) : initialFillTarget(this.#depth(this.#reserve), this.#reserveSource);
    this.#capacity = Math.max(full, DOUBLE_BUFFER);
  }

  /** The consumer took a batch; fires the honest resize after the second one of the run. */
  onConsumed(): void {
    this.#consumed++;
    this.#runConsumed++;
    if (this.#runConsumed >= 2 && !this.#honestResizeDone) {
      this.#honestResizeDone = true;
      if (!this.#userOwned) this.#target = Math.max(this.#depth(0), 1);
    }
  }

  /** Batches that may be in flight right now. */
  get window(): number {
    return Math.max(Math.min(this.#target, this.#capacity), 1);
  }

  setDepth(depth: number): void {
    this.#capacity = Math.max(depth, 1);
    this.#target = this.#capacity;
    this.#userOwned = true;
  }

  /** Re-probe and pin the depth (reference §1.5 `auto_resize`). */
  autoResize(): number {
    const d = Math.max(this.#depth(this.#honestResizeDone ? 0 : this.#reserve), 1);
    this.setDepth(d);
    return d;
  }

  setActivationReserve(bytes: number, source: ReserveSource = 'user'): void {
    if (source === 'auto' && this.#reserveSource !== 'bare') return;
    this.#reserve = bytes;
    this.#reserveSource = source;
  }
}
