// A batch: the tensors of one step, with the sample ids and picks they hold. The rule: a batch never
// changes under the user's feet — it owns its memory until it is released, and after release every
// read through Stoker's API throws ERR_BATCH_RELEASED rather than show recycled memory.
//
// NOTE [Batch leasing]
// A batch is born with one lease, the delivery lease. `retain()` adds a user hold; `release()`
// drops a user hold if there is one, else the delivery lease. Devices whose memory is scarce (CUDA)
// drop the delivery lease themselves when the consumer asks for the next batch; on the CPU the
// delivery lease stays until `release()` (or the garbage collector). When no lease is left, the
// memory goes back to the device's pool and the batch is dead.

import { batchReleased, show, unknownFieldError } from './errors.js';
import type { Lease } from './tensor/lease.js';
import type { AnyTensor } from './device/device-tensor.js';
import type { Tensor } from './tensor/tensor.js';

/** `T` is `Tensor` on the CPU and `DeviceTensor` on an accelerator. */
export class Batch<T extends AnyTensor = Tensor> implements Lease {
  /** Field names, in positional order. */
  readonly names: readonly string[];
  /** Epoch this batch belongs to. */
  readonly epoch: number;
  /** Position of this batch in its epoch, 0-based. */
  readonly index: number;
  /** Dataset sample id of each row. */
  readonly sampleIds: Uint32Array;
  /** Pick of each row (sample id × augment + repeat). */
  readonly picks: Uint32Array;
  #tensors: readonly T[];
  #holds = 0;
  #delivered = true;
  #free: (() => void) | undefined;

  /** Internal: batches are made by the loader. */
  constructor(init: {
    names: readonly string[];
    epoch: number;
    index: number;
    sampleIds: Uint32Array;
    picks: Uint32Array;
    tensors: (lease: Lease) => readonly AnyTensor[];
    free: () => void;
  }) {
    this.names = init.names;
    this.epoch = init.epoch;
    this.index = init.index;
    this.sampleIds = init.sampleIds;
    this.picks = init.picks;
    this.#tensors = init.tensors(this) as readonly T[];
    this.#free = init.free;
  }

  /** Rows in this batch (the first dimension of every tensor). */
  get rows(): number {
    return this.sampleIds.length;
  }

  /** True once the last lease ended; every tensor read then throws ERR_BATCH_RELEASED. */
  get released(): boolean {
    return this.#free === undefined;
  }

  /** All tensors, in positional order. */
  get tensors(): readonly T[] {
    this.#check();
    return this.#tensors;
  }

  /** The tensor at position `i`. */
  at(i: number): T {
    this.#check();
    const t = this.#tensors[i];
    if (t === undefined) {
      throw unknownFieldError(`Batch: position ${show(i)} is out of range; this batch has ${this.#tensors.length} tensors (0 … ${this.#tensors.length - 1})`);
    }
    return t;
  }

  /** The tensor named `name`. Throws ERR_UNKNOWN_FIELD naming the available fields if there is none. */
  get(name: string): T {
    this.#check();
    const i = this.names.indexOf(name);
    if (i < 0) throw unknownFieldError(`Batch: unknown field ${show(name)}. Available: [${this.names.join(', ')}]`);
    return this.#tensors[i]!;
  }

  has(name: string): boolean {
    return this.names.includes(name);
  }

  /** Keep this batch alive past the point where the loader would recycle it. Pair with `release()`. */
  retain(): this {
    this.#check();
    this.#holds++;
    return this;
  }

  /** End one lease (a `retain()`, else the delivery lease). Releasing a dead batch is a no-op. */
  release(): void {
    if (this.#free === undefined) return;
    if (this.#holds > 0) this.#holds--;
    else this.#delivered = false;
    if (this.#holds === 0 && !this.#delivered) this.#die();
  }

  /** `using batch = …` releases at the end of the block. */
  [Symbol.dispose](): void {
    this.release();
  }

  /** Internal: the loader ends the delivery lease (devices with scarce memory). */
  endDelivery(): void {
    if (this.#free === undefined || !this.#delivered) return;
    this.#delivered = false;
    if (this.#holds === 0) this.#die();
  }

  toString(): string {
    return `Batch(epoch ${this.epoch}, #${this.index}, ${this.rows} rows: ${this.names.map((n, i) => `${n}=${this.#tensors[i]}`).join(', ')})`;
  }

  #die(): void {
    const free = this.#free;
    this.#free = undefined;
    free?.();
  }

  #check(): void {
    if (this.#free === undefined) throw batchReleased();
  }
}
