// Internal: not exported from the package entry.
// The thread behind OrderAhead: waits for a request (control word 0 moves past the last one it
// served), computes that epoch's permutation into the shared result buffer, then publishes the
// request number it served in control word 1. A request number below 0 ends the loop.

import { workerData } from 'node:worker_threads';
import { type U64, epochPermutationInto } from './rng.js';

export interface OrderShared {
  readonly seed: U64;
  readonly n: number;
  /** Int32 [0] = latest request, [1] = request served; Float64 [1] (bytes 8–15) = its epoch. */
  readonly control: SharedArrayBuffer;
  /** 4n bytes: the order of the served request. */
  readonly result: SharedArrayBuffer;
}

const { seed, n, control, result } = workerData as OrderShared;
const words = new Int32Array(control, 0, 2);
const epochs = new Float64Array(control, 8, 1);
const out = new Uint32Array(result, 0, n);
let served = 0;
for (;;) {
  Atomics.wait(words, 0, served);
  const request = Atomics.load(words, 0);
  if (request < 0) break;
  // The epoch is written before the request number: it belongs to `request` or to a later one, and
  // a later one is served on the next turn (the main thread only reads a result marked with its own).
  epochPermutationInto(seed, epochs[0]!, out);
  served = request;
  Atomics.store(words, 1, request);
}
