// `npm start`: the main job on the CPU. Builds a CIFAR-shaped in-memory dataset (50 000 × 3×32×32
// uint8 images + int32 labels), and runs three shuffled epochs with two augmented views per sample
// (random crop with 4-pixel zero padding and a horizontal flip, keyed per pick), printing each
// epoch's throughput and the loader's figures.
//
//   npm start                      # the defaults above
//   npm start -- --samples 5000 --epochs 2 --mode streaming

import { parseArgs } from 'node:util';
import { DataLoader, sources, tensor, transforms } from '../index.js';

const { values: args } = parseArgs({
  options: {
    samples: { type: 'string', default: '50000' },
    epochs: { type: 'string', default: '3' },
    'batch-size': { type: 'string', default: '256' },
    augment: { type: 'string', default: '2' },
    mode: { type: 'string', default: 'auto' },
  },
});

const n = positiveInt('samples', args.samples);
const epochs = positiveInt('epochs', args.epochs);
const batchSize = positiveInt('batch-size', args['batch-size']);
const augment = positiveInt('augment', args.augment);
const mode = args.mode as 'auto' | 'resident' | 'streaming';

const C = 3;
const H = 32;
const W = 32;
const PAD = 4;

/** A dataset with structure: each class is a colour gradient, each sample adds its own noise. */
function cifarShaped(count: number) {
  const rowBytes = C * H * W;
  const templates = new Uint8Array(10 * rowBytes);
  for (let label = 0; label < 10; label++) {
    for (let c = 0; c < C; c++) {
      for (let y = 0; y < H; y++) {
        for (let x = 0; x < W; x++) templates[label * rowBytes + (c * H + y) * W + x] = (label * 25 + c * 40 + x * 2 + y) & 0xff;
      }
    }
  }
  const images = new Uint8Array(count * rowBytes);
  const labels = new Int32Array(count);
  const words = new Uint32Array(images.buffer);
  let state = 0x2545f491;
  for (let i = 0; i < count; i++) {
    const label = i % 10;
    labels[i] = label;
    images.set(templates.subarray(label * rowBytes, (label + 1) * rowBytes), i * rowBytes);
    // Low-amplitude noise: xor the low 4 bits of every byte with a xorshift stream.
    for (let w = (i * rowBytes) / 4, end = w + rowBytes / 4; w < end; w++) {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      words[w]! ^= state & 0x0f0f0f0f;
    }
  }
  return sources.arrays({ image: tensor(images, [count, C, H, W]), label: labels });
}

const t0 = performance.now();
const dataset = cifarShaped(n);
const buildMs = performance.now() - t0;
// The built-in keyed image pipeline: random crop with 4 pixels of zero padding and a horizontal flip.
const transform = transforms.image({ crop: { padding: PAD }, flip: true });
const loader = await DataLoader.create(dataset, { batchSize, augment, transform, mode, seed: 42 });
console.log(`Stoker demo — ${n.toLocaleString('en-US')} CIFAR-shaped samples (3×32×32 uint8 + label), generated in ${buildMs.toFixed(0)} ms`);
console.log(`device ${loader.device}, ${loader.isResident ? 'resident' : 'streaming'} mode, batch ${batchSize}, augment ×${augment} (crop + flip), ${loader.numBatches} batches per epoch\n`);

const header = ['epoch', 'batches', 'samples/s', 'epoch s', 'wait %', 'transform %', 'label checksum'];
const widths = [5, 7, 10, 7, 6, 11, 14];
console.log(header.map((h, i) => h.padStart(widths[i]!)).join('  '));
for (let e = 0; e < epochs; e++) {
  const start = performance.now();
  let checksum = 0;
  for await (const batch of loader.epoch(e)) {
    const labels = batch.get('label').data as Int32Array;
    for (let i = 0; i < labels.length; i++) checksum = (checksum * 31 + labels[i]!) >>> 0;
    batch.release();
  }
  const seconds = (performance.now() - start) / 1000;
  const s = loader.stats().epochs.at(-1)!;
  const cells = [
    String(e), String(s.batches), Math.round(s.rowsDelivered / seconds).toLocaleString('en-US'), seconds.toFixed(2),
    ((100 * (s.waitMs - s.transformMs)) / (seconds * 1000)).toFixed(1), ((100 * s.transformMs) / (seconds * 1000)).toFixed(1),
    checksum.toString(16).padStart(8, '0'),
  ];
  console.log(cells.map((c, i) => c.padStart(widths[i]!)).join('  '));
}
console.log('\nwait % = time the loop waited on the loader for gathers (transform excluded); transform % = time in the augmentation.');
console.log('The label checksum differs per epoch (fresh shuffle) and repeats run to run (seeded).');
await loader.close();

function positiveInt(name: string, value: string | undefined): number {
  const v = Number(value);
  if (!Number.isSafeInteger(v) || v < 1) {
    console.error(`stoker demo: --${name} must be an integer ≥ 1, got ${JSON.stringify(value)}`);
    process.exit(2);
  }
  return v;
}
