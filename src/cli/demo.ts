// `stoker demo` (and `npm start`): the main job in under a minute on a laptop CPU. Writes a small
// real dataset — PNG files in an image folder, ten classes of coloured shapes — to a temp folder,
// reads it with `sources.imageFolder` through a streaming loader (reader workers decode, the RAM
// cache serves later epochs, a keyed crop + flip + normalize transform), and trains a small
// TensorFlow.js classifier on it with `model.fitDataset` through the tfjs adapter; a second,
// unshuffled loader over the held-out split measures accuracy after every epoch. The rule: every
// figure printed comes from `loader.stats()` or from tfjs's own logs, never from a stopwatch of ours
// around the loader.

import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Command, Option } from 'commander';
import type * as tfjs from '@tensorflow/tfjs';
import { toTfDataset } from '../adapters/tfjs.js';
import { DataLoader } from '../loader.js';
import { sources } from '../dataset/sources.js';
import { transforms } from '../transforms/transforms.js';
import type { EpochStats } from '../pipeline/stats.js';
import { type EpochFigures, bytes, epochFigures, int, pct } from '../report/figures.js';
import { type DeviceName, deviceArg, intArg, workersArg } from './args.js';
import { onCleanup } from './cleanup.js';
import { UsageError } from './errors.js';
import { SHAPE_CLASSES, writeShapesDataset } from './demo-data.js';
import { type TfBackendChoice, TF_BACKENDS, loadTf } from './tf.js';
import { NO_PROGRESS, type Progress, Ui, pairs, table } from './ui.js';

export interface DemoOptions {
  readonly samples: number;
  readonly epochs: number;
  readonly batchSize: number;
  readonly size: number;
  readonly device: DeviceName;
  readonly backend: TfBackendChoice;
  readonly workers: number | 'auto';
  readonly dir: string | undefined;
  readonly seed: number;
  readonly json: boolean;
  readonly progress: boolean;
}

const HIDDEN = 64;
const LEARNING_RATE = 2e-3;
/** Per-channel mean and std of the shapes images on the [0, 1] scale (dark backgrounds, bright shapes). */
const NORMALIZE = { mean: [0.25, 0.25, 0.25], std: [0.3, 0.3, 0.3] } as const;

export function demoCommand(): Command {
  return new Command('demo')
    .description('train a small image classifier with TensorFlow.js, fed by Stoker, on a dataset of PNG files it writes to a temp folder')
    .addOption(new Option('--samples <n>', 'training images (a quarter as many more are held out)').default(4000).argParser(intArg(10)))
    .addOption(new Option('--epochs <n>', 'training epochs').default(5).argParser(intArg(1, 1000)))
    .addOption(new Option('--batch-size <n>', 'images per batch').default(64).argParser(intArg(1, 65536)))
    .addOption(new Option('--size <px>', 'image side in pixels').default(32).argParser(intArg(8, 256)))
    .addOption(new Option('--device <name>', "where the loader delivers batches: cpu, cuda, cuda:N, sim (tfjs trains on the CPU; batches on a GPU are copied to it)").default('cpu').argParser(deviceArg))
    .addOption(new Option('--backend <name>', 'TensorFlow.js backend (auto: wasm when it loads, else cpu)').default('auto').choices(TF_BACKENDS))
    .addOption(new Option('--workers <n>', "reader threads that decode the PNGs ('auto' = cores − 1)").default('auto').argParser(workersArg))
    .addOption(new Option('--dir <path>', 'write the dataset here and keep it (default: a temp folder, removed at the end)'))
    .addOption(new Option('--seed <n>', 'shuffle, augmentation and dataset seed').default(42).argParser(intArg(0, 2 ** 32 - 1)))
    .option('--json', 'print one JSON document (figures per epoch, loader.stats()) instead of text')
    .option('--no-progress', 'no progress bars (they only show on a terminal anyway)')
    .addHelpText('after', `
Examples:
  stoker demo                              the defaults: 4 000 + 1 000 images, 5 epochs, on the CPU
  stoker demo --samples 20000 --epochs 10  longer
  stoker demo --device cuda                batches from the GPU (the model still trains with tfjs on the CPU)
  stoker demo --json > demo.json           figures for a script`)
    .action(async (opts: DemoOptions) => {
      await runDemo(opts, new Ui({ json: opts.json === true, progress: opts.progress }));
    });
}

interface EpochRow extends EpochFigures {
  readonly loss: number;
  readonly accuracy: number;
  readonly heldOutAccuracy: number;
}

