// Both sides of the shuffle trade (issue 34, docs/options.md#block-shuffle), on the orders the
// loader's own samplers compute — global (`shuffle: true`), block with a few windows
// (`shuffle: { window }`), shard-only (`shuffle: { within: false }`) — over a synthetic dataset of S
// shards × P samples, shard bytes nominal (nothing is read: the figures follow from the order):
//
// (a) Cost: bytes and requests per epoch per node through a node cache of ¼, ½ and 1× the dataset
//     that holds whole shards (a miss is one GET of a whole shard, as the remote node cache fetches)
//     and evicts the shard whose next use is furthest (Belady: exact, the order is known — the node
//     cache's `nextUse` policy). Simulated over epochs 0–2; the figure is epoch 1 (a warm cache, the
//     future known past it). One node: any number of ranks on it read the global order together.
//     W nodes of one rank each: a node reads its rank's share (distributed/shard.ts), batch B.
//     Reference: no cache, one ranged GET per sample (n requests, the dataset's bytes).
// (b) Quality: mean |Δposition| of consecutive picks over n/3 (its expectation for a uniform
//     order: 1 for global, near 0 for reading in order); and a small model's held-out loss curve —
//     a softmax linear model trained by plain SGD on Gaussian blobs of C classes, written class by
//     class (shards sorted by class, the common worst case for tar shards), loss measured at each
//     quarter epoch. Ratios against global last.
//
//   npm run bench -- shuffle [--shards 256] [--per-shard 1000] [--shard-mb 64] [--epochs 2] [--windows 2,8,32] [--quick]

import { parseArgs } from 'node:util';
import { shardPicks } from '../src/distributed/shard.js';
import { BlockSampler, fixedBlockStarts } from '../src/sampler/block-sampler.js';
import { RandomSampler } from '../src/sampler/random-sampler.js';
import { Rng, toU64 } from '../src/sampler/rng.js';
import { fmtFixed, fmtInt, hardwareLine, table, UsageError } from './util.js';

const USAGE = 'shuffle [--shards S] [--per-shard P] [--shard-mb MB] [--epochs E] [--windows 2,8,32] [--quick]';
const SEED = toU64(42);
const NODES = 8;
const BATCH = 32;
const CLASSES = 10;
const DIM = 16;

interface Order {
  readonly name: string;
  /** A built-in sampler: its orders are Uint32Arrays. */
  readonly sampler: { readonly length: number; indices(epoch: number): Uint32Array };
  /** The order the loader makes on NODES nodes, when it differs (the block shuffle's streams). */
  readonly nodes?: { indices(epoch: number): Uint32Array };
}

