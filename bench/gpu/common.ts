// The GPU bench's shared pieces (bench/gpu.ts says what the bench measures and how): its constants,
// configuration and flags; the stamped datasets and their row-by-row check; the CUDA environment;
// the row, ratio and failure records every part produces; number formatting.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Batch, DeviceTensor } from '../../src/index.js';
import type { CudaContext } from '../../src/device/cuda/context.js';
import { driver } from '../../src/device/cuda/driver.js';
import type { CudaModule } from '../../src/device/cuda/module.js';
import { UsageError, fmtInt } from '../util.js';

export const SEED = 42;
export const STAMP_MASK = 0x5a5a5a5a;
export const LARGE_SHAPE = [3, 224, 224] as const;
export const CIFAR_SHAPE = [3, 32, 32] as const;
export const BENCH_PTX = new URL('../../kernels/bench.ptx', import.meta.url);
export const TORCH_SCRIPT = new URL('../torch_loader.py', import.meta.url);
/** Part 4: an ImageNet-sized batch of 64 costs a model far more than a CIFAR batch of 256 (ResNet-50 vs ResNet-18 class). */
export const LARGE_SPIN_FACTOR = 10;
export const USAGE = 'npm run -s bench -- gpu [--quick] [--json] [--device cuda|cuda:N|sim] [--parts 1,2,3,4] [--no-torch] [--spin-us N]';

// ---------------------------------------------------------------------------------------------
// Configuration

export interface Config {
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

export const DEFAULT: Config = {
  largeSamples: 16_384, cifarSamples: 200_000, warmEpochs: 1,
  p1Batch: 64, p1Epochs: 3, ceilingCopies: 256, ceilingReps: 5,
  p2Batch: 256, p2Warmup: 2048, p2Window: 1024, p2Reps: 5,
  p3Batch: 256, p3Epochs: 3, torchWorkers: [0, 4, 8], torchWarmup: 20, torchBatches: 200, torchTimeoutS: 300,
  spinUs: 2000, p4Epochs: 1,
};
export const QUICK: Config = {
  largeSamples: 1_024, cifarSamples: 20_480, warmEpochs: 1,
  p1Batch: 64, p1Epochs: 2, ceilingCopies: 32, ceilingReps: 3,
  p2Batch: 256, p2Warmup: 4, p2Window: 64, p2Reps: 3,
  p3Batch: 256, p3Epochs: 2, torchWorkers: [0, 2], torchWarmup: 5, torchBatches: 20, torchTimeoutS: 120,
  spinUs: 1000, p4Epochs: 1,
};

export type DeviceName = `cuda${string}` | 'sim';

export interface Options {
  readonly json: boolean;
  readonly quick: boolean;
  readonly device: DeviceName;
  readonly parts: ReadonlySet<number>;
  readonly torch: boolean;
  readonly spinUs: number | undefined;
}

export function parseOptions(args: readonly string[]): Options {
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

/** The configuration the flags select: --quick's or the full one, with --spin-us applied. */
export function configOf(opts: Options): Config {
  const cfg0 = opts.quick ? QUICK : DEFAULT;
  return opts.spinUs !== undefined ? { ...cfg0, spinUs: opts.spinUs } : cfg0;
}

// ---------------------------------------------------------------------------------------------
// Data: stamped rows in shared memory (reader workers share it without a copy)

export interface Data {
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

export function makeData(label: string, n: number, shape: readonly number[], withLabels: boolean): Data {
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
export function checkRow(data: Data, id: number, row: Uint8Array, where: string): void {
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
export async function verifyBatch(data: Data, batch: Batch<DeviceTensor>, where: string): Promise<number> {
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

export interface CudaEnv {
  readonly ctx: CudaContext;
  readonly ptx: string;
  readonly module: CudaModule;
}

export interface Env {
  readonly opts: Options;
  readonly cfg: Config;
  readonly sim: boolean;
  readonly cuda: CudaEnv | undefined;
  readonly log: (s: string) => void;
}

export function whyNoCuda(): string {
  try {
    driver();
    return 'the NVIDIA driver loads but sees no CUDA device (check nvidia-smi and CUDA_VISIBLE_DEVICES)';
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

export function loadBenchPtx(): string {
  try {
    return readFileSync(fileURLToPath(BENCH_PTX), 'utf8');
  } catch (error) {
    throw new Error(`the bench's kernels ${fileURLToPath(BENCH_PTX)} could not be read (${(error as Error).message}). Build them with: npm run kernels (needs nvcc)`);
  }
}

// ---------------------------------------------------------------------------------------------
// Records: a result row, a ratio line, a failed run

export interface Row {
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

export interface Ratio {
  /** Stable key for --json readers. */
  readonly id: string;
  readonly label: string;
  readonly value: number;
  readonly goal: number | undefined;
  /** 'atLeast': value ≥ goal meets it; 'below': value < goal meets it. */
  readonly direction: 'atLeast' | 'below';
  readonly percent: boolean;
}

/** What a part hands back: its table rows and its ratio lines. */
export interface PartResult {
  readonly rows: Row[];
  readonly ratios: Ratio[];
}

// Failures: a run that throws is recorded, printed loudly, and the bench goes on with the others.
export interface Failure {
  readonly where: string;
  readonly message: string;
}

export function describeError(error: unknown): string {
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

export function failedRow(part: number, key: string, name: string): Row {
  return { part, key, name, gbps: undefined, samplesPerSec: undefined, usPerBatch: undefined, hostUsPerBatch: undefined, spread: '—', timed: 'FAILED', note: 'see FAILURES below' };
}

// ---------------------------------------------------------------------------------------------
// Formatting

export function fmtBytes(b: number): string {
  if (!Number.isFinite(b)) return '—';
  if (b >= 1e9) return `${(b / 1e9).toFixed(2)} GB`;
  if (b >= 1e6) return `${(b / 1e6).toFixed(2)} MB`;
  if (b >= 1e3) return `${(b / 1e3).toFixed(1)} kB`;
  return `${b} B`;
}

export function fmtOpt(x: number | undefined, digits: number): string {
  if (x === undefined || !Number.isFinite(x)) return '—';
  return digits === 0 ? fmtInt(x) : x.toFixed(digits);
}

export function spreadOf(xs: readonly number[], digits: number): string {
  if (xs.length < 2) return '—';
  const f = (x: number) => (digits === 0 ? fmtInt(x) : x.toFixed(digits));
  return `${f(Math.min(...xs))}–${f(Math.max(...xs))}`;
}
