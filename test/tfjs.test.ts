// The TensorFlow.js adapter: fitDataset trains on Stoker batches with no leaked tensor and every
// batch released; float32/int32 fields cross without a copy on the CPU backend and hold their batch
// while a tensor reads it; other dtypes convert exactly; abandoned iterations end cleanly.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';
import { type AnyTensor, type Batch, DataLoader, LoaderError, type Tensor, sources, tensor } from '../src/index.js';
import { tfValues, toTfDataset, type TfLoader } from '../src/adapters/tfjs.js';
import { toBFloat16Bits, toFloat16Bits } from '../src/tensor/half.js';
import { HANG_MS, within } from './fixtures.js';

const FEATURES = 8;

/** Two separable classes: the label is the sign of the features' sum. */
function separable(n: number) {
  const x = new Float32Array(n * FEATURES);
  const y = new Int32Array(n);
  let s = 12345;
  for (let i = 0; i < n; i++) {
    const label = i % 2;
    for (let f = 0; f < FEATURES; f++) {
      s = (s * 1103515245 + 12345) >>> 0;
      x[i * FEATURES + f] = (label === 1 ? 0.6 : -0.6) + ((s / 2 ** 32) - 0.5);
    }
    y[i] = label;
  }
  return sources.arrays({ x: tensor(x, [n, FEATURES]), y });
}

/** A loader whose epochs record every batch they deliver. */
function recording(loader: DataLoader): TfLoader & { batches: Batch<AnyTensor>[] } {
  const batches: Batch<AnyTensor>[] = [];
  return {
    batches,
    names: loader.names,
    numBatches: loader.numBatches,
    epoch: (e) => ({
      async *[Symbol.asyncIterator]() {
        for await (const b of loader.epoch(e)) {
          batches.push(b);
          yield b;
        }
      },
    }),
  };
}

function model(): tf.Sequential {
  const m = tf.sequential();
  m.add(tf.layers.dense({ inputShape: [FEATURES], units: 2, activation: 'softmax' }));
  m.compile({ optimizer: tf.train.adam(0.05), loss: 'categoricalCrossentropy', metrics: ['accuracy'] });
  return m;
}

before(async () => {
  tf.enableProdMode(); // also silences the "install tfjs-node" banner
  await tf.setBackend('cpu');
  await tf.ready();
});

describe('toTfDataset with model.fitDataset', () => {
  let loader: DataLoader;
  let val: DataLoader;
  before(async () => {
    loader = await DataLoader.create(separable(256), { batchSize: 32, mode: 'streaming' });
    val = await DataLoader.create(separable(64), { batchSize: 32, shuffle: false });
  });
  after(async () => {
    await loader.close();
    await val.close();
  });

  it('trains two epochs with the live tensor count equal after each, and releases every batch', async () => {
    const rec = recording(loader);
    const train = toTfDataset(rec, { tf, x: 'x', y: 'y', oneHot: 2 });
    const validation = toTfDataset(val, { tf, x: 'x', y: 'y', oneHot: 2 });
    const m = model();
    const counts: number[] = [];
    const history = await within(HANG_MS, 'fitDataset', m.fitDataset(train, {
      epochs: 2,
      validationData: validation,
      verbose: 0,
      callbacks: { onEpochEnd: async () => void counts.push(tf.memory().numTensors) },
    }));
    assert.equal(counts.length, 2);
    assert.equal(counts[1], counts[0], `live tensors after epoch 1 and 2: ${counts.join(', ')}`);
    assert.equal(rec.batches.length, 2 * loader.numBatches, 'two loader epochs ran');
    assert.ok(rec.batches.every((b) => b.released), 'every Stoker batch was released');
    assert.equal(train.heldBatches, 0);
    assert.equal(validation.heldBatches, 0);
    assert.equal(train.nextEpoch, 2, 'each fitDataset epoch ran the next loader epoch');
    const acc = history.history.val_acc as number[];
    assert.ok(acc.at(-1)! > 0.9, `xs and ys stay aligned, so the model learns the separable set: val_acc ${acc.join(', ')}`);

    // A third epoch, in a new fit: still no growth.
    await m.fitDataset(train, { epochs: 1, verbose: 0 });
    assert.equal(tf.memory().numTensors, counts[1], 'no tensor leaks across fits');
    m.dispose();
  });

  it('works under .repeat() with batchesPerEpoch, and stop() ends the epoch being read', async () => {
    const rec = recording(loader);
    const train = toTfDataset(rec, { tf, x: 'x', y: 'y', oneHot: 2 });
    const m = model();
    const counts: number[] = [];
    await within(HANG_MS, 'fitDataset', m.fitDataset(train.repeat(), {
      epochs: 3,
      batchesPerEpoch: 5,
      verbose: 0,
      callbacks: { onEpochEnd: async () => void counts.push(tf.memory().numTensors) },
    }));
    assert.equal(rec.batches.length, 15);
    assert.deepEqual(counts, [counts[0], counts[0], counts[0]], `live tensors per epoch: ${counts.join(', ')}`);
    assert.equal(train.nextEpoch, 2, '15 batches of 8 per loader epoch span two loader epochs');
    await train.stop();
    assert.equal(train.heldBatches, 0);
    assert.ok(rec.batches.every((b) => b.released));
    let n = 0;
    for await (const b of loader.epoch(7)) {
      n++;
      b.release();
    }
    assert.equal(n, loader.numBatches, 'the loader is free for another epoch after stop()');
    m.dispose();
  });
});

