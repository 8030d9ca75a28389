// GPU throughput: Stoker on an NVIDIA GPU against the copy engines' own ceilings and against
// PyTorch's DataLoader, in one run: `npm run -s bench -- gpu [--quick] [--json] [--device sim]`.
//
// Part 1, pinned host → device, ImageNet-sized samples (uint8 [3, 224, 224] = 150 528 bytes): the
//   ceiling is raw cuMemcpyHtoDAsync of one batch (64 rows) from registered (page-locked) memory,
//   repeated; Stoker is a streaming loader (VRAM pool off so every byte crosses the bus) over the
//   same rows: with the source page-locked and read in place (the default for in-memory columns),
//   and staged through reader memory (pinSource: false; workers 0 and 'auto'). Figure: GB/s delivered.
// Part 2, device gather: the ceiling is raw cuMemcpyDtoDAsync of one batch's bytes, reading a
//   dataset-sized source in order; Stoker is a resident loader (one gather kernel per column per
//   batch) on ImageNet-sized rows (batch 256) and on CIFAR-shaped rows (batch 256).
// Part 3, CIFAR-shaped in-RAM dataset (200 000 × uint8 [3, 32, 32] + int64 label), batch 256,
//   shuffled: samples/s delivered on the GPU by Stoker (streaming with workers 0 / 'auto' and the VRAM
//   pool off, streaming with its defaults, resident) and by PyTorch's DataLoader (per-item Dataset,
//   pin_memory, num_workers 0/4/8, .cuda(non_blocking=True)), run by bench/torch_loader.py.
// Part 4, a consumer with a fixed GPU time per batch: a spin kernel launched on the loader's consumer
//   stream per batch; the host paces itself like a training loop that reads its loss every step
//   (it waits on an event recorded two batches back), so it cannot run ahead of the GPU. Figure: the
//   share of wall time the host spent inside the loader waiting for its next batch.
// The rule: every figure is measured in this run (PyTorch in its child process), and the verdict is
// the ratio lines at the end. Without a CUDA device the bench says so and exits 0; `--device sim`
// runs the Stoker parts on the simulated device: a smoke test of the code paths, whose figures are
// not GPU figures and are never judged.
//
// How it measures (printed with the results, so a reader of the output needs nothing else):
// - Every row of every dataset is stamped: its first 4 bytes hold the sample id, its last 4 bytes
//   the id XOR 0x5a5a5a5a; CIFAR labels are the sample ids. In parts 1 and 2, during the warm-up and
//   one untimed window after the timed ones, the consumer launches a tiny kernel on the loader's
//   consumer stream for every batch (after the batch's ready event, as any consumer kernel) that
//   sums both stamps of every row; the sums must equal what the batches' sample ids say, or the run
//   fails. Timed windows only touch each batch (tensor addresses), as PyTorch's loop only copies.
//   In every Stoker run two batches of the last timed window are retained and read back with
//   toHost() after the timing, row by row against the source.
// - A timed window starts after the device is synchronized and ends when the loader's consumer stream
//   is synchronized (loader.synchronize()), so every delivered batch had landed on the device.
//   Streaming windows are whole epochs (a streaming loader reads ahead, up to a whole epoch; a window
//   that started mid-epoch would get batches read before the clock started); resident windows in
//   part 2 are fixed batch counts that cross epoch boundaries.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Batch, DeviceTensor, UserKernel } from '../src/index.js';
import { DataLoader, sources, tensor } from '../src/index.js';
import { CudaBackend } from '../src/device/cuda/cuda-backend.js';
import { CudaContext } from '../src/device/cuda/context.js';
import { DeviceMemory } from '../src/device/cuda/device-memory.js';
import { cudaAvailable, driver } from '../src/device/cuda/driver.js';
import { CudaEvent } from '../src/device/cuda/event.js';
import { CudaModule } from '../src/device/cuda/module.js';
import { PAGE_BYTES, RegisteredHost } from '../src/device/cuda/registered-host.js';
import { CudaStream } from '../src/device/cuda/stream.js';
import type { Column } from './util.js';
import { UsageError, fmtInt, hardware, hardwareLine, median, now, sink, table } from './util.js';

const SEED = 42;
const STAMP_MASK = 0x5a5a5a5a;
const LARGE_SHAPE = [3, 224, 224] as const;
const CIFAR_SHAPE = [3, 32, 32] as const;
const BENCH_PTX = new URL('../kernels/bench.ptx', import.meta.url);
const TORCH_SCRIPT = new URL('./torch_loader.py', import.meta.url);
/** Part 4: an ImageNet-sized batch of 64 costs a model far more than a CIFAR batch of 256 (ResNet-50 vs ResNet-18 class). */
const LARGE_SPIN_FACTOR = 10;
const USAGE = 'npm run -s bench -- gpu [--quick] [--json] [--device cuda|cuda:N|sim] [--parts 1,2,3,4] [--no-torch] [--spin-us N]';

// ---------------------------------------------------------------------------------------------
// Configuration

interface Config {
  /** ImageNet-sized rows (parts 1, 2, 4). */
  readonly largeSamples: number;
  /** CIFAR-shaped rows (parts 2, 3, 4). */
  readonly cifarSamples: number;
  /** Untimed whole epochs before a streaming (or part 3/4) measurement. */
  readonly warmEpochs: number;
  readonly p1Batch: number;
  /** Part 1: timed epochs per Stoker run (each its own window; the figure is the median). */
  readonly p1Epochs: number;
  /** Ceilings: copies per timed repetition, and repetitions. */
  readonly ceilingCopies: number;
  readonly ceilingReps: number;
  readonly p2Batch: number;
  readonly p2Warmup: number;
  readonly p2Window: number;
  readonly p2Reps: number;
  readonly p3Batch: number;
  readonly p3Epochs: number;
  readonly torchWorkers: readonly number[];
  readonly torchWarmup: number;
  readonly torchBatches: number;
  readonly torchTimeoutS: number;
  /** Part 4: GPU time per batch (CIFAR-shaped rows; ImageNet-sized rows spin LARGE_SPIN_FACTOR times longer), and timed epochs. */
  readonly spinUs: number;
  readonly p4Epochs: number;
}

