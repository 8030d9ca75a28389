// Every failure Stoker reports is a `LoaderError` with a stable `code`; messages name the knob or
// the file, the bad value and the fix. Create errors through the factories below, never ad hoc,
// so that one failure always reads the same.

import { nearestName } from './base/nearest-name.js';

/**
 * Stable error codes, one per kind of failure; docs/errors.md has a section per code (what causes it,
 * the fix). Tests and callers match on these, never on message text.
 */
export const ERROR_CODES = [
  'ERR_INVALID_OPTION',
  'ERR_UNSUPPORTED_OPTION',
  'ERR_EMPTY_DATASET',
  'ERR_INVALID_DATASET',
  'ERR_EMPTY_SAMPLE',
  'ERR_SAMPLE_MISMATCH',
  'ERR_NAMES_COUNT',
  'ERR_AUGMENT_WITH_SAMPLER',
  'ERR_SAMPLER_OUTPUT',
  'ERR_BATCH_FAILED',
  'ERR_TRANSFORM_OUTPUT',
  'ERR_BATCH_RELEASED',
  'ERR_UNKNOWN_FIELD',
  'ERR_EPOCH_ACTIVE',
  'ERR_LOADER_CLOSED',
  'ERR_INVALID_TENSOR',
  'ERR_DISK_STAGE',
  'ERR_IMPURE_DATASET',
  'ERR_WORKER_START',
  'ERR_WORKER_DIED',
  'ERR_NEEDS_SAMPLE_LAYER',
  'ERR_DEVICE_OOM',
  'ERR_CUDA',
  'ERR_CUDA_UNAVAILABLE',
  'ERR_KERNEL_MISSING',
  'ERR_IMPURE_TRANSFORM',
  'ERR_BAD_FILE',
  'ERR_FILE_ACCESS',
  'ERR_LAUNCH_ENV',
  'ERR_RESUME_MISMATCH',
  'ERR_TOO_LONG',
  'ERR_PIN_SOURCE',
  'ERR_SERVE_STOPPED',
  'ERR_REMOTE',
] as const;

/** Stable error codes. Tests and callers match on these, never on message text. */
export type LoaderErrorCode = (typeof ERROR_CODES)[number];

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

