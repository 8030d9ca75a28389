// Internal: not exported from the package entry.
// The process warnings Stoker emits (`process.emitWarning`), each with a stable code a user can
// filter on (`process.on('warning', (w) => w.code === 'STOKER_PIN_SOURCE' && …)`); docs/errors.md
// lists them. The rule: a warning is for a fallback that keeps the run going (the loader chose a
// slower route or a smaller one); a failure the user must act on is a LoaderError instead.

/** Every warning code, by kind. */
export const WARNING_CODES = {
  /** Anything else worth a line: a decode process that restarted, a knob that had no effect. */
  generic: 'STOKER_WARNING',
  /** `mode: 'resident'` did not fit on the device: the loader streams instead. */
  residentFallback: 'STOKER_RESIDENT_FALLBACK',
  /** `decode: 'auto'` found no GPU JPEG decoder: images are decoded on the CPU. */
  gpuDecode: 'STOKER_GPU_DECODE',
  /** A GPU JPEG decode thread could not start: that slot decodes on the main thread. */
  gpuDecodeThread: 'STOKER_GPU_DECODE_THREAD',
  /** In-memory columns could not be page-locked for in-place reads: batches go through staging. */
  pinSource: 'STOKER_PIN_SOURCE',
} as const;

export type WarningKind = keyof typeof WARNING_CODES;

/** Emit `message` as a process warning with the code of `kind`. */
export function warn(kind: WarningKind, message: string): void {
  process.emitWarning(message, { code: WARNING_CODES[kind] });
}
