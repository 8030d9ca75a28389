// Internal: not exported from the package entry.
// Classified retries for remote reads. The rule: a failure the store or the network may get over
// (throttling 503 SlowDown / 429, other 5xx, a reset or timed-out connection, a body cut short,
// expired credentials, which the SDK's chain refreshes on the next call) is retried with exponential
// backoff and full jitter until a deadline; a failure that will not change by asking again (403
// AccessDenied, 404 NoSuchKey, a wrong signature, a changed object) fails at once. Either way the
// error names the URL, what was tried and how often. Retries never change which bytes are asked for,
// so the sample order is the plan's whatever the network does.

import { setTimeout as sleep } from 'node:timers/promises';
import { switchName } from '../base/env.js';
import { LoaderError } from '../errors.js';
import { StoreError } from './store.js';

export interface RetryPolicy {
  /** Give up once this many ms have passed since the first attempt (default 120 000). */
  readonly deadlineMs: number;
  /** First backoff ceiling (default 200 ms), doubled per attempt up to `maxDelayMs` (default 10 000). */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  /** A request that brings no byte (no answer, or a body that stops) for this long is abandoned and retried (default 60 000). */
  readonly stallMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { deadlineMs: 120_000, baseDelayMs: 200, maxDelayMs: 10_000, stallMs: 60_000 };

const RETRY_STATUS = new Set([408, 429, 500, 502, 503, 504]);
const RETRY_CODES = new Set([
  'SlowDown', 'Throttling', 'ThrottlingException', 'RequestTimeout', 'RequestTimeTooSkewed', 'InternalError', 'ServiceUnavailable',
  'ExpiredToken', 'ExpiredTokenException', 'RequestExpired', 'TruncatedBody', 'TimeoutError', 'AbortError:timeout',
  'ECONNRESET', 'ECONNREFUSED', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EAI_AGAIN', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH',
  'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ERR_STREAM_PREMATURE_CLOSE',
]);

/** True when asking again may succeed. */
export function retryable(error: unknown): boolean {
  if (!(error instanceof StoreError)) {
    const code = (error as { code?: string } | null)?.code;
    return code !== undefined && RETRY_CODES.has(code);
  }
  if (error.code !== undefined && RETRY_CODES.has(error.code)) return true;
  return error.status !== undefined && RETRY_STATUS.has(error.status);
}

export interface RetryCounters {
  retries: number;
}

/**
 * Run `attempt` until it succeeds, fails for good, or the deadline passes. `doing` names the work in
 * the final error (`ERR_REMOTE`): `GET s3://b/k`. An abort ends the wait at once.
 */
export async function withRetries<T>(doing: string, attempt: (n: number) => Promise<T>, policy: RetryPolicy, counters: RetryCounters, signal?: AbortSignal): Promise<T> {
  const t0 = Date.now();
  for (let n = 0; ; n++) {
    try {
      return await attempt(n);
    } catch (error) {
      if (signal?.aborted) throw error;
      const elapsed = Date.now() - t0;
      const delay = Math.random() * Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** n);
      if (!retryable(error)) throw remoteError(doing, error, n + 1, false);
      if (elapsed + delay > policy.deadlineMs) throw remoteError(doing, error, n + 1, true, policy.deadlineMs);
      counters.retries++;
      await sleep(delay, undefined, signal ? { signal } : undefined);
    }
  }
}

function remoteError(doing: string, error: unknown, attempts: number, timedOut: boolean, deadlineMs?: number): LoaderError {
  if (error instanceof LoaderError) return error;
  const what = error instanceof Error ? error.message : String(error);
  const status = error instanceof StoreError ? error.status : undefined;
  const code = error instanceof StoreError ? error.code : undefined;
  const fix = timedOut
    ? `still failing after ${attempts} attempts over ${Math.round((deadlineMs ?? 0) / 1000)} s; check the network and the store, or raise ${switchName('remoteDeadline')}`
    : status === 403 || code === 'AccessDenied' || code === 'SignatureDoesNotMatch' || code === 'InvalidAccessKeyId'
      ? 'the store refused the credentials: check AWS_PROFILE / AWS_ACCESS_KEY_ID (the AWS SDK credential chain), and the endpoint and region'
      : status === 404 || code === 'NoSuchKey' || code === 'NotFound' || code === 'NoSuchBucket'
        ? 'no such object: check the bucket and key (listing shows what exists)'
        : status === 412 || code === 'PreconditionFailed'
          ? 'the object changed while it was read: open the dataset again'
          : 'not a failure that retrying fixes';
  return new LoaderError('ERR_REMOTE', `${doing}: ${what}; ${fix}`, { cause: error });
}