const DEFAULT: Config = {
  largeSamples: 16_384, cifarSamples: 200_000, warmEpochs: 1,
  p1Batch: 64, p1Epochs: 3, ceilingCopies: 256, ceilingReps: 5,
  p2Batch: 256, p2Warmup: 2048, p2Window: 1024, p2Reps: 5,
  p3Batch: 256, p3Epochs: 3, torchWorkers: [0, 4, 8], torchWarmup: 20, torchBatches: 200, torchTimeoutS: 300,
  spinUs: 2000, p4Epochs: 1,
};
const QUICK: Config = {
  largeSamples: 1_024, cifarSamples: 20_480, warmEpochs: 1,
  p1Batch: 64, p1Epochs: 2, ceilingCopies: 32, ceilingReps: 3,
  p2Batch: 256, p2Warmup: 4, p2Window: 64, p2Reps: 3,
  p3Batch: 256, p3Epochs: 2, torchWorkers: [0, 2], torchWarmup: 5, torchBatches: 20, torchTimeoutS: 120,
  spinUs: 1000, p4Epochs: 1,
};

type DeviceName = `cuda${string}` | 'sim';

interface Options {
  readonly json: boolean;
  readonly quick: boolean;
  readonly device: DeviceName;
  readonly parts: ReadonlySet<number>;
  readonly torch: boolean;
  readonly spinUs: number | undefined;
}

function parseOptions(args: readonly string[]): Options {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...args],
      strict: true,
      allowPositionals: false,
      options: {
        json: { type: 'boolean', default: false },
        quick: { type: 'boolean', default: false },
        device: { type: 'string', default: 'cuda' },
        parts: { type: 'string', default: '1,2,3,4' },
        'no-torch': { type: 'boolean', default: false },
        'spin-us': { type: 'string' },
      },
    }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nusage: ${USAGE}`);
  }
  const device = String(values.device);
  if (!/^(sim|cuda(:\d+)?)$/.test(device)) throw new UsageError(`--device must be cuda, cuda:N or sim, got ${JSON.stringify(device)}\nusage: ${USAGE}`);
  const parts = new Set<number>();
  for (const p of String(values.parts).split(',')) {
    const n = Number(p.trim());
    if (![1, 2, 3, 4].includes(n)) throw new UsageError(`--parts lists part numbers 1 to 4, got ${JSON.stringify(values.parts)}\nusage: ${USAGE}`);
    parts.add(n);
  }
  let spinUs: number | undefined;
  if (values['spin-us'] !== undefined) {
    spinUs = Number(values['spin-us']);
    if (!Number.isFinite(spinUs) || spinUs < 50 || spinUs > 1e6) throw new UsageError(`--spin-us must be a number of microseconds from 50 to 1e6, got ${JSON.stringify(values['spin-us'])}`);
  }
  return { json: values.json === true, quick: values.quick === true, device: device as DeviceName, parts, torch: values['no-torch'] !== true, spinUs };
}

// ---------------------------------------------------------------------------------------------
// Data: stamped rows in shared memory (reader workers share it without a copy)

interface Data {
  readonly label: string;
  readonly n: number;
  readonly shape: readonly number[];
  readonly rowBytes: number;
  /** Bytes per sample over all columns (image + label). */
  readonly sampleBytes: number;
  readonly images: Uint8Array;
  readonly labels: BigInt64Array | undefined;
  /** The bytes every row holds between its two stamps. */
  readonly template: Uint8Array;
}

function makeData(label: string, n: number, shape: readonly number[], withLabels: boolean): Data {
  const rowBytes = shape.reduce((a, b) => a * b, 1);
  if (rowBytes % 4 !== 0 || rowBytes < 8) throw new Error(`${label}: rows of ${rowBytes} bytes cannot hold two 4-byte stamps`);
  const images = new Uint8Array(new SharedArrayBuffer(n * rowBytes));
  const template = new Uint8Array(rowBytes);
  const tw = new Uint32Array(template.buffer);
  let s = 0x9e3779b9 | 0;
  for (let i = 0; i < tw.length; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    tw[i] = s;
  }
  const words = new Uint32Array(images.buffer);
  const rowWords = rowBytes / 4;
  for (let i = 0; i < n; i++) {
    images.set(template, i * rowBytes);
    words[i * rowWords] = i;
    words[i * rowWords + rowWords - 1] = (i ^ STAMP_MASK) >>> 0;
  }
  const labels = withLabels ? BigInt64Array.from({ length: n }, (_, i) => BigInt(i)) : undefined;
  return { label, n, shape, rowBytes, sampleBytes: rowBytes + (withLabels ? 8 : 0), images, labels, template };
}

/** Check one delivered row against the source; throws, loudly, on the first difference. */
function checkRow(data: Data, id: number, row: Uint8Array, where: string): void {
  const w = new DataView(row.buffer, row.byteOffset, row.byteLength);
  const first = w.getUint32(0, true);
  const last = w.getUint32(row.byteLength - 4, true);
  const middle = Buffer.from(row.buffer, row.byteOffset + 4, row.byteLength - 8);
  const expected = Buffer.from(data.template.buffer, data.template.byteOffset + 4, data.rowBytes - 8);
  if (first !== id || last !== ((id ^ STAMP_MASK) >>> 0) || !middle.equals(expected)) {
    throw new Error(
      `DATA MISMATCH in ${where}: expected sample ${id} of ${data.label}; the row's first stamp is ${first}, its last stamp ${last} ` +
        `(expected ${(id ^ STAMP_MASK) >>> 0}), its middle bytes ${middle.equals(expected) ? 'match' : 'differ'}`,
    );
  }
}

/** Read a retained batch back and check every row; returns the rows checked. */
async function verifyBatch(data: Data, batch: Batch<DeviceTensor>, where: string): Promise<number> {
  const image = (await batch.get('image').toHost()).data as Uint8Array;
  if (image.byteLength !== batch.rows * data.rowBytes) throw new Error(`${where}: image tensor holds ${image.byteLength} bytes, expected ${batch.rows} rows × ${data.rowBytes}`);
  const labels = data.labels !== undefined ? ((await batch.get('label').toHost()).data as BigInt64Array) : undefined;
  batch.sampleIds.forEach((id, r) => {
    const at = `${where}, epoch ${batch.epoch} batch ${batch.index} row ${r}`;
    checkRow(data, id, image.subarray(r * data.rowBytes, (r + 1) * data.rowBytes), at);
    if (labels !== undefined && labels[r] !== BigInt(id)) throw new Error(`DATA MISMATCH in ${at}: label ${labels[r]}, expected ${id}`);
  });
  return batch.rows;
}

// ---------------------------------------------------------------------------------------------
// Environment

interface CudaEnv {
  readonly ctx: CudaContext;
  readonly ptx: string;
  readonly module: CudaModule;
}

interface Env {
  readonly opts: Options;
  readonly cfg: Config;
  readonly sim: boolean;
  readonly cuda: CudaEnv | undefined;
  readonly log: (s: string) => void;
}

