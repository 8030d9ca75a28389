// Internal: not exported from the package entry.
// The thread behind OrderAhead: computes an epoch's permutation into shared memory and raises the
// ready flag (word 0) when the order (words 1 … n) is complete.

import { parentPort } from 'node:worker_threads';
import { epochPermutationInto } from './rng.js';
import type { U64 } from './rng.js';

export interface OrderRequest {
  readonly seed: U64;
  readonly epoch: number;
  readonly n: number;
  /** 4 + 4n bytes: an Int32 ready flag, then the order. */
  readonly buffer: SharedArrayBuffer;
}

parentPort?.on('message', (m: OrderRequest) => {
  epochPermutationInto(m.seed, m.epoch, new Uint32Array(m.buffer, 4, m.n));
  Atomics.store(new Int32Array(m.buffer, 0, 1), 0, 1);
});
