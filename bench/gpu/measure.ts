// Measuring, shared by the GPU bench's parts (bench/gpu.ts says what it measures and how): the
// consumers every window feeds (touch, stamp kernel), a stream of batches across epochs, timed
// windows, one Stoker run from opening its loader to its result row, the copy ceilings' timing, and
// the recorder that runs each measurement so that a failure is kept and the bench goes on.

import type { Batch, DeviceTensor, UserKernel } from '../../src/index.js';
import { DataLoader, sources, tensor } from '../../src/index.js';
import { DeviceMemory } from '../../src/device/cuda/device-memory.js';
import type { CudaStream } from '../../src/device/cuda/stream.js';
import { fmtInt, median, now, sink } from '../util.js';
import type { CudaEnv, Data, Env, Failure, Row } from './common.js';
import { SEED, STAMP_MASK, describeError, failedRow, fmtBytes, spreadOf, verifyBatch } from './common.js';

// ---------------------------------------------------------------------------------------------
// Consumers: what the training loop does with each batch

export interface Consumer {
  batch(batch: Batch<DeviceTensor>): void | Promise<void>;
  /** After loader.synchronize(): wait for consumer work the loader's stream does not hold (sim). */
  settle?(): void;
}

/** Touch the batch's tensors (a lease check and an address read): what a consumer that hands device pointers on does. */
export const touchConsumer: Consumer = {
  batch(batch) {
    for (const t of batch.tensors) sink.value += Number(t.ptr & 0xffn);
  },
};

/** Sums both stamps of every row on the consumer stream (kernels/bench.cu); `check()` compares with the sample ids. */
export class StampConsumer implements Consumer {
  readonly #kernel: UserKernel;
  readonly #acc: DeviceMemory;
  readonly #rowBytes: bigint;
  #first = 0n;
  #last = 0n;
  rows = 0;

  constructor(loader: DataLoader<DeviceTensor>, cuda: CudaEnv, data: Data) {
    this.#kernel = loader.kernel(cuda.ptx, 'stoker_bench_row_stamps');
    this.#acc = new DeviceMemory(cuda.ctx, 16);
    this.#acc.copyFromHost(new BigUint64Array(2));
    this.#rowBytes = BigInt(data.rowBytes);
  }

  batch(batch: Batch<DeviceTensor>): void {
    const rows = batch.rows;
    this.#kernel.launch({ grid: Math.ceil(rows / 256), block: 256, args: [batch.get('image'), { u64: this.#rowBytes }, { u32: rows }, { ptr: this.#acc.ptr }] });
    let first = 0;
    let last = 0;
    for (const id of batch.sampleIds) {
      first += id;
      last += (id ^ STAMP_MASK) >>> 0;
    }
    this.#first += BigInt(first);
    this.#last += BigInt(last);
    this.rows += rows;
  }

  /** Throws, loudly, when the device saw other rows than the loader said it delivered. */
  check(where: string): number {
    const got = new BigUint64Array(2);
    this.#acc.copyToHost(got);
    this.#acc.dispose();
    if (got[0] !== this.#first || got[1] !== this.#last) {
      throw new Error(
        `DATA MISMATCH in ${where}: over ${this.rows} delivered rows the consumer kernel summed stamps ${got[0]} / ${got[1]}, ` +
          `the batches' sample ids say ${this.#first} / ${this.#last}: a batch was read before its data landed, or holds other rows`,
      );
    }
    return this.rows;
  }
}

// ---------------------------------------------------------------------------------------------
// Driving a loader: a stream of batches across epochs, timed windows

export class BatchFeed {
  readonly loader: DataLoader<DeviceTensor>;
  /** Epoch numbers in the order their runs started. */
  readonly started: number[] = [];
  #epoch = 0;
  #it: AsyncIterator<Batch<DeviceTensor>> | undefined;

  constructor(loader: DataLoader<DeviceTensor>) {
    this.loader = loader;
  }

