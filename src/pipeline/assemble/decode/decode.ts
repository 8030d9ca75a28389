// Internal: not exported from the package entry.
// The decode route (`decode: 'gpu'`): a batch of an image source whose files the device decodes.
// The host reads only the encoded files of the batch (reader threads, decode-reads.ts, blocking
// reads in parallel), straight into page-locked memory, and the small fields (labels); the device's JPEG decoder
// (device.jpeg: nvJPEG on CUDA, the CPU behind sim) writes the cropped, resized, flipped,
// normalized rows straight into the batch's device memory, and the files it refuses (PNG, WebP,
// CMYK, progressive, corrupt) are decoded on the CPU into the same rows. The rules:
// - The crop box of a row is the source's own (the same `boxFor` of crop-box.ts on the same pick
//   key, or the `fit` box), so a pick's GPU and CPU crops are the same box; a center-crop view's
//   box carries the Pillow resize of the whole image the CPU decoder computes (`centerCropResize`
//   of view-resample.ts), so its GPU rows are torchvision's pixels too (NOTE [eval on the GPU]).
// - A file neither decoder can read fails its batch (the loader's `errors` decides; the loader
//   stays usable), its typed error naming the file, with the batch's memory handed back.
// - Reading batches i + 1 … overlaps decoding batch i (the run's read-ahead window launches them);
//   at most `decodeAhead` batches (default 4; env switches: base/env.ts) read or hold their files at once, taking their
//   places in launch order, so that their page-locked buffers are reused rather than made per batch.
// - Slots go in launch order: a batch takes its place in the decoder's slot order when it gets its
//   read-ahead place (a ticket, jpeg-slots.ts), then waits for exactly its files and that slot —
//   not for the previous batch's read (NOTE [slot order]).
// - `close` returns only once no batch is in flight: no read writes and no decode runs after it.
// - The env switch `decodeTiming` logs where a batch's time goes at each epoch's end (decode-timing.ts).

import { badFile, fileAccess } from '../../../errors.js';
import type { DeviceBatch, ResidentStore } from '../../../device/device.js';
import { FilesGivenBack, type JpegDevice, type JpegImageSpec } from '../../../device/jpeg/jpeg-batch.js';
import type { JpegDecoder, SlotTicket } from '../../../device/device.js';
import type { CropBox, JpegBox } from '../../../image/jpeg-plan.js';
import type { EncodedImages } from '../../../dataset/formats/images/encoded-images.js';
import { decodeImage } from '../../../image/image-decode.js';
import { coverPlan } from '../../../image/image-reference.js';
import type { Schema } from '../../../dataset/schema.js';
import { PickKey, type PickKeys, pickKeyAt } from '../../../sampler/pick-key.js';
import { allocStorage } from '../../../tensor/dtype.js';
import { Tensor } from '../../../tensor/tensor.js';
import { boxFor } from '../../../image/crop-box.js';
import { centerCropResize } from '../../../image/view-resample.js';
import type { EpochStats } from '../../stats.js';
import type { AssembleContext, BatchAssembler } from '../assembler.js';
import { FileReaders } from './decode-reads.js';
import { AheadGate, type BatchFigures, type DecodeRouteKnobs, DecodeTiming, decodeRouteKnobs, newFigures } from './decode-timing.js';

const ZERO_SEED = { hi: 0, lo: 0 };

/** The first guess of a file's size (bytes), until a batch was read. */
const FIRST_GUESS = 192 * 1024;

/**
 * NOTE [slot order] A batch takes its place in the decoder's slot order (`decoder.reserve()`) as it
 * gets its read-ahead place, which the gate hands out in launch order; it then awaits its own files
 * and, with them read, its slot (`decodeInto` claims the ticket). So slots go in launch order, a
 * batch never waits for an earlier batch's read or host work beyond that order, and a batch that
 * fails before its decode cancels its ticket (the slot passes to the next). Before (run 12, still
 * env switch `decodeLegacy`) each batch awaited the previous batch's turn — its read and its call into
 * the decoder — and only then queued for a slot.
 */

