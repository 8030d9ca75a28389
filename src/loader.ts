// The DataLoader: a thin validating façade over the private pipeline. The rule: build the model
// first, then the loader, so that device memory probes see what the model really uses; and take one
// epoch at a time — a loader runs one epoch iterator at once.

import { type RemoteCounters, remoteStats } from './remote/remote.js';
import { openDevice } from './device/open-device.js';
import { makeUserKernel } from './device/user-kernel.js';
import type { UserKernel } from './device/user-kernel.js';
import type { AnyTensor, DeviceTensor } from './device/device-tensor.js';
import type { Tensor } from './tensor/tensor.js';
import type { Device, ResidentStore } from './device/device.js';
import { type AnyDataset, closeDataset } from './dataset/dataset.js';
import type { PlannedReads } from './dataset/capabilities.js';
import { BlockSampler } from './sampler/block-sampler.js';
import type { SourceSpec } from './dataset/source-spec.js';
import type { StreamingParts } from './pipeline/streaming-parts.js';
import type { Batch } from './batch.js';
import { epochActive, invalidOption, loaderClosed, resumeMismatchError } from './errors.js';
import { type LoaderOptions, type ResolvedOptions, resolveOptions } from './options.js';
import { type DeliveryConfig, deliveredNames } from './pipeline/delivery.js';
import { type Built, buildLoader, checkActivationReserve } from './pipeline/build.js';
import type { EpochPlan } from './pipeline/epoch-plan.js';
import type { BatchPlanner, Segment } from './pipeline/batch-planner.js';
import { MixSampler } from './sampler/mix-sampler.js';
import type { World } from './distributed/launch.js';
import { type LoaderState, type OrderShape, seedString } from './distributed/resume.js';
import type { EpochRun } from './pipeline/epoch-run.js';
import type { Governor } from './pipeline/governor.js';
import { ResidentRun } from './pipeline/resident-run.js';
import { type ClientEpoch, type ClientGather, kClientGather } from './pipeline/client-gather.js';
import type { EpochRoute, EpochStats } from './pipeline/stats.js';
import { describeLoader } from './report/describe.js';
import { StreamingRun } from './pipeline/streaming-run.js';
import { RandomSampler } from './sampler/random-sampler.js';
import { type Sampler, validatedPicks } from './sampler/sampler.js';

/** One epoch's batches: iterate it with `for await`; `length` is its batch count. */
export interface Epoch<T extends AnyTensor = Tensor> extends AsyncIterable<Batch<T>> {
  readonly epoch: number;
  readonly length: number;
}

export interface LoaderStats {
  readonly device: string;
  readonly mode: 'resident' | 'streaming';
  /** Milliseconds `create` spent reading the dataset into memory (resident mode). */
  readonly residentBuildMs: number;
  /** Live reader workers (0 = reads on the main thread). */
  readonly workers: number;
  /** This process's rank, the world size, the local rank and the launcher they came from. */
  readonly world: World;
  /** Device bytes and page-locked host bytes the loader holds now (0 after close). */
  readonly memory: { readonly device: number; readonly pinned: number };
  /** One entry per epoch run so far, oldest first (the last 1000). */
  readonly epochs: readonly EpochStats[];
  /** Remote files (s3://, http(s)://) this thread's node caches fetched or found: requests, bytes, retries, hits, downloads, waits, evictions (docs/remote.md). */
  readonly remote: RemoteCounters;
}

const STATS_HISTORY = 1000;

/**
 * `T` is the tensor type of the batches: `Tensor` on the CPU, `DeviceTensor` on 'cuda' and 'sim'.
 * Iterate `loader.epoch(e)` to name the epoch, or the loader itself (`for await (const b of
 * loader)`), which runs the next epoch on each loop, as a PyTorch DataLoader does.
 */