describe('toTfDataset: memory, epochs and conversions', () => {
  let loader: DataLoader;
  before(async () => {
    loader = await DataLoader.create(separable(64), { batchSize: 16 });
  });
  after(() => loader.close());

  it('float32 and int32 fields become tf tensors over the batch memory (no copy) on the CPU backend', async () => {
    const rec = recording(loader);
    const ds = toTfDataset(rec, { tf, x: 'x', y: 'y' });
    const it = await ds.iterator();
    const first = (await it.next()).value as { xs: tf.Tensor; ys: tf.Tensor };
    const batch = rec.batches[0]!;
    assert.equal(first.xs.dtype, 'float32');
    assert.deepEqual(first.xs.shape, [16, FEATURES]);
    assert.equal(first.xs.dataSync(), (batch.get('x') as Tensor).data, 'xs reads the batch array itself');
    assert.equal(first.ys.dataSync(), (batch.get('y') as Tensor).data, 'ys reads the batch array itself');
    assert.equal(batch.released, false, 'the batch is held while tensors borrow it');

    const view = first.xs.reshape([16 * FEATURES]);
    tf.dispose([first.xs, first.ys]);
    const second = (await it.next()).value as { xs: tf.Tensor; ys: tf.Tensor };
    assert.equal(batch.released, false, 'a reshape shares the data: the batch stays held');
    view.dispose();
    tf.dispose([second.xs, second.ys]);
    await it.next();
    assert.equal(batch.released, true, 'released once no tensor reads it');
    assert.equal(rec.batches[1]!.released, true);
    await ds.stop();
  });

  it('an iterator that is never read claims no epoch; a new iteration ends an abandoned one', async () => {
    const ds = toTfDataset(loader, { tf, x: 'x', y: 'y' });
    await ds.iterator(); // fitDataset does this once before its loop and never reads it
    assert.equal(ds.nextEpoch, 0);
    const a = await ds.iterator();
    const fromA = (await a.next()).value as { xs: tf.Tensor; ys: tf.Tensor };
    tf.dispose(fromA);
    const b = await ds.iterator(); // a is abandoned mid-epoch, as fitDataset does when training stops early
    const fromB = (await b.next()).value as { xs: tf.Tensor; ys: tf.Tensor };
    assert.equal(ds.nextEpoch, 2);
    assert.equal((await a.next()).done, true, 'the abandoned iteration is over');
    tf.dispose(fromB);
    let rows = 0;
    for (let r = await b.next(); r.done !== true; r = await b.next()) {
      rows += (r.value as { ys: tf.Tensor }).ys.shape[0]!;
      tf.dispose(r.value);
    }
    assert.equal(rows + 16, 64, 'the new iteration runs a whole epoch');
    assert.equal(ds.heldBatches, 0);
  });

  it('next() calls that overlap (tf.data prefetch) are served in order from one epoch', async () => {
    const rec = recording(loader);
    const ds = toTfDataset(rec, { tf, x: 'x', y: 'y' });
    const abandoned = await ds.iterator();
    tf.dispose((await abandoned.next()).value as tf.TensorContainer);
    rec.batches.length = 0;
    const it = await ds.iterator();
    const results = await Promise.all([it.next(), it.next(), it.next(), it.next(), it.next()]);
    assert.deepEqual(results.map((r) => r.done), [false, false, false, false, true], '4 batches of 16, then the end');
    assert.equal(ds.nextEpoch, 2, 'one loader epoch claimed by the new iteration');
    const ids = rec.batches.flatMap((b) => Array.from(b.sampleIds));
    assert.deepEqual([...ids].sort((a, b) => a - b), Array.from({ length: 64 }, (_, i) => i), 'every sample once');
    results.forEach((r, k) => {
      if (r.done !== true) assert.equal((r.value as { xs: tf.Tensor }).xs.dataSync()[0], (rec.batches[k]!.get('x') as Tensor).data[0], `element ${k} is batch ${k}`);
    });
    tf.dispose(results.filter((r) => r.done !== true).map((r) => r.value as tf.TensorContainer));
    await ds.stop();
    assert.equal(ds.heldBatches, 0);
  });

  it('map runs inside a tidy: intermediates and unused inputs are freed', async () => {
    const base = tf.memory().numTensors;
    const ds = toTfDataset(loader, {
      tf,
      map: ({ x, y }, t) => ({ xs: x!.mul(2).add(1).reshape([-1, 2, FEATURES / 2]), ys: t.oneHot(y!, 2) }),
    });
    const it = await ds.iterator();
    const r = await it.next();
    const el = r.value as { xs: tf.Tensor; ys: tf.Tensor };
    assert.deepEqual(el.xs.shape, [16, 2, FEATURES / 2]);
    assert.equal(tf.memory().numTensors, base + 2, 'only the returned tensors are live');
    tf.dispose(el);
    await ds.stop();
    assert.equal(tf.memory().numTensors, base);
    assert.equal(ds.heldBatches, 0);
  });

  it('converts uint8, int16, uint32, float64, int64, float16 and bfloat16 to int32 or float32 with the right values', () => {
    const cases = [
      { t: tensor(new Uint8Array([0, 7, 255]), [3]), dtype: 'int32', values: [0, 7, 255] },
      { t: tensor(new Int16Array([-300, 0, 300]), [3]), dtype: 'int32', values: [-300, 0, 300] },
      { t: tensor(new Uint32Array([0, 2 ** 31 - 1]), [2]), dtype: 'int32', values: [0, 2 ** 31 - 1] },
      { t: tensor(new Float64Array([0.5, -2.25]), [2]), dtype: 'float32', values: [0.5, -2.25] },
      { t: tensor(new BigInt64Array([-5n, 9n]), [2]), dtype: 'int32', values: [-5, 9] },
      { t: tensor(Uint16Array.from([1, -2.5, 65504].map(toFloat16Bits)), [3], 'float16'), dtype: 'float32', values: [1, -2.5, 65504] },
      { t: tensor(Uint16Array.from([1, -0.5, 256].map(toBFloat16Bits)), [3], 'bfloat16'), dtype: 'float32', values: [1, -0.5, 256] },
    ] as const;
    for (const c of cases) {
      const v = tfValues(c.t, 'f');
      assert.equal(v.dtype, c.dtype, c.t.dtype);
      assert.equal(v.shared, false, `${c.t.dtype} is converted (one copy)`);
      assert.deepEqual(Array.from(v.values), c.values, c.t.dtype);
    }
  });

  it('an int64 or uint32 value outside int32 fails with ERR_INVALID_TENSOR naming the field and the value', () => {
    assert.throws(() => tfValues(tensor(new BigInt64Array([1n, 2n ** 40n]), [2]), 'label'), (e: unknown) =>
      e instanceof LoaderError && e.code === 'ERR_INVALID_TENSOR' && /"label"/.test(e.message) && /1099511627776n/.test(e.message) && /element 1/.test(e.message));
    assert.throws(() => tfValues(tensor(new Uint32Array([2 ** 32 - 1]), [1]), 'id'), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_TENSOR' && /"id"/.test(e.message));
  });

  it('rejects an unknown field, a bad oneHot and a missing tf with a typed error that says the fix', () => {
    assert.throws(() => toTfDataset(loader, { tf, x: 'image' }), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_UNKNOWN_FIELD' && /Available: \[x, y\]/.test(e.message));
    assert.throws(() => toTfDataset(loader, { tf, oneHot: 1 }), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_OPTION' && /oneHot/.test(e.message));
    assert.throws(() => toTfDataset(loader, { tf, y: ['x', 'y'], oneHot: 3 }), (e: unknown) => e instanceof LoaderError && /one label field/.test(e.message));
    assert.throws(() => toTfDataset(loader, { tf: {} as never }), (e: unknown) => e instanceof LoaderError && /import \* as tf/.test(e.message));
  });

  it('x and y as lists give records keyed by field name (multi-input models)', async () => {
    const ds = toTfDataset(loader, { tf, x: ['x'], y: ['y'] });
    const it = await ds.iterator();
    const el = (await it.next()).value as { xs: Record<string, tf.Tensor>; ys: Record<string, tf.Tensor> };
    assert.deepEqual(Object.keys(el.xs), ['x']);
    assert.deepEqual(el.ys.y!.shape, [16]);
    tf.dispose(el);
    await ds.stop();
  });

  it('on the WASM backend the values are copied at creation, so the batch is released at once', async () => {
    await tf.setBackend('wasm');
    try {
      const rec = recording(loader);
      const ds = toTfDataset(rec, { tf, x: 'x', y: 'y', oneHot: 2 });
      const it = await ds.iterator();
      const el = (await it.next()).value as { xs: tf.Tensor; ys: tf.Tensor };
      assert.equal(rec.batches[0]!.released, true);
      // In this set every feature of a row has the sign of its label (0 → negative).
      const x = el.xs.dataSync();
      const labels = Array.from({ length: 16 }, (_, r) => (x[r * FEATURES]! > 0 ? 1 : 0));
      assert.equal(el.ys.dtype, 'float32');
      assert.deepEqual(Array.from(el.ys.dataSync()), labels.flatMap((l) => (l === 1 ? [0, 1] : [1, 0])), 'one-hot float32 values (not int32 bits)');
      const row0 = Array.from(el.xs.dataSync().subarray(0, FEATURES));
      assert.equal(row0.length, FEATURES);
      assert.ok(row0.every((v) => Number.isFinite(v) && v !== 0));
      tf.dispose(el);
      await ds.stop();
    } finally {
      await tf.setBackend('cpu');
    }
  });
});