export class DecodeAssembler implements BatchAssembler {
  readonly route = 'decode';
  readonly pool = undefined;
  readonly #source: EncodedImages;
  readonly #jpeg: JpegDevice;
  readonly #decoder: JpegDecoder;
  readonly #image: JpegImageSpec;
  readonly #imageAt: number;
  /** The schema's other fields, in order: key, dtype, shape, elements per row. */
  readonly #others: readonly { key: string; dtype: Schema['fields'][number]['dtype']; shape: readonly number[]; rowSize: number }[];
  readonly #readers: FileReaders;
  /** Bytes a file of this source takes, the largest batch mean seen (FIRST_GUESS until a batch was read): sizes a batch's memory. */
  #bytesPerFile = FIRST_GUESS;
  #measured = false;
  readonly #knobs: DecodeRouteKnobs;
  readonly #ahead: AheadGate;
  readonly #timing: DecodeTiming | undefined;
  /** `decodeLegacy`: the last batch's turn to ask for a decode slot (the next asks after it). */
  #turn: Promise<void> = Promise.resolve();
  readonly #inFlight = new Set<Promise<unknown>>();
  #closed = false;

  constructor(source: EncodedImages, jpeg: JpegDevice, decoder: JpegDecoder, schema: Schema) {
    this.#source = source;
    this.#jpeg = jpeg;
    this.#decoder = decoder;
    const keys = schema.keys ?? [];
    this.#imageAt = keys.indexOf(source.imageKey);
    if (this.#imageAt < 0) throw new Error(`internal: the image key ${source.imageKey} is not among the sample's keys`);
    this.#image = {
      size: source.size, layout: source.layout, dtype: source.output,
      ...(source.normalize !== undefined ? { mean: source.normalize.mean, std: source.normalize.std } : {}),
    };
    this.#readers = new FileReaders();
    this.#knobs = decodeRouteKnobs();
    this.#ahead = new AheadGate(this.#knobs.ahead);
    this.#timing = this.#knobs.timing ? new DecodeTiming() : undefined;
    this.#others = schema.fields.flatMap((f, i) => (i === this.#imageAt ? [] : [{ key: keys[i]!, dtype: f.dtype, shape: f.shape, rowSize: f.rowSize }]));
  }

  /** 'nvjpeg-hardware', 'nvjpeg-gpu-hybrid' or 'sim'. */
  get decoderKind(): string {
    return this.#decoder.kind;
  }

  beginEpoch(stats: EpochStats): void {
    stats.vramPool = 'none';
    this.#timing?.begin();
  }

  endEpoch(stats: EpochStats): void {
    if (this.#timing !== undefined) process.stderr.write(`${this.#timing.report(stats.epoch, stats.waitMs, this.#knobs)}\n`);
  }

  assemble(ids: Uint32Array, context: AssembleContext, keys?: PickKeys): Promise<DeviceBatch> {
    const work = this.#assemble(ids, context, keys);
    this.#inFlight.add(work);
    const forget = () => this.#inFlight.delete(work);
    work.then(forget, forget);
    return work;
  }

  async #assemble(ids: Uint32Array, context: AssembleContext, keys?: PickKeys): Promise<DeviceBatch> {
    const figures = this.#timing !== undefined ? newFigures() : undefined;
    const t0 = performance.now();
    try {
      return await this.#ordered(ids, context, keys, figures);
    } finally {
      if (figures !== undefined) {
        figures.totalMs = performance.now() - t0;
        this.#timing!.add(figures);
      }
    }
  }

