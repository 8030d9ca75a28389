// Internal: not exported from the package entry.
// The CPU route of `stoker serve`: a ring of slots in one shared-memory file (a "slab") that the
// client maps once. A batch is copied into a free slot (the one copy on the CPU) and the slot is
// reused only after the client's release. The rule: the file is unlinked as soon as the client says
// it mapped it (or when the ring closes), so nothing is left in /dev/shm whichever side dies.
//
// A batch larger than the slots makes a new slab; the old one is retired, not waited for: the
// client may keep some of its batches for as long as its loop holds them (NOTE [Kept batches],
// python/stoker/torch.py), so its slots come back one by one, each freed at its release, and the
// old slab goes with its last one.
//
// NOTE [Mapped slabs]
// Node has no mmap, so the copy went through pwrite into tmpfs: ~110 µs for a CIFAR batch of 256
// (786 KB), most of the server's own time per batch after the loader's gather. Mapping the slab
// here too (mmap through koffi, as src/tensor/native-copy.ts reaches memcpy) makes it a plain
// memory copy, ~25 µs (measured on the dev machine). The mapping lives exactly as long as the slab's
// fd and nothing outside `write` holds a view of it, so no JS object can outlive the munmap. Where
// libc or koffi does not load (or the env switch `shmMmap` is off), pwrite remains.