export async function main(args: readonly string[]): Promise<void> {
  let v: Record<string, string | boolean | undefined>;
  try {
    ({ values: v } = parseArgs({
      args: [...args], strict: true,
      options: { shards: { type: 'string' }, 'per-shard': { type: 'string' }, 'shard-mb': { type: 'string' }, epochs: { type: 'string' }, windows: { type: 'string' }, quick: { type: 'boolean' } },
    }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nusage: ${USAGE}`);
  }
  const quick = v.quick === true;
  const shards = Number(v.shards ?? (quick ? 64 : 256));
  const perShard = Number(v['per-shard'] ?? (quick ? 250 : 1000));
  const shardMb = Number(v['shard-mb'] ?? 64);
  const epochs = Number(v.epochs ?? 2);
  const windows = String(v.windows ?? '2,8,32').split(',').map(Number);
  if (![shards, perShard, shardMb, epochs, ...windows].every((x) => Number.isInteger(x) && x >= 1)) throw new UsageError(`flags take integers ≥ 1\nusage: ${USAGE}`);
  const n = shards * perShard;
  const starts = fixedBlockStarts(n, perShard);
  const orders: Order[] = [
    { name: 'global', sampler: new RandomSampler(n, SEED) },
    ...windows.map((window) => ({
      name: `block, window ${window}`,
      sampler: new BlockSampler(starts, n, 1, SEED, { window, within: true }),
      // As the loader lays it out on NODES nodes of one rank (NOTE [Blocks per node]): a stream of blocks per node.
      nodes: new BlockSampler(starts, n, 1, SEED, { window, within: true }, { streams: NODES, chunk: BATCH }),
    })),
    { name: 'shard-only', sampler: new BlockSampler(starts, n, 1, SEED, { window: 1, within: false }), nodes: new BlockSampler(starts, n, 1, SEED, { window: 1, within: false }, { streams: NODES, chunk: BATCH }) },
  ];
  console.log(hardwareLine());
  console.log(`data: ${shards} shards × ${perShard} samples, ${shardMb} MiB a shard nominal (${fmtInt((shards * shardMb) / 1024)} GiB); batch ${BATCH}; ${NODES} nodes of one rank share an epoch by the loader's sharding`);
  const t0 = performance.now();

  // (a) Cost.
  const shareOf = [0.25, 0.5, 1];
  const costRows = orders.map((o) => {
    const trace = [0, 1, 2].map((e) => o.sampler.indices(e));
    const one = shareOf.map((s) => belady(trace.map((t) => shardsOf(t, perShard)), Math.round(s * shards), 1));
    const nodeTrace = o.nodes === undefined ? trace : [0, 1, 2].map((e) => o.nodes!.indices(e));
    const perNode = shareOf.map((s) => {
      let misses = 0;
      for (let rank = 0; rank < NODES; rank++) {
        const mine = nodeTrace.map((t) => shardPicks(t, { rank, worldSize: NODES, batchSize: BATCH, position: 0, shards: 'drop' }));
        misses += belady(mine.map((t) => shardsOf(t, perShard)), Math.round(s * shards), 1);
      }
      return misses / NODES;
    });
    return { name: o.name, one, perNode };
  });
  const gib = (misses: number) => (misses * shardMb) / 1024;
  console.log(`\n(a) per epoch (epoch 1 of 0–2), per node: whole-shard GETs and GiB through a node cache evicting by next use`);
  console.log(table(costRows, [
    { title: 'order', cell: (r) => r.name },
    ...shareOf.map((s, i) => ({ title: `1 node, cache ${s}×`, align: 'right' as const, cell: (r: (typeof costRows)[number]) => `${fmtInt(r.one[i]!)} GETs ${fmtFixed(gib(r.one[i]!), 0)} GiB` })),
    ...shareOf.map((s, i) => ({ title: `${NODES} nodes, cache ${s}×`, align: 'right' as const, cell: (r: (typeof costRows)[number]) => `${fmtInt(r.perNode[i]!)} GETs ${fmtFixed(gib(r.perNode[i]!), 0)} GiB` })),
  ]));
  console.log(`  no cache, a ranged GET per sample: ${fmtInt(n)} GETs and ${fmtFixed((shards * shardMb) / 1024, 0)} GiB an epoch on one node (${fmtInt(n / NODES)} GETs, ${fmtFixed((shards * shardMb) / 1024 / NODES, 1)} GiB per node of ${NODES}) whatever the order`);

  // (b) Quality.
  const data = blobs(n, perShard);
  const qualityRows = orders.map((o) => {
    const curve = train(o.sampler, data, epochs);
    const last = curve.slice(-4);
    return { name: o.name, delta: meanJump(o.sampler.indices(0)), classes: classesPerBatch(o.sampler.indices(0), data.label), curve, final: curve[curve.length - 1]!, lastEpoch: last.reduce((a, x) => a + x, 0) / last.length };
  });
  const global = qualityRows[0]!;
  console.log(`\n(b) shuffle quality: mean |Δposition| / (n/3); classes per batch of ${BATCH} (of ${CLASSES}); held-out loss of a softmax model (SGD, batch ${BATCH}) on class-sorted shards, each quarter epoch`);
  console.log(table(qualityRows, [
    { title: 'order', cell: (r) => r.name },
    { title: '|Δpos|/(n/3)', align: 'right', cell: (r) => fmtFixed(r.delta, 4) },
    { title: 'classes/batch', align: 'right', cell: (r) => fmtFixed(r.classes, 2) },
    { title: 'held-out loss, each ¼ epoch', cell: (r) => r.curve.map((x) => fmtFixed(x, 3)).join(' ') },
  ]));
  console.log(`  for scale: a uniform guess scores ln ${CLASSES} = ${fmtFixed(Math.log(CLASSES), 3)}; the curves are one seed's, so single points move by a few hundredths`);

  console.log('\nratios against global (the exact shuffle, measured in this run):');
  for (let i = 1; i < orders.length; i++) {
    const c = costRows[i]!;
    const q = qualityRows[i]!;
    const bytes = shareOf.map((_, k) => `${fmtFixed(ratio(c.one[k]!, costRows[0]!.one[k]!), 3)}`).join(' / ');
    const nodeBytes = shareOf.map((_, k) => `${fmtFixed(ratio(c.perNode[k]!, costRows[0]!.perNode[k]!), 3)}`).join(' / ');
    console.log(`  ${c.name.padEnd(16)} bytes ÷ global, cache ¼ / ½ / 1×: 1 node ${bytes}, ${NODES} nodes ${nodeBytes}; held-out loss ÷ global: final ${fmtFixed(q.final / global.final, 3)}, last epoch's mean ${fmtFixed(q.lastEpoch / global.lastEpoch, 3)}`);
  }
  console.log(`(${fmtFixed((performance.now() - t0) / 1000, 1)} s)`);
  console.log(JSON.stringify({ bench: 'shuffle', shards, perShard, shardMb, epochs, cost: costRows, quality: qualityRows }));
}

/** 0/0 (no GETs either way) reads as 1: the same cost. */
const ratio = (a: number, b: number) => (b === 0 ? (a === 0 ? 1 : Infinity) : a / b);

/** The shard of each pick. */
function shardsOf(picks: Uint32Array, perShard: number): Uint32Array {
  return picks.map((p) => Math.floor(p / perShard));
}

/**
 * Misses in epoch `measured` of a node cache of `capacity` whole shards over these epochs' shard
 * reads, evicting the shard whose next use is furthest (Belady's rule; a shard read must be cached
 * to be read, so every miss is inserted).
 */
function belady(epochs: readonly Uint32Array[], capacity: number, measured: number): number {
  // Consecutive reads of one shard are one read: a run in a block order.
  const seq: number[] = [];
  const epochOf: number[] = [];
  epochs.forEach((e, k) => {
    for (const s of e) {
      if (seq.length === 0 || seq[seq.length - 1] !== s || epochOf[epochOf.length - 1] !== k) {
        seq.push(s);
        epochOf.push(k);
      }
    }
  });
  const next = new Float64Array(seq.length);
  const last = new Map<number, number>();
  for (let t = seq.length - 1; t >= 0; t--) {
    next[t] = last.get(seq[t]!) ?? Infinity;
    last.set(seq[t]!, t);
  }
  // Cached shard → its next use; a max-heap of (next use, shard) with stale entries skipped.
  const cached = new Map<number, number>();
  const heap = new MaxHeap();
  let misses = 0;
  for (let t = 0; t < seq.length; t++) {
    const s = seq[t]!;
    if (!cached.has(s)) {
      if (epochOf[t] === measured) misses++;
      while (cached.size >= capacity) {
        const [use, victim] = heap.pop()!;
        if (cached.get(victim) === use) cached.delete(victim);
      }
    }
    cached.set(s, next[t]!);
    heap.push(next[t]!, s);
  }
  return misses;
}

/** A binary max-heap of (key, value) pairs. */
class MaxHeap {
  readonly #keys: number[] = [];
  readonly #values: number[] = [];

  push(key: number, value: number): void {
    const k = this.#keys;
    const v = this.#values;
    let i = k.length;
    k.push(key);
    v.push(value);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (k[p]! >= key) break;
      k[i] = k[p]!;
      v[i] = v[p]!;
      i = p;
    }
    k[i] = key;
    v[i] = value;
  }

  pop(): [number, number] | undefined {
    const k = this.#keys;
    const v = this.#values;
    if (k.length === 0) return undefined;
    const top: [number, number] = [k[0]!, v[0]!];
    const lastKey = k.pop()!;
    const lastValue = v.pop()!;
    if (k.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= k.length) break;
        const c = l + 1 < k.length && k[l + 1]! > k[l]! ? l + 1 : l;
        if (k[c]! <= lastKey) break;
        k[i] = k[c]!;
        v[i] = v[c]!;
        i = c;
      }
      k[i] = lastKey;
      v[i] = lastValue;
    }
    return top;
  }
}

