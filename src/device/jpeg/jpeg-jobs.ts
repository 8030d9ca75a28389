// Internal: not exported from the package entry.
// The work one JPEG decode slot does off the main thread: on the slot's worker thread (jpeg-worker.ts,
// env switch `jpegWorkers` 1, the default on sim) or inline on the calling thread (the default on CUDA, the same code). On CUDA a slot
// owns one nvJPEG state and runs the blocking calls — header probes and nvjpegDecodeBatched — with
// the loader's context made current on its thread; on `sim` it runs the CPU decoder (sharp) and the
// reference resampler, the two halves the GPU does (decode, then crop/resize). The rules:
// - One job of a slot at a time (the caller awaits each reply before the next): nvJPEG states are
//   not thread-safe, and a sim slot keeps the images of its last decode until its rows job.
// - Every address a job is given (files in host memory, device scratch, the CUDA stream) is the
//   caller's to keep valid until the reply; nvJPEG's device work is queued on that stream, so the
//   scratch is written only in stream order.
// - A file is never an error: a refused or undecodable file comes back with width 0.

import { NVJPEG_CSS_UNKNOWN, NVJPEG_OUTPUT_RGB, NVJPEG_OUTPUT_RGBI, nvjpeg, nvjpegFailed } from '../cuda/nvjpeg-lib.js';
import { driver } from '../cuda/driver.js';
import { CHANNELS, type JpegBatchOutput, type JpegBox, checkOutput } from '../../image/jpeg-plan.js';
import { cropResize, encodeRow } from '../../image/jpeg-resample.js';
import { decodeImage, loadImageDecoder } from '../../image/image-decode.js';

/** Which files a CPU decode takes: every decodable one, or only those the GPU decoder would (baseline JPEG, 3 components). */
export type CpuRowFilter = 'any' | 'gpu-jpeg';

/**
 * NOTE [grey JPEGs on the CPU] A JPEG of one component (grey: what PIL writes for an 'L' image;
 * sharp's greyscale() JPEGs have three) goes to the CPU decoder. On the H200 (hardware engine,
 * nvJPEG 13) a PIL-written 224×224 one-component JPEG, decoded in a batch with four colour JPEGs of
 * other sizes (test/cuda/gpu-decode.test.ts's eval check), came out mean 44, max 202 levels off
 * torchvision's pixels (the colour JPEGs before it within 1; with it on the CPU, all 36 rows of the
 * check within 1); a one-component JPEG decoded alone, or beside colour JPEGs of its own size, was
 * exact. Not pinned down further: one
 * component means the CPU, whose pixels are PIL's. Grey images are rare in photo datasets.
 */

/** Images over this many pixels go to the CPU, which refuses them by its own limit (sharp's default, 0x3FFF²). */
const MAX_PIXELS = 0x3fff * 0x3fff;

export type JpegJob =
  /** Make `context` current on this thread; this slot's jobs use `state` and `jpegStream` (made and destroyed by the decoder) on `handle` (shared by the slots). */
  | { readonly op: 'nvjpeg-open'; readonly context: bigint; readonly handle: bigint; readonly state: bigint; readonly jpegStream: bigint; readonly hardware: boolean }
  /**
   * Probe files (host addresses and lengths), place the accepted ones in `scratch` (each at the next
   * 256-byte boundary) and decode them in one batched call on `stream`. `need` > scratchBytes: nothing
   * was decoded; call again with that much scratch.
   */
  | { readonly op: 'nvjpeg-decode'; readonly data: BigUint64Array; readonly lengths: BigUint64Array; readonly scratch: bigint; readonly scratchBytes: number; readonly stream: bigint; readonly planar: boolean }
  /** Decode files[k] = memory[offsets[k], offsets[k] + lengths[k]) on the CPU and keep the pixels for `sim-rows`. */
  | { readonly op: 'sim-decode'; readonly memory: SharedArrayBuffer; readonly offsets: Float64Array; readonly lengths: Float64Array; readonly filter: CpuRowFilter }
  /**
   * The rows of the last `sim-decode`'s images that have a box (5 numbers per file: left, top, width,
   * height, flip; width 0 = none), concatenated; `pil`: 8 per file (x in0, in1, out, first, then y's;
   * NaN first: none), the box's Pillow resize.
   */
  | { readonly op: 'sim-rows'; readonly boxes: Int32Array; readonly pil: Float64Array; readonly out: Omit<JpegBatchOutput, 'ptr' | 'rowBytes'> };

export interface NvjpegDecoded {
  /** Per file: decoded size (0 × 0: refused, to the CPU), place in the scratch, whether the batch call wrote it. */
  readonly widths: Int32Array;
  readonly heights: Int32Array;
  readonly offsets: Float64Array;
  readonly decoded: Uint8Array;
  readonly need: number;
  readonly probeMs: number;
  readonly decodeMs: number;
}

export interface SimDecoded {
  readonly widths: Int32Array;
  readonly heights: Int32Array;
}

export type JpegReply = NvjpegDecoded | SimDecoded | { readonly rows: Uint8Array } | { readonly opened: true };

