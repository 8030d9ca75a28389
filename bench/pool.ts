// The VRAM sample pool (`npm run -s bench -- pool [--device sim] [--quick] [--json]`): epochs 2+ of
// a streaming loader with the pool against the same loader without it and against resident mode,
// for a dataset the pool holds entirely and one three times larger than the pool. The pool's size
// is set by occupying device memory first (a model would), so the budget law leaves it 1/3 of the
// dataset. Verdicts: H2D bytes fall by the pool's hit rate (± 2 %), and with the whole dataset
// pooled an epoch takes at most 1.2× a resident epoch.

import { DataLoader, type DeviceTensor, type LoaderOptions, sources, tensor } from '../src/index.js';
import { cudaAvailable } from '../src/device/cuda/driver.js';
import { CudaContext } from '../src/device/cuda/context.js';
import { DeviceMemory } from '../src/device/cuda/device-memory.js';
import { MARGIN_BYTES } from '../src/device/accelerator/vram-pool.js';
import { hardwareLine, median, now, parseFlags } from './util.js';

const ROW = 3 * 64 * 64; // 12 KiB images + an int32 label
const BATCH = 256;

interface Run {
  readonly name: string;
  readonly epochMs: number[];
  readonly h2d: number[];
  readonly served: number[];
  readonly rows: number;
  readonly pooledRows: number;
  /** First epoch the streaming loader ran resident (its pool held every sample), or -1. */
  readonly residentFrom: number;
  /** The pool's phase in each epoch (stats().epochs[e].vramPool). */
  readonly phases: string[];
}

interface Contender {
  readonly name: string;
  readonly options: Partial<LoaderOptions> & { device: string };
}

/**
 * Run contenders side by side, epochs interleaved (epoch e of each, in turn, before epoch e + 1 of
 * any): a slow spell of the host then lands on all of them alike, which sequential runs do not give
 * (run-to-run spread on the GPU host was larger than the differences measured).
 */
async function runTogether(contenders: readonly Contender[], n: number, epochs: number): Promise<Run[]> {
  const loaders: DataLoader<DeviceTensor>[] = [];
  const runs = contenders.map((c) => ({ name: c.name, epochMs: [] as number[], h2d: [] as number[], served: [] as number[], rows: 0, pooledRows: 0, residentFrom: -1, phases: [] as string[] }));
  try {
    for (const c of contenders) {
      const images = new Uint8Array(n * ROW);
      for (let i = 0; i < n; i++) images[i * ROW] = i & 0xff;
      const ds = sources.arrays({ image: tensor(images, [n, 3, 64, 64]), label: Int32Array.from({ length: n }, (_, i) => i) });
      loaders.push((await DataLoader.create(ds, { batchSize: BATCH, workers: 0, ...c.options } as LoaderOptions & { device: 'sim' })) as unknown as DataLoader<DeviceTensor>);
    }
    for (let e = 0; e < epochs; e++) {
      for (let k = 0; k < loaders.length; k++) {
        const loader = loaders[k]!;
        const r = runs[k]!;
        const t0 = now();
        let rows = 0;
        for await (const b of loader.epoch(e)) rows += b.rows;
        await loader.synchronize();
        r.epochMs.push(now() - t0);
        r.rows = rows;
        const s = loader.stats().epochs[e]!;
        r.h2d.push(s.h2dBytes);
        // After the pool came to hold every sample the loader is resident: every row is on the device.
        const promoted = loader.isResident && contenders[k]!.options.mode !== 'resident';
        if (promoted && r.residentFrom < 0) r.residentFrom = e;
        r.served.push(promoted ? rows : s.rowsServedOnDevice);
        r.pooledRows = s.pooledRows;
        r.phases.push(promoted ? 'resident' : s.vramPool);
      }
    }
  } finally {
    for (const l of loaders) await l.close();
  }
  return runs;
}

