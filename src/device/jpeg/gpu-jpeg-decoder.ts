// Internal: not exported from the package entry.
// The GPU JPEG decoder: a batch of JPEG files in host memory in, a batch of cropped, resized, flipped,
// normalized images out, written straight into device memory at row k of the batch. On CUDA the
// files go through nvJPEG's batched decoder (the hardware engine on A100/H100/H200, else the GPU
// hybrid backend) into a device scratch buffer, then kernels/crop-resize.cu writes the rows; on `sim`
// the CPU decodes (sim-jpeg.ts) and uploads the same rows, so CI runs the same calls.
//
// The rules a caller must know:
// - Every file the GPU cannot take (not a JPEG, CMYK, progressive or otherwise refused by the
//   hardware engine, corrupt, too large) is reported in `fallback`, its row left unwritten: decode
//   those on the CPU (`decodeOnCpu` writes the same rows from the same resampler). A bad file never
//   fails the batch or the process; a bad box or output spec throws (the caller's bug).
// - The work is enqueued on `stream` (the backend's copy stream by default): the rows are ready, and
//   `files` may be reused, only once an event recorded on that stream after the call is done.
// - A decoder serves `slots` calls at a time (default 2): each call holds one decode slot
//   (jpeg-slots.ts), a worker thread that runs the blocking part — nvJPEG's header probes and
//   nvjpegDecodeBatched on CUDA, sharp and the resampler on sim — while the main thread goes on
//   (reads the next batch, hands out the last). Each slot has its own nvJPEG state and device
//   scratch; stream order makes a slot's scratch safe to reuse. Calls beyond `slots` wait, in order.
//   A caller may take its place in that order before the call (`reserve`, then pass the ticket in
//   `call.ticket`; cancel it if the call never comes), so that order is the order of its batches.
// - `close` waits for no call (await `whenIdle` first); with calls in flight it finishes once they are done.

import { invalidOption, unsupportedOptionError } from '../../errors.js';
import { readSwitch } from '../../base/env.js';
import type { Backend, StreamName } from '../backend.js';
import type { DecodeCall, DecodeResult, DecodeStats, JpegDecoder } from '../device.js';
import type { CropBoxes, JpegBatchOutput } from '../../image/jpeg-plan.js';
import { DEFAULT_JPEG_SLOTS, type JpegSlot, type SlotTicket } from './jpeg-slots.js';

export interface GpuJpegOptions {
  /**
   * How nvJPEG brings 4:2:0 / 4:2:2 chroma to full size: 'interpolate' (default; libjpeg-turbo's
   * "fancy" upsampling, as sharp and PIL do, so GPU rows match CPU rows closely) or 'replicate'
   * (nvJPEG's default, what torchvision's decode_jpeg(device='cuda') gives). A library that refuses
   * interpolation falls back to 'replicate' (see `chroma` on the decoder).
   */
  readonly chroma?: 'interpolate' | 'replicate';
  /** Calls decoding at once, each on its own worker thread with its own state and scratch: 1 … 8, default the env switch `jpegSlots` (base/env.ts) or 2. */
  readonly slots?: number;
}

export abstract class GpuJpegDecoder implements JpegDecoder {
  /** 'nvjpeg-hardware', 'nvjpeg-gpu-hybrid' or 'sim' (the CPU decoder behind the sim device). */
  abstract readonly kind: string;
  /** The chroma upsampling in effect ('interpolate' on sim: libjpeg-turbo's). */
  abstract readonly chroma: 'interpolate' | 'replicate';
  readonly stats: DecodeStats = { probeMs: 0, decodeMs: 0, launchMs: 0, calls: 0 };

  /** A decoder for the backend's device: nvJPEG on CUDA (ERR_CUDA_UNAVAILABLE without libnvjpeg), the CPU on sim. */
  static open(backend: Backend, options: GpuJpegOptions = {}): GpuJpegDecoder {
    if (options.chroma !== undefined && options.chroma !== 'interpolate' && options.chroma !== 'replicate') throw invalidOption('chroma', "'interpolate' or 'replicate'", options.chroma);
    const slots = options.slots ?? readSwitch('jpegSlots') ?? DEFAULT_JPEG_SLOTS;
    if (!Number.isInteger(slots) || slots < 1 || slots > 8) throw invalidOption('slots', 'an integer from 1 to 8 (decodes in flight)', options.slots);
    const decoder = backend.openJpeg?.(options.chroma ?? 'interpolate', slots);
    if (decoder instanceof GpuJpegDecoder) return decoder;
    throw unsupportedOptionError(`GPU JPEG decoding needs a CUDA or sim device, got the backend ${backend.name}`);
  }

  /** Decode `files`, crop each by its box and write row k of `out`; see the header for the rules. */
  abstract decodeInto(files: readonly Uint8Array[], boxes: CropBoxes, out: JpegBatchOutput, stream?: StreamName, call?: DecodeCall<JpegSlot>): Promise<DecodeResult>;

  /**
   * A place in the slot order, taken now (decode calls with it go in the order of their tickets,
   * calls without one in the order they are made, after the tickets already out): pass it to
   * `decodeInto` as `call.ticket`, or `cancel` it when that call never comes.
   */
  abstract reserve(): SlotTicket;

  /** Write rows `which` of `out` from the CPU decoder (any format sharp reads); `failed` are the files it could not decode. */
  abstract decodeOnCpu(files: readonly Uint8Array[], which: readonly number[], boxes: CropBoxes, out: JpegBatchOutput, stream?: StreamName): Promise<{ failed: number[] }>;

  /** Resolves when no call is decoding (every slot free). */
  abstract whenIdle(): Promise<void>;

  /** Waits for queued work, frees scratch memory and the library handles (after the calls in flight, when there are). Idempotent. */
  abstract close(): void;
}