/** The job runner of one slot: its state lives in this closure. Transfer lists come with the replies that have one. */
export function jpegJobs(): (job: JpegJob) => Promise<{ reply: JpegReply; transfer?: ArrayBuffer[] }> {
  let nv: NvjpegSlot | undefined;
  let images: ({ rgb: Uint8Array; width: number; height: number } | undefined)[] = [];
  return async (job): Promise<{ reply: JpegReply; transfer?: ArrayBuffer[] }> => {
    switch (job.op) {
      case 'nvjpeg-open':
        nv = new NvjpegSlot(job);
        return { reply: { opened: true } };
      case 'nvjpeg-decode':
        if (nv === undefined) throw new Error('internal: nvjpeg-decode before nvjpeg-open');
        return { reply: nv.decode(job) };
      case 'sim-decode': {
        const n = job.offsets.length;
        images = await Promise.all(Array.from({ length: n }, (_, k) => cpuDecode(new Uint8Array(job.memory, job.offsets[k]!, job.lengths[k]!), k, job.filter)));
        const widths = new Int32Array(n);
        const heights = new Int32Array(n);
        images.forEach((im, k) => {
          widths[k] = im?.width ?? 0;
          heights[k] = im?.height ?? 0;
        });
        return { reply: { widths, heights } };
      }
      case 'sim-rows': {
        const outSpec = { ...job.out, ptr: 0n, rowBytes: 0 };
        const payload = CHANNELS * job.out.size[0] * job.out.size[1] * bytesOf(job.out.dtype);
        const scaleBias = checkOutput({ ...outSpec, rowBytes: payload });
        const parts: Uint8Array[] = [];
        for (let k = 0; k < images.length; k++) {
          const b = job.boxes.subarray(5 * k, 5 * k + 5);
          const image = images[k];
          if (image === undefined || b[2] === 0) continue;
          const box: JpegBox = { left: b[0]!, top: b[1]!, width: b[2]!, height: b[3]!, flip: b[4] !== 0, ...pilAt(job.pil, k) };
          parts.push(encodeRow(cropResize(image.rgb, image.width * 3, box, job.out.size[0], job.out.size[1], image), outSpec, scaleBias));
        }
        images = [];
        const rows = new Uint8Array(parts.length * payload);
        parts.forEach((p, i) => rows.set(p, i * payload));
        return { reply: { rows }, transfer: [rows.buffer as ArrayBuffer] };
      }
    }
  };
}

/** Packs box k's Pillow resize into `table` (8 numbers a box; NaN: none), as `sim-rows` takes it. */
export function packPil(table: Float64Array, k: number, box: JpegBox): void {
  const p = box.pil;
  table.set(p !== undefined ? [p.x.in0, p.x.in1, p.x.out, p.x.first, p.y.in0, p.y.in1, p.y.out, p.y.first] : [NaN, NaN, NaN, NaN, NaN, NaN, NaN, NaN], 8 * k);
}

function pilAt(table: Float64Array, k: number): Pick<JpegBox, 'pil'> {
  const t = table.subarray(8 * k, 8 * k + 8);
  if (Number.isNaN(t[0])) return {};
  return { pil: { x: { in0: t[0]!, in1: t[1]!, out: t[2]!, first: t[3]! }, y: { in0: t[4]!, in1: t[5]!, out: t[6]!, first: t[7]! } } };
}

function bytesOf(dtype: JpegBatchOutput['dtype']): number {
  return dtype === 'uint8' ? 1 : dtype === 'float32' ? 4 : 2;
}

/** The CPU decoder's full-size RGB of a file, or undefined (not decodable; with 'gpu-jpeg', not what nvJPEG's engine takes). */
export async function cpuDecode(bytes: Uint8Array, k: number, filter: CpuRowFilter): Promise<{ rgb: Uint8Array; width: number; height: number } | undefined> {
  try {
    const meta = await loadImageDecoder()(bytes.buffer instanceof SharedArrayBuffer ? Uint8Array.from(bytes) : bytes).metadata();
    if (filter === 'gpu-jpeg' && (meta.format !== 'jpeg' || meta.space === 'cmyk' || meta.isProgressive === true || meta.channels !== 3)) return undefined;
    const height = meta.pageHeight ?? meta.height;
    const width = meta.width;
    const t = await decodeImage(bytes, { size: [height, width], fit: 'resize', layout: 'hwc', source: `file ${k}` });
    return { rgb: t.data, width, height };
  } catch {
    return undefined;
  }
}

/** One nvJPEG state (and parsed stream) on the thread that runs its jobs. */
class NvjpegSlot {
  readonly #lib = nvjpeg();
  readonly #handle: bigint;
  readonly #hardware: boolean;
  readonly #state: bigint;
  readonly #jpegStream: bigint;
  /** Batch size and format of the last nvjpegDecodeBatchedInitialize; −1 after a failed batch (the docs ask for a new one). */
  #initialized = -1;
  #initializedPlanar = false;
  // Out-parameters, reused (a synchronous FFI call runs no JS until it returns).
  readonly #components = new Int32Array(new ArrayBuffer(4));
  readonly #subsampling = new Int32Array(new ArrayBuffer(4));
  readonly #widths = new Int32Array(new ArrayBuffer(16));
  readonly #heights = new Int32Array(new ArrayBuffer(16));
  readonly #supported = new Int32Array(new ArrayBuffer(4));