/** `stoker serve` is stopping (`why`: the signal, say) while a client is connected: sent to the client before its socket closes. */
export function serveStopped(why: string): LoaderError {
  return new LoaderError(
    'ERR_SERVE_STOPPED',
    `stoker serve was stopped (${why}) while this client was connected: its loader is closed and no more batches come. ` +
      'Start the server again (or let stoker.torch start a loader of its own: leave out connect=) and resume from the last state_dict()',
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

// ---------------------------------------------------------------------------------------------
// Factories by failure. Where several sites share a failure, the factory takes its parts; where a
// site's message is its own, the code's generic factory (`…Error(message)`) takes the message.
// docs/errors.md documents every code.

/** `where`: `unit` `index` is out of range [0, `length`) — a dataset asked for a row it does not have. */
export function indexOutOfRange(where: string, unit: string, index: unknown, length: number): LoaderError {
  return new LoaderError('ERR_INVALID_DATASET', `${where}: ${unit} ${show(index)} is out of range [0, ${length})`);
}

/** A ragged read of a column or field that was not declared ragged. */
export function notRaggedField(path: string, kind: string, name: unknown): LoaderError {
  return new LoaderError('ERR_INVALID_DATASET', `${path}: ${kind} ${show(name)} is not a ragged field`);
}

/** A file source opened with something other than a file path (`fn` is e.g. `sources.jsonl`). */
export function invalidSourcePath(fn: string, path: unknown): LoaderError {
  return new LoaderError('ERR_INVALID_DATASET', `${fn}(path): path must be a non-empty file path, got ${show(path)}`);
}

/** A source module (`kind` 'source' or 'decoder') that cannot be imported. */
export function moduleImport(kind: string, module: string, cause: unknown): LoaderError {
  return new LoaderError('ERR_INVALID_DATASET', `${kind} module ${module} cannot be imported: ${describeCause(cause)}`, { cause });
}

/** A source module (`kind` 'source' or 'decoder') without the function export asked for. */
export function moduleExport(kind: string, module: string, exportName: unknown, mod: object): LoaderError {
  return new LoaderError('ERR_INVALID_DATASET', `${kind} module ${module} has no function export ${show(exportName)} (exports: ${Object.keys(mod).join(', ') || 'none'})`);
}

/** A column of file `path` stored with compression `codec`, which Stoker cannot decompress (it reads `readable`). */
export function unsupportedCodec(path: string, column: string, codec: string, readable: readonly string[], fix: string): LoaderError {
  return new LoaderError('ERR_INVALID_DATASET', `${path}: column ${show(column)} is compressed with ${codec}, which Stoker does not decompress (it reads ${readable.join(', ')}). ${fix}`);
}

/** A `tokenizer` (option `knob`) given to a source whose selected columns hold no text: it would be silently unused. */
export function tokenizerUnused(knob: string, path: string, columns: string): LoaderError {
  return new LoaderError(
    'ERR_INVALID_OPTION',
    `\`${knob}\` is given, but no selected column of ${path} is a string column, so nothing would be tokenized (its columns: ${columns}). Select a string column with \`columns\`, or drop \`${knob}\``,
  );
}

/** A JSONL source given a tokenizer but no `text` field to use it on. */
export function tokenizerWithoutText(path: string): LoaderError {
  return new LoaderError(
    'ERR_INVALID_OPTION',
    `sources.jsonl(${path}): \`tokenizer\` is given, but no \`text\` field is named, so nothing would be tokenized. Name the text fields with \`text: 'field'\` (or a list), or drop \`tokenizer\``,
  );
}

/** A file that holds nothing to load: `what` says what it lacks (`rows`, `records (no non-blank lines)`). */
export function emptyFile(path: string, what: string): LoaderError {
  return new LoaderError('ERR_EMPTY_DATASET', `${path}: the file holds no ${what}`);
}

/** A helper worker (`who`, e.g. `x: a lengths worker`) raised an uncaught error. */
export function workerFailed(who: string, error: Error): LoaderError {
  return new LoaderError('ERR_WORKER_DIED', `${who} failed: ${error.message}`);
}

/** A helper worker (`who`) exited before it reported its result. */
export function workerExited(who: string, exitCode: number): LoaderError {
  return new LoaderError('ERR_WORKER_DIED', `${who} exited with code ${exitCode} before it finished`);
}

/** A device tensor handed to `who` that is no batch's in delivery. */
export function foreignDeviceTensor(who: string): LoaderError {
  return new LoaderError('ERR_INVALID_TENSOR', `${who}: this device tensor does not belong to a batch being delivered`);
}

/** `api`: `knob` must be <expected>, got <value> — an option of a function other than `DataLoader.create`. */
export function invalidOptionOf(api: string, knob: string, expected: string, value: unknown): LoaderError {
  return new LoaderError('ERR_INVALID_OPTION', `${api}: \`${knob}\` must be ${expected}, got ${show(value)}`);
}

/** A ragged row longer than its capacity (`by` 'collate' at collation, 'read' when the sample is read). */
export function raggedTooLong(field: string, id: number, length: number, capacity: number, by: 'collate' | 'read'): LoaderError {
  return new LoaderError(
    'ERR_TOO_LONG',
    by === 'collate'
      ? `ragged field \`${field}\`: sample ${id} has length ${length}, over the capacity ${capacity}. Set \`collate.${field}.*.truncate: true\` to keep its first ${capacity}, or raise \`maxLength\` (or the pad \`to\`)`
      : `ragged field \`${field}\`: sample ${id} has length ${length}, over the capacity ${capacity}. Set \`collate.${field}.*.truncate: true\` (or \`pack.truncate\`) to keep its first ${capacity}, or raise \`maxLength\``,
  );
}

/**
 * A sample read with another length of ragged field `field` than the one its batches were planned
 * with (sequence packing lays out tokens by it): `by` says who gave the planned length.
 */
export function plannedLengthMismatch(field: string, id: number, read: number, planned: number, by: 'option' | 'dataset'): LoaderError {
  const why = `packing placed its tokens by that length, so the document would be cut or padded with tokens it does not have`;
  return by === 'option'
    ? new LoaderError('ERR_INVALID_OPTION', `\`lengths\` says sample ${id} has ${planned} tokens, but its field \`${field}\` read ${read}: ${why}. Give \`lengths\` as get(i) reads the field, or drop it to use the dataset's`)
    : new LoaderError('ERR_INVALID_DATASET', `the dataset's lengths say sample ${id} has ${planned} tokens, but its field \`${field}\` read ${read}: ${why}. A dataset's \`lengths\` (or \`loadLengths\`) must give each sample's length as get(i) reads it; or pass \`lengths\``);
}

/** `diskStage.dir` cannot take the stage: `what` could not be created there. */
export function stageDirUnwritable(dir: string, what: string, cause: unknown): LoaderError {
  return new LoaderError('ERR_DISK_STAGE', `diskStage.dir ${JSON.stringify(dir)}: ${what} (${describeCause(cause)}). Point diskStage.dir at a writable local drive`, { cause });
}

export function namesCount(given: number, count: number): LoaderError {
  return new LoaderError('ERR_NAMES_COUNT', `DataLoader: names count (${given}) does not match dataset tensor count (${count}). Pass ${count} names, or omit \`names\``);
}

export function augmentWithSampler(augment: number): LoaderError {
  return new LoaderError(
    'ERR_AUGMENT_WITH_SAMPLER',
    `augment(${augment}) composes with the built-in samplers only: a custom sampler owns its index stream. Emit each sample id ${augment} times from the sampler instead, or drop \`sampler\``,
  );
}

export function epochActive(epoch: number, active: number): LoaderError {
  return new LoaderError(
    'ERR_EPOCH_ACTIVE',
    `epoch ${epoch} cannot start while epoch ${active} is still being iterated. Finish or break out of that loop first (a loader runs one epoch at a time)`,
  );
}

/** `perSample`: the dataset has get(i) (so only `sampleCache: false` is in the way). */
export function needsSampleLayer(perSample: boolean): LoaderError {
  return new LoaderError(
    'ERR_NEEDS_SAMPLE_LAYER',
    `DataLoader: diskStage requires the sample layer: a per-sample dataset (get(i)) with sampleCache on. ${perSample ? 'Remove sampleCache: false' : 'This dataset reads whole batches (getBatch), which the tiers cannot key by sample'}, or drop diskStage`,
  );
}

export function impureDataset(id: number): LoaderError {
  return new LoaderError(
    'ERR_IMPURE_DATASET',
    `dataset.get(${id}) returned different content on two reads. A dataset must be a pure function of the index: the sample cache and the disk stage keep the first read and serve it every epoch. Move randomness into the loader's transform (take it from key.rng()), or pass sampleCache: false`,
  );
}

export function impureTransform(): LoaderError {
  return new LoaderError(
    'ERR_IMPURE_TRANSFORM',
    'the transform gave different results for the same rows and keys. It must be a pure function of (rows, keys): take randomness only from key.rng(), so every (seed, epoch, sample, repeat) gives the same view. (Checked once per loader in development; NODE_ENV=production skips the check.)',
  );
}

/** `pinSource: true` and the arrays could not be page-locked: `why` says how it failed. */
export function pinSourceFailed(why: string, cause: unknown): LoaderError {
  return new LoaderError('ERR_PIN_SOURCE', `${why}. Pass pinSource: 'auto' or false to stream through staging instead`, { cause });
}

/** No usable CUDA driver or device in this process. */
export function cudaUnavailable(why: string, cause?: unknown): LoaderError {
  return new LoaderError(
    'ERR_CUDA_UNAVAILABLE',
    `CUDA is not available: ${why}. Fix: install the NVIDIA driver, or use device: 'cpu' (or 'sim' to rehearse GPU policies)`,
    cause === undefined ? undefined : { cause },
  );
}

/** libnvjpeg missing or unusable: GPU JPEG decoding is off. */
/** `pathSwitch`: the environment switch that points at libnvjpeg (named by base/env.ts). */
export function nvjpegUnavailable(why: string, pathSwitch: string, cause?: unknown): LoaderError {
  return new LoaderError(
    'ERR_CUDA_UNAVAILABLE',
    `GPU JPEG decoding is not available: ${why}. Fix: install the CUDA toolkit's nvJPEG (libnvjpeg, CUDA 12 or 13), point ${pathSwitch} at libnvjpeg.so, or decode on the CPU (decode: 'cpu')`,
    cause === undefined ? undefined : { cause },
  );
}

/** A compiled kernel file is missing from kernels/. */
export function kernelMissing(path: string, cause: unknown): LoaderError {
  return new LoaderError(
    'ERR_KERNEL_MISSING',
    `the CUDA kernel file ${path} could not be read (${cause instanceof Error ? cause.message : String(cause)}). Fix: build the kernels with npm run kernels (needs nvcc), or reinstall the package`,
    { cause },
  );
}

/**
 * A LoaderError rebuilt from its code and message after crossing a thread or process boundary
 * (the code is the one the other side raised, so it is trusted as a LoaderErrorCode).
 */
export function revivedError(code: string, message: string, cause?: unknown): LoaderError {
  return new LoaderError(code as LoaderErrorCode, message, cause === undefined ? undefined : { cause });
}

type Cause = { cause?: unknown } | undefined;
const withCause = (cause: unknown): Cause => (cause === undefined ? undefined : { cause });

// Generic factories, one per code, for failures whose message is the site's own.
export const invalidOptionError = (message: string): LoaderError => new LoaderError('ERR_INVALID_OPTION', message);
export const unsupportedOptionError = (message: string): LoaderError => new LoaderError('ERR_UNSUPPORTED_OPTION', message);
export const emptyDatasetError = (message: string): LoaderError => new LoaderError('ERR_EMPTY_DATASET', message);
export const invalidDatasetError = (message: string, cause?: unknown): LoaderError => new LoaderError('ERR_INVALID_DATASET', message, withCause(cause));
export const emptySampleError = (message: string): LoaderError => new LoaderError('ERR_EMPTY_SAMPLE', message);
export const sampleMismatchError = (message: string): LoaderError => new LoaderError('ERR_SAMPLE_MISMATCH', message);
export const samplerOutputError = (message: string, cause?: unknown): LoaderError => new LoaderError('ERR_SAMPLER_OUTPUT', message, withCause(cause));
export const transformOutputError = (message: string): LoaderError => new LoaderError('ERR_TRANSFORM_OUTPUT', message);
export const unknownFieldError = (message: string): LoaderError => new LoaderError('ERR_UNKNOWN_FIELD', message);
export const loaderClosedError = (message: string): LoaderError => new LoaderError('ERR_LOADER_CLOSED', message);
export const invalidTensorError = (message: string): LoaderError => new LoaderError('ERR_INVALID_TENSOR', message);
export const diskStageError = (message: string, cause?: unknown): LoaderError => new LoaderError('ERR_DISK_STAGE', message, withCause(cause));
export const workerStartError = (message: string, cause?: unknown): LoaderError => new LoaderError('ERR_WORKER_START', message, withCause(cause));
export const workerDiedError = (message: string, cause?: unknown): LoaderError => new LoaderError('ERR_WORKER_DIED', message, withCause(cause));
export const cudaFailure = (message: string): LoaderError => new LoaderError('ERR_CUDA', message);
export const badFileError = (message: string, cause?: unknown): LoaderError => new LoaderError('ERR_BAD_FILE', message, withCause(cause));
export const launchEnvError = (message: string): LoaderError => new LoaderError('ERR_LAUNCH_ENV', message);
export const resumeMismatchError = (message: string): LoaderError => new LoaderError('ERR_RESUME_MISMATCH', message);
export const tooLongError = (message: string): LoaderError => new LoaderError('ERR_TOO_LONG', message);
