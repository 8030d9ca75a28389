// Internal: not exported from the package entry.
// The patience both modes have with a transient device out-of-memory (reference §6.5): wait
// OOM_RETRY_SLEEP_MS and retry, up to OOM_RETRY_ATTEMPTS times, then let the batch fail under the
// loader's `errors` policy. The rule: only what a failed attempt left untouched may be retried — the
// device commits an upload or a gather only once all its memory is held (NOTE [Upload commits last]
// in accelerator-device.ts), so a retry starts from a clean slate.

import { setTimeout as sleep } from 'node:timers/promises';
import { isDeviceOutOfMemory } from '../device/backend.js';
import { OOM_RETRY_ATTEMPTS, OOM_RETRY_SLEEP_MS } from '../base/budget.js';

/**
 * True when `error`, thrown by attempt `attempt` (0-based), is worth another attempt: a device
 * out-of-memory, attempts left, and the epoch still running.
 */
export function retriesOom(error: unknown, attempt: number, signal: AbortSignal): boolean {
  return isDeviceOutOfMemory(error) && attempt < OOM_RETRY_ATTEMPTS && !signal.aborted;
}

/** The wait before the next attempt; ends early (rejecting) when the epoch ends. */
export function oomPause(signal: AbortSignal): Promise<void> {
  return sleep(OOM_RETRY_SLEEP_MS, undefined, { signal });
}
