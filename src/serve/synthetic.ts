// A synthetic dataset for `stoker serve` (`{builtin: 'synthetic'}`), its tests and `bench torch`:
// sample i = { image: uint8 [c, h, w] with byte j = (i + j) mod 251, label: int32 i mod classes }.
// The rule: content is a pure function of the index, so a consumer in another process can check
// every row it receives; `failAt` makes reading those samples throw (a per-sample dataset then).

import { ArraySource } from '../dataset/arrays-source.js';
import { tensor } from '../tensor/tensor.js';

export interface SyntheticOptions {
  /** Samples. Default 50 000 (CIFAR-10's training set). */
  n?: number;
  /** Per-sample image shape. Default [3, 32, 32]. */
  shape?: readonly number[];
  classes?: number;
  /** Samples whose read throws: the dataset is then read per sample (`get(i)`), not resident columns. */
  failAt?: readonly number[];
}

export function synthetic(o: SyntheticOptions = {}) {
  const n = o.n ?? 50_000;
  const shape = o.shape ?? [3, 32, 32];
  const classes = o.classes ?? 10;
  let row = 1;
  for (const d of shape) row *= d;
  const sample = (i: number, into: Uint8Array) => {
    for (let j = 0; j < row; j++) into[j] = (i + j) % 251;
  };
  if (o.failAt !== undefined && o.failAt.length > 0) {
    const fail = new Set(o.failAt);
    return {
      length: n,
      get(i: number) {
        if (fail.has(i)) throw new Error(`synthetic sample ${i} is scripted to fail`);
        const image = new Uint8Array(row);
        sample(i, image);
        return { image: tensor(image, shape, 'uint8'), label: tensor(new Int32Array([i % classes]), [], 'int32') };
      },
    };
  }
  const images = new Uint8Array(n * row);
  const labels = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    sample(i, images.subarray(i * row, (i + 1) * row));
    labels[i] = i % classes;
  }
  return new ArraySource({ image: tensor(images, [n, ...shape], 'uint8'), label: labels });
}