/** Mean |Δ| between consecutive picks over n/3, the mean for two independent uniform positions. */
function meanJump(order: Uint32Array): number {
  let sum = 0;
  for (let i = 1; i < order.length; i++) sum += Math.abs(order[i]! - order[i - 1]!);
  return sum / (order.length - 1) / (order.length / 3);
}

/** Mean distinct classes per batch of BATCH consecutive picks. */
function classesPerBatch(order: Uint32Array, label: Uint8Array): number {
  let total = 0;
  let batches = 0;
  for (let at = 0; at + BATCH <= order.length; at += BATCH) {
    const seen = new Set<number>();
    for (let i = at; i < at + BATCH; i++) seen.add(label[order[i]!]!);
    total += seen.size;
    batches++;
  }
  return total / batches;
}

interface Blobs {
  readonly x: Float32Array;
  readonly label: Uint8Array;
  readonly heldX: Float32Array;
  readonly heldLabel: Uint8Array;
}

/**
 * n samples of CLASSES Gaussian blobs in DIM dimensions, written class by class: shards of
 * `perShard` consecutive samples each hold one class (or two where a class ends mid-shard). The
 * blobs overlap (class means N(0, 1) per dimension, noise σ 1.5), so the best loss is well above 0
 * and a model pulled toward the last classes it saw pays for it. A held-out set of 2 000 samples.
 */
