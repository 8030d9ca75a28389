// Internal: not exported from the package entry.
// The VRAM sample pool: in streaming mode, samples captured on the device from batches that crossed
// the bus anyway, kept in 64 MiB slabs and gathered on the device in later epochs, so only misses
// are uploaded. Keyed by sample id; fill until full, never evict — except, as a last resort, the
// newest slab under a device out-of-memory once the in-flight target is already 1 (reference §7).
//
// NOTE [VRAM pool budget]
// Dormant until one decision, taken after the consumer's second batch (the honest probe: the model's
// step memory is now visible): budget = free − (min(depth, 16) batches of in-flight reserve
// + 512 MiB margin); below one 64 MiB slab the pool stays dormant for good. After an eviction the
// budget is latched to what the pool holds, so memory freed under pressure is never refilled.

import type { Backend, DeviceBuffer } from '../backend.js';
import { PoolPayoff } from '../pool-payoff.js';
import type { PoolFigures, VramPool as SamplePool } from '../device.js';
import { POOL_MARGIN_BYTES, flowReserveBytes, vramPoolBudget } from '../../base/budget.js';
import { readSwitch } from '../../base/env.js';

export const SLAB_BYTES = 64 * 2 ** 20;
/** The headroom NOTE [The budget law] keeps beside the pool. */
export const MARGIN_BYTES = POOL_MARGIN_BYTES;
export { flowReserveBytes };

/** The environment kill switch: the env switch `vramPool` (base/env.ts) set to off (or 0) turns the pool off everywhere. */
export function vramPoolKilled(env: NodeJS.ProcessEnv = process.env): boolean {
  return !readSwitch('vramPool', env);
}

interface Slab {
  readonly buffers: readonly DeviceBuffer[];
  used: number;
}

export class VramPool implements SamplePool {
  readonly #backend: Backend;
  readonly #rowBytes: readonly number[];
  readonly #sampleBytes: number;
  readonly #rowsPerSlab: number;
  /** sample id → slab × rowsPerSlab + row + 1; 0 = not pooled. */
  readonly #where: Int32Array;
  readonly #slabs: Slab[] = [];
  readonly #enabled: boolean;
  readonly figures: PoolFigures = { rowsServed: 0, rowsSeen: 0, bytesSaved: 0, captured: 0 };
  /** Whether stitching its rows pays, epoch by epoch (NOTE [A pool that does not pay stays dormant]). */
  readonly payoff = new PoolPayoff();
  #decided = false;
  #budget = 0;
  #bytes = 0;
  #full = false;

  constructor(backend: Backend, rowBytes: readonly number[], length: number, enabled: boolean) {
    this.#backend = backend;
    this.#rowBytes = rowBytes;
    this.#sampleBytes = Math.max(rowBytes.reduce((a, b) => a + b, 0), 1);
    this.#rowsPerSlab = Math.max(Math.floor(SLAB_BYTES / this.#sampleBytes), 1);
    this.#where = new Int32Array(length);
    this.#enabled = enabled;
  }

  /** True once a budget was installed and not fully evicted: partition may return hits. */
  get active(): boolean {
    return this.#budget > 0;
  }

  /** Active and not yet full: `admit` may take rows. */
  get admitting(): boolean {
    return this.active && !this.#full;
  }

  get decided(): boolean {
    return this.#decided;
  }

  get budget(): number {
    return this.#budget;
  }

  /** Bytes held in slabs. */
  get bytes(): number {
    return this.#bytes;
  }

  get pooledRows(): number {
    return this.#slabs.reduce((s, slab) => s + slab.used, 0);
  }

  /** Every sample of the dataset is pooled (and no eviction has happened since). */
  get complete(): boolean {
    return this.#where.length > 0 && this.pooledRows === this.#where.length;
  }