  /** Its read-ahead place and slot ticket (NOTE [slot order]), its files, its decode; everything given back on the way out. */
  async #ordered(ids: Uint32Array, context: AssembleContext, keys: PickKeys | undefined, figures: BatchFigures | undefined): Promise<DeviceBatch> {
    const legacy = this.#knobs.legacy;
    let previous: Promise<void> | undefined;
    let release = () => {};
    if (legacy) {
      // Reserve this batch's turn to ask for a decode slot now, so slots go in launch order whatever order reads finish in.
      previous = this.#turn;
      const mine = new Promise<void>((resolve) => (release = resolve));
      // The next batch asks for a slot after this one and every one before it, even when this one fails early.
      this.#turn = previous.then(() => mine);
    }
    let ticket: SlotTicket | undefined;
    let placeError: unknown;
    const tw = figures !== undefined ? performance.now() : 0;
    const waiting = this.#ahead.enter(() => {
      if (legacy) return;
      try {
        ticket = this.#decoder.reserve();
      } catch (error) {
        placeError = error;
      }
    });
    try {
      if (waiting !== undefined) await waiting;
      if (figures !== undefined) figures.aheadMs += performance.now() - tw;
      if (placeError !== undefined) throw placeError;
      return await this.#decode(ids, context, keys, previous, release, ticket, figures);
    } finally {
      ticket?.cancel();
      release();
      this.#ahead.leave();
    }
  }

  async #decode(ids: Uint32Array, context: AssembleContext, keys: PickKeys | undefined, previous: Promise<void> | undefined, release: () => void, ticket: SlotTicket | undefined, figures: BatchFigures | undefined): Promise<DeviceBatch> {
    let batch: DeviceBatch;
    let failed: number[];
    const read = await this.#readFiles(ids, context.signal, figures);
    const files = read.files;
    // Until decodeBatch succeeds, the page-locked files are this batch's to give back.
    let owned: Uint8Array | undefined = read.host;
    try {
      const others = this.#readOthers(ids);
      const boxes = (k: number, width: number, height: number) => this.#box(ids[k]!, k, keys, width, height);
      if (previous !== undefined) {
        const tt = performance.now();
        await previous;
        if (figures !== undefined) figures.turnMs += performance.now() - tt;
      }
      context.signal.throwIfAborted();
      const call = { ...(ticket !== undefined ? { ticket } : {}), ...(figures !== undefined ? { timing: figures } : {}) };
      for (let attempt = 0; ; attempt++) {
        try {
          // Its synchronous part asks for the decode slot (or claims the ticket): then the next batch may ask for one.
          const decoding = this.#jpeg.decodeBatch(this.#decoder, files, read.host, boxes, this.#image, this.#imageAt, others, call);
          release();
          ({ batch, failed } = await decoding);
          owned = undefined;
          break;
        } catch (error) {
          // Once decodeBatch queued work it gives the files back itself: no retry then.
          if (error instanceof FilesGivenBack) {
            owned = undefined;
            throw error.cause;
          }
          await context.backOff(error, attempt);
        }
      }
    } finally {
      if (owned !== undefined) this.#jpeg.releaseFiles(owned);
    }
    if (failed.length > 0) {
      // Rows of the batch are garbage: free it in stream order (the consumer waits for its copies first).
      batch.beforeDelivery?.();
      batch.free();
      throw await this.#whyFailed(files[failed[0]!]!, ids[failed[0]!]!, failed.length);
    }
    context.stats.rowsFetched += ids.length;
    return batch;
  }

  /**
   * The batch's files, read straight into one page-locked buffer (NOTE [files in page-locked
   * memory], jpeg-batch.ts) by the reader threads, packed; when they need more than the guess, read
   * again into a buffer of their size. On a failure the buffer is given back (the readers are done
   * with it when `read` settles); the error names the file.
   */
  async #readFiles(ids: Uint32Array, signal: AbortSignal, figures: BatchFigures | undefined): Promise<{ files: Uint8Array[]; host: Uint8Array }> {
    const src = this.#source;
    const paths = Array.from(ids, (id) => src.path(id));
    let bytes = Math.ceil(ids.length * this.#bytesPerFile * 1.25);
    for (;;) {
      signal.throwIfAborted();
      const tm = figures !== undefined ? performance.now() : 0;
      const host = this.#jpeg.fileMemory(bytes);
      const tr = figures !== undefined ? performance.now() : 0;
      if (figures !== undefined) {
        figures.filesMemoryMs += tr - tm;
        if (tr - tm > 1) figures.slowFileMemory++;
      }
      let r;
      try {
        r = await this.#readers.read(paths, host);
      } catch (error) {
        this.#jpeg.releaseFiles(host);
        throw error;
      } finally {
        if (figures !== undefined) figures.readMs += performance.now() - tr;
      }
      if (r.ok === true) {
        let total = 0;
        const files = Array.from(ids, (_, k) => {
          total += r.lengths[k]!;
          return host.subarray(r.offsets[k]!, r.offsets[k]! + r.lengths[k]!);
        });
        const mean = Math.ceil(total / Math.max(1, ids.length));
        // The guess stands only until a batch was measured (legacy: for good, since it is a floor).
        this.#bytesPerFile = this.#measured || this.#knobs.legacy ? Math.max(this.#bytesPerFile, mean) : mean;
        this.#measured = true;
        if (signal.aborted) {
          this.#jpeg.releaseFiles(host);
          signal.throwIfAborted();
        }
        return { files, host };
      }
      this.#jpeg.releaseFiles(host);
      if (r.ok === 'error') {
        signal.throwIfAborted();
        throw fileAccess(src.where(ids[r.k]!), 'read the image', r.error);
      }
      this.#bytesPerFile = Math.max(this.#bytesPerFile, Math.ceil(r.need / Math.max(1, ids.length)));
      bytes = r.need;
    }
  }

  /** The box of row k (sample `id`): the pick's view (a center-crop view's with its Pillow resize), or the `fit` box, checked against maxInputPixels. */
  #box(id: number, k: number, keys: PickKeys | undefined, width: number, height: number): JpegBox {
    const src = this.#source;
    if (width * height > src.maxInputPixels) {
      throw badFile(src.where(id), 0, `cannot decode the image: it has more than ${src.maxInputPixels} pixels (${width}×${height})`, 'Raise maxInputPixels if the image is trusted');
    }
    const view = src.view;
    if (view === undefined) return fitBox(src.fit, src.size, width, height);
    const box = boxFor(view, keys !== undefined ? pickKeyAt(keys, k) : new PickKey(id, 0, 0, ZERO_SEED), width, height);
    return view.kind === 'center-crop' ? { ...box, pil: centerCropResize(view, width, height, src.size[1], src.size[0]) } : box;
  }

  /** The other fields of the batch's samples as host tensors [rows, …], in schema order. */
  #readOthers(ids: Uint32Array): Tensor[] {
    const n = ids.length;
    const out = this.#others.map((f) => allocStorage(f.dtype, n * f.rowSize));
    for (let r = 0; r < n; r++) {
      const fields = this.#source.fields(ids[r]!);
      this.#others.forEach((f, i) => (out[i] as { set(a: ArrayLike<unknown>, at: number): void }).set(fields[f.key]!.data as ArrayLike<unknown>, r * f.rowSize));
    }
    return this.#others.map((f, i) => new Tensor(out[i]!, [n, ...f.shape], f.dtype));
  }

  /** The CPU decoder's own typed error for a file neither decoder read (ERR_BAD_FILE naming it). */
  async #whyFailed(bytes: Uint8Array, id: number, count: number): Promise<Error> {
    const where = this.#source.where(id);
    const more = count > 1 ? ` (and ${count - 1} more file${count === 2 ? '' : 's'} of this batch)` : '';
    try {
      await decodeImage(bytes, { size: [1, 1], fit: 'resize', source: where });
    } catch (error) {
      if (error instanceof Error && more !== '') error.message += more;
      return error as Error;
    }
    return badFile(where, 0, `cannot decode the image on the device or the CPU${more}`);
  }

  relieve(): void {}

  promote(): ResidentStore | undefined {
    return undefined;
  }

  /** After the batches in flight (the epoch was ended first: no new one starts): the decoder, the reader threads. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
    await this.#decoder.whenIdle();
    this.#decoder.close();
    this.#readers.close();
  }
}

/**
 * The box a `fit` cuts, in source pixels: 'resize' the whole image; 'center-crop' the part that
 * torchvision's Resize(n) + CenterCrop(size) keeps (coverPlan's resized size and anchor mapped back
 * to the source, rounded to whole pixels), so one crop-and-resize gives that recipe's view.
 */
export function fitBox(fit: 'resize' | 'center-crop', size: readonly [number, number], width: number, height: number): CropBox {
  if (fit === 'resize') return { left: 0, top: 0, width, height, flip: false };
  const [h, w] = size;
  const plan = coverPlan(height, width, h, w);
  const sx = width / plan.rw;
  const sy = height / plan.rh;
  const bw = Math.min(width, Math.max(1, Math.round(w * sx)));
  const bh = Math.min(height, Math.max(1, Math.round(h * sy)));
  return {
    left: Math.min(width - bw, Math.max(0, Math.round(plan.left * sx))),
    top: Math.min(height - bh, Math.max(0, Math.round(plan.top * sy))),
    width: bw,
    height: bh,
    flip: false,
  };
}