import { closeSync, existsSync, ftruncateSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { readSwitch } from '../base/env.js';

/** Field offsets inside a slot are aligned to this (cache lines; any dtype's alignment). */
export const FIELD_ALIGN = 64;

export interface Slab {
  readonly id: number;
  readonly path: string;
  readonly slotBytes: number;
  readonly slots: number;
}

type OpenSlab = Slab & { fd: number; linked: boolean; map: Mapping | undefined };

/** A slot a client holds: its slab and its index there. */
export interface SlotRef {
  readonly slab?: number;
  readonly slot?: number;
}

export class ShmRing {
  readonly #slots: number;
  #slab: OpenSlab | undefined;
  #nextSlab = 0;
  readonly #free: number[] = [];
  /** Slabs a larger batch replaced, with the slots the client still holds there; each goes with its last slot. */
  readonly #retired = new Map<number, { slab: OpenSlab; out: Set<number> }>();
  #waiters: (() => void)[] = [];
  #closed = false;

  constructor(slots: number) {
    this.#slots = slots;
  }

  get slots(): number {
    return this.#slots;
  }

  get leased(): number {
    return this.#slab === undefined ? 0 : this.#slots - this.#free.length;
  }

  /** Slabs still open: the current one and the retired ones whose slots the client still holds. */
  get slabs(): number {
    return (this.#slab === undefined ? 0 : 1) + this.#retired.size;
  }

  /**
   * A free slot of at least `bytes` bytes, waiting for a release when all are leased. Returns the
   * slab too: a new one (announce it) when the batch outgrew the current slot size; the old one is
   * retired until its last slot comes back.
   */
  async acquire(bytes: number, signal: AbortSignal): Promise<{ slab: Slab; slot: number; fresh: boolean }> {
    let fresh = false;
    if (this.#slab === undefined || bytes > this.#slab.slotBytes) {
      this.#retire();
      this.#makeSlab(Math.max(bytes, FIELD_ALIGN));
      fresh = true;
    }
    while (this.#free.length === 0) await this.#wait(signal);
    return { slab: this.#slab!, slot: this.#free.shift()!, fresh };
  }

  /** Copy `data` into `slot` at byte `offset` of the slot. */
  write(slot: number, offset: number, data: ArrayBufferView): void {
    const s = this.#slab!;
    const view = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (s.map !== undefined) {
      s.map.view.set(view, slot * s.slotBytes + offset);
      return;
    }
    let done = 0;
    while (done < view.byteLength) done += writeSync(s.fd, view, done, view.byteLength - done, slot * s.slotBytes + offset + done);
  }

  release(slab: number, slot: number): boolean {
    const old = this.#retired.get(slab);
    if (old !== undefined) {
      if (!old.out.delete(slot)) return false;
      if (old.out.size === 0) this.#drop(slab);
      return true;
    }
    if (this.#slab?.id !== slab || slot < 0 || slot >= this.#slots || this.#free.includes(slot)) return false;
    this.#free.push(slot);
    this.#wake();
    return true;
  }

  /** Every slot is free again but those in `held` (the client stopped an epoch and keeps those batches). */
  reclaim(held: Iterable<SlotRef> = []): void {
    const keep = new Map<number, Set<number>>();
    for (const h of held) {
      if (h.slab === undefined || h.slot === undefined) continue;
      let slots = keep.get(h.slab);
      if (slots === undefined) keep.set(h.slab, (slots = new Set()));
      slots.add(h.slot);
    }
    for (const [id, old] of [...this.#retired]) {
      const kept = keep.get(id);
      for (const slot of old.out) if (kept === undefined || !kept.has(slot)) old.out.delete(slot);
      if (old.out.size === 0) this.#drop(id);
    }
    const kept = this.#slab === undefined ? undefined : keep.get(this.#slab.id);
    this.#free.length = 0;
    for (let i = 0; i < this.#slots; i++) if (kept === undefined || !kept.has(i)) this.#free.push(i);
    this.#wake();
  }

  /** The client mapped `slab`: its name is no longer needed. */
  unlink(slab: number): void {
    const s = this.#slab?.id === slab ? this.#slab : this.#retired.get(slab)?.slab;
    if (s !== undefined) unlinkSlab(s);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const id of [...this.#retired.keys()]) this.#drop(id);
    this.#dropSlab();
    this.#wake();
  }

  #makeSlab(minBytes: number): void {
    const slotBytes = Math.ceil(minBytes / 4096) * 4096;
    const dir = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
    const path = join(dir, `stoker-${process.pid}-${randomBytes(4).toString('hex')}-${this.#nextSlab}`);
    const fd = openSync(path, 'w+', 0o600);
    ftruncateSync(fd, slotBytes * this.#slots);
    this.#slab = { id: this.#nextSlab++, path, fd, slotBytes, slots: this.#slots, linked: true, map: mapShared(fd, slotBytes * this.#slots) };
    this.#free.length = 0;
    for (let i = 0; i < this.#slots; i++) this.#free.push(i);
  }

  /** The current slab makes way for a larger one: dropped now when every slot is free, else retired. */
  #retire(): void {
    const s = this.#slab;
    if (s === undefined) return;
    const out = new Set<number>();
    for (let i = 0; i < this.#slots; i++) if (!this.#free.includes(i)) out.add(i);
    if (out.size === 0) {
      this.#dropSlab();
      return;
    }
    this.#retired.set(s.id, { slab: s, out });
    this.#slab = undefined;
  }

  #drop(id: number): void {
    const old = this.#retired.get(id);
    if (old === undefined) return;
    this.#retired.delete(id);
    closeSlab(old.slab);
  }

  #dropSlab(): void {
    const s = this.#slab;
    if (s === undefined) return;
    closeSlab(s);
    this.#slab = undefined;
  }

  #wait(signal: AbortSignal): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('the shared-memory ring is closed'));
    signal.throwIfAborted();
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(() => {
        signal.removeEventListener('abort', onAbort);
        if (this.#closed) reject(new Error('the shared-memory ring is closed'));
        else resolve();
      });
    });
  }

  #wake(): void {
    const w = this.#waiters;
    this.#waiters = [];
    for (const f of w) f();
  }
}

function unlinkSlab(s: OpenSlab): void {
  if (!s.linked) return;
  s.linked = false;
  try {
    unlinkSync(s.path);
  } catch {
    // already gone
  }
}

function closeSlab(s: OpenSlab): void {
  unlinkSlab(s);
  s.map?.unmap();
  closeSync(s.fd);
}

interface Mapping {
  readonly view: Uint8Array;
  unmap(): void;
}

interface Libc {
  readonly mmap: (addr: null, len: number, prot: number, flags: number, fd: number, off: number) => unknown;
  readonly munmap: (addr: unknown, len: number) => number;
  readonly address: (ptr: unknown) => bigint;
  readonly view: (ptr: unknown, len: number) => ArrayBuffer;
}

let libc: Libc | null | undefined;

function loadLibc(): Libc | null {
  if (libc !== undefined) return libc;
  libc = null;
  if (process.platform !== 'linux' || !readSwitch('shmMmap')) return libc;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as {
      load(name: string): { func(signature: string): (...args: unknown[]) => unknown };
      address(ptr: unknown): bigint;
      view(ptr: unknown, len: number): ArrayBuffer;
    };
    const c = koffi.load('libc.so.6');
    libc = {
      mmap: c.func('void *mmap(void *addr, size_t len, int prot, int flags, int fd, intptr_t off)') as Libc['mmap'],
      munmap: c.func('int munmap(void *addr, size_t len)') as Libc['munmap'],
      address: (p) => koffi.address(p),
      view: (p, len) => koffi.view(p, len),
    };
  } catch {
    libc = null;
  }
  return libc;
}

const PROT_READ_WRITE = 0x3;
const MAP_SHARED = 0x1;

/** The file `fd` mapped read-write and shared (NOTE [Mapped slabs]); undefined where that is not available. */
function mapShared(fd: number, bytes: number): Mapping | undefined {
  const c = loadLibc();
  if (c === null) return undefined;
  const ptr = c.mmap(null, bytes, PROT_READ_WRITE, MAP_SHARED, fd, 0);
  // MAP_FAILED is (void *) -1.
  if (ptr === null || c.address(ptr) === 0xffffffffffffffffn) return undefined;
  let view: Uint8Array | undefined = new Uint8Array(c.view(ptr, bytes));
  return {
    get view() {
      if (view === undefined) throw new Error('stoker serve: a shared-memory slab was written after it was unmapped');
      return view;
    },
    unmap() {
      if (view === undefined) return;
      view = undefined;
      c.munmap(ptr, bytes);
    },
  };
}
