// Picks in order, 0 … length−1, the same every epoch. Used when `shuffle: false`.

import type { Sampler } from './sampler.js';

export class SequentialSampler implements Sampler {
  readonly length: number;

  constructor(length: number) {
    this.length = length;
  }

  indices(_epoch: number): Uint32Array {
    const out = new Uint32Array(this.length);
    for (let i = 0; i < out.length; i++) out[i] = i;
    return out;
  }
}