export async function runDemo(opts: DemoOptions, ui: Ui): Promise<void> {
  if (opts.samples < opts.batchSize) throw new UsageError(`--samples (${opts.samples}) must be at least --batch-size (${opts.batchSize}): an epoch drops its short last batch`);
  if (opts.dir !== undefined && existsSync(opts.dir) && readdirSync(opts.dir).length > 0) {
    throw new UsageError(`--dir ${opts.dir} is not empty: give a new or empty folder (the demo never deletes what it did not write)`);
  }
  const t0 = performance.now();
  const testCount = Math.max(SHAPE_CLASSES.length, Math.round(opts.samples / 4));
  const dir = opts.dir !== undefined ? resolve(opts.dir) : mkdtempSync(join(tmpdir(), 'stoker-demo-'));
  const removeDir = opts.dir === undefined ? onCleanup(() => rmSync(dir, { recursive: true, force: true })) : () => {};
  const closers: (() => Promise<void>)[] = [];
  try {
    // The optional peer first: without TensorFlow.js the demo says so before it writes anything.
    const { tf, backend, note } = await loadTf(opts.backend);
    ui.line('Stoker demo — a small image classifier trained with TensorFlow.js, fed by Stoker');
    ui.line('');
    const files = opts.samples + testCount;
    const writing = ui.task(
      `dataset   writing ${int(files)} PNG files (${int(opts.samples)} to train on, ${int(testCount)} held out) with sharp to ${dir} …`,
      '          {bar} {percentage}% | {value}/{total} files', files);
    const data = await writeShapesDataset(dir, { train: opts.samples, test: testCount, size: opts.size, seed: opts.seed, onProgress: (n) => writing.update(n, {}) });
    writing.stop();
    ui.line(`          written in ${(data.ms / 1000).toFixed(1)} s: ${data.classes.length} classes of coloured shapes, ${opts.size}×${opts.size} RGB, ${bytes(data.bytes)}${opts.dir === undefined ? ' (removed at the end)' : ''}`);

    const size = opts.size;
    const train = sources.imageFolder(data.trainDir, { size, channels: 3, layout: 'chw' });
    const test = sources.imageFolder(data.testDir, { size, channels: 3, layout: 'chw' });
    const augment = transforms.image({ crop: { padding: Math.max(1, Math.round(size / 16)) }, flip: true, normalize: NORMALIZE });
    const plain = transforms.image({ normalize: NORMALIZE });
    const common = { device: opts.device, mode: 'streaming', workers: opts.workers, seed: opts.seed } as const;
    const trainLoader = await DataLoader.create(train, { ...common, batchSize: opts.batchSize, transform: augment });
    closers.push(() => trainLoader.close());
    const testLoader = await DataLoader.create(test, { ...common, batchSize: Math.min(256, testCount), shuffle: false, dropLast: false, transform: plain });
    closers.push(() => testLoader.close());
    const workers = trainLoader.stats().workers;
    ui.line(`loader    sources.imageFolder → DataLoader: ${trainLoader.device}, streaming, ${workers === 0 ? 'reads on the main thread' : `${workers} reader worker${workers === 1 ? '' : 's'} decoding`}, RAM sample cache on,`);
    ui.line(`          batch ${opts.batchSize} (${trainLoader.numBatches} per epoch), keyed random crop + flip + normalize → float32; held-out split: a second loader, unshuffled`);

    const model = buildModel(tf, size);
    const parameters = model.countParams();
    ui.line(`model     TensorFlow.js ${tf.version.tfjs} (${backend} backend${note !== undefined ? `: ${note}` : ''}), MLP ${3 * size * size} → ${HIDDEN} → ${SHAPE_CLASSES.length}, ${int(parameters)} parameters, adam ${LEARNING_RATE}`);
    ui.line('');

    const trainSet = toTfDataset(trainLoader, { tf, x: 'image', y: 'label', oneHot: SHAPE_CLASSES.length });
    const testSet = toTfDataset(testLoader, { tf, x: 'image', y: 'label', oneHot: SHAPE_CLASSES.length });
    const rows: EpochRow[] = [];
    let bar: Progress = NO_PROGRESS;
    let lossSum = 0;
    let lossCount = 0;
    const current = (): EpochStats | undefined => trainLoader.stats().epochs.at(-1);
    await model.fitDataset(trainSet, {
      epochs: opts.epochs,
      validationData: testSet,
      verbose: 0,
      callbacks: {
        onEpochBegin: async (epoch) => {
          lossSum = 0;
          lossCount = 0;
          bar = ui.progress(`epoch ${epoch + 1}/${opts.epochs} {bar} {percentage}% | {rate} samples/s | wait {wait} | cache {cache} | loss {loss}`, trainLoader.numBatches, { rate: '—', wait: '—', cache: '—', loss: '—' });
        },
        onBatchEnd: async (batch, logs) => {
          if (typeof logs?.loss === 'number') {
            lossSum += logs.loss;
            lossCount++;
          }
          const s = current();
          if (s === undefined) return;
          const f = epochFigures(s);
          bar.update(batch + 1, { rate: int(f.samplesPerSec), wait: pct(f.waitPct, 0), cache: pct(f.hitPct, 0), loss: (lossSum / Math.max(1, lossCount)).toFixed(3) });
        },
        onEpochEnd: async (epoch, logs) => {
          bar.stop();
          const s = trainLoader.stats().epochs.find((e) => e.epoch === trainSet.nextEpoch - 1);
          if (s === undefined) throw new Error(`no loader figures for epoch ${epoch}`);
          const row: EpochRow = {
            ...epochFigures(s),
            epoch,
            loss: Number(logs?.loss ?? Number.NaN),
            accuracy: Number(logs?.acc ?? Number.NaN),
            heldOutAccuracy: Number(logs?.val_acc ?? Number.NaN),
          };
          rows.push(row);
          ui.line(epochLine(row, opts.epochs));
        },
      },
    });
    model.dispose();
    const final = rows.at(-1)!;
    const totalSeconds = (performance.now() - t0) / 1000;
    const stats = trainLoader.stats();

    if (ui.json) {
      ui.emit({
        ok: true,
        command: 'demo',
        dataset: { dir, kept: opts.dir !== undefined, format: 'png', classes: data.classes, train: opts.samples, heldOut: testCount, size: [3, size, size], files: data.files, bytes: data.bytes, writeSeconds: data.ms / 1000 },
        loader: { device: trainLoader.device, mode: stats.mode, workers: stats.workers, batchSize: opts.batchSize, batchesPerEpoch: trainLoader.numBatches, transform: 'random crop + flip + normalize → float32' },
        tfjs: { version: tf.version.tfjs, backend },
        model: { layers: [3 * size * size, HIDDEN, SHAPE_CLASSES.length], parameters },
        epochs: rows,
        heldOutAccuracy: final.heldOutAccuracy,
        chance: 1 / SHAPE_CLASSES.length,
        totalSeconds,
        stats,
      });
      return;
    }
    ui.line('');
    ui.line(table(rows, [
      { title: 'epoch', align: 'right', cell: (r) => String(r.epoch + 1) },
      { title: 'samples/s', align: 'right', cell: (r) => int(r.samplesPerSec) },
      { title: 'loader wait', align: 'right', cell: (r) => pct(r.waitPct) },
      { title: 'cache hits', align: 'right', cell: (r) => pct(r.hitPct) },
      ...(rows.some((r) => (r.poolPct ?? 0) > 0) ? [{ title: 'of which VRAM pool', align: 'right' as const, cell: (r: EpochRow) => pct(r.poolPct) }] : []),
      { title: 'decoded from files', align: 'right', cell: (r) => pct(r.sourcePct) },
      { title: 'loss', align: 'right', cell: (r) => r.loss.toFixed(3) },
      { title: 'train acc', align: 'right', cell: (r) => pct(100 * r.accuracy) },
      { title: 'held-out acc', align: 'right', cell: (r) => pct(100 * r.heldOutAccuracy) },
    ]));
    ui.line('');
    ui.line(pairs([
      ['held-out accuracy', `${pct(100 * final.heldOutAccuracy)} after ${rows.length} epoch${rows.length === 1 ? '' : 's'} (chance: ${pct(100 / SHAPE_CLASSES.length, 0)}), on ${int(testCount)} images the model never trained on`],
      ['total', `${totalSeconds.toFixed(1)} s, writing the images included`],
    ]));
    ui.line('');
    ui.line('loader wait = share of the epoch the training loop spent waiting for its next batch (decode + transform it could not hide);');
    ui.line('cache hits = rows served already decoded (RAM sample cache; on a GPU also the VRAM pool): epoch 1 decodes every PNG, later epochs hit the cache.');
    ui.line('All figures: loader.stats() (docs/stats.md). Try --json, --epochs 10, --device cuda.');
  } finally {
    for (const close of closers.reverse()) await close();
    removeDir();
  }
}

function epochLine(r: EpochRow, epochs: number): string {
  return [
    `epoch ${r.epoch + 1}/${epochs}`,
    `${int(r.samplesPerSec).padStart(6)} samples/s`,
    `wait ${pct(r.waitPct, 0).padStart(5)}`,
    `cache ${pct(r.hitPct, 0).padStart(5)}`,
    `loss ${r.loss.toFixed(3)}`,
    `acc ${pct(100 * r.accuracy)}`,
    `held-out acc ${pct(100 * r.heldOutAccuracy)}`,
  ].join('  ');
}

function buildModel(tf: typeof tfjs, size: number): tfjs.Sequential {
  const model = tf.sequential();
  model.add(tf.layers.flatten({ inputShape: [3, size, size] }));
  model.add(tf.layers.dense({ units: HIDDEN, activation: 'relu' }));
  model.add(tf.layers.dense({ units: SHAPE_CLASSES.length, activation: 'softmax' }));
  model.compile({ optimizer: tf.train.adam(LEARNING_RATE), loss: 'categoricalCrossentropy', metrics: ['accuracy'] });
  return model;
}