  constructor(job: Extract<JpegJob, { op: 'nvjpeg-open' }>) {
    // The primary context the loader uses, current on this thread for every call it makes.
    driver().ctxSetCurrent(job.context);
    this.#handle = job.handle;
    this.#hardware = job.hardware;
    this.#state = job.state;
    this.#jpegStream = job.jpegStream;
  }

  decode(job: Extract<JpegJob, { op: 'nvjpeg-decode' }>): NvjpegDecoded {
    const n = job.data.length;
    const widths = new Int32Array(n);
    const heights = new Int32Array(n);
    const offsets = new Float64Array(n);
    const decoded = new Uint8Array(n);
    const t0 = performance.now();
    const accepted: number[] = [];
    let total = 0;
    for (let k = 0; k < n; k++) {
      const size = this.#probe(job.data[k]!, Number(job.lengths[k]!));
      if (size === undefined) continue;
      widths[k] = size.width;
      heights[k] = size.height;
      offsets[k] = total;
      total += Math.ceil((size.width * size.height * CHANNELS) / 256) * 256;
      accepted.push(k);
    }
    const t1 = performance.now();
    if (accepted.length === 0 || total > job.scratchBytes) return { widths, heights, offsets, decoded, need: total, probeMs: t1 - t0, decodeMs: 0 };
    const m = accepted.length;
    const data = new BigUint64Array(new ArrayBuffer(m * 8));
    const lengths = new BigUint64Array(new ArrayBuffer(m * 8));
    const images = new BigUint64Array(new ArrayBuffer(m * 64));
    accepted.forEach((k, i) => {
      data[i] = job.data[k]!;
      lengths[i] = job.lengths[k]!;
      const at = job.scratch + BigInt(offsets[k]!);
      if (job.planar) {
        const plane = widths[k]! * heights[k]!;
        for (let c = 0; c < CHANNELS; c++) {
          images[8 * i + c] = at + BigInt(c * plane);
          images[8 * i + 4 + c] = BigInt(widths[k]!);
        }
      } else {
        images[8 * i] = at;
        images[8 * i + 4] = BigInt(widths[k]! * CHANNELS);
      }
    });
    if (this.#batch(m, data, lengths, images, job.stream, job.planar) === 0) {
      for (const k of accepted) decoded[k] = 1;
    } else {
      // A corrupt stream among them: image by image, those failing again go to the CPU.
      accepted.forEach((k, i) => {
        decoded[k] = this.#batch(1, data.subarray(i, i + 1), lengths.subarray(i, i + 1), images.subarray(8 * i, 8 * i + 8), job.stream, job.planar) === 0 ? 1 : 0;
      });
    }
    return { widths, heights, offsets, decoded, need: total, probeMs: t1 - t0, decodeMs: performance.now() - t1 };
  }

  /** The decoded size when the GPU takes this file; undefined sends it to the CPU. */
  #probe(at: bigint, length: number): { width: number; height: number } | undefined {
    const lib = this.#lib;
    if (lib.getImageInfoAt(this.#handle, at, length, this.#components, this.#subsampling, this.#widths, this.#heights) !== 0) return undefined;
    const components = this.#components[0]!;
    const width = this.#widths[0]!;
    const height = this.#heights[0]!;
    // Grey (1 component: NOTE [grey JPEGs on the CPU]), CMYK/YCCK (4) and odd subsamplings go to the CPU, as do images too large for it.
    if (components !== 3 || this.#subsampling[0] === NVJPEG_CSS_UNKNOWN) return undefined;
    if (!(width >= 1 && height >= 1) || width * height > MAX_PIXELS) return undefined;
    if (this.#hardware) {
      // Progressive, arithmetic-coded or 4:1:1 streams are refused by the engine: CPU.
      if (lib.streamParseHeaderAt(this.#handle, at, length, this.#jpegStream) !== 0) return undefined;
      if (lib.decodeBatchedSupported(this.#handle, this.#jpegStream, this.#supported) !== 0 || this.#supported[0] !== 0) return undefined;
    }
    return { width, height };
  }

  #batch(n: number, data: BigUint64Array, lengths: BigUint64Array, images: BigUint64Array, stream: bigint, planar: boolean): number {
    const lib = this.#lib;
    if (this.#initialized !== n || this.#initializedPlanar !== planar) {
      const status = lib.decodeBatchedInitialize(this.#handle, this.#state, n, 1, planar ? NVJPEG_OUTPUT_RGB : NVJPEG_OUTPUT_RGBI);
      if (status !== 0 && planar) throw nvjpegFailed('nvjpegDecodeBatchedInitialize', status);
      if (status !== 0) return status;
      this.#initialized = n;
      this.#initializedPlanar = planar;
    }
    const status = lib.decodeBatched(this.#handle, this.#state, data, lengths, images, stream);
    if (status !== 0) this.#initialized = -1;
    return status;
  }
}