  /** The one budget decision (NOTE [VRAM pool budget]); a no-op before the honest probe or once decided. */
  maybeInstall(honest: boolean, target: number, batchBytes: number): void {
    if (!this.#enabled || this.#decided || !honest) return;
    this.installWithReserve(flowReserveBytes(target, batchBytes));
  }

  installWithReserve(reserve: number): void {
    if (this.#decided) return;
    this.#decided = true;
    const info = this.#backend.memInfo();
    if (info === undefined) return;
    const free = Math.max(info.total - info.used, 0);
    const budget = vramPoolBudget(free, reserve);
    if (budget < SLAB_BYTES) return;
    // Whole-or-nothing pools decline a budget that cannot hold every sample (see `wholeOnly`).
    if (this.wholeOnly && budget < this.#wholeBytes()) return;
    this.#budget = budget;
  }

  /**
   * Install only a pool that can hold every sample (set before the budget decision). For rows the
   * device reads in place from page-locked host memory with a gather kernel (small rows of a pinned
   * in-memory source), a partial pool costs the host more per batch — pool planning and address
   * tables — than it saves on the bus; a whole pool still pays, since the loader then turns resident.
   */
  wholeOnly = false;

  /** Slab bytes a pool holding every sample needs. */
  #wholeBytes(): number {
    return Math.ceil(this.#where.length / this.#rowsPerSlab) * this.#rowsPerSlab * this.#sampleBytes;
  }

  /** Bumped by every eviction: a batch planned under an older generation may name freed rows. */
  generation = 0;

  /**
   * Split batch positions into pooled (hits) and not (misses), both in caller order. Counted in
   * `figures` unless `count` is false; the caller then counts the split with `tally` once the batch
   * is made (a batch retried after an out-of-memory is counted once).
   */
  partition(ids: ArrayLike<number>, count = true): { hits: number[]; misses: number[] } {
    const hits: number[] = [];
    const misses: number[] = [];
    if (!this.active || this.#slabs.length === 0) {
      for (let r = 0; r < ids.length; r++) misses.push(r);
    } else {
      for (let r = 0; r < ids.length; r++) (this.#where[ids[r]!]! > 0 ? hits : misses).push(r);
    }
    if (count) this.tally({ hits, misses });
    return { hits, misses };
  }

  /** Count a split made with `partition(ids, false)` in `figures`. */
  tally(split: { readonly hits: readonly number[]; readonly misses: readonly number[] }): void {
    if (!this.active) return;
    const rows = split.hits.length + split.misses.length;
    this.figures.rowsSeen += rows;
    this.figures.rowsServed += split.hits.length;
    this.figures.bytesSaved += split.hits.length * this.#sampleBytes;
  }

  /** Device address of field `f` of pooled sample `id` (which must be pooled), as an exact number (< 2^53). */
  address(f: number, id: number): number {
    const k = this.#where[id]! - 1;
    const slab = this.#slabs[Math.floor(k / this.#rowsPerSlab)]!;
    return Number(slab.buffers[f]!.ptr) + (k % this.#rowsPerSlab) * this.#rowBytes[f]!;
  }

  /**
   * Admit fresh ids (not pooled; the first occurrence of a duplicate wins): returns, per admitted
   * row, the batch position it comes from and its new pool slot. The caller enqueues the copies
   * before any later batch can read those slots (same stream).
   */
  admit(ids: ArrayLike<number>, positions: readonly number[]): { position: number; id: number }[] {
    const out: { position: number; id: number }[] = [];
    if (!this.active || this.#full) return out;
    for (const position of positions) {
      const id = ids[position]!;
      if (this.#where[id] !== 0) continue;
      let slab = this.#slabs.at(-1);
      if (slab === undefined || slab.used === this.#rowsPerSlab) {
        slab = this.#newSlab();
        if (slab === undefined) break;
      }
      this.#where[id] = (this.#slabs.length - 1) * this.#rowsPerSlab + slab.used + 1;
      slab.used++;
      out.push({ position, id });
    }
    this.figures.captured += out.length;
    return out;
  }

  /**
   * Last resort under device memory pressure: forget the newest slab and latch the budget to what
   * is left. Returns the slab's buffers for the caller to free once queued work is done.
   */
  evictOneSlab(): readonly DeviceBuffer[] | undefined {
    const slab = this.#slabs.pop();
    if (slab === undefined) return undefined;
    const first = this.#slabs.length * this.#rowsPerSlab + 1;
    for (let i = 0; i < this.#where.length; i++) if (this.#where[i]! >= first) this.#where[i] = 0;
    this.#bytes -= this.#slabBytes();
    this.#budget = this.#bytes;
    this.#full = false;
    this.generation++;
    return slab.buffers;
  }

  /** All slab buffers, for the device to free at close. */
  release(): readonly DeviceBuffer[] {
    const buffers = this.#slabs.flatMap((s) => s.buffers);
    this.#slabs.length = 0;
    this.#where.fill(0);
    this.#bytes = 0;
    this.#budget = 0;
    return buffers;
  }

  #slabBytes(): number {
    return this.#rowsPerSlab * this.#sampleBytes;
  }

  #newSlab(): Slab | undefined {
    if (this.#bytes + this.#slabBytes() > this.#budget || this.#slabs.length >= 2 ** 31 / this.#rowsPerSlab) {
      this.#full = true;
      return undefined;
    }
    const buffers: DeviceBuffer[] = [];
    try {
      for (const rb of this.#rowBytes) buffers.push(this.#backend.alloc(this.#rowsPerSlab * rb));
    } catch {
      // A slab the device cannot hold ends admissions; content already pooled keeps serving.
      for (const b of buffers) this.#backend.free(b);
      this.#full = true;
      this.#budget = this.#bytes;
      return undefined;
    }
    const slab = { buffers, used: 0 };
    this.#slabs.push(slab);
    this.#bytes += this.#slabBytes();
    return slab;
  }
}
