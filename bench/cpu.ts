// CPU throughput: a CIFAR-shaped in-memory dataset (uint8 [3, 32, 32] image + int32 label per
// sample), batch 256, shuffled, dropLast, read through Stoker's resident and streaming pipelines,
// through the per-sample path, by a hand-written gather loop (the ceiling) and by tf.data (the peer).
// The rule: every contender runs in this one process, and the verdict is the ratio lines at the end.
//
// How it measures (printed with the results, so a reader of the output needs nothing else):
// - Stoker and the hand loop run interleaved, one epoch each per round, the starting contender
//   rotating, after warm-up rounds; a contender's figure is its median epoch. Every timed epoch is a
//   fresh shuffle (epoch index = round), so each epoch's time includes computing its permutation.
// - Each batch is consumed lightly (first image byte + sum of labels) and released. Stoker, the
//   per-sample path and the hand loop see the same order (seed 42), so their checksums must agree
//   epoch by epoch; a mismatch aborts the bench.
// - tf.data is timed over a subset, a whole pass from iterator creation to the last batch, best of
//   the timed passes (generous to the peer).

import type { Batch } from '../src/index.js';
import { DataLoader, RandomSampler, sources, tensor } from '../src/index.js';
import type { Column } from './util.js';
import { fmtFixed, fmtInt, hardware, hardwareLine, median, now, parseFlags, sink, table } from './util.js';

const C = 3;
const H = 32;
const W = 32;
const ROW = C * H * W;
const BATCH = 256;
const SEED = 42;
const DATA_SEED = 0x5eed;

interface Config {
  readonly samples: number;
  readonly warmupRounds: number;
  readonly rounds: number;
  /** tf.data: samples per timed pass (a multiple of BATCH, so dropLast leaves no tensor undisposed). */
  readonly tfSubset: number;
  readonly tfShuffleBuffer: number;
  readonly tfWarmupSubset: number;
  readonly tfPasses: number;
}

const DEFAULT: Config = { samples: 50_000, warmupRounds: 5, rounds: 40, tfSubset: 20_480, tfShuffleBuffer: 10_000, tfWarmupSubset: 2_560, tfPasses: 3 };
const QUICK: Config = { samples: 5_000, warmupRounds: 10, rounds: 15, tfSubset: 2_560, tfShuffleBuffer: 1_000, tfWarmupSubset: 512, tfPasses: 1 };

interface Data {
  readonly images: Uint8Array;
  readonly labels: Int32Array;
}

/** Seeded random bytes (xorshift32, a word at a time) and labels 0–9. */
function makeData(n: number): Data {
  const images = new Uint8Array(n * ROW);
  const words = new Uint32Array(images.buffer, 0, images.length >>> 2);
  let s = DATA_SEED | 0;
  for (let i = 0; i < words.length; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    words[i] = s;
  }
  const labels = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    labels[i] = (s >>> 0) % 10;
  }
  return { images, labels };
}

interface EpochResult {
  readonly rows: number;
  readonly checksum: number;
}

interface Contender {
  readonly key: string;
  readonly name: string;
  readonly note: string;
  runEpoch(epoch: number): EpochResult | Promise<EpochResult>;
  close(): Promise<void>;
}

/** The consumer every Stoker contender uses: touch the batch lightly, then release it. */
async function stokerEpoch(loader: DataLoader, epoch: number): Promise<EpochResult> {
  let rows = 0;
  let checksum = 0;
  for await (const batch of loader.epoch(epoch)) {
    checksum += touch(batch);
    rows += batch.rows;
    batch.release();
  }
  return { rows, checksum };
}

function touch(batch: Batch): number {
  const image = batch.get('image').data as Uint8Array;
  const label = batch.get('label').data as Int32Array | Float64Array;
  let acc = image[0]!;
  for (let r = 0; r < label.length; r++) acc += label[r]!;
  return acc;
}

async function stokerArrays(data: Data, mode: 'resident' | 'streaming'): Promise<Contender> {
  const source = sources.arrays({ image: tensor(data.images, [data.labels.length, C, H, W]), label: data.labels });
  const loader = await DataLoader.create(source, { batchSize: BATCH, mode, seed: SEED });
  if (loader.isResident !== (mode === 'resident')) throw new Error(`asked for mode ${mode}, got ${loader.stats().mode}`);
  return {
    key: mode,
    name: `Stoker ${mode}`,
    note: `sources.arrays, mode: '${mode}'`,
    runEpoch: (e) => stokerEpoch(loader, e),
    close: () => loader.close(),
  };
}

