// Every failure Stoker reports is a `LoaderError` with a stable `code`; messages name the knob or
// the file, the bad value and the fix. Create errors through the factories below, never ad hoc,
// so that one failure always reads the same.

import { nearestName } from './base/nearest-name.js';

/** Stable error codes. Tests and callers match on these, never on message text. */
export type LoaderErrorCode =
  | 'ERR_INVALID_OPTION'
  | 'ERR_UNSUPPORTED_OPTION'
  | 'ERR_EMPTY_DATASET'
  | 'ERR_INVALID_DATASET'
  | 'ERR_EMPTY_SAMPLE'
  | 'ERR_SAMPLE_MISMATCH'
  | 'ERR_NAMES_COUNT'
  | 'ERR_AUGMENT_WITH_SAMPLER'
  | 'ERR_SAMPLER_OUTPUT'
  | 'ERR_BATCH_FAILED'
  | 'ERR_TRANSFORM_OUTPUT'
  | 'ERR_BATCH_RELEASED'
  | 'ERR_UNKNOWN_FIELD'
  | 'ERR_EPOCH_ACTIVE'
  | 'ERR_LOADER_CLOSED'
  | 'ERR_INVALID_TENSOR'
  | 'ERR_DISK_STAGE'
  | 'ERR_IMPURE_DATASET'
  | 'ERR_WORKER_START'
  | 'ERR_WORKER_DIED'
  | 'ERR_NEEDS_SAMPLE_LAYER'
  | 'ERR_DEVICE_OOM'
  | 'ERR_CUDA'
  | 'ERR_CUDA_UNAVAILABLE'
  | 'ERR_KERNEL_MISSING'
  | 'ERR_IMPURE_TRANSFORM'
  | 'ERR_BAD_FILE'
  | 'ERR_FILE_ACCESS'
  | 'ERR_LAUNCH_ENV'
  | 'ERR_RESUME_MISMATCH'
  | 'ERR_TOO_LONG'
  | 'ERR_PIN_SOURCE';

export class LoaderError extends Error {
  readonly code: LoaderErrorCode;

  constructor(code: LoaderErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LoaderError';
    this.code = code;
  }
}

/** Where a batch failed: reading it (the dataset), on the device (out of memory past the retries), or in the transform. */
export type BatchStage = 'dataset' | 'device' | 'transform';

/**
 * One batch could not be produced: the dataset threw or rejected, the device stayed out of memory
 * past the retries, or the transform failed.
 * The epoch that raised it can be abandoned; the loader stays usable for the next epoch.
 */
export class BatchError extends LoaderError {
  /** Epoch the batch belongs to. */
  readonly epoch: number;
  /** Position of the batch within its epoch (0-based). */
  readonly batchIndex: number;
  /** Dataset sample ids the batch was made of, in batch order. */
  readonly sampleIds: readonly number[];

  constructor(epoch: number, batchIndex: number, sampleIds: readonly number[], stage: BatchStage, cause: unknown) {
    super(
      'ERR_BATCH_FAILED',
      `batch ${batchIndex} of epoch ${epoch} failed ${stage === 'device' ? 'on the device' : `in the ${stage}`} (samples ${formatIds(sampleIds)}): ` +
        `${describeCause(cause)}. The loader stays usable: start the next epoch, or pass errors: 'skip' to skip failed batches`,
      { cause },
    );
    this.name = 'BatchError';
    this.epoch = epoch;
    this.batchIndex = batchIndex;
    this.sampleIds = sampleIds;
  }
}

/** Sample ids for a message: the first eight, then a count. */
export function formatIds(ids: ArrayLike<number>): string {
  const shown = Array.from({ length: Math.min(ids.length, 8) }, (_, i) => ids[i]).join(', ');
  return ids.length > 8 ? `[${shown}, … ${ids.length - 8} more]` : `[${shown}]`;
}

export function describeCause(cause: unknown): string {
  if (cause instanceof Error) return cause.message;
  if (typeof cause === 'string') return cause;
  try {
    return `non-Error value thrown: ${JSON.stringify(cause)}`;
  } catch {
    return `non-Error value thrown: ${String(cause)}`;
  }
}

/** Render a user-supplied value for an error message, short and unambiguous. */
export function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return `a function`;
  if (Array.isArray(value)) return value.length > 6 ? `an array of ${value.length}` : JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v));
  if (value !== null && typeof value === 'object') return `an object (${Object.prototype.toString.call(value).slice(8, -1)})`;
  return String(value);
}

/** `knob` must be <expected>, got <value>. <fix> */
export function invalidOption(knob: string, expected: string, value: unknown, fix?: string): LoaderError {
  return new LoaderError('ERR_INVALID_OPTION', `\`${knob}\` must be ${expected}, got ${show(value)}${fix ? `. ${fix}` : ''}`);
}

/**
 * An option name that is not one of `known`: a typo is answered with the nearest known name, anything
 * else with the list. `where` is the object it was found in (`options`, `sim`, `diskStage`).
 */
export function unknownOption(where: string, key: string, known: readonly string[]): LoaderError {
  const near = nearestName(key, known);
  const kind = where === 'options' ? 'option' : `\`${where}\` option`;
  const fix = near !== undefined ? `; did you mean \`${near}\`?` : `. Known ${kind}s: ${known.join(', ')}`;
  return new LoaderError('ERR_INVALID_OPTION', `unknown ${kind} ${show(key)}${fix}`);
}

export function unsupportedOption(knob: string, value: unknown, why: string): LoaderError {
  return new LoaderError('ERR_UNSUPPORTED_OPTION', `\`${knob}\`: ${show(value)} is not supported yet: ${why}`);
}

export function batchReleased(): LoaderError {
  return new LoaderError(
    'ERR_BATCH_RELEASED',
    'this batch was released and its memory may already hold another batch. Call batch.retain() before the next batch is requested (and release() when done) to keep it, or copy the data out first',
  );
}

export function loaderClosed(): LoaderError {
  return new LoaderError('ERR_LOADER_CLOSED', 'the loader is closed. Create a new one with DataLoader.create(dataset, options)');
}

/**
 * A file's content is malformed, truncated or hostile: names the file, the byte offset where the
 * parser found it, and what was wrong. `fix` says what the user can do, when there is something.
 */
export function badFile(path: string, offset: number | bigint, what: string, fix?: string): LoaderError {
  return new LoaderError('ERR_BAD_FILE', `${path}: at byte ${offset}: ${what}${fix ? `. ${fix}` : ''}`);
}

/** A file cannot be opened, listed or read (missing, a directory, no permission, I/O error). */
export function fileAccess(path: string, doing: string, cause: unknown): LoaderError {
  const code = (cause as { code?: unknown } | null)?.code;
  return new LoaderError('ERR_FILE_ACCESS', `${path}: cannot ${doing}: ${typeof code === 'string' ? `${code}, ` : ''}${describeCause(cause)}`, { cause });
}
