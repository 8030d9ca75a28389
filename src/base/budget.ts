// Internal: not exported from the package entry.
// NOTE [The budget law]
// Every memory budget of the loader comes from this one module, with flodl 0.7.0's formulas and
// constants (reference §2), so that a number can be traced to one line:
// - Device prefetch depth: `floor((total·u − used − reserve) / batchBytes)`, with a double-buffer
//   floor when physical free memory is ≥ 256 batches; 2 on a device without a probe (the CPU).
// - First fill: the probe cannot see the model's step memory before its first step, so the first
//   target is discounted (1/3 with no information, 1/2 with a framework reserve, none when the user
//   declared one) and re-sized once, honestly, after the consumer drains its second batch.
// - Host RAM: budgets are anchored — the bytes a tier already holds are added back to MemAvailable
//   before taking the share — so they stay at r·A0 as the tier fills, neither ratcheting nor collapsing.
// - VRAM pool: one decision after the honest probe, `free − (min(depth, 16) batches + 512 MiB)`,
//   dormant below one slab (NOTE [VRAM pool budget], device/accelerator/vram-pool.ts).
// - Page-locked memory: `pinSource: 'auto'` pins an in-memory source only up to half the machine's
//   RAM (pinned pages cannot be swapped or reclaimed); recycled pinned staging and tables are kept
//   up to HOST_KEEP_BYTES per device.
// - Format caches (a reader's decoded record batches, e.g. Arrow's): one share for the whole
//   loader, min(256 MiB, RAM/32), split evenly among the reader threads that each hold a cache, so
//   that more readers never multiply it.

import { readFileSync } from 'node:fs';

/** Resident-fit cap (fixed; not the `vramMaxUsage` knob). */
export const RESIDENT_MAX_USAGE = 0.9;
/** Initial in-flight target before the first epoch sizes it. */
export const BOOTSTRAP_PREFETCH = 4;
/** Hard cap on any host-RAM share. */
export const RAM_SHARE_CEILING = 0.9;
/** Reader-ring size when RAM cannot be measured or a batch cannot be priced. */
export const RING_SLOTS_FALLBACK = 4;
/**
 * Most batches in flight on any route: the reader pool's job-token array addresses this many staging
 * slots, so the ring never grows past it and `prefetch` is refused above it at create.
 */
export const MAX_IN_FLIGHT = 1024;
/** Reader-ring cap while a retained tier (the sample cache) is active. */
export const RING_SLOTS_WITH_CACHE = 8;
/** Depth on a device without a probe, for unpriceable batches, and the floor. */
export const DOUBLE_BUFFER = 2;
/** Physical-free multiple of a batch required for the double-buffer floor. */
export const FLOOR_FREE_RATIO = 256;
/** Transient-OOM retries (about one second of patience at 100 ms each). */
export const OOM_RETRY_ATTEMPTS = 10;
export const OOM_RETRY_SLEEP_MS = 100;

export const VRAM_MAX_USAGE_RANGE = [0.5, 0.99] as const;
export const RAM_MAX_USAGE_RANGE = [0, RAM_SHARE_CEILING] as const;

/** Where the activation reserve came from: nothing known, a framework estimate, or the user. */
export type ReserveSource = 'bare' | 'auto' | 'user';

/** A device's memory probe: undefined = the device has none (CPU); a function returning undefined = the probe failed. */
/** A device's memory probe: what the driver counts (the budget law's input). */
export interface MemInfo {
  /** Bytes in use on the device, as the driver counts them. */
  readonly used: number;
  readonly total: number;
}

export type Probe = (() => MemInfo | undefined) | undefined;

export function clamp(x: number, lo: number, hi: number): number {
  return Math.min(Math.max(x, lo), hi);
}

/** VRAM pool: headroom kept free beside the pool, and the most in-flight batches reserved for the flow. */
export const POOL_MARGIN_BYTES = 512 * 2 ** 20;
export const FLOW_RESERVE_BATCHES = 16;

/** Device bytes kept free for batches in flight when the VRAM pool takes its budget. */
export function flowReserveBytes(depth: number, batchBytes: number): number {
  return Math.min(Math.max(depth, 1), FLOW_RESERVE_BATCHES) * batchBytes;
}

/** The VRAM pool's budget from the device's free bytes at the honest probe. */
export function vramPoolBudget(free: number, reserve: number): number {
  return Math.max(free - (reserve + POOL_MARGIN_BYTES), 0);
}

/** Largest share of the machine's RAM `pinSource: 'auto'` page-locks. */
export const PIN_SOURCE_RAM_SHARE = 0.5;