async function stokerPerSample(data: Data): Promise<Contender> {
  const { images, labels } = data;
  const dataset = {
    length: labels.length,
    get(i: number) {
      return { image: images.subarray(i * ROW, (i + 1) * ROW), label: labels[i]! };
    },
  };
  const loader = await DataLoader.create(dataset, { batchSize: BATCH, mode: 'streaming', seed: SEED });
  return {
    key: 'perSample',
    name: 'Stoker streaming, per-sample get(i)',
    note: 'get(i) → { image: Uint8Array view [3072], label: number (float64) }',
    runEpoch: (e) => stokerEpoch(loader, e),
    close: () => loader.close(),
  };
}

/**
 * The ceiling: the same permutation (Stoker's RandomSampler, seed 42, recomputed every epoch as
 * Stoker does), rows copied with `set(subarray)`, labels with an element loop, into two preallocated
 * buffer pairs used alternately — the equivalent of Stoker's recycling pool when batches are released.
 */
function handLoop(data: Data): Contender {
  const { images, labels } = data;
  const n = labels.length;
  const sampler = new RandomSampler(n, SEED);
  const imageBufs = [new Uint8Array(BATCH * ROW), new Uint8Array(BATCH * ROW)] as const;
  const labelBufs = [new Int32Array(BATCH), new Int32Array(BATCH)] as const;
  return {
    key: 'hand',
    name: 'hand-written gather loop',
    note: 'sync; 2 reused buffer pairs; set(subarray) per row',
    runEpoch(epoch: number): EpochResult {
      const order = sampler.indices(epoch);
      const batches = Math.floor(n / BATCH);
      let rows = 0;
      let checksum = 0;
      for (let b = 0; b < batches; b++) {
        const img = imageBufs[b & 1]!;
        const lab = labelBufs[b & 1]!;
        const base = b * BATCH;
        for (let r = 0; r < BATCH; r++) {
          const id = order[base + r]!;
          img.set(images.subarray(id * ROW, id * ROW + ROW), r * ROW);
          lab[r] = labels[id]!;
        }
        let acc = img[0]!;
        for (let r = 0; r < BATCH; r++) acc += lab[r]!;
        checksum += acc;
        rows += BATCH;
      }
      return { rows, checksum };
    },
    close: async () => {},
  };
}

interface Row {
  readonly key: string;
  readonly name: string;
  readonly note: string;
  readonly samplesPerSec: number;
  /** Median epoch (fast contenders); undefined for tf.data (timed over a subset). */
  readonly msPerEpoch: number | undefined;
  readonly msMin: number | undefined;
  readonly msMax: number | undefined;
  readonly timed: string;
}

async function measureFast(contenders: readonly Contender[], cfg: Config, expectRows: number, log: (s: string) => void): Promise<Row[]> {
  const times = contenders.map(() => [] as number[]);
  const total = cfg.warmupRounds + cfg.rounds;
  for (let round = 0; round < total; round++) {
    const checksums = new Map<string, number>();
    for (let k = 0; k < contenders.length; k++) {
      const i = (round + k) % contenders.length;
      const c = contenders[i]!;
      const t0 = now();
      const res = await c.runEpoch(round);
      const ms = now() - t0;
      if (res.rows !== expectRows) throw new Error(`${c.name}: epoch ${round} delivered ${res.rows} rows, expected ${expectRows}`);
      checksums.set(c.name, res.checksum);
      sink.value += res.checksum;
      if (round >= cfg.warmupRounds) times[i]!.push(ms);
    }
    const distinct = new Set(checksums.values());
    if (distinct.size !== 1) {
      throw new Error(`epoch ${round}: contenders disagree on what they delivered: ${[...checksums].map(([n, s]) => `${n}=${s}`).join(', ')}`);
    }
    log(`  round ${round + 1}/${total}${round < cfg.warmupRounds ? ' (warm-up)' : ''}`);
  }
  return contenders.map((c, i) => {
    const ts = times[i]!;
    const ms = median(ts);
    return {
      key: c.key,
      name: c.name,
      note: c.note,
      samplesPerSec: expectRows / (ms / 1000),
      msPerEpoch: ms,
      msMin: Math.min(...ts),
      msMax: Math.max(...ts),
      timed: `median of ${ts.length} epochs`,
    };
  });
}

interface TfReport {
  readonly row: Row;
  readonly version: string;
  readonly subset: number;
  readonly shuffleBuffer: number;
  readonly passesMs: readonly number[];
  readonly tensorsBefore: number;
  readonly tensorsMax: number;
  readonly tensorsAfter: number;
}