export async function main(args: readonly string[]): Promise<void> {
  const flags = parseFlags(args, ['json', 'quick', 'sim'], 'npm run bench -- pool [--sim] [--quick] [--json]');
  const device = flags.sim ? 'sim' : 'cuda';
  if (device === 'cuda' && !cudaAvailable()) {
    console.log('bench pool: no CUDA driver or device here; run it on a GPU machine, or pass --sim for a smoke run');
    return;
  }
  const n = flags.quick || flags.sim ? 4096 : 80_000;
  const epochs = flags.quick ? 3 : 8;
  const datasetBytes = n * (ROW + 4);
  // Leave the pool a third of the dataset: free = pool + margin + 16 batches of flow reserve.
  const reserve = 16 * BATCH * (ROW + 4);
  const third = Math.floor(datasetBytes / 3);
  let hog: (() => void) | undefined;
  let context: CudaContext | undefined;
  const small: Partial<LoaderOptions> & { device: string } = { device, mode: 'streaming' };
  if (device === 'cuda') {
    context = CudaContext.open(0);
  }
  const results: Run[] = [];
  const fits = flags.sim ? { sim: { totalBytes: datasetBytes * 4 + MARGIN_BYTES * 2 } } : {};
  results.push(...(await runTogether([
    { name: 'fits: streaming + pool', options: { device, mode: 'streaming', ...fits } },
    { name: 'fits: streaming, vramPool: false', options: { device, mode: 'streaming', vramPool: false, ...fits } },
    { name: 'fits: resident', options: { device, mode: 'resident', ...fits } },
  ], n, epochs)));
  // 3× the pool: occupy device memory so that free ≈ third + margin + flow reserve; the batches in
  // flight when the pool decides (at most the 16 of `prefetch`) come off the third.
  const leave = third + MARGIN_BYTES + reserve;
  if (context !== undefined) {
    context.setCurrent();
    const blocks: DeviceMemory[] = [];
    let free = context.memInfo().free;
    while (free - leave > 64 * 2 ** 20) {
      blocks.push(new DeviceMemory(context, Math.min(free - leave, 8 * 2 ** 30)));
      free = context.memInfo().free;
    }
    hog = () => blocks.forEach((b) => b.dispose());
  }
  Object.assign(small, flags.sim ? { sim: { totalBytes: leave, usedBytes: 0 }, prefetch: 16 } : { prefetch: 16 });
  try {
    // One at a time: the hog leaves room for one pool of a third of the dataset. Staged through
    // reader memory (pinSource: false), the path of every file source; read in place from the
    // pinned in-memory source, these 12 KB rows are a case where the pool declines a partial budget.
    results.push(...(await runTogether([{ name: '3× pool: streaming + pool', options: { ...small, pinSource: false } }], n, epochs)));
    results.push(...(await runTogether([{ name: '3× pool: streaming, vramPool: false', options: { ...small, pinSource: false, vramPool: false } }], n, epochs)));
    results.push(...(await runTogether([{ name: '3× pool: pinned source (pool declines)', options: small }], n, epochs)));
  } finally {
    hog?.();
    context?.dispose();
  }

  const later = (r: Run) => median(r.epochMs.slice(1));
  // Steady state: the last three epochs (after a complete pool turned the loader resident, if it did).
  const steady = (r: Run) => median(r.epochMs.slice(-3));
  const table = results.map((r) => ({
    contender: r.name,
    'epoch 1 ms': r.epochMs[0]!.toFixed(0),
    'epochs 2+ ms (median)': later(r).toFixed(1),
    'last 3 ms': steady(r).toFixed(1),
    'samples/s (2+)': Math.round(r.rows / (later(r) / 1000)).toLocaleString('en-US'),
    'H2D MB (last epoch)': (r.h2d.at(-1)! / 1e6).toFixed(1),
    'hit rate (last epoch)': r.rows > 0 ? (r.served.at(-1)! / r.rows).toFixed(3) : '—',
    'pooled rows': String(r.pooledRows),
    'resident from epoch': r.residentFrom < 0 ? '—' : String(r.residentFrom + 1),
    'pool phase (last)': r.phases.at(-1) ?? '—',
  }));
  const [fitPool, fitNo, fitRes, bigPool, bigNo, bigPinned] = results as [Run, Run, Run, Run, Run, Run];
  const hit = bigPool.served.at(-1)! / bigPool.rows;
  const h2dRatio = bigPool.h2d.at(-1)! / bigNo.h2d.at(-1)!;
  const fitHit = fitPool.served.at(-1)! / fitPool.rows;
  const fitH2dRatio = fitPool.h2d.at(-1)! / fitNo.h2d.at(-1)!;
  const ratios = [
    { label: '3× pool: H2D with / without − (1 − hit rate)', value: h2dRatio - (1 - hit), goal: '|x| ≤ 0.02', met: Math.abs(h2dRatio - (1 - hit)) <= 0.02 },
    { label: 'fits: H2D with / without − (1 − hit rate)', value: fitH2dRatio - (1 - fitHit), goal: '|x| ≤ 0.02', met: Math.abs(fitH2dRatio - (1 - fitHit)) <= 0.02 },
    { label: 'fits: pooled epoch / resident epoch (last 3 epochs)', value: steady(fitPool) / steady(fitRes), goal: '≤ 1.2', met: steady(fitPool) / steady(fitRes) <= 1.2 },
    // The default must never cost (issue 15): pool on at most 2 % slower than pool off, every case.
    { label: 'fits: pooled epoch / unpooled streaming epoch', value: later(fitPool) / later(fitNo), goal: '≤ 1.02', met: later(fitPool) / later(fitNo) <= 1.02 },
    { label: '3× pool: pooled epoch / unpooled streaming epoch', value: later(bigPool) / later(bigNo), goal: '≤ 1.02', met: later(bigPool) / later(bigNo) <= 1.02 },
    { label: '3× pool: pinned source epoch / staged pooled epoch', value: later(bigPinned) / later(bigPool), goal: undefined, met: undefined },
  ];
  if (flags.json) {
    console.log(JSON.stringify({ bench: 'pool', device, samples: n, datasetBytes, results, ratios }, null, 2));
    return;
  }
  console.log(`hardware: ${hardwareLine()}${context ? '' : ''}; device ${device}`);
  console.log(`dataset: ${n.toLocaleString('en-US')} samples × (uint8 [3, 64, 64] + int32), ${(datasetBytes / 1e9).toFixed(2)} GB; batch ${BATCH}, shuffled, workers 0, ${epochs} epochs`);
  console.table(table);
  console.log('method: the three "fits" contenders run side by side, epochs interleaved (epoch e of each in turn); the two "3× pool" ones one after the other (the device is filled for one pool).');
  console.log('method: wall time per epoch including a final synchronize of the consumer stream; H2D = bytes the loader copied host → device in the epoch; hit rate = rows served from the pool / rows delivered.');
  console.log('method: "3× pool" occupies device memory first so that the budget law leaves the pool about a third of the dataset; its first two contenders stage rows through reader memory (pinSource: false, the path of file sources), the third reads the in-memory source in place, where a pool that cannot hold every sample stays dormant for rows this small.');
  console.log('method: a streaming loader whose pool comes to hold every sample turns resident (the pool is copied into contiguous columns once); its rows then all count as served on the device.');
  for (const r of ratios) {
    console.log(`${r.label.padEnd(52)} ${r.value.toFixed(3).padStart(8)}   ${r.goal ? `goal ${r.goal}: ${flags.quick ? 'not judged (--quick)' : r.met ? 'met' : 'not met'}` : ''}`);
  }
}
