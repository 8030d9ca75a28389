// Internal: not exported from the package entry.
// Device memory and page-locked host memory reused in stream order. The rule: no buffer is reused
// while a queued operation may still read it — every reuse goes through a follow-up that runs
// only once the event recorded after the buffer's last use is done (`after`, then `retire`).
//
// NOTE [Follow-ups run without a next call] A follow-up may hand memory to another owner that is
// waiting for it: host staging goes back to the reader pool's ring, and a fetch that finds the ring
// full waits for a slot (NOTE [A bounded ring], reader-pool.ts). Retiring only on the device's next
// call (an upload) deadlocks there: the next upload waits for the fetch, the fetch for a slot, the
// slot for a retire — an epoch that never delivers. So while any follow-up is pending a watch polls
// `retire` (on the next turn, then every WATCH_MS): it waits for events recorded on this device's
// streams, which complete once the device has done the queued work, and stops when every queue is
// empty (`drain` at close empties them and stops it). It is ref'd: a process whose only pending
// work is a copy in flight must not exit under it.

import { type Backend, type DeviceBuffer, type DeviceEvent, isDeviceOutOfMemory } from '../backend.js';
import { HostPool } from '../host-pool.js';
import { elementSize, storageView } from '../../tensor/dtype.js';
import { PAGE_BYTES } from '../../reader/staging.js';
import { HOST_KEEP_BYTES } from '../../base/budget.js';

export type Stream = 'copy' | 'consumer';

/** Poll interval of the follow-up watch while events are pending (an event query costs microseconds). */
const WATCH_MS = 1;

interface Pending {
  readonly event: DeviceEvent;
  readonly run: () => void;
}

export class StreamMemory {
  readonly backend: Backend;
  /** Page-locked host buffers (staging, address tables, id lists), recycled in stream order too. */
  readonly host: HostPool;
  readonly #free = new Map<number, DeviceBuffer[]>();
  readonly #queues = new Map<Stream, Pending[]>([['copy', []], ['consumer', []]]);
  /** Bytes of released buffers kept for reuse. */
  #keptBytes = 0;
  /** The follow-up watch's pending turn, if armed (NOTE [Follow-ups run without a next call]). */
  #watch: { readonly cancel: () => void } | undefined;
  #stopped = false;

  /** `pin(sab)` page-locks a new host buffer and returns its first page-aligned byte; `unpin` undoes it. */
  constructor(backend: Backend, pin: (memory: SharedArrayBuffer) => number, unpin: (memory: SharedArrayBuffer) => void) {
    this.backend = backend;
    this.host = new HostPool(
      (dtype, length) => {
        // Page-locked once, when the pool first makes the buffer; reused for every later batch.
        const bytes = Math.max(length * elementSize(dtype), 1);
        const sab = new SharedArrayBuffer(Math.ceil(bytes / PAGE_BYTES) * PAGE_BYTES + PAGE_BYTES);
        return storageView(dtype, sab, pin(sab), length);
      },
      (data) => unpin(data.buffer as SharedArrayBuffer),
      HOST_KEEP_BYTES,
    );
  }

  /** Run `run` once `event`, recorded on `stream`, is done (checked by `retire`, in record order). */
  after(stream: Stream, event: DeviceEvent, run: () => void): void {
    this.#queues.get(stream)!.push({ event, run });
    if (this.#watch === undefined && !this.#stopped) {
      const turn = setImmediate(() => this.#poll());
      this.#watch = { cancel: () => clearImmediate(turn) };
    }
  }

  /** One turn of the watch: run what completed; re-arm while anything is still pending. */
  #poll(): void {
    this.#watch = undefined;
    if (this.#stopped) return;
    this.retire();
    if (!this.#pending()) return;
    const timer = setTimeout(() => this.#poll(), WATCH_MS);
    this.#watch = { cancel: () => clearTimeout(timer) };
  }

  #pending(): boolean {
    for (const queue of this.#queues.values()) if (queue.length > 0) return true;
    return false;
  }

  /**
   * Device memory of `bytes` bytes: a released buffer of that size if one is kept, else a new one.
   * Released buffers are all kept (their number is bounded by the peak of batches in flight, which
   * the budget law bounds): freeing and re-allocating per batch costs the host a driver round trip
   * each way, and cuMemFree waits for the device. Under out-of-memory they are given back first.
   */
  acquire(bytes: number): DeviceBuffer {
    const size = Math.max(bytes, 1);
    const hit = this.#free.get(size)?.pop();
    if (hit !== undefined) {
      this.#keptBytes -= hit.bytes;
      return hit;
    }
    return this.allocOrTrim(size);
  }

  /**
   * Device buffers of these sizes, all or none: on a failure the ones acquired go back and the error
   * is rethrown. Nothing queued may use them before the call returns, so a failure leaves no trace.
   */
  acquireAll(sizes: readonly number[]): DeviceBuffer[] {
    const out: DeviceBuffer[] = [];
    try {
      for (const bytes of sizes) out.push(this.acquire(bytes));
    } catch (error) {
      for (const b of out) this.recycle(b);
      throw error;
    }
    return out;
  }

  /** A new buffer; under out-of-memory the kept released buffers are given back first, then once more. */
  allocOrTrim(bytes: number): DeviceBuffer {
    try {
      return this.backend.alloc(bytes);
    } catch (error) {
      if (!isDeviceOutOfMemory(error) || this.#keptBytes === 0) throw error;
      this.trim();
      return this.backend.alloc(bytes);
    }
  }

  /** Keep an idle buffer for reuse: only once no queued work can read it. */
  recycle(buffer: DeviceBuffer): void {
    let list = this.#free.get(buffer.bytes);
    if (list === undefined) this.#free.set(buffer.bytes, (list = []));
    list.push(buffer);
    this.#keptBytes += buffer.bytes;
  }

  /** Free every kept buffer (they are idle: recycled only after their last use completed). */
  trim(): void {
    for (const list of this.#free.values()) for (const b of list) this.backend.free(b);
    this.#free.clear();
    this.#keptBytes = 0;
  }

  /** Order later copy-stream work (copies, frees through freeAfterCopies) after everything queued on the consumer stream so far. */
  copiesAfterConsumer(): void {
    const consumed = this.backend.record('consumer');
    this.backend.wait('copy', consumed);
    this.after('consumer', consumed, () => this.backend.recycle(consumed));
  }

  freeAfterCopies(buffer: DeviceBuffer): void {
    const event = this.backend.record('copy');
    this.after('copy', event, () => { this.backend.free(buffer); this.backend.recycle(event); });
  }

  /**
   * Run the follow-ups of completed events (host staging back to its owner, buffers to the pool).
   * Events of one stream complete in the order they were recorded, so each stream's queue is
   * checked from its head and the check stops at the first event not yet done.
   */
  retire(): void {
    for (const queue of this.#queues.values()) {
      while (queue.length > 0 && this.backend.done(queue[0]!.event)) queue.shift()!.run();
    }
  }

  /** Wait for every queued event and run every follow-up, and stop the watch (at close). */
  drain(): void {
    this.#stopped = true;
    this.#watch?.cancel();
    this.#watch = undefined;
    for (const queue of this.#queues.values()) for (const p of queue) this.backend.synchronize(p.event);
    this.retire();
  }
}