export class DataLoader<T extends AnyTensor = Tensor> implements AsyncIterable<Batch<T>> {
  readonly #opts: ResolvedOptions;
  readonly #device: Device;
  readonly #datasetLength: number;
  readonly #sampler: Sampler;
  readonly #customSampler: boolean;
  readonly #delivery: DeliveryConfig;
  #resident: ResidentStore | undefined;
  /** Samples resident mode could not read at create (their batches fail as streaming's would). */
  readonly #residentFailed: ReadonlyMap<number, unknown> | undefined;
  #streaming: StreamingParts | undefined;
  /** Streaming parts retired by a promotion to resident, still shutting down. */
  readonly #retiring: Promise<void>[] = [];
  #governor: Governor | undefined;
  readonly #residentBuildMs: number;
  readonly #history: EpochStats[] = [];
  #active: EpochRun | undefined;
  #closed = false;
  readonly #order: OrderShape;
  /** The dataset this loader opened from a source spec (and so closes). */
  readonly #owned: AnyDataset | undefined;
  /** The main thread's dataset when it follows each epoch's plan (`PlannedReads`). */
  readonly #follower: PlannedReads | undefined;
  /** A `resume` state whose epoch has not started yet. */
  #resume: LoaderState | undefined;
  /** The epoch the next `for await` over the loader runs. */
  #nextLoopEpoch: number;
  /** Cuts an epoch's order into this rank's batches (fixed or token-budget). */
  readonly #planner: BatchPlanner;
  /** The latest epoch run's segment and how far its consumer got. */
  /** The epoch being consumed; `run` is undefined for one a client gathers itself (pipeline/client-gather.ts). */
  #progress: { run: EpochRun | undefined; epoch: number; segment: Segment; next: number; done: boolean } | undefined;

  private constructor(opts: ResolvedOptions, device: Device, built: Built) {
    this.#opts = opts;
    this.#device = device;
    this.#datasetLength = built.datasetLength;
    this.#sampler = built.sampler;
    this.#planner = built.planner;
    this.#customSampler = opts.sampler !== undefined;
    this.#delivery = built.delivery;
    this.#resident = built.resident;
    this.#residentFailed = built.residentFailed;
    this.#streaming = built.streaming;
    this.#governor = built.streaming?.governor;
    this.#residentBuildMs = built.residentBuildMs;
    this.#order = built.order;
    this.#resume = built.resume;
    this.#nextLoopEpoch = built.resume?.epoch ?? 0;
    this.#owned = built.owned;
    this.#follower = built.follower;
  }