  async next(): Promise<Batch<DeviceTensor>> {
    for (;;) {
      if (this.#it === undefined) {
        this.#it = this.loader.epoch(this.#epoch)[Symbol.asyncIterator]();
        this.started.push(this.#epoch);
      }
      const r = await this.#it.next();
      if (r.done !== true) return r.value;
      this.#it = undefined;
      this.#epoch++;
    }
  }

  async close(): Promise<void> {
    const it = this.#it;
    this.#it = undefined;
    await it?.return?.();
  }
}

export interface Window {
  readonly batches: number;
  readonly rows: number;
  /** From the first request to the last batch handed over (host side). */
  readonly hostMs: number;
  /** Until the consumer stream was synchronized: every batch landed. */
  readonly wallMs: number;
  /** Time inside `await next()`, measured by the bench around the call. */
  readonly benchWaitMs: number;
  /** Sum of `stats().epochs[e].waitMs` over the epochs the window ran (windows of whole epochs only). */
  readonly loaderWaitMs: number | undefined;
  readonly epochs: readonly number[];
}

export interface WindowPlan {
  readonly warmup: number;
  readonly window: number;
  readonly reps: number;
  /** Windows are whole epochs (warm-up and window multiples of the epoch's batches). */
  readonly aligned: boolean;
}

export async function settle(loader: DataLoader<DeviceTensor>, consumer: Consumer): Promise<void> {
  await loader.synchronize();
  consumer.settle?.();
}

export async function measure(
  feed: BatchFeed,
  consumer: Consumer,
  plan: WindowPlan,
  data: Data,
  where: string,
  onWindowStart?: () => void,
  verifier?: Consumer,
): Promise<{ windows: Window[]; checkedRows: number }> {
  const loader = feed.loader;
  if (plan.aligned && (plan.warmup % loader.numBatches !== 0 || plan.window % loader.numBatches !== 0)) {
    throw new Error(`${where}: an aligned window needs whole epochs of ${loader.numBatches} batches (warm-up ${plan.warmup}, window ${plan.window})`);
  }
  // The verifier (the stamp kernel) sees the warm-up and one untimed window after the timed ones.
  const warm = verifier ?? consumer;
  for (let i = 0; i < plan.warmup; i++) warm.batch(await feed.next());
  await settle(loader, warm);
  const windows: Window[] = [];
  let checkedRows = 0;
  for (let rep = 0; rep < plan.reps; rep++) {
    const firstStarted = feed.started.length;
    const keep: Batch<DeviceTensor>[] = [];
    let rows = 0;
    let wait = 0;
    onWindowStart?.();
    const t0 = now();
    for (let i = 0; i < plan.window; i++) {
      const tw = now();
      const batch = await feed.next();
      wait += now() - tw;
      const pacing = consumer.batch(batch);
      if (pacing !== undefined) await pacing;
      rows += batch.rows;
      if (rep === plan.reps - 1 && (i === 1 || i === plan.window - 1)) keep.push(batch.retain());
    }
    const hostMs = now() - t0;
    await settle(loader, consumer);
    const wallMs = now() - t0;
    // The window's epochs: those started inside it (an aligned window starts its first epoch itself).
    const epochs = feed.started.slice(firstStarted);
    let loaderWaitMs: number | undefined;
    if (plan.aligned) {
      const set = new Set(epochs);
      loaderWaitMs = loader.stats().epochs.filter((s) => set.has(s.epoch)).reduce((a, s) => a + s.waitMs, 0);
    }
    for (const b of keep) {
      checkedRows += await verifyBatch(data, b, where);
      b.release();
    }
    windows.push({ batches: plan.window, rows, hostMs, wallMs, benchWaitMs: wait, loaderWaitMs, epochs });
  }
  if (verifier !== undefined) {
    for (let i = 0; i < plan.window; i++) verifier.batch(await feed.next());
    await settle(loader, verifier);
  }
  return { windows, checkedRows };
}

// ---------------------------------------------------------------------------------------------
// Stoker runs

export interface StokerSpec {
  readonly key: string;
  readonly name: string;
  readonly data: Data;
  readonly batchSize: number;
  readonly mode: 'streaming' | 'resident';
  readonly workers?: number | 'auto';
  readonly vramPool?: boolean;
  /** false: stage rows through reader memory (the path of every non-memory source). */
  readonly pinSource?: boolean;
}

export async function openLoader(env: Env, spec: StokerSpec): Promise<DataLoader<DeviceTensor>> {
  const d = spec.data;
  const image = tensor(d.images, [d.n, ...d.shape]);
  const source = sources.arrays(d.labels !== undefined ? { image, label: d.labels } : { image });
  const loader = await DataLoader.create(source, {
    batchSize: spec.batchSize,
    device: env.opts.device,
    mode: spec.mode,
    seed: SEED,
    ...(spec.workers !== undefined ? { workers: spec.workers } : {}),
    ...(spec.vramPool !== undefined ? { vramPool: spec.vramPool } : {}),
    ...(spec.pinSource !== undefined ? { pinSource: spec.pinSource } : {}),
  });
  if (loader.numBatches < 2) {
    await loader.close();
    throw new Error(`${spec.name}: ${d.n} samples make ${loader.numBatches} batch(es) of ${spec.batchSize} per epoch; the bench needs at least 2`);
  }
  if (loader.isResident !== (spec.mode === 'resident')) {
    const mode = loader.stats().mode;
    await loader.close();
    throw new Error(`${spec.name}: asked for mode '${spec.mode}', the loader runs '${mode}' (a resident upload that did not fit falls back to streaming)`);
  }
  return loader;
}

/** One line about what the loader held and did, read from its stats (fields read defensively: the loader is still growing). */
export function diagnose(loader: DataLoader<DeviceTensor>, timedEpochs: readonly number[]): string {
  const s = loader.stats();
  const parts = [`workers ${s.workers}`];
  if (s.mode === 'streaming') parts.push(`prefetch depth ${fmtInt(loader.prefetchDepth)}`);
  const last = s.epochs.at(-1);
  if (last !== undefined && last.ringSlots > 0) parts.push(`ring ${last.ringSlots} slots`);
  if (s.mode === 'resident') parts.push(`resident build ${s.residentBuildMs.toFixed(0)} ms`);
  parts.push(`holds ${fmtBytes(s.memory.device)} device + ${fmtBytes(s.memory.pinned)} pinned host memory`);
  const set = new Set(timedEpochs);
  const timed = s.epochs.filter((e) => set.has(e.epoch));
  const sum = (field: string): number | undefined => {
    let total = 0;
    for (const e of timed) {
      const v = (e as unknown as Record<string, unknown>)[field];
      if (typeof v !== 'number') return undefined;
      total += v;
    }
    return total;
  };
  const h2d = sum('h2dBytes');
  if (h2d !== undefined && s.mode === 'streaming') parts.push(`H2D ${fmtBytes(h2d)} in the timed epochs`);
  const pooled = sum('rowsServedOnDevice');
  const rows = sum('rowsDelivered');
  if (pooled !== undefined && rows !== undefined && rows > 0 && s.mode === 'streaming') parts.push(`${((100 * pooled) / rows).toFixed(0)}% of rows from the VRAM pool`);
  const oom = sum('oomRetries');
  if (oom !== undefined && oom > 0) parts.push(`${oom} OOM retries`);
  return parts.join(', ');
}

export interface StokerResult {
  readonly row: Row;
  readonly windows: readonly Window[];
  readonly checkedRows: number;
  readonly stampedRows: number;
}

export async function runStoker(env: Env, spec: StokerSpec, part: number, plan: WindowPlan, useStamps: boolean, timedLabel: string): Promise<StokerResult> {
  env.log(`  ${spec.name}: opening`);
  const loader = await openLoader(env, spec);
  const feed = new BatchFeed(loader);
  let stamps: StampConsumer | undefined;
  try {
    if (useStamps && env.cuda !== undefined) stamps = new StampConsumer(loader, env.cuda, spec.data);
    const consumer = touchConsumer;
    const p: WindowPlan = plan.aligned ? { ...plan, warmup: plan.warmup * loader.numBatches, window: plan.window * loader.numBatches } : plan;
    env.log(`  ${spec.name}: ${p.warmup} warm-up + ${p.reps} × ${p.window} timed batches`);
    const { windows, checkedRows } = await measure(feed, consumer, p, spec.data, spec.name, undefined, stamps);
    const stampedRows = stamps?.check(spec.name) ?? 0;
    stamps = undefined;
    const timedEpochs = windows.flatMap((w) => w.epochs);
    const per = windows.map((w) => w.rows / (w.wallMs / 1000));
    const med = median(per);
    const mid = windows.reduce((best, w) => (Math.abs(w.rows / (w.wallMs / 1000) - med) < Math.abs(best.rows / (best.wallMs / 1000) - med) ? w : best));
    const row: Row = {
      part,
      key: spec.key,
      name: spec.name,
      gbps: (med * spec.data.sampleBytes) / 1e9,
      samplesPerSec: med,
      usPerBatch: (mid.wallMs * 1000) / mid.batches,
      hostUsPerBatch: (mid.hostMs * 1000) / mid.batches,
      spread: spreadOf(per.map((x) => (part === 3 ? x : (x * spec.data.sampleBytes) / 1e9)), part === 3 ? 0 : 1),
      timed: `${timedLabel}`,
      note: noteOf(spec),
      diag: diagnose(loader, timedEpochs),
      windowsMs: windows.map((w) => w.wallMs),
    };
    return { row, windows, checkedRows, stampedRows };
  } finally {
    await feed.close();
    await loader.close();
  }
}

export function noteOf(spec: StokerSpec): string {
  const bits = [`mode '${spec.mode}'`];
  if (spec.workers !== undefined) bits.push(`workers ${spec.workers === 'auto' ? "'auto'" : spec.workers}`);
  if (spec.vramPool !== undefined) bits.push(`vramPool ${spec.vramPool}`);
  bits.push(`batch ${spec.batchSize}`);
  return bits.join(', ');
}

// ---------------------------------------------------------------------------------------------
// Ceilings (CUDA only): raw driver copies on a stream of the bench's own

export interface Ceiling {
  readonly bytes: number;
  readonly copies: number;
  readonly repsMs: readonly number[];
  /** Median repetition. */
  readonly gbps: number;
  readonly best: number;
}

export function timeCopies(stream: CudaStream, copies: number, reps: number, bytes: number, copy: (k: number) => void): Ceiling {
  for (let k = 0; k < Math.min(copies, 16); k++) copy(k);
  stream.synchronize();
  const repsMs: number[] = [];
  let k = 0;
  for (let r = 0; r < reps; r++) {
    const t0 = now();
    for (let i = 0; i < copies; i++) copy(k++);
    stream.synchronize();
    repsMs.push(now() - t0);
  }
  const rates = repsMs.map((ms) => (copies * bytes) / (ms / 1000) / 1e9);
  return { bytes, copies, repsMs, gbps: median(rates), best: Math.max(...rates) };
}

export function ceilingRow(part: number, key: string, name: string, c: Ceiling, note: string): Row {
  const medMs = median(c.repsMs);
  return {
    part,
    key,
    name,
    gbps: c.gbps,
    samplesPerSec: undefined,
    usPerBatch: (medMs * 1000) / c.copies,
    hostUsPerBatch: undefined,
    spread: spreadOf(c.repsMs.map((ms) => (c.copies * c.bytes) / (ms / 1000) / 1e9), 1),
    timed: `median of ${c.repsMs.length} × ${c.copies} copies`,
    note,
  };
}

// ---------------------------------------------------------------------------------------------
// The recorder: a run that throws is recorded, printed loudly, and the bench goes on with the others

export class Recorder {
  readonly failures: Failure[] = [];
  readonly notes: string[] = [];
  /** Rows read back with toHost() and checked, and rows the stamp kernel checked on the device. */
  checkedRows = 0;
  stampedRows = 0;
  readonly #env: Env;

  constructor(env: Env) {
    this.#env = env;
  }

  /** Run `f`; on a throw, record it (exit code 1 at the end) and return undefined. */
  async attempt<T>(where: string, f: () => T | Promise<T>): Promise<T | undefined> {
    try {
      return await f();
    } catch (error) {
      const message = describeError(error);
      this.failures.push({ where, message });
      this.#env.log(`  ${where}: FAILED: ${message.split('\n')[0]}`);
      process.exitCode = 1;
      return undefined;
    }
  }

  /** One Stoker run: its row, or a FAILED row when it threw; its checked rows are tallied. */
  async stoker(spec: StokerSpec, part: number, plan: WindowPlan, stamps: boolean, timed: string): Promise<Row> {
    const r = await this.attempt(spec.name, () => runStoker(this.#env, spec, part, plan, stamps, timed));
    if (r === undefined) return failedRow(part, spec.key, spec.name);
    this.checkedRows += r.checkedRows;
    this.stampedRows += r.stampedRows;
    return r.row;
  }
}

/** The "timed" cell of a run whose windows are whole epochs. */
export function streamingEpochs(n: number): string {
  return `median of ${n} whole epoch${n === 1 ? '' : 's'}, each its own window`;
}
