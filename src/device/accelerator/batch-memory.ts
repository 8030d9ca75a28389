// Internal: not exported from the package entry.
// One batch's device memory: its buffers (plus scratch its transform allocates), its ready event,
// and the release that returns the memory once no queued work may read it. The rule: `free()` runs
// at most once, and the buffers go back only after an event recorded on the consumer stream at
// release is done (or at once when the batch never left the consumer stream).

import type { Backend, DeviceBuffer, DeviceEvent } from '../backend.js';
import type { DeviceBatch } from '../device.js';
import { type BatchScratch, DeviceTensor } from '../device-tensor.js';
import type { StreamMemory } from './stream-memory.js';
import type { DType } from '../../tensor/dtype.js';

/** One field of a batch: its buffer and what it holds. */
export interface BatchPart {
  readonly buffer: DeviceBuffer;
  readonly dtype: DType;
  readonly shape: readonly number[];
}

/** What a batch's memory needs from its device (one object per device, not closures per batch). */
export interface BatchOwner {
  readonly memory: StreamMemory;
  /** Buffers of batches not yet released (freed at close, when their tensors then refuse to be read). */
  readonly live: Set<readonly DeviceBuffer[]>;
  closed(): boolean;
}

/** A class rather than closures: one is made per batch. */
export class BatchMemory implements DeviceBatch, BatchScratch {
  readonly tensors: readonly DeviceTensor[];
  readonly #backend: Backend;
  readonly #owner: BatchOwner;
  readonly #buffers: DeviceBuffer[];
  readonly #events: DeviceEvent[] = [];
  readonly #ready: DeviceEvent | undefined;
  #escaped: DeviceEvent | undefined;

  /**
   * `ready` is the copy-stream event the consumer waits on; undefined when the batch was made on the
   * consumer stream (then an event is recorded only if someone asks for one, and the memory is reused
   * in stream order unless an event escaped to other streams).
   */
  constructor(owner: BatchOwner, parts: readonly BatchPart[], ready: DeviceEvent | undefined) {
    const backend = owner.memory.backend;
    this.#backend = backend;
    this.#owner = owner;
    this.#ready = ready;
    const buffers: DeviceBuffer[] = [];
    const tensors: DeviceTensor[] = [];
    for (const p of parts) {
      buffers.push(p.buffer);
      tensors.push(new DeviceTensor({ backend, buffer: p.buffer, offset: 0, dtype: p.dtype, shape: p.shape, ready: ready ?? 'lazy', owner: this }));
    }
    this.#buffers = buffers;
    this.tensors = tensors;
    owner.live.add(buffers);
  }

  beforeDelivery(): void {
    if (this.#ready !== undefined) this.#backend.wait('consumer', this.#ready);
  }

  alloc(bytes: number): DeviceBuffer {
    const b = this.#owner.memory.acquire(bytes);
    this.#buffers.push(b);
    return b;
  }

  track(event: DeviceEvent): void {
    this.#events.push(event);
  }

  readyEvent(): DeviceEvent {
    this.#escaped ??= this.#backend.record('consumer');
    return this.#escaped;
  }

  free(): void {
    const owner = this.#owner;
    if (owner.closed() || !owner.live.delete(this.#buffers)) return;
    if (this.#ready === undefined && this.#escaped === undefined && this.#events.length === 0) {
      // Made and used only on the consumer stream: the next use of this memory is ordered after.
      for (const b of this.#buffers) owner.memory.recycle(b);
      return;
    }
    if (this.#escaped !== undefined) this.#events.push(this.#escaped);
    const released = this.#backend.record('consumer');
    // SAFETY: kernels the consumer queued before the release may still read these buffers.
    owner.memory.after('consumer', released, () => this.#retire(released));
  }

  #retire(released: DeviceEvent): void {
    const backend = this.#backend;
    for (const b of this.#buffers) this.#owner.memory.recycle(b);
    for (const e of this.#events) backend.recycle(e);
    backend.recycle(released);
    if (this.#ready !== undefined) backend.recycle(this.#ready);
  }
}