  /**
   * Validate the options, probe sample 0 (one dataset read), and either read the whole dataset into
   * device memory (resident mode) or prepare the streaming pipeline.
   */
  static create(dataset: AnyDataset | SourceSpec, options: LoaderOptions<Tensor> & { device?: 'cpu' }): Promise<DataLoader<Tensor>>;
  static create(dataset: AnyDataset | SourceSpec, options: LoaderOptions<DeviceTensor> & { device: `cuda${string}` | 'sim' }): Promise<DataLoader<DeviceTensor>>;
  // A device chosen at run time: batches may hold either kind of tensor.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  static create(dataset: AnyDataset | SourceSpec, options: LoaderOptions<any>): Promise<DataLoader<AnyTensor>>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  static async create(dataset: AnyDataset | SourceSpec, options: LoaderOptions<any>): Promise<DataLoader<any>> {
    const opts = resolveOptions(options);
    const device = await openDevice(opts.device, opts.sim);
    try {
      return new DataLoader(opts, device, await buildLoader(dataset, opts, device));
    } catch (error) {
      device.close();
      throw error;
    }
  }

  /**
   * The batches of epoch `epoch` (an integer ≥ 0). Order is a pure function of (seed, epoch).
   * `signal`: aborting it ends the epoch as leaving the loop does (in-flight reads are cancelled, the
   * loader stays usable for the next epoch) and the pending `next()` rejects with the signal's
   * reason, as fetch does; an already-aborted signal rejects at the first `next()`.
   */
  epoch(epoch: number, options?: { signal?: AbortSignal }): Epoch<T> {
    if (!Number.isSafeInteger(epoch) || epoch < 0) throw invalidOption('epoch', 'an integer ≥ 0', epoch);
    const signal = options?.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw invalidOption('epoch(e, { signal })', 'an AbortSignal', signal);
    if (this.#closed) throw loaderClosed();
    const loader = this;
    return {
      epoch,
      length: this.#planner.batches(epoch, this.#resume?.epoch === epoch ? this.#resume.position : 0),
      [Symbol.asyncIterator]: () => loader.#lazyRun(epoch, signal) as AsyncIterator<Batch<T>>,
    };
  }

  /**
   * `for await (const batch of loader)` runs the next epoch, as iterating a PyTorch DataLoader
   * does: 0, 1, 2, … (from a `resume` state's epoch when given), each one after the latest epoch
   * started, each with its own shuffle — the same batches as `loader.epoch(e)`.
   */
  [Symbol.asyncIterator](): AsyncIterator<Batch<T>> {
    const epoch = this.#nextLoopEpoch;
    this.#nextLoopEpoch = epoch + 1;
    return this.epoch(epoch)[Symbol.asyncIterator]();
  }

  /** Picks per epoch: dataset length × augment, or a custom sampler's length. */
  get length(): number {
    return this.#sampler.length;
  }

  /**
   * Batches per epoch of this rank (every rank has as many). With `batchTokens` the count varies by
   * epoch: this is the next loop epoch's, and `loader.epoch(e).length` is epoch e's.
   */
  get numBatches(): number {
    return this.#planner.batches(this.#nextLoopEpoch, 0);
  }

  /** This process's place among the ranks, and the launcher it was read from. */
  get world(): World {
    return this.#opts.world;
  }

  /**
   * Where this run stands, as a small JSON-serializable object: pass it as `resume` to
   * `DataLoader.create` to continue at exactly the next batch — after a crash, or with another
   * number of ranks (the rest of the epoch is re-partitioned over them). It counts the batches this
   * rank's loop has received; in a multi-rank run, save it at a step every rank has completed
   * (after the step's all-reduce), from any one rank.
   */
  state(): LoaderState {
    const p = this.#progress;
    if (p === undefined) return this.#stateAt(this.#resume?.epoch ?? 0, this.#resume?.position ?? 0);
    return this.#stateOf(p.epoch, p.segment, p.next, p.done);
  }

  /** The state once `next` batches of `segment` (epoch `epoch`) were taken, or all of them (`done`). */
  #stateOf(epoch: number, seg: Segment, next: number, done: boolean): LoaderState {
    const position = done ? seg.total : seg.consumed(next);
    if (position >= seg.total || next >= seg.plan.batches) return this.#stateAt(epoch + 1, 0);
    return this.#stateAt(epoch, position);
  }

  #stateAt(epoch: number, position: number): LoaderState {
    const o = this.#order;
    return {
      stoker: 1, epoch, position, seed: seedString(o.seed), datasetLength: o.datasetLength, augment: o.augment, picks: o.picks,
      order: o.order, worldSize: this.#opts.world.worldSize, batchSize: this.#opts.batchSize,
      ...(o.content !== undefined ? { content: o.content } : {}),
      ...(o.block !== undefined ? { block: this.#sampler instanceof BlockSampler ? { ...o.block, ...this.#sampler.layoutOf(epoch) } : o.block } : {}),
      ...(this.#sampler instanceof MixSampler ? { mix: this.#sampler.stateFor(epoch) } : {}),
      ...this.#planner.state,
    };
  }

  get batchSize(): number {
    return this.#opts.batchSize;
  }

  get device(): string {
    return this.#device.name;
  }

  get names(): readonly string[] {
    return deliveredNames(this.#delivery);
  }

  get isResident(): boolean {
    return this.#resident !== undefined;
  }

  /** Batches the streaming pipeline may hold ahead of the consumer; 0 in resident mode. */
  get prefetchDepth(): number {
    return this.#governor?.capacity ?? 0;
  }

  /** Pin the streaming depth (≥ 1) and turn adaptive sizing off. No-op in resident mode. */
  setPrefetchDepth(depth: number): void {
    if (!Number.isSafeInteger(depth) || depth < 0) throw invalidOption('setPrefetchDepth(depth)', 'an integer ≥ 0', depth);
    this.#governor?.setDepth(depth);
  }

  /** Re-probe the device and pin the depth it allows; returns it (2 on the CPU, 0 in resident mode). */
  autoResize(): number {
    return this.#governor?.autoResize() ?? 0;
  }

  /** Declare the device memory a training step needs beyond what the probe sees (at most the device's memory). No-op in resident mode. */
  setActivationReserve(bytes: number): void {
    if (!Number.isSafeInteger(bytes) || bytes < 0) throw invalidOption('setActivationReserve(bytes)', 'a byte count ≥ 0', bytes);
    if (!this.#closed) checkActivationReserve('setActivationReserve(bytes)', bytes, this.#device);
    this.#governor?.setActivationReserve(bytes, 'user');
  }

  /**
   * Load a kernel from PTX (CUDA only) to launch on batches: it runs on the stream batches are
   * ordered on, after each batch's data and before its memory is reused.
   */
  kernel(ptx: string | Uint8Array, name: string): UserKernel {
    if (this.#closed) throw loaderClosed();
    return makeUserKernel(this.#device.kernels, this.#device.name, ptx, name);
  }

  /**
   * The CUstream batches are ordered on (CUDA; undefined on the CPU and sim): another library's or
   * process's work joins the lease rules by waiting on it / being waited on by it (`stoker serve`).
   */
  get cudaStream(): bigint | undefined {
    // On CUDA the kernel host is the CUDA backend, whose consumer stream orders the batches.
    const stream = (this.#device.kernels as { consumerStream?: { handle: bigint } } | undefined)?.consumerStream;
    return stream?.handle;
  }

  /** Wait until work queued on the batches' stream (user kernels, releases) is done. No-op on the CPU. */
  async synchronize(): Promise<void> {
    this.#device.synchronize();
  }

  stats(): LoaderStats {
    if (this.#active !== undefined) this.#streaming?.refresh(this.#active.stats);
    return {
      device: this.#device.name,
      mode: this.isResident ? 'resident' : 'streaming',
      residentBuildMs: this.#residentBuildMs,
      workers: this.#streaming?.readers?.workers ?? 0,
      world: this.#opts.world,
      memory: this.#device.live(),
      epochs: this.#history.map((s) => ({ ...s, skipped: s.skipped.slice() })),
      remote: remoteStats(),
    };
  }

  /** How the next epoch's batches will be assembled (`stats().epochs[e].route` records each epoch's). */
  #route(): EpochRoute {
    return this.#resident !== undefined ? 'resident' : (this.#streaming?.assembler.route ?? 'staged');
  }

  /**
   * What this loader is, in one readable summary: the device, the mode and the route batches take,
   * the tiers and what they hold now, the budgets, the world. For logs and for questions like "why is
   * this epoch slow": print it after an epoch or two, when the tiers have filled.
   */
  describe(): string {
    const parts = this.#streaming;
    const o = this.#opts;
    const pool = parts?.pool;
    const disk = parts?.disk;
    const remote = remoteStats();
    return describeLoader({
      device: this.#device.name, resident: this.isResident, route: this.#route(), workers: parts?.readers?.workers ?? 0,
      datasetLength: this.#datasetLength, augment: o.augment, picks: this.length, batchSize: o.batchSize, numBatches: this.numBatches, dropLast: o.dropLast,
      cache: parts?.cache !== undefined ? { held: parts.cache.heldBytes, budget: parts.cacheBudget } : undefined,
      disk: disk !== undefined ? { bytes: disk.stats.bytes, budget: (o.diskStage?.gigabytes ?? 0) * 2 ** 30, latched: disk.stats.latched } : undefined,
      pool: pool !== undefined && pool.decided ? { phase: pool.payoff.phase, bytes: pool.bytes, budget: pool.budget, rows: pool.pooledRows } : undefined,
      ramMaxUsage: o.ramMaxUsage, ramShare: o.ramShare, vramMaxUsage: o.vramMaxUsage,
      prefetch: this.#governor !== undefined ? { depth: this.#governor.capacity, pinned: this.#governor.userOwned } : undefined,
      world: o.world, epochsRun: this.#history.length,
      ...(remote.requests > 0 ? { remote } : {}),
    });
  }

  /**
   * Stop the active epoch, free memory and readers. Idempotent: every call returns the same promise,
   * which resolves once the loader is closed; never waits on a hanging read.
   *
   * NOTE [Loader shutdown]
   * Stages close from the consumer end back to the source, each closing what it owns, because each
   * stage writes into memory the stage after it owns: nothing may be freed while something can still
   * write into it or enqueue device work that reads it.
   *  1. Mark closed: no epoch, kernel or resume can start (ERR_LOADER_CLOSED).
   *  2. End the active epoch: its AbortController fires, in-flight reads are cancelled, a consumer
   *     waiting in next() is settled; no new batch is launched.
   *  3. Dispose the resident store (device columns and id buffers; nothing reads them once 2 is done).
   *  4. Await streaming parts retired by a promotion to resident (their readers were still stopping).
   *  5. Close the fetcher: reader workers are asked to stop and joined (terminated past a grace
   *     period, never waited on forever) — before the staging slabs, cache chunks and disk-stage file
   *     they write into go away, so a worker never writes into unregistered memory or a closed file.
   *  6. Close the route (its BatchAssembler, pipeline/assemble/): release the mapped source
   *     (page-locked columns, unmapped once the copy stream has passed its last reader), then
   *  7. give the VRAM pool's slabs back to the device (freed after the copies queued before).
   *  8. Close the disk stage (its descriptor: the pack file has had no name since create).
   *  9. Close the device: its streams drain, then device memory is freed and staging unpinned — after
   *     every stage that could enqueue work on it has stopped.
   * 10. Stop the sampler's order-ahead helper thread (it writes into a buffer only the loader reads).
   * 11. Close the dataset this loader opened from a spec (decode processes, file handles) — last,
   *     since readers may read it until 5.
   * Steps 5–8 are StreamingParts.close() (the streaming parts own those stages); a promotion to
 * resident runs the same steps early, between epochs. Every close() named here is idempotent and
 * bounded; each one's doc points back to this note.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  #closing: Promise<void> | undefined;

  async #close(): Promise<void> {
    this.#closed = true;
    this.#active?.end();
    this.#resident?.dispose();
    await Promise.all(this.#retiring);
    await this.#streaming?.close();
    this.#device.close();
    if (!this.#customSampler && this.#sampler instanceof RandomSampler) await this.#sampler.close();
    await closeDataset(this.#owned);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** The iterator of one `for await`: the run starts (and claims the loader) on the first `next()`. */
  #lazyRun(epoch: number, signal: AbortSignal | undefined): AsyncIterator<Batch<AnyTensor>, undefined> {
    let run: EpochRun | undefined;
    let finished = false;
    return {
      next: async () => {
        if (finished) return { done: true, value: undefined };
        signal?.throwIfAborted();
        run ??= this.#start(epoch, signal);
        const result = await run.next();
        if (signal?.aborted) {
          // The abort ended the run while this call waited (NOTE [Epoch lifecycle]); a batch that
          // arrived in the same turn is never handed out.
          if (result.done !== true) result.value.release();
          throw signal.reason;
        }
        const p = this.#progress;
        if (p?.run === run) {
          if (result.done === true) p.done = true;
          else p.next = result.value.index + 1;
        }
        return result;
      },
      return: async () => {
        finished = true;
        run?.end();
        return { done: true, value: undefined };
      },
    };
  }

  /** NOTE [The budget law] (base/budget.ts): one MemAvailable probe per epoch sizes the RAM cache. */
  #startStreaming(plan: EpochPlan, onEnd: (run: EpochRun) => void): EpochRun {
    const parts = this.#streaming!;
    parts.beginEpoch(this.#opts, plan.batches);
    const run = new StreamingRun(plan, 'streaming', this.#delivery, this.#opts.errors, onEnd).bind(parts.assembler, parts.governor, parts.maxInFlight);
    parts.trackEpoch(run.stats);
    this.#follower?.followPlan(run.readPlan());
    return run;
  }

  /**
   * Between epochs: once the VRAM pool holds every sample, a streaming loader turns resident (the
   * route copies the pool into contiguous columns and frees it; see device/accelerator/resident-columns.ts).
   * Same batches, same order — resident gathers instead of pooled stitching. The streaming parts
   * are shut down (readers, staging ring, route, disk stage), since no later epoch reads the source.
   */
  #promoteIfPooled(): void {
    const parts = this.#streaming;
    const store = parts?.assembler.promote(this.#datasetLength);
    if (parts === undefined || store === undefined) return;
    this.#resident = store;
    this.#streaming = undefined;
    this.#governor = undefined;
    this.#retiring.push(parts.close());
  }

  /** The segment epoch `epoch` runs (from a resume's position on its first epoch); refuses a second epoch at once. */
  #segmentFor(epoch: number): Segment {
    if (this.#closed) throw loaderClosed();
    if (this.#active !== undefined) {
      throw epochActive(epoch, this.#active.plan.epoch);
    }
    let position = 0;
    if (this.#resume !== undefined) {
      if (epoch !== this.#resume.epoch) {
        throw resumeMismatchError(
          `this loader resumes epoch ${this.#resume.epoch} at pick ${this.#resume.position}, so its first epoch must be ${this.#resume.epoch}, not ${epoch}. Loop from state.epoch: for (let e = state.epoch; …)`,
        );
      }
      position = this.#resume.position;
      this.#resume = undefined;
    }
    if (this.#resident === undefined) this.#promoteIfPooled();
    // The built-in samplers hand out a fresh array per epoch: no copy.
    const order = this.#customSampler ? validatedPicks(this.#sampler, epoch, this.#datasetLength) : (this.#sampler.indices(epoch) as Uint32Array);
    return this.#planner.segment(epoch, order, position);
  }

  /**
   * `stoker serve`'s client gather (pipeline/client-gather.ts): the resident columns and per-epoch
   * plans, or undefined when this loader's batches are not just its rows.
   */
  [kClientGather](): ClientGather | undefined {
    const store = this.#resident;
    const d = this.#delivery;
    if (store === undefined || d.transform !== undefined || d.ragged !== undefined || (this.#residentFailed?.size ?? 0) > 0) return undefined;
    if (this.#planner.state.pack !== undefined) return undefined;
    const names = d.names;
    const columns = store.columns().map((c, i) => ({ ...c, name: names[i]! }));
    return { columns, epoch: (epoch) => this.#clientEpoch(epoch) };
  }

  #clientEpoch(epoch: number): ClientEpoch {
    if (!Number.isSafeInteger(epoch) || epoch < 0) throw invalidOption('epoch', 'an integer ≥ 0', epoch);
    const segment = this.#segmentFor(epoch);
    const progress = { run: undefined, epoch, segment, next: 0, done: false };
    this.#progress = progress;
    this.#nextLoopEpoch = Math.max(this.#nextLoopEpoch, epoch + 1);
    const batches = segment.plan.batches;
    return {
      plan: segment.plan,
      at: (taken: number) => {
        if (!Number.isSafeInteger(taken) || taken < 0 || taken > batches) throw invalidOption('taken', `an integer in [0, ${batches}]`, taken);
        if (this.#progress === progress) {
          progress.next = taken;
          progress.done = taken === batches;
        }
        return this.#stateOf(epoch, segment, taken, taken === batches);
      },
      track: () => {
        const positions = new Float64Array(batches);
        for (let k = 1; k <= batches; k++) {
          const position = k === batches ? segment.total : segment.consumed(k);
          positions[k - 1] = position >= segment.total || k >= batches ? -1 : position;
        }
        return { base: this.#stateAt(epoch, 0), next: this.#stateAt(epoch + 1, 0), positions };
      },
    };
  }

  #start(epoch: number, signal?: AbortSignal): EpochRun {
    const segment = this.#segmentFor(epoch);
    const plan = segment.plan;
    const stop = () => run.end();
    const onEnd = (run: EpochRun) => {
      signal?.removeEventListener('abort', stop);
      if (this.#active === run) this.#active = undefined;
      this.#streaming?.finishEpoch(run.stats);
    };
    const run =
      this.#resident !== undefined
        ? new ResidentRun(plan, 'resident', this.#delivery, this.#opts.errors, onEnd).bind(this.#resident, this.#residentFailed)
        : this.#startStreaming(plan, onEnd);
    run.stats.route = this.#route();
    run.autoRelease = this.#device.autoRelease;
    signal?.addEventListener('abort', stop, { once: true });
    this.#active = run;
    this.#nextLoopEpoch = Math.max(this.#nextLoopEpoch, epoch + 1);
    this.#progress = { run, epoch, segment, next: 0, done: false };
    this.#history.push(run.stats);
    if (this.#history.length > STATS_HISTORY) this.#history.shift();
    return run;
  }
}