function whyNoCuda(): string {
  try {
    driver();
    return 'the NVIDIA driver loads but sees no CUDA device (check nvidia-smi and CUDA_VISIBLE_DEVICES)';
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

function loadBenchPtx(): string {
  try {
    return readFileSync(fileURLToPath(BENCH_PTX), 'utf8');
  } catch (error) {
    throw new Error(`the bench's kernels ${fileURLToPath(BENCH_PTX)} could not be read (${(error as Error).message}). Build them with: npm run kernels (needs nvcc)`);
  }
}

// ---------------------------------------------------------------------------------------------
// Consumers: what the training loop does with each batch

interface Consumer {
  batch(batch: Batch<DeviceTensor>): void | Promise<void>;
  /** After loader.synchronize(): wait for consumer work the loader's stream does not hold (sim). */
  settle?(): void;
}

/** Touch the batch's tensors (a lease check and an address read): what a consumer that hands device pointers on does. */
const touchConsumer: Consumer = {
  batch(batch) {
    for (const t of batch.tensors) sink.value += Number(t.ptr & 0xffn);
  },
};

/** Sums both stamps of every row on the consumer stream (kernels/bench.cu); `check()` compares with the sample ids. */
class StampConsumer implements Consumer {
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

/** Part 4 on CUDA: a spin kernel per batch on the consumer stream; the host waits on the event of two batches back. */
class SpinConsumer implements Consumer {
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
class VirtualSpinConsumer implements Consumer {
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
function kernelWithStream(loader: DataLoader<DeviceTensor>, ptx: string, name: string): { kernel: UserKernel; stream: CudaStream } {
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
    throw new Error("part 4: loader.kernel() no longer goes through CudaBackend.prototype.loadKernel, so the bench cannot reach the consumer stream; update kernelWithStream() in bench/gpu.ts");
  }
  return { kernel, stream: backend.consumerStream };
}

// ---------------------------------------------------------------------------------------------
// Driving a loader: a stream of batches across epochs, timed windows

class BatchFeed {
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

interface Window {
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

interface WindowPlan {
  readonly warmup: number;
  readonly window: number;
  readonly reps: number;
  /** Windows are whole epochs (warm-up and window multiples of the epoch's batches). */
  readonly aligned: boolean;
}

async function settle(loader: DataLoader<DeviceTensor>, consumer: Consumer): Promise<void> {
  await loader.synchronize();
  consumer.settle?.();
}

async function measure(
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

interface StokerSpec {
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

async function openLoader(env: Env, spec: StokerSpec): Promise<DataLoader<DeviceTensor>> {
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
function diagnose(loader: DataLoader<DeviceTensor>, timedEpochs: readonly number[]): string {
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

interface Row {
  readonly part: number;
  readonly key: string;
  readonly name: string;
  /** Bytes per second delivered (GB/s = 1e9). */
  readonly gbps: number | undefined;
  readonly samplesPerSec: number | undefined;
  /** Median window, per batch: wall and host-side. */
  readonly usPerBatch: number | undefined;
  readonly hostUsPerBatch: number | undefined;
  /** Spread of the per-window figure. */
  readonly spread: string;
  readonly timed: string;
  readonly note: string;
  readonly diag?: string;
  readonly windowsMs?: readonly number[];
}

interface StokerResult {
  readonly row: Row;
  readonly windows: readonly Window[];
  readonly checkedRows: number;
  readonly stampedRows: number;
}

async function runStoker(env: Env, spec: StokerSpec, part: number, plan: WindowPlan, useStamps: boolean, timedLabel: string): Promise<StokerResult> {
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

function noteOf(spec: StokerSpec): string {
  const bits = [`mode '${spec.mode}'`];
  if (spec.workers !== undefined) bits.push(`workers ${spec.workers === 'auto' ? "'auto'" : spec.workers}`);
  if (spec.vramPool !== undefined) bits.push(`vramPool ${spec.vramPool}`);
  bits.push(`batch ${spec.batchSize}`);
  return bits.join(', ');
}

function spreadOf(xs: readonly number[], digits: number): string {
  if (xs.length < 2) return '—';
  const f = (x: number) => (digits === 0 ? fmtInt(x) : x.toFixed(digits));
  return `${f(Math.min(...xs))}–${f(Math.max(...xs))}`;
}

// ---------------------------------------------------------------------------------------------
// Ceilings (CUDA only): raw driver copies on a stream of the bench's own

interface Ceiling {
  readonly bytes: number;
  readonly copies: number;
  readonly repsMs: readonly number[];
  /** Median repetition. */
  readonly gbps: number;
  readonly best: number;
}

function timeCopies(stream: CudaStream, copies: number, reps: number, bytes: number, copy: (k: number) => void): Ceiling {
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

/**
 * Host → device, one batch per copy. 'covering': the ceiling — a SharedArrayBuffer over-allocated by
 * two pages so that its registered (page-aligned) range covers every copied byte. 'whole': a buffer
 * of exactly the batch's size registered as Stoker registers its staging (only the page-aligned
 * interior can be pinned when the base is not page-aligned). 'pageable': never registered.
 */
function h2dCopies(cuda: CudaEnv, bytes: number, copies: number, reps: number, kind: 'covering' | 'whole' | 'pageable'): { ceiling: Ceiling; pinning: string } {
  const { ctx } = cuda;
  const stream = new CudaStream(ctx);
  const host = new SharedArrayBuffer(kind === 'covering' ? bytes + 2 * PAGE_BYTES : bytes);
  const registered = kind === 'pageable' ? undefined : new RegisteredHost(ctx, host);
  const dst = new DeviceMemory(ctx, bytes);
  try {
    const view = new Uint8Array(host, kind === 'covering' ? registered!.start : 0, bytes);
    if (kind === 'covering' && !registered!.covers(view)) {
      throw new Error(`H2D ceiling: the registered range [${registered!.start}, ${registered!.end}) does not cover the ${bytes} bytes copied`);
    }
    const pinning =
      registered === undefined
        ? 'not registered'
        : registered.covers(view)
          ? 'every copied byte registered'
          : `registered bytes [${registered.start}, ${registered.end}) of the ${bytes} copied (the buffer's base is not page-aligned)`;
    view.fill(0x5a);
    return { ceiling: timeCopies(stream, copies, reps, bytes, () => dst.copyFromHostAsync(view, stream)), pinning };
  } finally {
    stream.synchronize();
    dst.dispose();
    registered?.dispose();
    stream.dispose();
  }
}

/** Device → device: one batch's bytes per copy, read in order from a dataset-sized source, into two alternating destinations (as a loader's recycled batch buffers). */
function d2dCeiling(cuda: CudaEnv, bytes: number, sourceBytes: number, copies: number, reps: number): Ceiling {
  const { ctx } = cuda;
  const stream = new CudaStream(ctx);
  const src = new DeviceMemory(ctx, Math.max(sourceBytes, bytes));
  const dst = [new DeviceMemory(ctx, bytes), new DeviceMemory(ctx, bytes)] as const;
  try {
    src.fillAsync(0x5a, stream);
    stream.synchronize();
    const slots = Math.max(1, Math.floor(src.bytes / bytes));
    return timeCopies(stream, copies, reps, bytes, (k) => (k & 1 ? dst[1] : dst[0]).copyFromDeviceAsync(src.ptr + BigInt((k % slots) * bytes), bytes, stream));
  } finally {
    stream.synchronize();
    dst[0].dispose();
    dst[1].dispose();
    src.dispose();
    stream.dispose();
  }
}

function ceilingRow(part: number, key: string, name: string, c: Ceiling, note: string): Row {
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
// PyTorch (part 3), in a child process

interface TorchResult {
  readonly numWorkers: number;
  readonly samplesPerSec: number;
  readonly timedS: number;
  readonly warmupS: number;
}

type TorchOutcome =
  | { readonly status: 'ok'; readonly version: string; readonly cuda: string | null; readonly device: string; readonly results: readonly TorchResult[]; readonly command: string }
  | { readonly status: 'skipped' | 'failed'; readonly reason: string; readonly command: string };

function runTorch(env: Env): TorchOutcome {
  const { cfg } = env;
  const python = process.env.STOKER_PYTHON ?? 'python3';
  const script = fileURLToPath(TORCH_SCRIPT);
  const args = [
    script, '--samples', String(cfg.cifarSamples), '--batch', String(cfg.p3Batch), '--workers', cfg.torchWorkers.join(','),
    '--warmup', String(cfg.torchWarmup), '--batches', String(cfg.torchBatches), '--seed', String(SEED), '--device', env.sim ? 'cpu' : 'cuda',
  ];
  const command = `${python} bench/torch_loader.py ${args.slice(1).join(' ')}`;
  env.log(`  PyTorch: ${command} (time limit ${cfg.torchTimeoutS} s)`);
  const r = spawnSync(python, args, {
    encoding: 'utf8',
    timeout: cfg.torchTimeoutS * 1000,
    maxBuffer: 64 * 1024 * 1024,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
  });
  const stderr = r.stderr ?? '';
  if (!env.opts.json && stderr.length > 0) process.stderr.write(stderr.endsWith('\n') ? stderr : `${stderr}\n`);
  const tail = stderr.trim().split('\n').slice(-15).join('\n');
  if (r.error !== undefined) {
    const code = (r.error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { status: 'skipped', reason: `${python} was not found (set STOKER_PYTHON to a Python that has torch)`, command };
    if (code === 'ETIMEDOUT') return { status: 'failed', reason: `${python} ran past the ${cfg.torchTimeoutS} s limit and was stopped${tail ? `; its last output:\n${tail}` : ''}`, command };
    return { status: 'failed', reason: `${python} could not run: ${r.error.message}`, command };
  }
  if (r.status !== 0) return { status: 'failed', reason: `${python} exited with ${r.status ?? `signal ${r.signal}`}${tail ? `; its last output:\n${tail}` : ''}`, command };
  const line = (r.stdout ?? '').trim().split('\n').at(-1) ?? '';
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return { status: 'failed', reason: `bench/torch_loader.py printed no JSON on its last stdout line: ${JSON.stringify(line.slice(0, 300))}`, command };
  }
  if (typeof parsed.skipped === 'string') return { status: 'skipped', reason: parsed.skipped, command };
  const results = parsed.results;
  if (!Array.isArray(results) || results.length === 0) return { status: 'failed', reason: `bench/torch_loader.py returned no results: ${line.slice(0, 300)}`, command };
  return {
    status: 'ok',
    version: String(parsed.torch),
    cuda: parsed.cuda === null ? null : String(parsed.cuda),
    device: String(parsed.device),
    results: results.map((x: Record<string, unknown>) => ({
      numWorkers: Number(x.num_workers),
      samplesPerSec: Number(x.samples_per_s),
      timedS: Number(x.timed_s),
      warmupS: Number(x.warmup_s),
    })),
    command,
  };
}

// ---------------------------------------------------------------------------------------------
// Part 4: a consumer with fixed GPU time per batch

interface SpinPlan {
  readonly askedUs: number;
  readonly kernel: 'stoker_bench_spin_ns' | 'stoker_bench_spin';
  readonly arg: bigint;
  readonly measuredUs: number;
  readonly how: string;
}

/** Make the spin last `spinUs`: %globaltimer if it keeps time, else clock64 calibrated against the host clock. Throws if neither does. */
function calibrateSpin(cuda: CudaEnv, spinUs: number): SpinPlan {
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

interface P4Row {
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

async function runPart4(env: Env, spec: StokerSpec, spin: SpinPlan | undefined, spinUs: number): Promise<{ row: P4Row; checkedRows: number }> {
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

// ---------------------------------------------------------------------------------------------
// Failures: a run that throws is recorded, printed loudly, and the bench goes on with the others

interface Failure {
  readonly where: string;
  readonly message: string;
}

function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  let text = `${error.name}: ${error.message}`;
  let cause = (error as { cause?: unknown }).cause;
  for (let depth = 0; cause !== undefined && depth < 4; depth++) {
    text += `\n    cause: ${cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause)}`;
    cause = cause instanceof Error ? (cause as { cause?: unknown }).cause : undefined;
  }
  const frames = (error.stack ?? '').split('\n').filter((l) => l.trim().startsWith('at ')).slice(0, 4);
  return frames.length > 0 ? `${text}\n${frames.join('\n')}` : text;
}

function failedRow(part: number, key: string, name: string): Row {
  return { part, key, name, gbps: undefined, samplesPerSec: undefined, usPerBatch: undefined, hostUsPerBatch: undefined, spread: '—', timed: 'FAILED', note: 'see FAILURES below' };
}

// ---------------------------------------------------------------------------------------------
// Report

interface Ratio {
  /** Stable key for --json readers. */
  readonly id: string;
  readonly label: string;
  readonly value: number;
  readonly goal: number | undefined;
  /** 'atLeast': value ≥ goal meets it; 'below': value < goal meets it. */
  readonly direction: 'atLeast' | 'below';
  readonly percent: boolean;
}

function fmtBytes(b: number): string {
  if (!Number.isFinite(b)) return '—';
  if (b >= 1e9) return `${(b / 1e9).toFixed(2)} GB`;
  if (b >= 1e6) return `${(b / 1e6).toFixed(2)} MB`;
  if (b >= 1e3) return `${(b / 1e3).toFixed(1)} kB`;
  return `${b} B`;
}

function fmtOpt(x: number | undefined, digits: number): string {
  if (x === undefined || !Number.isFinite(x)) return '—';
  return digits === 0 ? fmtInt(x) : x.toFixed(digits);
}

function verdict(env: Env, r: Ratio): string {
  if (r.goal === undefined) return '';
  const goal = r.direction === 'atLeast' ? `goal ≥ ${r.percent ? `${r.goal * 100}%` : r.goal}` : `goal < ${r.percent ? `${r.goal * 100}%` : r.goal}`;
  if (!Number.isFinite(r.value)) return `   ${goal}: not measured`;
  if (env.sim) return `   ${goal}: not judged (sim device)`;
  if (env.opts.quick) return `   ${goal}: not judged (--quick is a smoke test)`;
  const met = r.direction === 'atLeast' ? r.value >= r.goal : r.value < r.goal;
  return `   ${goal}: ${met ? 'met' : 'NOT MET'}`;
}

function metOf(env: Env, r: Ratio): boolean | null {
  if (r.goal === undefined || !Number.isFinite(r.value) || env.sim || env.opts.quick) return null;
  return r.direction === 'atLeast' ? r.value >= r.goal : r.value < r.goal;
}

function fmtRatio(r: Ratio): string {
  if (!Number.isFinite(r.value)) return '—';
  if (r.percent) return `${(r.value * 100).toFixed(2)}%`;
  return r.value >= 10 ? r.value.toFixed(0) : r.value.toFixed(2);
}

// ---------------------------------------------------------------------------------------------
// Main

export async function main(args: readonly string[]): Promise<void> {
  const opts = parseOptions(args);
  const cfg0 = opts.quick ? QUICK : DEFAULT;
  const cfg: Config = opts.spinUs !== undefined ? { ...cfg0, spinUs: opts.spinUs } : cfg0;
  const log = opts.json ? (_: string) => {} : (s: string) => process.stderr.write(`${s}\n`);
  const hw = hardware();
  const sim = opts.device === 'sim';

  if (!sim && !cudaAvailable()) {
    const why = whyNoCuda();
    if (opts.json) console.log(JSON.stringify({ bench: 'gpu', hardware: hw, skipped: why }, null, 2));
    else {
      console.log(`hardware: ${hardwareLine(hw)}`);
      console.log(`gpu bench skipped: no CUDA device here (${why}).`);
      console.log('Run it on a machine with an NVIDIA GPU and driver, or pass --device sim for a smoke test of the Stoker paths.');
    }
    return;
  }

  let cuda: CudaEnv | undefined;
  let gpuLine: string;
  let gpuInfo: Record<string, unknown>;
  if (sim) {
    gpuLine = 'sim (the simulated device, 16 GiB): a smoke test of the Stoker paths; its figures are not GPU figures and no goal is judged';
    gpuInfo = { device: 'sim' };
  } else {
    const ordinal = opts.device === 'cuda' ? 0 : Number(opts.device.slice('cuda:'.length));
    const ctx = CudaContext.open(ordinal);
    try {
      const ptx = loadBenchPtx();
      cuda = { ctx, ptx, module: CudaModule.load(ctx, ptx) };
    } catch (error) {
      ctx.dispose();
      throw error;
    }
    const mem = ctx.memInfo();
    const v = driver().version;
    gpuInfo = {
      name: ctx.name, ordinal, totalBytes: mem.total, usedBytesAtStart: mem.used,
      computeCapability: ctx.computeCapability.join('.'), multiprocessors: ctx.multiprocessors, driverApi: `${Math.floor(v / 1000)}.${(v % 1000) / 10}`,
    };
    gpuLine =
      `${ctx.name} (cuda:${ordinal}), ${(mem.total / 2 ** 30).toFixed(1)} GiB (${(mem.used / 2 ** 30).toFixed(1)} GiB in use at start), ` +
      `compute ${ctx.computeCapability.join('.')}, ${ctx.multiprocessors} SMs, driver API ${gpuInfo.driverApi}`;
  }
  const env: Env = { opts, cfg, sim, cuda, log };
  if (!opts.json) {
    console.log(`hardware: ${hardwareLine(hw)}`);
    console.log(`gpu: ${gpuLine}`);
  }

  try {
    await runAll(env, hw, gpuInfo);
  } finally {
    cuda?.ctx.dispose();
  }
}

async function runAll(env: Env, hw: ReturnType<typeof hardware>, gpuInfo: Record<string, unknown>): Promise<void> {
  const { cfg, opts, cuda, log } = env;
  const parts = opts.parts;
  const t0 = now();
  const needLarge = parts.has(1) || parts.has(2) || parts.has(4);
  const needCifar = parts.has(2) || parts.has(3) || parts.has(4);
  const large = needLarge ? makeData('the ImageNet-sized set', cfg.largeSamples, LARGE_SHAPE, false) : undefined;
  const cifar = needCifar ? makeData('the CIFAR-shaped set', cfg.cifarSamples, CIFAR_SHAPE, true) : undefined;
  const genMs = now() - t0;
  const datasets: string[] = [];
  if (large) datasets.push(`ImageNet-sized: ${fmtInt(large.n)} × uint8 [${large.shape.join(', ')}] (${fmtInt(large.rowBytes)} B), ${fmtBytes(large.n * large.rowBytes)}`);
  if (cifar) datasets.push(`CIFAR-shaped: ${fmtInt(cifar.n)} × (uint8 [${cifar.shape.join(', ')}] + int64 label), ${fmtBytes(cifar.n * cifar.sampleBytes)}`);
  if (!opts.json) console.log(`datasets: ${datasets.join('; ')}; in shared memory, rows stamped with their ids, generated in ${genMs.toFixed(0)} ms`);

  const rows: Row[] = [];
  const p4: P4Row[] = [];
  const ratios: Ratio[] = [];
  const notes: string[] = [];
  let checkedRows = 0;
  let stampedRows = 0;
  let torch: TorchOutcome | undefined;
  let spin: SpinPlan | undefined;
  let spinLarge: SpinPlan | undefined;
  const failures: Failure[] = [];
  /** Run `f`; on a throw, record it (exit code 1 at the end) and return undefined. */
  const attempt = async <T>(where: string, f: () => T | Promise<T>): Promise<T | undefined> => {
    try {
      return await f();
    } catch (error) {
      const message = describeError(error);
      failures.push({ where, message });
      log(`  ${where}: FAILED: ${message.split('\n')[0]}`);
      process.exitCode = 1;
      return undefined;
    }
  };
  const stoker = async (spec: StokerSpec, part: number, plan: WindowPlan, stamps: boolean, timed: string): Promise<void> => {
    const r = await attempt(spec.name, () => runStoker(env, spec, part, plan, stamps, timed));
    if (r === undefined) {
      rows.push(failedRow(part, spec.key, spec.name));
      return;
    }
    rows.push(r.row);
    checkedRows += r.checkedRows;
    stampedRows += r.stampedRows;
  };
  const streamingEpochs = (n: number) => `median of ${n} whole epoch${n === 1 ? '' : 's'}, each its own window`;

  // Part 1: pinned H2D ceiling vs streaming.
  if (parts.has(1)) {
    const data = large!;
    const batchBytes = cfg.p1Batch * data.rowBytes;
    log(`part 1: pinned host → device, batches of ${cfg.p1Batch} × ${fmtInt(data.rowBytes)} B = ${fmtBytes(batchBytes)}`);
    if (cuda) {
      const kinds = [
        ['h2d', 'covering', 'ceiling: cuMemcpyHtoDAsync, registered memory'],
        ['h2d-whole', 'whole', 'reference: same, buffer registered as Stoker does'],
        ['h2d-pageable', 'pageable', 'reference: same, pageable memory'],
      ] as const;
      for (const [key, kind, name] of kinds) {
        const c = await attempt(name, () => h2dCopies(cuda, batchBytes, cfg.ceilingCopies, cfg.ceilingReps, kind));
        if (c === undefined) rows.push(failedRow(1, key, name));
        else {
          const note =
            kind === 'covering'
              ? `one ${fmtBytes(batchBytes)} copy per batch, ${c.pinning}; best rep ${c.ceiling.best.toFixed(1)} GB/s`
              : kind === 'whole'
                ? `a SharedArrayBuffer of exactly one batch, new RegisteredHost(ctx, sab): ${c.pinning}`
                : 'a SharedArrayBuffer never registered';
          rows.push(ceilingRow(1, key, name, c.ceiling, note));
        }
      }
    }
    const p1Specs: StokerSpec[] = [
      { key: 'p1-streaming-pinned', name: 'Stoker streaming, pinned source', data, batchSize: cfg.p1Batch, mode: 'streaming', vramPool: false },
      ...([0, 'auto'] as const).map((workers): StokerSpec => ({ key: `p1-streaming-w${workers}`, name: `Stoker streaming, staged, workers ${workers}`, data, batchSize: cfg.p1Batch, mode: 'streaming', workers, vramPool: false, pinSource: false })),
    ];
    for (const spec of p1Specs) {
      await stoker(spec, 1, { warmup: cfg.warmEpochs, window: 1, reps: cfg.p1Epochs, aligned: true }, true, streamingEpochs(cfg.p1Epochs));
    }
    const ceiling = rows.find((r) => r.key === 'h2d')?.gbps ?? Number.NaN;
    const p1Rows = rows.filter((r) => r.part === 1 && r.key.startsWith('p1-'));
    const best = p1Rows.reduce((a, b) => ((b.gbps ?? -1) > (a.gbps ?? -1) ? b : a));
    ratios.push({ id: 'p1.best_streaming_vs_h2d', label: `part 1: best streaming (${best.name.replace('Stoker streaming, ', '')}) / pinned H2D ceiling`, value: (best.gbps ?? Number.NaN) / ceiling, goal: 0.9, direction: 'atLeast', percent: false });
    for (const other of p1Rows.filter((r) => r !== best)) {
      ratios.push({ id: `p1.${other.key}_vs_h2d`, label: `part 1: streaming (${other.name.replace('Stoker streaming, ', '')}) / pinned H2D ceiling`, value: (other.gbps ?? Number.NaN) / ceiling, goal: undefined, direction: 'atLeast', percent: false });
    }
  }

  // Part 2: resident gather vs DtoD ceiling.
  if (parts.has(2)) {
    log('part 2: resident gather vs device-to-device copy');
    for (const [data, key] of [[large!, 'large'], [cifar!, 'cifar']] as const) {
      const batchBytes = cfg.p2Batch * data.sampleBytes;
      if (cuda) {
        const name = `ceiling: cuMemcpyDtoDAsync, ${key === 'large' ? 'ImageNet-sized' : 'CIFAR-shaped'} batch`;
        const c = await attempt(name, () => d2dCeiling(cuda, batchBytes, data.n * data.sampleBytes, cfg.ceilingCopies, cfg.ceilingReps));
        rows.push(c === undefined ? failedRow(2, `d2d-${key}`, name) : ceilingRow(2, `d2d-${key}`, name, c, `one ${fmtBytes(batchBytes)} copy per batch from a ${fmtBytes(data.n * data.sampleBytes)} source, in order`));
      }
      const spec: StokerSpec = { key: `p2-resident-${key}`, name: `Stoker resident, ${key === 'large' ? 'ImageNet-sized' : 'CIFAR-shaped'} rows`, data, batchSize: cfg.p2Batch, mode: 'resident' };
      await stoker(spec, 2, { warmup: cfg.p2Warmup, window: cfg.p2Window, reps: cfg.p2Reps, aligned: false }, true, `median of ${cfg.p2Reps} windows of ${cfg.p2Window} batches`);
      const stokerGbps = rows.find((x) => x.key === spec.key)?.gbps ?? Number.NaN;
      const ceiling = rows.find((x) => x.key === `d2d-${key}`)?.gbps ?? Number.NaN;
      ratios.push({
        id: `p2.resident_vs_d2d.${key}`,
        label: `part 2: resident gather / DtoD ceiling, ${key === 'large' ? `ImageNet-sized rows (${fmtBytes(batchBytes)} batches)` : `CIFAR-shaped rows (${fmtBytes(batchBytes)} batches)`}`,
        value: stokerGbps / ceiling,
        goal: key === 'large' ? 0.8 : undefined,
        direction: 'atLeast',
        percent: false,
      });
    }
  }

  // Part 3: CIFAR-shaped samples/s, Stoker vs PyTorch.
  const cifarSpecs = (batchSize: number): StokerSpec[] => {
    const data = cifar!;
    return [
      { key: 'streaming-w0', name: 'Stoker streaming, staged, workers 0', data, batchSize, mode: 'streaming', workers: 0, vramPool: false, pinSource: false },
      { key: 'streaming-wauto', name: 'Stoker streaming, staged, workers auto', data, batchSize, mode: 'streaming', workers: 'auto', vramPool: false, pinSource: false },
      { key: 'streaming-pinned', name: 'Stoker streaming, pinned source', data, batchSize, mode: 'streaming', vramPool: false },
      { key: 'streaming-defaults', name: 'Stoker streaming, defaults (pinned source + pool)', data, batchSize, mode: 'streaming' },
      { key: 'resident', name: 'Stoker resident', data, batchSize, mode: 'resident' },
    ];
  };
  if (parts.has(3)) {
    log(`part 3: CIFAR-shaped, batch ${cfg.p3Batch}, samples/s on the device`);
    if (opts.torch) {
      torch = runTorch(env);
      if (torch.status === 'ok') {
        for (const t of torch.results) {
          rows.push({
            part: 3,
            key: `torch-w${t.numWorkers}`,
            name: `PyTorch DataLoader, num_workers=${t.numWorkers}`,
            gbps: undefined,
            samplesPerSec: t.samplesPerSec,
            usPerBatch: (t.timedS * 1e6) / cfg.torchBatches,
            hostUsPerBatch: undefined,
            spread: '—',
            timed: `${cfg.torchBatches} batches after ${cfg.torchWarmup} warm-up`,
            note: `torch ${torch.version}${torch.cuda ? ` (CUDA ${torch.cuda})` : ''} on ${torch.device}; warm-up ${t.warmupS.toFixed(2)} s`,
          });
        }
      } else {
        notes.push(`PyTorch ${torch.status === 'skipped' ? 'skipped' : 'FAILED'}: ${torch.reason}`);
        if (torch.status === 'failed') process.exitCode = 1;
      }
    } else {
      notes.push('PyTorch not run (--no-torch)');
    }
    for (const spec of cifarSpecs(cfg.p3Batch)) {
      await stoker({ ...spec, key: `p3-${spec.key}` }, 3, { warmup: cfg.warmEpochs, window: 1, reps: cfg.p3Epochs, aligned: true }, false, streamingEpochs(cfg.p3Epochs));
    }
    const stokerRows = rows.filter((r) => r.part === 3 && r.key.startsWith('p3-'));
    const bestStoker = stokerRows.reduce((a, b) => ((b.samplesPerSec ?? -1) > (a.samplesPerSec ?? -1) ? b : a));
    const torchRows = rows.filter((r) => r.part === 3 && r.key.startsWith('torch-'));
    const bestTorch = torchRows.length > 0 ? torchRows.reduce((a, b) => ((b.samplesPerSec ?? -1) > (a.samplesPerSec ?? -1) ? b : a)) : undefined;
    const bestStreaming = stokerRows.filter((r) => r.key.includes('streaming')).reduce((a, b) => ((b.samplesPerSec ?? -1) > (a.samplesPerSec ?? -1) ? b : a));
    const torchLabel = bestTorch ? bestTorch.name.replace('PyTorch DataLoader, ', '') : 'not measured';
    ratios.push({
      id: 'p3.best_stoker_vs_best_torch',
      label: `part 3: best Stoker (${bestStoker.name.replace('Stoker ', '')}) / best PyTorch (${torchLabel}), samples/s`,
      value: (bestStoker.samplesPerSec ?? Number.NaN) / (bestTorch?.samplesPerSec ?? Number.NaN),
      goal: 10,
      direction: 'atLeast',
      percent: false,
    });
    ratios.push({
      id: 'p3.best_streaming_vs_best_torch',
      label: `part 3: best Stoker streaming (${bestStreaming.name.replace('Stoker streaming, ', '')}) / best PyTorch, samples/s`,
      value: (bestStreaming.samplesPerSec ?? Number.NaN) / (bestTorch?.samplesPerSec ?? Number.NaN),
      goal: undefined,
      direction: 'atLeast',
      percent: false,
    });
  }

  // Part 4: consumer with fixed GPU time per batch.
  if (parts.has(4)) {
    const largeSpinUs = cfg.spinUs * LARGE_SPIN_FACTOR;
    log(`part 4: a consumer with ${cfg.spinUs} µs (CIFAR-shaped) and ${largeSpinUs} µs (ImageNet-sized) of GPU time per batch`);
    if (cuda) {
      spin = await attempt('part 4: spin kernel calibration', () => calibrateSpin(cuda, cfg.spinUs));
      spinLarge = await attempt('part 4: spin kernel calibration', () => calibrateSpin(cuda, largeSpinUs));
      for (const sp of [spin, spinLarge]) if (sp) log(`  spin kernel: ${sp.askedUs} µs asked, ${sp.measuredUs.toFixed(0)} µs measured per launch (${sp.how})`);
    }
    const specs: StokerSpec[] = [
      ...cifarSpecs(cfg.p3Batch),
      { key: 'large-streaming-pinned', name: 'Stoker streaming, pinned source, ImageNet-sized', data: large!, batchSize: cfg.p1Batch, mode: 'streaming', vramPool: false },
    ];
    for (const spec of cuda && (!spin || !spinLarge) ? [] : specs) {
      const isLarge = spec.data === large;
      const r = await attempt(`part 4: ${spec.name}`, () => runPart4(env, { ...spec, key: `p4-${spec.key}` }, isLarge ? spinLarge : spin, isLarge ? largeSpinUs : cfg.spinUs));
      if (r !== undefined) {
        p4.push(r.row);
        checkedRows += r.checkedRows;
      }
      ratios.push({ id: `p4.wait_share.${spec.key}`, label: `part 4: loader wait / wall, ${spec.name.replace('Stoker ', '')}`, value: r?.row.waitShare ?? Number.NaN, goal: 0.02, direction: 'below', percent: true });
    }
  }

  // ------------------------------------------------------------------ output
  const method: string[] = [
    'method: every row is stamped with its sample id (first 4 bytes; last 4 bytes = id XOR 0x5a5a5a5a; CIFAR labels = ids). ' +
      (cuda
        ? 'Parts 1–2: in the warm-up and one untimed window after the timed ones, the consumer launches a stamp-summing kernel on the loader\'s consumer stream for every batch (loader.kernel); the sums must match the batches\' sample ids. Timed windows only read each tensor\'s address. '
        : 'Parts 1–2 (sim): no consumer kernel (sim runs no PTX). ') +
      'Every Stoker run retains two batches of its last window and checks them row by row with toHost() after the timing.',
    'method: a window starts on a synchronized device and ends after loader.synchronize() (the consumer stream, which waited on every batch\'s ready event); ' +
      'GB/s and samples/s = delivered bytes or rows / that wall time. Streaming and part 3–4 windows are whole epochs (the read-ahead may span an epoch); ' +
      `part 2 resident windows are ${cfg.p2Window} batches after ${cfg.p2Warmup} warm-up, crossing epochs. "host µs/batch" is the loop's time before the final synchronize.`,
    `method: ceilings are raw driver copies on a stream of the bench's own, ${cfg.ceilingCopies} back-to-back per repetition, median of ${cfg.ceilingReps}; ` +
      'H2D from a registered SharedArrayBuffer (the range checked to cover the copy; the two reference rows show a buffer registered the way Stoker registers its staging, and pageable memory), ' +
      'DtoD from a dataset-sized source read in order into two alternating buffers.',
    `method: shuffled with seed ${SEED}, dropLast; ${cfg.warmEpochs} warm-up epoch(s) before streaming windows; VRAM pool off in parts 1, 3 and 4 unless the row says defaults.`,
  ];
  if (parts.has(3)) {
    method.push(
      `method: PyTorch runs in a child process (bench/torch_loader.py): per-item Dataset over a uint8 tensor + int64 labels, DataLoader(batch_size=${cfg.p3Batch}, shuffle=True, ` +
        `pin_memory=True, drop_last=True, num_workers=${cfg.torchWorkers.join('/')}), x.cuda(non_blocking=True) per batch; ${cfg.torchBatches} batches timed after ${cfg.torchWarmup} warm-up ` +
        '(worker start-up excluded; bounded because its per-item path is slow), torch.cuda.synchronize() at both ends. Stoker\'s figures are whole epochs, start-up included: the comparison favors PyTorch.',
    );
  }
  if (parts.has(4)) {
    method.push(
      `method: part 4 launches a spin kernel per batch on the loader's consumer stream — ${cfg.spinUs} µs for CIFAR-shaped batches, ${cfg.spinUs * LARGE_SPIN_FACTOR} µs for ImageNet-sized ones ` +
        `(${spin ? `${spin.how}; measured ${spin.measuredUs.toFixed(0)} and ${spinLarge?.measuredUs.toFixed(0)} µs` : 'sim: a virtual GPU clock'}) — then ` +
        'records an event after it, blocks (cuEventSynchronize) on the event of two batches back and yields to the event loop once, like a Node loop that awaits its loss every step; ' +
        '"loader wait" is the sum of stats().epochs[e].waitMs over the timed epoch(s), the bench\'s own measure around next() beside it; GPU busy = batches × spin / wall.',
    );
  }

  const ratioJson = Object.fromEntries(ratios.map((r) => [r.id, { label: r.label, value: Number.isFinite(r.value) ? r.value : null, goal: r.goal ?? null, direction: r.direction, met: metOf(env, r) }]));
  if (opts.json) {
    console.log(
      JSON.stringify(
        {
          bench: 'gpu',
          device: opts.device,
          hardware: hw,
          gpu: gpuInfo,
          config: { ...cfg, seed: SEED, quick: opts.quick, parts: [...parts] },
          rows,
          part4: p4,
          torch: torch ?? null,
          spin: [spin, spinLarge].map((sp) => (sp ? { ...sp, arg: sp.arg.toString() } : null)),
          verification: { rowsCheckedWithToHost: checkedRows, rowsCheckedByStampKernel: stampedRows },
          failures,
          notes,
          ratios: ratioJson,
          sink: sink.value,
        },
        null,
        2,
      ),
    );
    return;
  }

  const columns: Column<Row>[] = [
    { title: 'contender', cell: (r) => r.name },
    { title: 'GB/s', align: 'right', cell: (r) => fmtOpt(r.gbps, 1) },
    { title: 'samples/s', align: 'right', cell: (r) => fmtOpt(r.samplesPerSec, 0) },
    { title: 'µs/batch', align: 'right', cell: (r) => fmtOpt(r.usPerBatch, 1) },
    { title: 'host µs/batch', align: 'right', cell: (r) => fmtOpt(r.hostUsPerBatch, 1) },
    { title: 'spread', align: 'right', cell: (r) => r.spread },
    { title: 'timed', cell: (r) => r.timed },
    { title: 'notes', cell: (r) => r.note },
  ];
  const titles: Record<number, string> = {
    1: `part 1 — pinned host → device, ImageNet-sized samples, batch ${cfg.p1Batch} (${fmtBytes(cfg.p1Batch * LARGE_SHAPE.reduce((a, b) => a * b, 1))}); spread = GB/s per window`,
    2: `part 2 — resident gather vs device-to-device copy, batch ${cfg.p2Batch}; spread = GB/s per window`,
    3: `part 3 — CIFAR-shaped in RAM, ${fmtInt(cfg.cifarSamples)} samples, batch ${cfg.p3Batch}, shuffled, delivered on the device; spread = samples/s per window`,
  };
  for (const part of [1, 2, 3]) {
    const rs = rows.filter((r) => r.part === part);
    if (rs.length === 0) continue;
    console.log('');
    console.log(titles[part]);
    console.log(table(rs, columns));
    for (const r of rs) if (r.diag !== undefined) console.log(`  ${r.name}: ${r.diag}`);
  }
  if (p4.length > 0) {
    console.log('');
    console.log(`part 4 — a consumer with fixed GPU time per batch (column "spin µs"), pacing on the event of two batches back`);
    console.log(
      table(p4, [
        { title: 'loader', cell: (r) => r.name },
        { title: 'batches', align: 'right', cell: (r) => fmtInt(r.batches) },
        { title: 'spin µs', align: 'right', cell: (r) => fmtInt(r.spinUs) },
        { title: 'wall ms', align: 'right', cell: (r) => r.wallMs.toFixed(0) },
        { title: 'GPU busy', align: 'right', cell: (r) => `${(r.gpuBusy * 100).toFixed(1)}%` },
        { title: 'loader wait ms', align: 'right', cell: (r) => fmtOpt(r.loaderWaitMs, 1) },
        { title: 'wait/wall', align: 'right', cell: (r) => `${(r.waitShare * 100).toFixed(2)}%` },
        { title: 'bench-measured', align: 'right', cell: (r) => `${(r.benchWaitShare * 100).toFixed(2)}%` },
        { title: 'host blocked on GPU ms', align: 'right', cell: (r) => r.blockedMs.toFixed(0) },
        { title: 'notes', cell: (r) => r.note },
      ]),
    );
    for (const r of p4) console.log(`  ${r.name}: ${r.diag}`);
  }
  console.log('');
  for (const m of method) console.log(m);
  console.log(
    `verified: ${fmtInt(checkedRows)} rows read back with toHost() and checked against the source` +
      (cuda ? `; ${fmtInt(stampedRows)} delivered rows checked on the device by the stamp kernel` : '') +
      `; ${failures.length === 0 ? 'every check passed' : 'every run that finished passed its checks (a failed check fails its run, below)'}.`,
  );
  for (const n of notes) console.log(`note: ${n}`);
  if (failures.length > 0) {
    console.log('');
    console.log(`FAILURES (${failures.length}; the bench exits with code 1):`);
    for (const f of failures) console.log(`- ${f.where}: ${f.message.replace(/\n/g, '\n    ')}`);
  }
  if (ratios.length > 0) {
    console.log('');
    const width = Math.max(...ratios.map((r) => r.label.length));
    for (const r of ratios) console.log(`${r.label.padEnd(width)}  ${fmtRatio(r).padStart(7)}${verdict(env, r)}`);
  }
}
