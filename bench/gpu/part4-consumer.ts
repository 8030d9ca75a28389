// Part 4 of the GPU bench (bench/gpu.ts says what it measures and how): a consumer with a fixed GPU
// time per batch (a spin kernel on the loader's consumer stream, or a virtual GPU clock on sim) that
// paces itself like a training loop; the figure is the share of wall time spent waiting on the loader.

import type { Batch, DataLoader, DeviceTensor, UserKernel } from '../../src/index.js';
import { CudaBackend } from '../../src/device/cuda/cuda-backend.js';
import type { CudaContext } from '../../src/device/cuda/context.js';
import { CudaEvent } from '../../src/device/cuda/event.js';
import { CudaStream } from '../../src/device/cuda/stream.js';
import { now, sink } from '../util.js';
import type { CudaEnv, Data, Env, Ratio } from './common.js';
import { LARGE_SPIN_FACTOR } from './common.js';
import type { Consumer, Recorder, StokerSpec, WindowPlan } from './measure.js';
import { BatchFeed, diagnose, measure, noteOf, openLoader } from './measure.js';
import { cifarSpecs } from './part3-cifar.js';

// ---------------------------------------------------------------------------------------------
// Consumers with a fixed GPU time per batch

/** Part 4 on CUDA: a spin kernel per batch on the consumer stream; the host waits on the event of two batches back. */
export class SpinConsumer implements Consumer {
  readonly #kernel: UserKernel;
  readonly #stream: CudaStream;
  readonly #events: CudaEvent[];
  readonly #arg: bigint;
  #i = 0;
  blockedMs = 0;

  constructor(kernel: UserKernel, stream: CudaStream, ctx: CudaContext, arg: bigint) {
    this.#kernel = kernel;
    this.#stream = stream;
    this.#events = [new CudaEvent(ctx), new CudaEvent(ctx), new CudaEvent(ctx)];
    this.#arg = arg;
  }

  async batch(batch: Batch<DeviceTensor>): Promise<void> {
    sink.value += Number(batch.get('image').ptr & 0xffn);
    this.#kernel.launch({ grid: 1, block: 1, args: [{ u64: this.#arg }] });
    this.#events[this.#i % 3]!.record(this.#stream);
    if (this.#i >= 2) {
      const t = now();
      this.#events[(this.#i - 2) % 3]!.synchronize();
      this.blockedMs += now() - t;
      // A Node training loop then yields to the event loop once per step (it awaits something, e.g.
      // tfjs `await loss.data()`), which is when the loader's read-ahead and reader messages move.
      await new Promise((resolve) => setImmediate(resolve));
    }
    this.#i++;
  }

  dispose(): void {
    for (const e of this.#events) e.dispose();
  }
}

/** Part 4 on sim: the same pacing against a virtual GPU clock (the host blocks by spinning, as cuEventSynchronize does). */
export class VirtualSpinConsumer implements Consumer {
  readonly #spinMs: number;
  readonly #marks = [0, 0, 0];
  #busyUntil = 0;
  #i = 0;
  blockedMs = 0;

  constructor(spinUs: number) {
    this.#spinMs = spinUs / 1000;
  }

  batch(batch: Batch<DeviceTensor>): void {
    sink.value += Number(batch.get('image').ptr & 0xffn);
    this.#busyUntil = Math.max(now(), this.#busyUntil) + this.#spinMs;
    this.#marks[this.#i % 3] = this.#busyUntil;
    if (this.#i >= 2) {
      const t = now();
      const mark = this.#marks[(this.#i - 2) % 3]!;
      while (now() < mark);
      this.blockedMs += now() - t;
    }
    this.#i++;
  }

