// Part 1 of the GPU bench (bench/gpu.ts says what it measures and how): pinned host → device with
// ImageNet-sized samples, the raw cuMemcpyHtoDAsync ceiling (and two reference rows) against
// Stoker's streaming loader, pinned source and staged through reader memory.

import { DeviceMemory } from '../../src/device/cuda/device-memory.js';
import { PAGE_BYTES, RegisteredHost } from '../../src/device/cuda/registered-host.js';
import { CudaStream } from '../../src/device/cuda/stream.js';
import { fmtInt } from '../util.js';
import type { Config, CudaEnv, Data, Env, PartResult, Ratio, Row } from './common.js';
import { failedRow, fmtBytes } from './common.js';
import type { Ceiling, Recorder, StokerSpec } from './measure.js';
import { ceilingRow, streamingEpochs, timeCopies } from './measure.js';

/**
 * Host → device, one batch per copy. 'covering': the ceiling — a SharedArrayBuffer over-allocated by
 * two pages so that its registered (page-aligned) range covers every copied byte. 'whole': a buffer
 * of exactly the batch's size registered as Stoker registers its staging (only the page-aligned
 * interior can be pinned when the base is not page-aligned). 'pageable': never registered.
 */
export function h2dCopies(cuda: CudaEnv, bytes: number, copies: number, reps: number, kind: 'covering' | 'whole' | 'pageable'): { ceiling: Ceiling; pinning: string } {
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

/** The H2D ceiling and its two reference rows (CUDA only). */
async function h2dRows(cuda: CudaEnv, rec: Recorder, cfg: Config, batchBytes: number): Promise<Row[]> {
  const rows: Row[] = [];
  const kinds = [
    ['h2d', 'covering', 'ceiling: cuMemcpyHtoDAsync, registered memory'],
    ['h2d-whole', 'whole', 'reference: same, buffer registered as Stoker does'],
    ['h2d-pageable', 'pageable', 'reference: same, pageable memory'],
  ] as const;
  for (const [key, kind, name] of kinds) {
    const c = await rec.attempt(name, () => h2dCopies(cuda, batchBytes, cfg.ceilingCopies, cfg.ceilingReps, kind));
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
  return rows;
}

/** Part 1: pinned H2D ceiling vs streaming. */
export async function runPart1(env: Env, rec: Recorder, data: Data): Promise<PartResult> {
  const { cfg, cuda, log } = env;
  const batchBytes = cfg.p1Batch * data.rowBytes;
  log(`part 1: pinned host → device, batches of ${cfg.p1Batch} × ${fmtInt(data.rowBytes)} B = ${fmtBytes(batchBytes)}`);
  const rows: Row[] = cuda ? await h2dRows(cuda, rec, cfg, batchBytes) : [];
  const p1Specs: StokerSpec[] = [
    { key: 'p1-streaming-pinned', name: 'Stoker streaming, pinned source', data, batchSize: cfg.p1Batch, mode: 'streaming', vramPool: false },
    ...([0, 'auto'] as const).map((workers): StokerSpec => ({ key: `p1-streaming-w${workers}`, name: `Stoker streaming, staged, workers ${workers}`, data, batchSize: cfg.p1Batch, mode: 'streaming', workers, vramPool: false, pinSource: false })),
  ];
  for (const spec of p1Specs) {
    rows.push(await rec.stoker(spec, 1, { warmup: cfg.warmEpochs, window: 1, reps: cfg.p1Epochs, aligned: true }, true, streamingEpochs(cfg.p1Epochs)));
  }
  const ratios: Ratio[] = [];
  const ceiling = rows.find((r) => r.key === 'h2d')?.gbps ?? Number.NaN;
  const p1Rows = rows.filter((r) => r.part === 1 && r.key.startsWith('p1-'));
  const best = p1Rows.reduce((a, b) => ((b.gbps ?? -1) > (a.gbps ?? -1) ? b : a));
  ratios.push({ id: 'p1.best_streaming_vs_h2d', label: `part 1: best streaming (${best.name.replace('Stoker streaming, ', '')}) / pinned H2D ceiling`, value: (best.gbps ?? Number.NaN) / ceiling, goal: 0.9, direction: 'atLeast', percent: false });
  for (const other of p1Rows.filter((r) => r !== best)) {
    ratios.push({ id: `p1.${other.key}_vs_h2d`, label: `part 1: streaming (${other.name.replace('Stoker streaming, ', '')}) / pinned H2D ceiling`, value: (other.gbps ?? Number.NaN) / ceiling, goal: undefined, direction: 'atLeast', percent: false });
  }
  return { rows, ratios };
}