/** tf.data over the first `cfg.tfSubset` samples: generator → shuffle → batch(256, no short batch) → prefetch(2). */
async function measureTfData(data: Data, cfg: Config, log: (s: string) => void): Promise<TfReport> {
  const tf = await import('@tensorflow/tfjs');
  // Production mode, as tfjs advises for speed; it also silences the "install tfjs-node" banner.
  tf.enableProdMode();
  await tf.setBackend('cpu');
  await tf.ready();
  const { images, labels } = data;

  type Element = { image: import('@tensorflow/tfjs').Tensor; label: import('@tensorflow/tfjs').Tensor };
  const pass = async (count: number, buffer: number): Promise<{ ms: number; rows: number; maxTensors: number }> => {
    const t0 = now();
    const ds = tf.data
      .generator(function* () {
        for (let i = 0; i < count; i++) {
          // tfjs has no uint8 dtype: the image becomes int32, as a tfjs user would store it.
          yield { image: tf.tensor(images.subarray(i * ROW, (i + 1) * ROW), [C, H, W], 'int32'), label: tf.scalar(labels[i]!, 'int32') };
        }
      })
      .shuffle(buffer, String(SEED))
      .batch(BATCH, false)
      .prefetch(2);
    const it = await ds.iterator();
    let rows = 0;
    let maxTensors = 0;
    let checksum = 0;
    for (;;) {
      const r = await it.next();
      if (r.done) break;
      const batch = r.value as Element;
      const image = batch.image.dataSync();
      const label = batch.label.dataSync();
      let acc = image[0]!;
      for (let k = 0; k < label.length; k++) acc += label[k]!;
      checksum += acc;
      rows += batch.label.shape[0]!;
      maxTensors = Math.max(maxTensors, tf.memory().numTensors);
      tf.dispose(batch);
    }
    sink.value += checksum;
    return { ms: now() - t0, rows, maxTensors };
  };

  const tensorsBefore = tf.memory().numTensors;
  log(`  tf.data warm-up pass (${cfg.tfWarmupSubset} samples)`);
  await pass(cfg.tfWarmupSubset, Math.min(cfg.tfShuffleBuffer, cfg.tfWarmupSubset));
  const passesMs: number[] = [];
  let maxTensors = 0;
  for (let p = 0; p < cfg.tfPasses; p++) {
    log(`  tf.data timed pass ${p + 1}/${cfg.tfPasses} (${cfg.tfSubset} samples)`);
    const r = await pass(cfg.tfSubset, cfg.tfShuffleBuffer);
    if (r.rows !== cfg.tfSubset) throw new Error(`tf.data delivered ${r.rows} rows, expected ${cfg.tfSubset}`);
    passesMs.push(r.ms);
    maxTensors = Math.max(maxTensors, r.maxTensors);
  }
  const tensorsAfter = tf.memory().numTensors;
  const best = Math.min(...passesMs);
  return {
    row: {
      key: 'tfdata',
      name: `tf.data (tfjs ${tf.version.tfjs}, cpu)`,
      note: `first ${cfg.tfSubset} samples, shuffle(${cfg.tfShuffleBuffer}), image int32`,
      samplesPerSec: cfg.tfSubset / (best / 1000),
      msPerEpoch: undefined,
      msMin: undefined,
      msMax: undefined,
      timed: `best of ${passesMs.length} whole pass${passesMs.length === 1 ? '' : 'es'} over a subset`,
    },
    version: tf.version.tfjs,
    subset: cfg.tfSubset,
    shuffleBuffer: cfg.tfShuffleBuffer,
    passesMs,
    tensorsBefore,
    tensorsMax: maxTensors,
    tensorsAfter,
  };
}

interface Ratio {
  readonly label: string;
  readonly value: number;
  readonly goal: number | undefined;
}

