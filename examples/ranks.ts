// One rank of a multi-process run. Start it under the launcher you already use:
//
//   mpirun -np 2 node --import tsx examples/ranks.ts                       # Open MPI, CPU
//   torchrun --nproc-per-node 2 --no-python node --import tsx examples/ranks.ts --device cuda
//   srun -n 4 node --import tsx examples/ranks.ts
//
// Open MPI (4.1) refuses to run as root without --allow-run-as-root, and refuses more ranks than
// cores (its default slots) without --oversubscribe: as root on 2 cores, 4 ranks is
//   mpirun --allow-run-as-root --oversubscribe -np 4 node --import tsx examples/ranks.ts
//
// Every rank builds the same CIFAR-shaped dataset (uint8 [3, 32, 32] + int32 label = the sample id),
// reads its share of each epoch's global order through a streaming loader, and prints one JSON line:
// rank, world, batches, samples/s. Options for tests and benchmarks:
//   --out DIR          write rank-<r>.json with the sample ids this rank received, in order
//   --stop-after K     stop after K batches of the first epoch and write the loader's state to --state
//   --state FILE       where --stop-after writes the state (rank 0 writes it)
//   --resume FILE      continue from a saved state
//   --warmup K         leave the first K epochs out of the timing
//   --no-vram-pool     stream every byte from the host every epoch (CUDA)

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { DataLoader, Tensor, sources, tensor } from '../src/index.js';

const { values: args } = parseArgs({
  options: {
    samples: { type: 'string', default: '20000' },
    batch: { type: 'string', default: '256' },
    epochs: { type: 'string', default: '2' },
    warmup: { type: 'string', default: '0' },
    seed: { type: 'string', default: '7' },
    device: { type: 'string', default: 'cpu' },
    shards: { type: 'string', default: 'pad' },
    workers: { type: 'string', default: '0' },
    'drop-last': { type: 'boolean', default: false },
    'no-vram-pool': { type: 'boolean', default: false },
    out: { type: 'string' },
    'stop-after': { type: 'string' },
    state: { type: 'string' },
    resume: { type: 'string' },
  },
});

const n = Number(args.samples);
const shape = [3, 32, 32];
const rowBytes = 3 * 32 * 32;
const images = new Uint8Array(n * rowBytes);
for (let i = 0; i < n; i++) images.fill(i & 0xff, i * rowBytes, (i + 1) * rowBytes);
const dataset = sources.arrays({ image: tensor(images, [n, ...shape]), label: Int32Array.from({ length: n }, (_, i) => i) });

const resume = args.resume !== undefined ? JSON.parse(readFileSync(args.resume, 'utf8')) : undefined;
const loader = await DataLoader.create(dataset, {
  batchSize: Number(args.batch),
  seed: Number(args.seed),
  device: args.device,
  mode: 'streaming',
  workers: args.workers === 'auto' ? 'auto' : Number(args.workers),
  shards: args.shards as 'pad' | 'drop',
  dropLast: args['drop-last'],
  vramPool: !args['no-vram-pool'],
  resume,
});
const { rank, worldSize, launcher } = loader.world;
const stopAfter = args['stop-after'] !== undefined ? Number(args['stop-after']) : undefined;
const ids: number[][] = [];
const first = resume?.epoch ?? 0;
const epochs = Number(args.epochs);
const warmup = Number(args.warmup);
let samples = 0;
let batches = 0;
let t0 = performance.now();
let stopped = false;
const epochSeconds: number[] = [];
for (let e = first; e < first + epochs && !stopped; e++) {
  if (e === first + warmup) {
    samples = 0;
    batches = 0;
    await loader.synchronize();
    t0 = performance.now();
  }
  const te = performance.now();
  const epochIds: number[] = [];
  ids.push(epochIds);
  for await (const batch of loader.epoch(e)) {
    // On the CPU the labels (the content) must match the ids the loader says it delivered.
    const label = batch.get('label');
    if (label instanceof Tensor && (label.data as Int32Array).some((v, r) => v !== batch.sampleIds[r])) throw new Error(`rank ${rank}: batch ${batch.index} content does not match its sample ids`);
    for (const id of batch.sampleIds) epochIds.push(id);
    samples += batch.rows;
    batches++;
    batch.release();
    if (stopAfter !== undefined && e === first && batches === stopAfter) {
      stopped = true;
      break;
    }
  }
  await loader.synchronize();
  if (e >= first + warmup) epochSeconds.push((performance.now() - te) / 1000);
}
await loader.synchronize();
const seconds = (performance.now() - t0) / 1000;
if (stopped && args.state !== undefined && rank === 0) writeFileSync(args.state, JSON.stringify(loader.state()));
if (args.out !== undefined) {
  mkdirSync(args.out, { recursive: true });
  writeFileSync(join(args.out, `rank-${rank}.json`), JSON.stringify({ rank, worldSize, epochs: ids, firstEpoch: first }));
}
console.log(JSON.stringify({ rank, worldSize, launcher, device: loader.device, batches, samples, seconds, samplesPerSecond: samples / seconds, epochSeconds }));
await loader.close();
