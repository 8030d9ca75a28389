// Helpers every bench shares: the hardware line, timing and robust summaries, a sink that keeps
// consumed values alive, flag parsing, table printing and reading CPU time from /proc. The rule: a bench reports ratios against a
// reference measured in the same process, so these helpers never cache figures across runs.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
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

let ticksPerSecond: number | undefined;
/** Clock ticks per second of /proc's CPU times (`getconf CLK_TCK`; 100 when that fails). */
export function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    const t = Number(r.stdout?.trim());
    ticksPerSecond = r.status === 0 && Number.isInteger(t) && t > 0 ? t : 100;
  }
  return ticksPerSecond;
}

/** The fields of a /proc stat file after "pid (comm) " (state first: field 3 is index 0), or undefined when it is gone. */
export function statFields(path: string): string[] | undefined {
  try {
    const text = readFileSync(path, 'utf8');
    // comm may hold spaces and parentheses: cut at the last ')'.
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** utime + stime (fields 14 and 15 of a stat file) in clock ticks. */
export const cpuTicksOf = (fields: readonly string[]): number => Number(fields[11]) + Number(fields[12]);
