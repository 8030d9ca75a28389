// Test helpers for decode child processes: which ones this process has, and whether one is gone.

import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { HANG_MS, waitFor } from '../fixtures.js';

/** Whether `pid` is alive: kill(pid, 0) succeeds, or fails with ESRCH once it is gone (any other error fails the test). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    assert.equal((e as NodeJS.ErrnoException).code, 'ESRCH', `kill(${pid}, 0)`);
    return false;
  }
}

/**
 * Whether `pid` is gone within `graceMs` (an orphan is reaped by init a moment after it is killed:
 * a moment that a loaded machine stretches to seconds).
 */
export async function gone(pid: number, graceMs = HANG_MS): Promise<boolean> {
  return waitFor(() => !alive(pid), { what: `process ${pid} ending`, timeoutMs: graceMs, intervalMs: 20 }).catch(() => false);
}

/**
 * Decode child processes of this process (Linux: /proc), whichever thread started them: children of
 * this pid only, never a scan by command line, which would count other suites' and other processes'.
 */
export function decodeChildren(): number[] {
  if (process.platform !== 'linux') return [];
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('decode-child')) out.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}