export async function main(args: readonly string[]): Promise<void> {
  const flags = parseFlags(args, ['json', 'quick'], 'npm run bench -- cpu [--json] [--quick]');
  const cfg = flags.quick ? QUICK : DEFAULT;
  const log = flags.json ? (_: string) => {} : (s: string) => process.stderr.write(`${s}\n`);
  const hw = hardware();
  if (!flags.json) console.log(`hardware: ${hardwareLine(hw)}`);

  const t0 = now();
  const data = makeData(cfg.samples);
  const genMs = now() - t0;
  const epochRows = Math.floor(cfg.samples / BATCH) * BATCH;
  if (!flags.json) {
    console.log(
      `dataset: ${fmtInt(cfg.samples)} samples × (uint8 [${C}, ${H}, ${W}] + int32 label), ${fmtInt(megabytes(cfg.samples))} MB, generated in ${genMs.toFixed(0)} ms; ` +
        `batch ${BATCH}, shuffled (seed ${SEED}), dropLast → ${fmtInt(epochRows)} samples/epoch`,
    );
  }

  const contenders: Contender[] = [
    await stokerArrays(data, 'resident'),
    await stokerArrays(data, 'streaming'),
    await stokerPerSample(data),
    handLoop(data),
  ];
  log(`fast contenders: ${cfg.warmupRounds} warm-up + ${cfg.rounds} timed rounds, one epoch each per round`);
  const fast = await measureFast(contenders, cfg, epochRows, log);
  for (const c of contenders) await c.close();
  const tf = await measureTfData(data, cfg, log);

  const rows = [...fast, tf.row];
  const hand = rows.find((r) => r.key === 'hand')!;
  const by = (key: string) => rows.find((r) => r.key === key)!.samplesPerSec;
  const ratios: Ratio[] = [
    { label: 'resident / hand loop', value: by('resident') / by('hand'), goal: 0.8 },
    { label: 'resident / tf.data', value: by('resident') / by('tfdata'), goal: 30 },
    { label: 'streaming / hand loop', value: by('streaming') / by('hand'), goal: undefined },
    { label: 'streaming / tf.data', value: by('streaming') / by('tfdata'), goal: undefined },
    { label: 'per-sample streaming / hand loop', value: by('perSample') / by('hand'), goal: undefined },
  ];

  if (flags.json) {
    console.log(
      JSON.stringify(
        {
          bench: 'cpu',
          hardware: hw,
          config: { ...cfg, batchSize: BATCH, seed: SEED, sampleShape: [C, H, W], epochRows, quick: flags.quick },
          contenders: rows,
          tfjs: { version: tf.version, subset: tf.subset, shuffleBuffer: tf.shuffleBuffer, passesMs: tf.passesMs, tensorsBefore: tf.tensorsBefore, tensorsMax: tf.tensorsMax, tensorsAfter: tf.tensorsAfter },
          ratios: Object.fromEntries(ratios.map((r) => [r.label, { value: r.value, goal: r.goal ?? null, met: r.goal === undefined || flags.quick ? null : r.value >= r.goal }])),
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
    { title: 'samples/s', align: 'right', cell: (r) => fmtInt(r.samplesPerSec) },
    { title: 'ms/epoch', align: 'right', cell: (r) => fmtFixed(r.msPerEpoch, 1) },
    { title: 'min–max ms', align: 'right', cell: (r) => (r.msMin === undefined ? '—' : `${r.msMin.toFixed(1)}–${r.msMax!.toFixed(1)}`) },
    { title: 'timed', cell: (r) => r.timed },
    { title: 'notes', cell: (r) => r.note },
  ];
  console.log('');
  console.log(table(rows, columns));
  console.log('');
  console.log(
    `method: Stoker and the hand loop run interleaved (one epoch each per round, ${cfg.warmupRounds} warm-up + ${cfg.rounds} timed rounds); ` +
      'each epoch reshuffles (permutation time included), each batch is touched (first image byte + label sum) and released; ' +
      'their checksums agreed every epoch.',
  );
  console.log(
    'method: tf.data yields one tf.tensor per field per sample (image int32: tfjs has no uint8), shuffle → batch(256, no short batch) → prefetch(2); ' +
      'a pass runs from iterator creation to the last batch (shuffle-buffer fill included), batches disposed; prod mode, cpu backend.',
  );
  console.log(
    `tf.data: ${tf.subset} samples per pass (${tf.passesMs.map((m) => `${m.toFixed(0)} ms`).join(', ')}); shuffle buffer ${tf.shuffleBuffer}; ` +
      `tensors live: ${tf.tensorsBefore} before, max ${tf.tensorsMax} during, ${tf.tensorsAfter} after`,
  );
  const batches = epochRows / BATCH;
  for (const key of ['resident', 'streaming', 'perSample']) {
    const row = rows.find((r) => r.key === key)!;
    const extra = row.msPerEpoch! - hand.msPerEpoch!;
    console.log(`${row.name} − hand loop: ${extra >= 0 ? '+' : ''}${extra.toFixed(2)} ms/epoch = ${((extra * 1000) / batches).toFixed(1)} µs per batch of ${BATCH}`);
  }
  console.log('');
  const width = Math.max(...ratios.map((r) => r.label.length));
  for (const r of ratios) {
    const value = r.value >= 10 ? r.value.toFixed(0) : r.value.toFixed(2);
    const verdict = flags.quick ? 'not judged (--quick is a smoke test)' : r.value >= r.goal! ? 'met' : 'NOT MET';
    const goal = r.goal === undefined ? '' : `   goal ≥ ${r.goal}: ${verdict}`;
    console.log(`${r.label.padEnd(width)}  ${value.padStart(6)}${goal}`);
  }
}

function megabytes(samples: number): number {
  return (samples * ROW) / 1e6;
}