function blobs(n: number, _perShard: number): Blobs {
  const rng = Rng.seed(7);
  const means = Float32Array.from({ length: CLASSES * DIM }, () => rng.normal(0, 1));
  const draw = (count: number, sortedByClass: boolean) => {
    const x = new Float32Array(count * DIM);
    const label = new Uint8Array(count);
    for (let i = 0; i < count; i++) {
      const c = sortedByClass ? Math.floor((i * CLASSES) / count) : rng.below(CLASSES);
      label[i] = c;
      for (let d = 0; d < DIM; d++) x[i * DIM + d] = means[c * DIM + d]! + rng.normal(0, 1.5);
    }
    return { x, label };
  };
  const train = draw(n, true);
  const held = draw(2000, false);
  return { x: train.x, label: train.label, heldX: held.x, heldLabel: held.label };
}

/** Plain SGD (lr 0.05, batch BATCH) of a softmax linear model over `epochs` epochs of the sampler's orders: held-out loss at each quarter epoch. */
function train(sampler: Order['sampler'], data: Blobs, epochs: number): number[] {
  const w = new Float64Array(CLASSES * DIM);
  const b = new Float64Array(CLASSES);
  const gw = new Float64Array(CLASSES * DIM);
  const gb = new Float64Array(CLASSES);
  const p = new Float64Array(CLASSES);
  const lr = 0.05;
  const curve: number[] = [];
  for (let e = 0; e < epochs; e++) {
    const order = sampler.indices(e);
    const steps = Math.floor(order.length / BATCH);
    const marks = new Set([1, 2, 3, 4].map((q) => Math.floor((q * steps) / 4)));
    for (let s = 0; s < steps; s++) {
      gw.fill(0);
      gb.fill(0);
      for (let r = 0; r < BATCH; r++) {
        const i = order[s * BATCH + r]!;
        softmax(w, b, data.x, i * DIM, p);
        p[data.label[i]!]! -= 1;
        for (let c = 0; c < CLASSES; c++) {
          gb[c]! += p[c]!;
          for (let d = 0; d < DIM; d++) gw[c * DIM + d]! += p[c]! * data.x[i * DIM + d]!;
        }
      }
      for (let k = 0; k < w.length; k++) w[k]! -= (lr * gw[k]!) / BATCH;
      for (let c = 0; c < CLASSES; c++) b[c]! -= (lr * gb[c]!) / BATCH;
      if (marks.has(s + 1)) curve.push(heldOutLoss(w, b, data, p));
    }
  }
  return curve;
}

function softmax(w: Float64Array, b: Float64Array, x: Float32Array, at: number, out: Float64Array): void {
  let max = -Infinity;
  for (let c = 0; c < CLASSES; c++) {
    let z = b[c]!;
    for (let d = 0; d < DIM; d++) z += w[c * DIM + d]! * x[at + d]!;
    out[c] = z;
    if (z > max) max = z;
  }
  let sum = 0;
  for (let c = 0; c < CLASSES; c++) sum += out[c] = Math.exp(out[c]! - max);
  for (let c = 0; c < CLASSES; c++) out[c]! /= sum;
}

function heldOutLoss(w: Float64Array, b: Float64Array, data: Blobs, p: Float64Array): number {
  let loss = 0;
  for (let i = 0; i < data.heldLabel.length; i++) {
    softmax(w, b, data.heldX, i * DIM, p);
    loss -= Math.log(Math.max(p[data.heldLabel[i]!]!, 1e-12));
  }
  return loss / data.heldLabel.length;
}