  settle(): void {
    while (now() < this.#busyUntil);
  }

  dispose(): void {}
}

/**
 * `loader.kernel(ptx, name)` plus the stream it launches on. The public API hides the stream; part 4
 * records its pacing events on it, so this reaches the CUDA backend the one place it is handed out.
 */
export function kernelWithStream(loader: DataLoader<DeviceTensor>, ptx: string, name: string): { kernel: UserKernel; stream: CudaStream } {
  const proto = CudaBackend.prototype;
  const original = proto.loadKernel;
  let backend: CudaBackend | undefined;
  proto.loadKernel = function (this: CudaBackend, image: string | Uint8Array, kernelName: string) {
    backend = this;
    return original.call(this, image, kernelName);
  };
  let kernel: UserKernel;
  try {
    kernel = loader.kernel(ptx, name);
  } finally {
    proto.loadKernel = original;
  }
  if (backend === undefined) {
    throw new Error("part 4: loader.kernel() no longer goes through CudaBackend.prototype.loadKernel, so the bench cannot reach the consumer stream; update kernelWithStream() in bench/gpu/part4-consumer.ts");
  }
  return { kernel, stream: backend.consumerStream };
}

// ---------------------------------------------------------------------------------------------
// The spin kernel's calibration, one loader's run, the part

export interface SpinPlan {
  readonly askedUs: number;
  readonly kernel: 'stoker_bench_spin_ns' | 'stoker_bench_spin';
  readonly arg: bigint;
  readonly measuredUs: number;
  readonly how: string;
}

/** Make the spin last `spinUs`: %globaltimer if it keeps time, else clock64 calibrated against the host clock. Throws if neither does. */
export function calibrateSpin(cuda: CudaEnv, spinUs: number): SpinPlan {
  const stream = new CudaStream(cuda.ctx);
  try {
    const time = (name: SpinPlan['kernel'], arg: bigint, n: number): number => {
      const fn = cuda.module.getFunction(name);
      fn.launch([1, 1, 1], [1, 1, 1], stream, [{ u64: arg }]);
      stream.synchronize();
      const t0 = now();
      for (let i = 0; i < n; i++) fn.launch([1, 1, 1], [1, 1, 1], stream, [{ u64: arg }]);
      stream.synchronize();
      return ((now() - t0) * 1000) / n;
    };
    const fits = (us: number) => us >= 0.95 * spinUs && us <= 1.1 * spinUs + 20;
    const nsArg = BigInt(Math.round(spinUs * 1000));
    const viaTimer = time('stoker_bench_spin_ns', nsArg, 10);
    if (fits(viaTimer)) return { askedUs: spinUs, kernel: 'stoker_bench_spin_ns', arg: nsArg, measuredUs: viaTimer, how: '%globaltimer' };
    const c1 = 200_000n;
    const c2 = 4_000_000n;
    const t1 = time('stoker_bench_spin', c1, 5);
    const t2 = time('stoker_bench_spin', c2, 5);
    const cyclesPerUs = Number(c2 - c1) / (t2 - t1);
    const cycles = BigInt(Math.max(1, Math.round(spinUs * cyclesPerUs)));
    const viaClock = time('stoker_bench_spin', cycles, 10);
    if (fits(viaClock)) return { askedUs: spinUs, kernel: 'stoker_bench_spin', arg: cycles, measuredUs: viaClock, how: `clock64 at ${cyclesPerUs.toFixed(0)} cycles/µs` };
    throw new Error(
      `part 4: no spin kernel lasts the ${spinUs} µs asked: %globaltimer gave ${viaTimer.toFixed(0)} µs per launch, ` +
        `clock64 (calibrated at ${cyclesPerUs.toFixed(0)} cycles/µs) gave ${viaClock.toFixed(0)} µs`,
    );
  } finally {
    stream.dispose();
  }
}

export interface P4Row {
  readonly key: string;
  readonly name: string;
  readonly note: string;
  readonly batches: number;
  readonly spinUs: number;
  readonly wallMs: number;
  /** Share of the wall time the GPU spent in the consumer's kernels (batches × spin / wall). */
  readonly gpuBusy: number;
  readonly loaderWaitMs: number;
  readonly waitShare: number;
  readonly benchWaitShare: number;
  /** Host blocked on the pacing event (the consumer waiting for its own GPU work). */
  readonly blockedMs: number;
  readonly diag: string;
}

/** One loader under the spin consumer: one timed window of whole epochs. */
async function runSpinLoader(env: Env, spec: StokerSpec, spin: SpinPlan | undefined, spinUs: number): Promise<{ row: P4Row; checkedRows: number }> {
  env.log(`  ${spec.name}: opening`);
  const loader = await openLoader(env, spec);
  const feed = new BatchFeed(loader);
  let consumer: SpinConsumer | VirtualSpinConsumer | undefined;
  try {
    if (env.cuda !== undefined) {
      const { kernel, stream } = kernelWithStream(loader, env.cuda.ptx, spin!.kernel);
      consumer = new SpinConsumer(kernel, stream, env.cuda.ctx, spin!.arg);
    } else {
      consumer = new VirtualSpinConsumer(spinUs);
    }
    const plan: WindowPlan = { warmup: env.cfg.warmEpochs * loader.numBatches, window: env.cfg.p4Epochs * loader.numBatches, reps: 1, aligned: true };
    env.log(`  ${spec.name}: ${plan.warmup} warm-up + ${plan.window} timed batches at ${spinUs} µs of GPU time each`);
    // blockedMs accumulates over the warm-up too: the timed window's part is taken by difference.
    let blocked0 = 0;
    const c = consumer;
    const { windows, checkedRows } = await measure(feed, c, plan, spec.data, spec.name, () => (blocked0 = c.blockedMs));
    const w = windows[0]!;
    const blockedMs = consumer.blockedMs - blocked0;
    const busyMs = (w.batches * spinUs) / 1000;
    const row: P4Row = {
      key: spec.key,
      name: spec.name,
      note: noteOf(spec),
      batches: w.batches,
      spinUs,
      wallMs: w.wallMs,
      gpuBusy: busyMs / w.wallMs,
      loaderWaitMs: w.loaderWaitMs ?? Number.NaN,
      waitShare: (w.loaderWaitMs ?? Number.NaN) / w.wallMs,
      benchWaitShare: w.benchWaitMs / w.wallMs,
      blockedMs,
      diag: diagnose(loader, w.epochs),
    };
    return { row, checkedRows };
  } finally {
    await feed.close();
    await loader.close();
    consumer?.dispose();
  }
}

export interface Part4Result {
  readonly p4: P4Row[];
  readonly ratios: Ratio[];
  /** The calibrated spin kernels (CUDA only; undefined on sim or when calibration failed). */
  readonly spin: SpinPlan | undefined;
  readonly spinLarge: SpinPlan | undefined;
}

/** Part 4: consumer with fixed GPU time per batch. */
export async function runPart4(env: Env, rec: Recorder, large: Data, cifar: Data): Promise<Part4Result> {
  const { cfg, cuda, log } = env;
  const largeSpinUs = cfg.spinUs * LARGE_SPIN_FACTOR;
  log(`part 4: a consumer with ${cfg.spinUs} µs (CIFAR-shaped) and ${largeSpinUs} µs (ImageNet-sized) of GPU time per batch`);
  let spin: SpinPlan | undefined;
  let spinLarge: SpinPlan | undefined;
  if (cuda) {
    spin = await rec.attempt('part 4: spin kernel calibration', () => calibrateSpin(cuda, cfg.spinUs));
    spinLarge = await rec.attempt('part 4: spin kernel calibration', () => calibrateSpin(cuda, largeSpinUs));
    for (const sp of [spin, spinLarge]) if (sp) log(`  spin kernel: ${sp.askedUs} µs asked, ${sp.measuredUs.toFixed(0)} µs measured per launch (${sp.how})`);
  }
  const specs: StokerSpec[] = [
    ...cifarSpecs(cifar, cfg.p3Batch),
    { key: 'large-streaming-pinned', name: 'Stoker streaming, pinned source, ImageNet-sized', data: large, batchSize: cfg.p1Batch, mode: 'streaming', vramPool: false },
  ];
  const p4: P4Row[] = [];
  const ratios: Ratio[] = [];
  for (const spec of cuda && (!spin || !spinLarge) ? [] : specs) {
    const isLarge = spec.data === large;
    const r = await rec.attempt(`part 4: ${spec.name}`, () => runSpinLoader(env, { ...spec, key: `p4-${spec.key}` }, isLarge ? spinLarge : spin, isLarge ? largeSpinUs : cfg.spinUs));
    if (r !== undefined) {
      p4.push(r.row);
      rec.checkedRows += r.checkedRows;
    }
    ratios.push({ id: `p4.wait_share.${spec.key}`, label: `part 4: loader wait / wall, ${spec.name.replace('Stoker ', '')}`, value: r?.row.waitShare ?? Number.NaN, goal: 0.02, direction: 'below', percent: true });
  }
  return { p4, ratios, spin, spinLarge };
}
