// The figures people read off `loader.stats()`: throughput, the share of time the training loop
// waited on the loader, and where rows came from (VRAM pool, RAM cache, disk stage, source). The rule: derived
// from one EpochStats only, with the definitions of docs/stats.md, so the CLI, the report and a
// user's own dashboard agree.

import type { EpochStats } from '../pipeline/stats.js';

export interface EpochFigures {
  readonly epoch: number;
  readonly mode: 'resident' | 'streaming';
  readonly batches: number;
  readonly rows: number;
  readonly seconds: number;
  /** Rows delivered per second of the epoch's wall time. */
  readonly samplesPerSec: number;
  /** waitMs / wallMs, in % (includes the transform, which runs while the loop waits). */
  readonly waitPct: number;
  /** transformMs / wallMs, in %. */
  readonly transformPct: number;
  /**
   * Where the epoch's rows came from, in % of them: the VRAM sample pool (rows served on the GPU),
   * the RAM sample cache, the disk stage, the source. Undefined when no row went through the tiers
   * (resident mode reads the dataset once, at create).
   */
  readonly poolPct: number | undefined;
  readonly cachePct: number | undefined;
  readonly diskPct: number | undefined;
  readonly sourcePct: number | undefined;
  /** Cache hit rate: rows served by any tier instead of the source (100 − sourcePct), in %. */
  readonly hitPct: number | undefined;
  readonly failedBatches: number;
}

export function epochFigures(s: EpochStats): EpochFigures {
  const wall = Math.max(s.wallMs, 1e-9);
  const tiered = s.rowsServedOnDevice + s.rowsFromCache + s.rowsFromDisk + s.rowsFromSource;
  const share = (x: number) => (tiered === 0 ? undefined : (100 * x) / tiered);
  return {
    epoch: s.epoch,
    mode: s.mode,
    batches: s.batches,
    rows: s.rowsDelivered,
    seconds: s.wallMs / 1000,
    samplesPerSec: s.wallMs > 0 ? s.rowsDelivered / (s.wallMs / 1000) : 0,
    waitPct: Math.min(100, (100 * s.waitMs) / wall),
    transformPct: Math.min(100, (100 * s.transformMs) / wall),
    poolPct: share(s.rowsServedOnDevice),
    cachePct: share(s.rowsFromCache),
    diskPct: share(s.rowsFromDisk),
    sourcePct: share(s.rowsFromSource),
    hitPct: share(tiered - s.rowsFromSource),
    failedBatches: s.failedBatches,
  };
}

/** A percentage for a table cell: "97.3 %", or "—" when there is none. */
export function pct(x: number | undefined, digits = 1): string {
  return x === undefined || !Number.isFinite(x) ? '—' : `${x.toFixed(digits)} %`;
}

/** Thousands grouped with thin spaces: 12345.6 → "12 346". */
export function int(x: number): string {
  return Number.isFinite(x) ? Math.round(x).toLocaleString('en-US').replace(/,/g, ' ') : '—';
}

/** Bytes in binary units: 1536 → "1.5 KiB". */
export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(v >= 100 ? 0 : 1)} ${units[u]}`;
}