export function pinSourceFits(bytes: number, totalRam: number): boolean {
  return bytes <= totalRam * PIN_SOURCE_RAM_SHARE;
}

/** Recycled page-locked host buffers an accelerator keeps for reuse (bytes; past it they are unpinned). */
export const HOST_KEEP_BYTES = 256 * 2 ** 20;

/** The format caches' share of RAM for a whole loader, and its cap. */
export const FORMAT_CACHE_RAM_FRACTION = 1 / 32;
export const FORMAT_CACHE_MAX_BYTES = 256 * 2 ** 20;

/** Reader threads of this loader that hold a format cache each; set by a reader worker at boot (module state is per thread). */
let formatCacheReaders = 1;

export function setFormatCacheReaders(readers: number): void {
  formatCacheReaders = Math.max(1, Math.floor(readers));
}

/** One reader's format-cache budget: its equal part of the loader's share. */
export function formatCacheBytes(totalRam: number, readers = formatCacheReaders): number {
  return Math.floor(Math.min(FORMAT_CACHE_MAX_BYTES, totalRam * FORMAT_CACHE_RAM_FRACTION) / Math.max(readers, 1));
}

/** In-flight batches the device can hold (reference §2.4). */
export function prefetchDepthFromVram(sampleBytes: number, batchSize: number, probe: Probe, usage: number, reserve: number): number {
  if (probe === undefined) return DOUBLE_BUFFER;
  const batchBytes = sampleBytes * batchSize;
  if (batchBytes === 0) return DOUBLE_BUFFER;
  const info = probe();
  const used = info?.used ?? Number.MAX_SAFE_INTEGER;
  const total = info?.total ?? 0;
  const cap = Math.floor(total * clamp(usage, ...VRAM_MAX_USAGE_RANGE));
  const budget = Math.max(cap - (used + reserve), 0);
  const depth = Math.floor(budget / batchBytes);
  if (depth > 0) return depth;
  const free = Math.max(total - used, 0);
  return DOUBLE_BUFFER * batchBytes * FLOOR_FREE_RATIO <= free ? DOUBLE_BUFFER : 0;
}

/**
 * Whether a declared activation reserve can exist on a device of this memory: at most its total.
 * A larger one leaves `prefetchDepthFromVram` no budget at any usage and describes a step that can
 * never run; it is refused at create and by `setActivationReserve`.
 */
export function reserveFits(reserve: number, info: MemInfo): boolean {
  return reserve <= info.total;
}

/** The discounted first target (reference §2.5). */
export function initialFillTarget(depth: number, source: ReserveSource): number {
  const div = source === 'bare' ? 3 : source === 'auto' ? 2 : 1;
  return Math.max(Math.floor(depth / div), 1);
}

/** Whether the whole dataset fits on the device (reference §2.6). Always true without a probe. */
export function canFitResident(n: number, sampleBytes: number, probe: Probe): boolean {
  if (probe === undefined) return true;
  const info = probe();
  if (info === undefined) return false;
  const budget = Math.max(Math.floor(info.total * RESIDENT_MAX_USAGE) - info.used, 0);
  return sampleBytes * n < budget;
}

/** floor((available + held) × min(r, 0.90)) */
export function anchored(available: number, held: number, r: number): number {
  return Math.floor((available + held) * Math.min(r, RAM_SHARE_CEILING));
}

export function sampleCacheBudget(available: number, held: number, ringBytes: number, r: number): number {
  return Math.max(anchored(available, held, r) - ringBytes, 0);
}

/** Reader-ring slots from host RAM (reference §2.3); `available` undefined = RAM cannot be measured. */
export function ringSlotsFromRam(sampleBytes: number, batchSize: number, r: number, available: number | undefined, epochBatches: number): number {
  if (r <= 0) return 0;
  if (available === undefined) return Math.min(RING_SLOTS_FALLBACK, epochBatches);
  const batchBytes = sampleBytes * batchSize;
  if (batchBytes === 0) return Math.min(RING_SLOTS_FALLBACK, epochBatches);
  return Math.min(Math.floor(anchored(available, 0, r) / batchBytes), epochBatches, MAX_IN_FLIGHT);
}

/** MemAvailable from /proc/meminfo in bytes; undefined off Linux or when unreadable. */
export function memAvailable(): number | undefined {
  try {
    const m = /^MemAvailable:\s+(\d+)\s+kB/m.exec(readFileSync('/proc/meminfo', 'utf8'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}
