// Helpers every bench shares: the hardware line, timing and robust summaries, a sink that keeps
// consumed values alive, flag parsing and table printing. The rule: a bench reports ratios against a
// reference measured in the same process, so these helpers never cache figures across runs.

import { cpus } from 'node:os';
import { parseArgs } from 'node:util';

export interface Hardware {
  readonly cpu: string;
  readonly cores: number;
  readonly node: string;
  readonly platform: string;
}

export function hardware(): Hardware {
  const list = cpus();
  return {
    cpu: list[0]?.model.trim() ?? 'unknown CPU',
    cores: list.length,
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
  };
}

export function hardwareLine(hw: Hardware = hardware()): string {
  return `${hw.cpu}, ${hw.cores} cores, Node ${hw.node}, ${hw.platform}`;
}

/** Milliseconds, high resolution. */
export function now(): number {
  return performance.now();
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function min(xs: readonly number[]): number {
  return xs.length === 0 ? Number.NaN : Math.min(...xs);
}

/**
 * A value the optimizer cannot prove unused: benches fold what they consume into it, and print or
 * check it at the end, so no read is dead code.
 */
export const sink = { value: 0 };

/** Collect garbage now if the process runs with --expose-gc; a no-op otherwise. */
export function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/** Parse `--name` boolean flags; an unknown flag or a positional argument throws with the usage line. */
export function parseFlags<const K extends string>(args: readonly string[], flags: readonly K[], usage: string): Record<K, boolean> {
  const options = Object.fromEntries(flags.map((f) => [f, { type: 'boolean' as const, default: false }]));
  let values: Record<string, unknown>;
  try {
    ({ values } = parseArgs({ args: [...args], options, strict: true, allowPositionals: false }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nusage: ${usage}`);
  }
  return Object.fromEntries(flags.map((f) => [f, values[f] === true])) as Record<K, boolean>;
}

/** A bad command line: run.ts prints the message and exits with code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Thousands separators, no decimals: 1234567.8 → "1 234 568". */
export function fmtInt(x: number): string {
  if (!Number.isFinite(x)) return '—';
  return Math.round(x).toLocaleString('en-US').replace(/,/g, ' ');
}

/** Fixed decimals, or an em dash for a missing value. */
export function fmtFixed(x: number | undefined, digits: number): string {
  return x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(digits);
}

// Plain-text tables: the CLI's, so that `stoker bench` and `npm run bench` print alike.
export { type Column, table } from '../src/cli/ui.js';
