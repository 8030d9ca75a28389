// Internal: not exported from the package entry.
// What both modes share about running one epoch: the iterator protocol, the error policy, the
// figures. NOTE [Epoch lifecycle]: a run starts on the consumer's first `next()`, ends when the last
// batch is taken, when a batch error is thrown, when the consumer leaves the loop (`return()`), or
// when the loader closes; ending aborts the run's signal, which cancels in-flight reads, and frees
// every batch that was fetched but never delivered.

import { setMaxListeners } from 'node:events';
import type { Batch } from '../batch.js';
import type { AnyTensor } from '../device/device-tensor.js';
import { isDeviceOutOfMemory } from '../device/backend.js';
import { BatchError, type BatchStage, describeCause } from '../errors.js';
import { type DeliveryConfig, TransformFailure, deliver } from './delivery.js';
import type { DeviceBatch } from '../device/device.js';
import type { EpochPlan } from './epoch-plan.js';
import type { PickKeys } from '../sampler/pick-key.js';
import { type EpochStats, SKIPPED_KEPT, newEpochStats } from './stats.js';
import { countPacked } from './ragged-batch.js';

export abstract class EpochRun implements AsyncIterator<Batch<AnyTensor>, undefined> {
  readonly plan: EpochPlan;
  readonly stats: EpochStats;
  readonly #config: DeliveryConfig;
  readonly #errors: 'throw' | 'skip';
  readonly #controller = new AbortController();
  readonly #onEnd: (run: EpochRun) => void;
  #next = 0;
  #started = 0;
  #ended = false;
  #queue: Promise<void> = Promise.resolve();
  #previous: Batch<AnyTensor> | undefined;
  /** Set by the loader for devices whose batches are released when the next one is asked for. */
  autoRelease = false;

  constructor(plan: EpochPlan, mode: 'resident' | 'streaming', config: DeliveryConfig, errors: 'throw' | 'skip', onEnd: (run: EpochRun) => void) {
    this.plan = plan;
    this.stats = newEpochStats(plan.epoch, mode);
    this.#config = config;
    this.#errors = errors;
    this.#onEnd = onEnd;
    // Every async read of the epoch may listen for the abort: one listener per read in flight is
    // expected, not a leak.
    setMaxListeners(0, this.#controller.signal);
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** The picks of batch `index` with what makes their keys (NOTE [keyed reads], dataset.ts). */
  protected keysOf(index: number): PickKeys {
    const plan = this.plan;
    return { picks: plan.picks.subarray(plan.start(index), plan.end(index)), augment: this.#config.augment, epoch: plan.epoch, seed: this.#config.seed };
  }

  /** Batch memory for batch `index`, or a rejection carrying the dataset's error. */
  protected abstract produce(index: number): DeviceBatch | Promise<DeviceBatch>;

  /** Called once when the run ends, after the signal aborted. */
  protected abstract cleanup(): void;

  /** Hook: a batch was handed to the consumer. */
  protected onDelivered(): void {}

  /** Calls are served one at a time, in call order, even when the caller does not await each. */
  next(): Promise<IteratorResult<Batch<AnyTensor>, undefined>> {
    const step = this.#queue.then(() => this.#step());
    this.#queue = step.then(noop, noop);
    return step;
  }

  async #step(): Promise<IteratorResult<Batch<AnyTensor>, undefined>> {
    // NOTE [Batch leasing] (batch.ts): on devices with scarce memory, asking for the next batch ends
    // the previous one's delivery lease (a retained batch lives on until its release).
    if (this.autoRelease) {
      this.#previous?.endDelivery();
      this.#previous = undefined;
    }
    if (this.#ended) return { done: true, value: undefined };
    const t0 = performance.now();
    if (this.#started === 0) this.#started = t0;
    try {
      while (this.#next < this.plan.batches) {
        const index = this.#next++;
        let memory: DeviceBatch;
        try {
          const produced = this.produce(index);
          memory = produced instanceof Promise ? await produced : produced;
        } catch (cause) {
          if (this.#ended) return { done: true, value: undefined };
          this.#fail(index, 'dataset', cause);
          continue;
        }
        if (this.#ended) {
          memory.free();
          return { done: true, value: undefined };
        }
        // The consumer stream waits for the batch's data before anything runs on it: the transform
        // (user kernels included) as much as the training step.
        memory.beforeDelivery?.();
        const tt = performance.now();
        let batch: Batch<AnyTensor>;
        try {
          const delivered = deliver(this.#config, this.plan, index, memory);
          batch = delivered instanceof Promise ? await delivered : delivered;
        } catch (error) {
          if (!(error instanceof TransformFailure)) throw error;
          this.#fail(index, 'transform', error.cause);
          continue;
        } finally {
          if (this.#config.transform !== undefined) this.stats.transformMs += performance.now() - tt;
        }
        this.stats.batches++;
        this.stats.rowsDelivered += batch.rows;
        if (this.plan.packing !== undefined) countPacked(this.stats, this.plan.packing, index);
        if (this.autoRelease) this.#previous = batch;
        this.onDelivered();
        return { done: false, value: batch };
      }
      this.stats.complete = true;
      this.end();
      return { done: true, value: undefined };
    } catch (error) {
      this.end();
      throw error;
    } finally {
      this.stats.waitMs += performance.now() - t0;
      this.stats.wallMs = performance.now() - this.#started;
    }
  }

  async return(): Promise<IteratorResult<Batch<AnyTensor>, undefined>> {
    this.end();
    return { done: true, value: undefined };
  }

  /** End the run (idempotent): abort in-flight work, free undelivered batches, release the loader. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.autoRelease) {
      this.#previous?.endDelivery();
      this.#previous = undefined;
    }
    this.#controller.abort();
    this.cleanup();
    if (this.#started !== 0) this.stats.wallMs = performance.now() - this.#started;
    this.#onEnd(this);
  }

  #fail(index: number, where: 'dataset' | 'transform', cause: unknown): void {
    this.stats.failedBatches++;
    const p = this.plan;
    const sampleIds = Array.from(p.samples.subarray(p.start(index), p.end(index)));
    const stage: BatchStage = where === 'dataset' && isDeviceOutOfMemory(cause) ? 'device' : where;
    if (this.#errors === 'skip') {
      this.stats.skippedBatches++;
      if (this.stats.skipped.length < SKIPPED_KEPT) this.stats.skipped.push(Object.freeze({ index, sampleIds: Object.freeze(sampleIds), stage, reason: describeCause(cause) }));
      return;
    }
    throw new BatchError(p.epoch, index, sampleIds, stage, cause);
  }
}

function noop(): void {}
