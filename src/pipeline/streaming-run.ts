// Internal: not exported from the package entry.
// Streaming mode: batches are read ahead of the consumer within the governor's window, uploaded as
// they arrive, and delivered strictly in plan order whatever order reads finish in.
// The rule: at most `governor.window` batches are in flight (launched, not yet taken); the window is
// re-read before every launch, so a resize takes effect at once. See NOTE [Epoch lifecycle].

import type { DeviceBatch } from '../device/device.js';
import type { AssembleContext, BatchAssembler } from './assemble/assembler.js';
import { oomPause, retriesOom } from './oom-retry.js';
import type { EpochPlan } from './epoch-plan.js';
import { EpochRun } from './epoch-run.js';
import type { Governor } from './governor.js';
import type { ReadPlan } from '../dataset/capabilities.js';

/** Main-thread time one turn of read-ahead may take before yielding to the event loop. */
const READ_AHEAD_SLICE_MS = 1;

type Outcome = { readonly memory: DeviceBatch } | { readonly error: unknown };

export class StreamingRun extends EpochRun {
  #assembler!: BatchAssembler;
  #governor!: Governor;
  #context!: AssembleContext;
  readonly #inflight = new Map<number, Promise<Outcome>>();
  #launched = 0;
  #taken = 0;
  #aheadScheduled = false;
  #abandoned: Promise<void> | undefined;

  /** Hard bound on batches in flight (the staging ring's slots), below the governor's window. */
  #limit = Number.POSITIVE_INFINITY;

  /** `limit`: a hard bound on batches in flight below the governor's window (the staging ring's slots). */
  bind(assembler: BatchAssembler, governor: Governor, limit = Number.POSITIVE_INFINITY): this {
    this.#assembler = assembler;
    this.#limit = limit;
    this.#governor = governor;
    this.#context = {
      signal: this.signal,
      stats: this.stats,
      inFlight: () => Math.min(this.#governor.window, this.#limit),
      backOff: (error, attempt) => this.#backOff(error, attempt),
    };
    governor.beginEpoch();
    return this;
  }

  /** This run's reads for a dataset that follows the plan (`PlannedReads`, dataset/capabilities.ts). */
  readPlan(): ReadPlan {
    const plan = this.plan;
    const at = (b: number) => (b >= plan.batches ? plan.samples.length : plan.start(b));
    return { samples: plan.samples, consumed: () => at(this.#taken), signal: this.signal };
  }

  /** Batches launched and not yet taken by the consumer. */
  get inFlight(): number {
    return this.#launched - this.#taken;
  }

  protected async produce(index: number): Promise<DeviceBatch> {
    this.#taken = index;
    this.#fill(index);
    const pending = this.#inflight.get(index)!;
    const outcome = await Promise.race([pending, this.#whenAbandoned()]);
    // Abandoned: the pending read stays in the map, and cleanup() frees what it brings.
    if (outcome === undefined) throw new Error('epoch ended');
    this.#inflight.delete(index);
    // Read ahead while the consumer works on this batch: up to `window` batches beyond it, as
    // flodl's gate allows `target` batches sent and not yet consumed.
    this.#taken = index + 1;
    if ('error' in outcome) throw outcome.error;
    this.#scheduleReadAhead();
    return outcome.memory;
  }

  protected override onDelivered(): void {
    this.#governor.onConsumed();
  }

  #canLaunch(): boolean {
    return this.#launched < this.plan.batches && this.#launched - this.#taken < Math.min(this.#governor.window, this.#limit);
  }

  /** Launch up to batch `urgent` now (the consumer waits for it); read further ahead in the background. */
  #fill(urgent: number): void {
    while (this.#launched <= urgent && this.#canLaunch()) this.#launchNext();
    this.#scheduleReadAhead();
  }

  #launchNext(): void {
    const index = this.#launched++;
    this.#inflight.set(index, this.#launch(this.plan, index));
  }

  /**
   * Read-ahead in slices of at most READ_AHEAD_SLICE_MS of main-thread time per turn of the event
   * loop: a synchronous source (read on the main thread) then never holds the consumer for long, and
   * its reads overlap whatever the consumer awaits (device work, I/O) instead of running all at once
   * before the first delivery; cheap launches (pooled batches, worker reads) still go many per turn.
   */
  #scheduleReadAhead(): void {
    if (this.#aheadScheduled || this.ended || !this.#canLaunch()) return;
    this.#aheadScheduled = true;
    setImmediate(() => {
      this.#aheadScheduled = false;
      const t0 = performance.now();
      while (!this.ended && this.#canLaunch()) {
        this.#launchNext();
        if (performance.now() - t0 >= READ_AHEAD_SLICE_MS) break;
      }
      this.#scheduleReadAhead();
    });
  }

  async #launch(plan: EpochPlan, index: number): Promise<Outcome> {
    const ids = plan.samples.subarray(plan.start(index), plan.end(index));
    const t0 = performance.now();
    try {
      return { memory: await this.#assembler.assemble(ids, this.#context, this.keysOf(index)) };
    } catch (error) {
      return { error };
    } finally {
      this.stats.fetchMs += performance.now() - t0;
    }
  }

  /**
   * Reference §6.5: after a transient device out-of-memory, halve the in-flight target, wait, and let
   * the caller retry; the route gives memory back (the pool a slab) only once the target was already
   * 1. Rethrows anything else, and the last failure.
   */
  async #backOff(error: unknown, attempt: number): Promise<void> {
    if (!retriesOom(error, attempt, this.signal)) throw error;
    this.stats.oomRetries++;
    const atFloor = this.#governor.halveAfterOom();
    await oomPause(this.signal);
    if (atFloor) this.#assembler.relieve();
  }

  #whenAbandoned(): Promise<undefined> {
    this.#abandoned ??= new Promise<void>((resolve) => {
      if (this.signal.aborted) resolve();
      else this.signal.addEventListener('abort', () => resolve(), { once: true });
    });
    return this.#abandoned.then(() => undefined);
  }

  protected cleanup(): void {
    // Reads still in flight finish on their own (they saw the abort); their memory goes back now.
    for (const pending of this.#inflight.values()) {
      void pending.then((o) => {
        if ('memory' in o) o.memory.free();
      });
    }
    this.#inflight.clear();
  }
}
