// Internal: not exported from the package entry.
// Whether a partial VRAM pool pays, decided from measured epochs. The rule: the default must never
// cost — a pool that holds only part of the dataset stitches its rows into a batch only while that
// made epochs no slower than reading every row across the bus.
//
// NOTE [A pool that does not pay stays dormant]
// Stitching pooled rows saves bus bytes (by the hit rate) but costs the host a plan against the pool
// and two address tables per batch, and the device a stitch kernel; whether that pays depends on
// the row size, the bus, the reads and the consumer, none of which the loader can price up front
// (measured on the H200: a third of 12 KB rows pooled made epochs 1.7× slower; the whole dataset
// pooled makes them 6× faster, and that case turns resident anyway). So once the pool is full and
// still partial, one epoch stitches and the next does not, each timed per batch (wall, consumer
// included: both pay the same consumer, so the difference is the loader's), and later epochs take
// the cheaper way; ties go to the pool (it also spares the bus for the model). The trial is rerun
// every RETRIAL_EPOCHS epochs, since the consumer and the machine change. An epoch that did not run
// to its end measures nothing and is repeated. While the pool still fills it stitches (capturing is
// how it fills), and a complete pool is promoted to resident before any of this applies.

/** The pool's part in one epoch: how its rows reach batches, as `stats().epochs[e].vramPool` shows it. */
export type PoolPhase =
  /** No pool: disabled, not installed (no budget), or given back. */
  | 'none'
  /** Capturing rows (and stitching what it holds). */
  | 'filling'
  /** Full and partial: this epoch stitches, to time it. */
  | 'trial-stitch'
  /** Full and partial: this epoch reads every row across the bus, to time it. */
  | 'trial-bypass'
  /** Stitching paid in the last trial. */
  | 'stitching'
  /** Stitching cost more than it saved in the last trial: rows cross the bus, the pool waits. */
  | 'dormant';

export const RETRIAL_EPOCHS = 16;

interface PoolView {
  readonly active: boolean;
  readonly admitting: boolean;
}

interface EpochOutcome {
  readonly complete: boolean;
  readonly batches: number;
  readonly wallMs: number;
}

export class PoolPayoff {
  #phase: PoolPhase = 'none';
  #stitchMs = Number.NaN;
  #bypassMs = Number.NaN;
  #sinceTrial = 0;

  get phase(): PoolPhase {
    return this.#phase;
  }

  /** Whether batches of the current epoch gather pooled rows (false: every row is read and uploaded). */
  get stitching(): boolean {
    return this.#phase !== 'trial-bypass' && this.#phase !== 'dormant';
  }

  /** At an epoch's start: choose the phase from the pool's state and what earlier epochs measured. */
  begin(pool: PoolView): PoolPhase {
    if (!pool.active) return (this.#phase = 'none');
    if (pool.admitting) return (this.#phase = 'filling');
    if (Number.isNaN(this.#stitchMs)) return (this.#phase = 'trial-stitch');
    if (Number.isNaN(this.#bypassMs)) return (this.#phase = 'trial-bypass');
    if (this.#sinceTrial >= RETRIAL_EPOCHS) {
      this.#stitchMs = this.#bypassMs = Number.NaN;
      this.#sinceTrial = 0;
      return (this.#phase = 'trial-stitch');
    }
    this.#sinceTrial++;
    return (this.#phase = this.#stitchMs <= this.#bypassMs ? 'stitching' : 'dormant');
  }

  /** At an epoch's end: a trial epoch that ran to its end records its cost per batch. */
  end(outcome: EpochOutcome): void {
    if (!outcome.complete || outcome.batches === 0) return;
    const perBatch = outcome.wallMs / outcome.batches;
    if (this.#phase === 'trial-stitch') this.#stitchMs = perBatch;
    else if (this.#phase === 'trial-bypass') this.#bypassMs = perBatch;
  }
}
