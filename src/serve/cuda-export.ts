// Internal: not exported from the package entry.
// The CUDA route of `stoker serve`: the device memory a batch lives in, exported with CUDA IPC so
// the client opens each allocation once (not per batch), and readiness and release as interprocess
// events — the lease rules of DESIGN.md across two processes. The rules: a batch's fields are
// (allocation id, offset), an allocation is named by its driver buffer id (an address can be
// reused by a later allocation, a buffer id never is), and a client release event is waited on by
// the loader's stream before the loader may recycle the batch's memory.

import { CU_EVENT_DISABLE_TIMING, CU_EVENT_INTERPROCESS, driver } from '../device/cuda/driver.js';
import type { Message } from './protocol.js';

interface Exported {
  readonly id: number;
  readonly base: bigint;
  readonly bufferId: bigint;
}

export class CudaExport {
  readonly #stream: bigint;
  readonly #device: string;
  readonly #byBase = new Map<bigint, Exported>();
  /** NOTE [Placed pointers]: a tensor address seen before, with the buffer id found there then. */
  readonly #byPtr = new Map<bigint, { bufferId: bigint; exported: Exported; offset: number }>();
  #nextMem = 0;
  /** Our interprocess events, by id; `busy` ones guard a batch the client holds. */
  readonly #ready: { handle: bigint; busy: boolean }[] = [];
  /** The client's interprocess events, opened here once each. */
  readonly #client = new Map<number, bigint>();
  #closed = false;

  /** `stream`: the CUstream the loader orders batches and releases on. */
  constructor(stream: bigint, device: string) {
    this.#stream = stream;
    this.#device = device;
  }

  /** The allocation holding `ptr`: its id and `ptr`'s offset in it; `announce` when the client has not seen it. */
  place(ptr: bigint, announce: (m: Message) => void): { mem: number; offset: number } {
    const d = driver();
    // NOTE [Placed pointers]
    // The loader's pool hands out the same few addresses batch after batch: one driver call (the
    // buffer id at `ptr`, never reused by a later allocation) confirms a cached placement, instead of
    // two (address range, then the base's buffer id). A different id there means a new allocation.
    const seenAt = this.#byPtr.get(ptr);
    const idAtPtr = d.pointerBufferId(ptr);
    if (seenAt !== undefined && seenAt.bufferId === idAtPtr && this.#byBase.get(seenAt.exported.base) === seenAt.exported) {
      return { mem: seenAt.exported.id, offset: seenAt.offset };
    }
    const { base, bytes } = d.memGetAddressRange(ptr);
    const bufferId = d.pointerBufferId(base);
    let e = this.#byBase.get(base);
    if (e !== undefined && e.bufferId !== bufferId) {
      // The loader freed that allocation and a new one took its address.
      announce({ op: 'forget', id: e.id });
      this.#byBase.delete(base);
      e = undefined;
    }
    if (e === undefined) {
      e = { id: this.#nextMem++, base, bufferId };
      this.#byBase.set(base, e);
      announce({ op: 'mem', id: e.id, handle: hex(d.ipcGetMemHandle(base)), bytes, device: this.#device });
    }
    const offset = Number(ptr - base);
    if (this.#byPtr.size >= 4096) this.#byPtr.clear();
    this.#byPtr.set(ptr, { bufferId: idAtPtr, exported: e, offset });
    return { mem: e.id, offset };
  }

  /** Tell the client to close allocations the loader has freed since (between epochs). */
  sweep(announce: (m: Message) => void): void {
    const d = driver();
    for (const [base, e] of this.#byBase) {
      let alive: boolean;
      try {
        alive = d.pointerBufferId(base) === e.bufferId;
      } catch {
        alive = false;
      }
      if (!alive) {
        announce({ op: 'forget', id: e.id });
        this.#byBase.delete(base);
      }
    }
    for (const [ptr, p] of this.#byPtr) if (this.#byBase.get(p.exported.base) !== p.exported) this.#byPtr.delete(ptr);
  }

  /**
   * Record an interprocess event on the loader's stream once `waits` (the tensors' ready events)
   * fired; the client's stream waits on it. Returns its id; call `settled(id)` at the batch's release.
   * At most 0xfffe of them (a frame's event field), far beyond the batches a client may hold.
   */
  ready(waits: readonly bigint[], announce: (m: Message) => void): number {
    const d = driver();
    for (const w of waits) d.streamWaitEvent(this.#stream, w);
    let id = this.#ready.findIndex((r) => !r.busy);
    if (id < 0) {
      const handle = d.eventCreate(CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
      id = this.#ready.push({ handle, busy: false }) - 1;
      announce({ op: 'ready', id, handle: hex(d.ipcGetEventHandle(handle)) });
    }
    const r = this.#ready[id]!;
    r.busy = true;
    d.eventRecord(r.handle, this.#stream);
    return id;
  }

  /**
   * The client's release of batches: later work on the loader's stream (the leases' own releases)
   * waits for its event first — once for all of them, recorded after the client's last use of each.
   */
  waitClient(clientEvent: number | undefined): void {
    if (clientEvent === undefined) return;
    const ev = this.#client.get(clientEvent);
    if (ev !== undefined) driver().streamWaitEvent(this.#stream, ev);
  }

  /** The ready event of a released batch guards nothing any more (call after `waitClient`). */
  settled(readyId: number): void {
    const r = this.#ready[readyId];
    if (r !== undefined) r.busy = false;
  }

  /** A client event announced with {op: 'event'}. */
  openClientEvent(id: number, handle: string): void {
    const old = this.#client.get(id);
    if (old !== undefined) driver().eventDestroy(old);
    this.#client.set(id, driver().ipcOpenEventHandle(Uint8Array.from(Buffer.from(handle, 'hex'))));
  }

  /** Every batch came back but those whose ready events are `kept` (or the client left): no other event guards anything. */
  settleAll(kept: readonly number[] = []): void {
    for (let id = 0; id < this.#ready.length; id++) if (!kept.includes(id)) this.#ready[id]!.busy = false;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const d = driver();
    for (const r of this.#ready) d.eventDestroy(r.handle);
    for (const ev of this.#client.values()) d.eventDestroy(ev);
    this.#ready.length = 0;
    this.#client.clear();
    this.#byBase.clear();
    this.#byPtr.clear();
  }
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}
