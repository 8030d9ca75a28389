// Internal: not exported from the package entry.
// The CPU route of `stoker serve`: a ring of slots in one shared-memory file (a "slab") that the
// client maps once. A batch is copied into a free slot (the one copy on the CPU) and the slot is
// reused only after the client's release. The rule: the file is unlinked as soon as the client says
// it mapped it (or when the ring closes), so nothing is left in /dev/shm whichever side dies.
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

export class ShmRing {
  readonly #slots: number;
  #slab: (Slab & { fd: number; linked: boolean; map: Mapping | undefined }) | undefined;
  #nextSlab = 0;
  readonly #free: number[] = [];
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

  /**
   * A free slot of at least `bytes` bytes, waiting for a release when all are leased. Returns the
   * slab too: a new one (announce it) when the batch outgrew the current slot size, made only once
   * every slot of the old one came back.
   */
  async acquire(bytes: number, signal: AbortSignal): Promise<{ slab: Slab; slot: number; fresh: boolean }> {
    let fresh = false;
    if (this.#slab === undefined || bytes > this.#slab.slotBytes) {
      while (this.#slab !== undefined && this.#free.length < this.#slots) await this.#wait(signal);
      this.#dropSlab();
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
    if (this.#slab?.id !== slab || slot < 0 || slot >= this.#slots || this.#free.includes(slot)) return false;
    this.#free.push(slot);
    this.#wake();
    return true;
  }

  /** Every slot is free again (the client left, or stopped an epoch). */
  releaseAll(): void {
    this.#free.length = 0;
    for (let i = 0; i < this.#slots; i++) this.#free.push(i);
    this.#wake();
  }

  /** The client mapped `slab`: its name is no longer needed. */
  unlink(slab: number): void {
    const s = this.#slab;
    if (s === undefined || s.id !== slab || !s.linked) return;
    s.linked = false;
    try {
      unlinkSync(s.path);
    } catch {
      // already gone
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
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

  #dropSlab(): void {
    const s = this.#slab;
    if (s === undefined) return;
    this.unlink(s.id);
    s.map?.unmap();
    closeSync(s.fd);
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
