// Part 2 of the GPU bench (bench/gpu.ts says what it measures and how): device gather, the raw
// cuMemcpyDtoDAsync ceiling against Stoker's resident loader, on ImageNet-sized and CIFAR-shaped rows.

import { DeviceMemory } from '../../src/device/cuda/device-memory.js';
import { CudaStream } from '../../src/device/cuda/stream.js';
import type { CudaEnv, Data, Env, PartResult, Ratio, Row } from './common.js';
import { failedRow, fmtBytes } from './common.js';
import type { Ceiling, Recorder, StokerSpec } from './measure.js';
import { ceilingRow, timeCopies } from './measure.js';

export function d2dCeiling(cuda: CudaEnv, bytes: number, sourceBytes: number, copies: number, reps: number): Ceiling {
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

/** Part 2 on one dataset: the DtoD ceiling (CUDA only), the resident loader, and their ratio. */
async function gatherOn(env: Env, rec: Recorder, data: Data, key: 'large' | 'cifar'): Promise<PartResult> {
  const { cfg, cuda } = env;
  const rows: Row[] = [];
  const batchBytes = cfg.p2Batch * data.sampleBytes;
  if (cuda) {
    const name = `ceiling: cuMemcpyDtoDAsync, ${key === 'large' ? 'ImageNet-sized' : 'CIFAR-shaped'} batch`;
    const c = await rec.attempt(name, () => d2dCeiling(cuda, batchBytes, data.n * data.sampleBytes, cfg.ceilingCopies, cfg.ceilingReps));
    rows.push(c === undefined ? failedRow(2, `d2d-${key}`, name) : ceilingRow(2, `d2d-${key}`, name, c, `one ${fmtBytes(batchBytes)} copy per batch from a ${fmtBytes(data.n * data.sampleBytes)} source, in order`));
  }
  const spec: StokerSpec = { key: `p2-resident-${key}`, name: `Stoker resident, ${key === 'large' ? 'ImageNet-sized' : 'CIFAR-shaped'} rows`, data, batchSize: cfg.p2Batch, mode: 'resident' };
  rows.push(await rec.stoker(spec, 2, { warmup: cfg.p2Warmup, window: cfg.p2Window, reps: cfg.p2Reps, aligned: false }, true, `median of ${cfg.p2Reps} windows of ${cfg.p2Window} batches`));
  const stokerGbps = rows.find((x) => x.key === spec.key)?.gbps ?? Number.NaN;
  const ceiling = rows.find((x) => x.key === `d2d-${key}`)?.gbps ?? Number.NaN;
  const ratio: Ratio = {
    id: `p2.resident_vs_d2d.${key}`,
    label: `part 2: resident gather / DtoD ceiling, ${key === 'large' ? `ImageNet-sized rows (${fmtBytes(batchBytes)} batches)` : `CIFAR-shaped rows (${fmtBytes(batchBytes)} batches)`}`,
    value: stokerGbps / ceiling,
    goal: key === 'large' ? 0.8 : undefined,
    direction: 'atLeast',
    percent: false,
  };
  return { rows, ratios: [ratio] };
}

/** Part 2: resident gather vs DtoD ceiling. */
export async function runPart2(env: Env, rec: Recorder, large: Data, cifar: Data): Promise<PartResult> {
  env.log('part 2: resident gather vs device-to-device copy');
  const rows: Row[] = [];
  const ratios: Ratio[] = [];
  for (const [data, key] of [[large, 'large'], [cifar, 'cifar']] as const) {
    const r = await gatherOn(env, rec, data, key);
    rows.push(...r.rows);
    ratios.push(...r.ratios);
  }
  return { rows, ratios };
}
