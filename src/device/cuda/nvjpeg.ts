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
// - One decoder serves one call at a time, and stream order makes its scratch memory safe to reuse.

import { LoaderError, invalidOption } from '../../errors.js';
import type { Backend, DeviceBuffer, StreamName } from '../backend.js';
import { SimBackend } from '../sim/sim-backend.js';
import { StreamScratch } from '../stream-scratch.js';
import { CpuJpegRows } from '../sim/sim-jpeg.js';
import { CudaBackend } from './cuda-backend.js';
import { CHANNELS, type CropBox, type CropBoxes, JOB_BYTES, type JpegBatchOutput, boxFor, checkBoxCount, checkOutput, pixelLayout, writeJob } from './nvjpeg-plan.js';
import {
  NVJPEG_BACKEND_GPU_HYBRID,
  NVJPEG_BACKEND_HARDWARE,
  NVJPEG_CSS_UNKNOWN,
  NVJPEG_OUTPUT_RGB,
  NVJPEG_OUTPUT_RGBI,
  type NvJpeg,
  nvjpeg,
  nvjpegFailed,
  statusName,
} from './nvjpeg-lib.js';

export type { CropBox, CropBoxes, JpegBatchOutput } from './nvjpeg-plan.js';

const CROP_RESIZE_PTX = new URL('../../../kernels/crop-resize.ptx', import.meta.url);
const KERNELS = { uint8: 'stoker_crop_resize_u8', float32: 'stoker_crop_resize_f32', float16: 'stoker_crop_resize_f16', bfloat16: 'stoker_crop_resize_bf16' } as const;
/** Images over this many pixels go to the CPU, which refuses them by its own limit (sharp's default, 0x3FFF²). */
const MAX_PIXELS = 0x3fff * 0x3fff;
/** Fewer bytes than this cannot be a JPEG with a frame: not worth a library call. */
const MIN_JPEG_BYTES = 128;

export interface DecodeResult {
  /** Files not written (ascending): decode them on the CPU (decodeOnCpu) or fail their batch. */
  readonly fallback: number[];
}

export interface GpuJpegOptions {
  /**
   * How nvJPEG brings 4:2:0 / 4:2:2 chroma to full size: 'interpolate' (default; libjpeg-turbo's
   * "fancy" upsampling, as sharp and PIL do, so GPU rows match CPU rows closely) or 'replicate'
   * (nvJPEG's default, what torchvision's decode_jpeg(device='cuda') gives). A library that refuses
   * interpolation falls back to 'replicate' (see `chroma` on the decoder).
   */
  readonly chroma?: 'interpolate' | 'replicate';
}

/** NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION. */
const FLAG_INTERPOLATE_CHROMA = 32;

/** Host time spent per phase (ms), for benches. */
export interface DecodeStats {
  probeMs: number;
  decodeMs: number;
  launchMs: number;
  calls: number;
}

export abstract class GpuJpegDecoder {
  /** 'nvjpeg-hardware', 'nvjpeg-gpu-hybrid' or 'sim' (the CPU decoder behind the sim device). */
  abstract readonly kind: string;
  /** The chroma upsampling in effect ('interpolate' on sim: libjpeg-turbo's). */
  abstract readonly chroma: 'interpolate' | 'replicate';
  readonly stats: DecodeStats = { probeMs: 0, decodeMs: 0, launchMs: 0, calls: 0 };

  /** A decoder for the backend's device: nvJPEG on CUDA (ERR_CUDA_UNAVAILABLE without libnvjpeg), the CPU on sim. */
  static open(backend: Backend, options: GpuJpegOptions = {}): GpuJpegDecoder {
    if (options.chroma !== undefined && options.chroma !== 'interpolate' && options.chroma !== 'replicate') throw invalidOption('chroma', "'interpolate' or 'replicate'", options.chroma);
    if (backend instanceof CudaBackend) return NvJpegDecoder.create(backend, options.chroma ?? 'interpolate');
    if (backend instanceof SimBackend) return new SimJpegDecoder(backend);
    throw new LoaderError('ERR_UNSUPPORTED_OPTION', `GPU JPEG decoding needs a CUDA or sim device, got the backend ${backend.name}`);
  }

  /** Decode `files`, crop each by its box and write row k of `out`; see the header for the rules. */
  abstract decodeInto(files: readonly Uint8Array[], boxes: CropBoxes, out: JpegBatchOutput, stream?: StreamName): Promise<DecodeResult>;

  /** Write rows `which` of `out` from the CPU decoder (any format sharp reads); `failed` are the files it could not decode. */
  abstract decodeOnCpu(files: readonly Uint8Array[], which: readonly number[], boxes: CropBoxes, out: JpegBatchOutput, stream?: StreamName): Promise<{ failed: number[] }>;

  /** Waits for queued work, frees scratch memory and the library handles. Idempotent. */
  abstract close(): void;
}

class SimJpegDecoder extends GpuJpegDecoder {
  readonly kind = 'sim';
  readonly chroma = 'interpolate';
  readonly #rows: CpuJpegRows;

  constructor(backend: SimBackend) {
    super();
    this.#rows = new CpuJpegRows(backend);
  }

  async decodeInto(files: readonly Uint8Array[], boxes: CropBoxes, out: JpegBatchOutput, stream: StreamName = 'copy'): Promise<DecodeResult> {
    // What nvJPEG's hardware engine takes; the rest is the caller's CPU fallback, as on a GPU.
    const { skipped } = await this.#rows.write(files, boxes, out, stream, undefined, 'gpu-jpeg');
    return { fallback: skipped };
  }

  async decodeOnCpu(files: readonly Uint8Array[], which: readonly number[], boxes: CropBoxes, out: JpegBatchOutput, stream: StreamName = 'copy'): Promise<{ failed: number[] }> {
    return { failed: (await this.#rows.write(files, boxes, out, stream, which, 'any')).skipped };
  }

  close(): void {
    this.#rows.close();
  }
}

interface Accepted {
  readonly k: number;
  readonly bytes: Uint8Array;
  readonly width: number;
  readonly height: number;
  readonly box: CropBox;
  readonly offset: number;
}

class NvJpegDecoder extends GpuJpegDecoder {
  readonly kind: 'nvjpeg-hardware' | 'nvjpeg-gpu-hybrid';
  readonly chroma: 'interpolate' | 'replicate';
  readonly #backend: CudaBackend;
  readonly #lib: NvJpeg;
  readonly #handle: bigint;
  readonly #state: bigint;
  readonly #jpegStream: bigint;
  readonly #cpu: CpuJpegRows;
  /** Decoded into planar RGB (NVJPEG_OUTPUT_RGB) since interleaved RGB never worked here; else NVJPEG_OUTPUT_RGBI. */
  #planar = false;
  /** Some image decoded with the current output format. */
  #proven = false;
  /** Batch size of the last nvjpegDecodeBatchedInitialize; −1 after a failed batch (the docs ask for a new one). */
  #initialized = -1;
  #scratch: DeviceBuffer | undefined;
  #jobs: DeviceBuffer | undefined;
  readonly #order: StreamScratch;
  #closed = false;
  // Out-parameters, reused (a synchronous FFI call runs no JS until it returns).
  readonly #components = new Int32Array(new ArrayBuffer(4));
  readonly #subsampling = new Int32Array(new ArrayBuffer(4));
  readonly #widths = new Int32Array(new ArrayBuffer(16));
  readonly #heights = new Int32Array(new ArrayBuffer(16));
  readonly #supported = new Int32Array(new ArrayBuffer(4));

  private constructor(backend: CudaBackend, lib: NvJpeg, handle: bigint, hardware: boolean, interpolate: boolean) {
    super();
    this.chroma = interpolate ? 'interpolate' : 'replicate';
    this.#backend = backend;
    this.#lib = lib;
    this.#handle = handle;
    this.kind = hardware ? 'nvjpeg-hardware' : 'nvjpeg-gpu-hybrid';
    const out = new BigUint64Array(new ArrayBuffer(8));
    let status = lib.stateCreate(handle, out);
    if (status !== 0) throw nvjpegFailed('nvjpegJpegStateCreate', status);
    this.#state = out[0]!;
    status = lib.streamCreate(handle, out);
    if (status !== 0) throw nvjpegFailed('nvjpegJpegStreamCreate', status);
    this.#jpegStream = out[0]!;
    this.#cpu = new CpuJpegRows(backend);
    this.#order = new StreamScratch(backend);
  }

  static create(backend: CudaBackend, chroma: 'interpolate' | 'replicate'): NvJpegDecoder {
    const lib = nvjpeg();
    backend.context.setCurrent();
    const out = new BigUint64Array(new ArrayBuffer(8));
    let flags = chroma === 'interpolate' ? FLAG_INTERPOLATE_CHROMA : 0;
    let hardware = lib.createEx(NVJPEG_BACKEND_HARDWARE, flags, out) === 0;
    if (!hardware && flags !== 0) {
      flags = 0;
      hardware = lib.createEx(NVJPEG_BACKEND_HARDWARE, flags, out) === 0;
    }
    if (hardware) {
      // The hardware backend is accepted on GPUs without an engine too (it then runs GPU kernels): ask.
      const engines = new Uint32Array(new ArrayBuffer(4));
      const cores = new Uint32Array(new ArrayBuffer(4));
      const info = lib.hardwareDecoderInfo?.(out[0]!, engines, cores);
      if (info !== undefined && (info !== 0 || engines[0] === 0)) {
        lib.destroy(out[0]!);
        hardware = false;
      }
    }
    if (!hardware) {
      flags = chroma === 'interpolate' ? FLAG_INTERPOLATE_CHROMA : 0;
      let status = lib.createEx(NVJPEG_BACKEND_GPU_HYBRID, flags, out);
      if (status !== 0 && flags !== 0) status = lib.createEx(NVJPEG_BACKEND_GPU_HYBRID, (flags = 0), out);
      if (status !== 0) throw nvjpegFailed('nvjpegCreateEx(NVJPEG_BACKEND_GPU_HYBRID)', status, `decode on the CPU (decode: 'cpu'); nvJPEG is ${lib.path}`);
    }
    return new NvJpegDecoder(backend, lib, out[0]!, hardware, flags !== 0);
  }

  async decodeInto(files: readonly Uint8Array[], boxes: CropBoxes, out: JpegBatchOutput, stream: StreamName = 'copy'): Promise<DecodeResult> {
    this.#assertOpen();
    checkBoxCount(boxes, files.length);
    const scaleBias = checkOutput(out);
    this.#backend.context.setCurrent();
    this.#order.use(stream);
    const fallback: number[] = [];
    const accepted: Accepted[] = [];
    let scratchBytes = 0;
    const t0 = performance.now();
    this.stats.calls++;
    for (let k = 0; k < files.length; k++) {
      const size = this.#probe(files[k]!);
      if (size === undefined) {
        fallback.push(k);
        continue;
      }
      const box = boxFor(boxes, k, size.width, size.height);
      accepted.push({ k, bytes: files[k]!, width: size.width, height: size.height, box, offset: scratchBytes });
      scratchBytes += Math.ceil((size.width * size.height * CHANNELS) / 256) * 256;
    }
    const t1 = performance.now();
    this.stats.probeMs += t1 - t0;
    if (accepted.length === 0) return { fallback };
    const scratch = (this.#scratch = this.#order.grow(this.#scratch, scratchBytes, stream));
    const cuStream = this.#backend.stream(stream).handle;
    const n = accepted.length;
    const data = new BigUint64Array(new ArrayBuffer(n * 8));
    const lengths = new BigUint64Array(new ArrayBuffer(n * 8));
    for (let i = 0; i < n; i++) {
      data[i] = this.#lib.address(accepted[i]!.bytes);
      lengths[i] = BigInt(accepted[i]!.bytes.byteLength);
    }
    let decoded = this.#decodeBatch(data, lengths, this.#images(accepted, scratch.ptr), cuStream);
    if (!this.#proven && !this.#planar && !decoded.some(Boolean)) {
      // Nothing decoded before, nothing now: this library may not write interleaved RGB with this
      // backend. Planar RGB (what torchvision asks for) from now on.
      this.#planar = true;
      this.#initialized = -1;
      decoded = this.#decodeBatch(data, lengths, this.#images(accepted, scratch.ptr), cuStream);
    }
    if (decoded.some(Boolean)) this.#proven = true;
    const t2 = performance.now();
    this.stats.decodeMs += t2 - t1;
    const good = accepted.filter((_, i) => decoded[i]);
    for (let i = 0; i < n; i++) if (!decoded[i]) fallback.push(accepted[i]!.k);
    fallback.sort((a, b) => a - b);
    if (good.length === 0) return { fallback };

    const table = new DataView(new ArrayBuffer(good.length * JOB_BYTES));
    good.forEach((a, j) => writeJob(table, j, scratch.ptr + BigInt(a.offset), a.width, a.height, pixelLayout(a.width, a.height, this.#planar), a.box, a.k));
    const jobs = (this.#jobs = this.#order.grow(this.#jobs, table.byteLength, stream));
    // SAFETY: pageable source: the driver has staged it when the call returns.
    this.#backend.copyToDevice(jobs, 0, new Uint8Array(table.buffer), stream);
    const [oh, ow] = out.size;
    const fn = this.#backend.context.module(CROP_RESIZE_PTX).getFunction(KERNELS[out.dtype]);
    // SAFETY: scratch and jobs are reused only through this stream's order (or after a synchronize);
    // `out` is the caller's, alive until an event after this launch.
    fn.launch([Math.ceil((oh * ow) / 256), good.length, 1], [256, 1, 1], this.#backend.stream(stream), [
      { ptr: jobs.ptr },
      { ptr: out.ptr },
      { u64: BigInt(out.rowBytes) },
      { u32: oh },
      { u32: ow },
      { u32: out.layout === 'hwc' ? 1 : 0 },
      ...Array.from(scaleBias, (v) => ({ f32: v })),
    ]);
    this.stats.launchMs += performance.now() - t2;
    return { fallback };
  }

  /** The nvjpegImage_t of each accepted file (4 channel pointers, 4 pitches): its place in the scratch buffer. */
  #images(accepted: readonly Accepted[], base: bigint): BigUint64Array {
    const images = new BigUint64Array(new ArrayBuffer(accepted.length * 64));
    accepted.forEach((a, i) => {
      const at = base + BigInt(a.offset);
      if (this.#planar) {
        const plane = a.width * a.height;
        for (let c = 0; c < CHANNELS; c++) {
          images[8 * i + c] = at + BigInt(c * plane);
          images[8 * i + 4 + c] = BigInt(a.width);
        }
      } else {
        images[8 * i] = at;
        images[8 * i + 4] = BigInt(a.width * CHANNELS);
      }
    });
    return images;
  }

  /** The decoded size when the GPU takes this file; undefined sends it to the CPU. */
  #probe(bytes: Uint8Array): { width: number; height: number } | undefined {
    if (bytes.byteLength < MIN_JPEG_BYTES || bytes[0] !== 0xff || bytes[1] !== 0xd8 || bytes[2] !== 0xff) return undefined;
    const lib = this.#lib;
    if (lib.getImageInfo(this.#handle, bytes, this.#components, this.#subsampling, this.#widths, this.#heights) !== 0) return undefined;
    const components = this.#components[0]!;
    const width = this.#widths[0]!;
    const height = this.#heights[0]!;
    // CMYK/YCCK (4 components) and odd subsamplings go to the CPU, as do images too large for it.
    if ((components !== 1 && components !== 3) || this.#subsampling[0] === NVJPEG_CSS_UNKNOWN) return undefined;
    if (!(width >= 1 && height >= 1) || width * height > MAX_PIXELS) return undefined;
    if (this.kind === 'nvjpeg-hardware') {
      // Progressive, arithmetic-coded or 4:1:1 streams are refused by the engine: CPU.
      if (lib.streamParseHeader(this.#handle, bytes, this.#jpegStream) !== 0) return undefined;
      if (lib.decodeBatchedSupported(this.#handle, this.#jpegStream, this.#supported) !== 0 || this.#supported[0] !== 0) return undefined;
    }
    return { width, height };
  }

  /** Decodes the batch; when the batch call fails (a corrupt stream among them), retries image by image. */
  #decodeBatch(data: BigUint64Array, lengths: BigUint64Array, images: BigUint64Array, cuStream: bigint): boolean[] {
    const n = data.length;
    if (this.#batch(n, data, lengths, images, cuStream) === 0) return new Array<boolean>(n).fill(true);
    const ok: boolean[] = [];
    for (let i = 0; i < n; i++) {
      ok.push(this.#batch(1, data.subarray(i, i + 1), lengths.subarray(i, i + 1), images.subarray(8 * i, 8 * i + 8), cuStream) === 0);
    }
    return ok;
  }

  #batch(n: number, data: BigUint64Array, lengths: BigUint64Array, images: BigUint64Array, cuStream: bigint): number {
    const lib = this.#lib;
    if (this.#initialized !== n) {
      const status = lib.decodeBatchedInitialize(this.#handle, this.#state, n, 1, this.#planar ? NVJPEG_OUTPUT_RGB : NVJPEG_OUTPUT_RGBI);
      if (status !== 0 && this.#planar) throw nvjpegFailed('nvjpegDecodeBatchedInitialize', status);
      if (status !== 0) return status;
      this.#initialized = n;
    }
    const status = lib.decodeBatched(this.#handle, this.#state, data, lengths, images, cuStream);
    if (status !== 0) this.#initialized = -1;
    return status;
  }

  async decodeOnCpu(files: readonly Uint8Array[], which: readonly number[], boxes: CropBoxes, out: JpegBatchOutput, stream: StreamName = 'copy'): Promise<{ failed: number[] }> {
    this.#assertOpen();
    this.#order.use(stream);
    return { failed: (await this.#cpu.write(files, boxes, out, stream, which, 'any')).skipped };
  }

  /** Test hook: the last call's decoded pixels (each accepted file at the next 256-byte boundary, in order) and their layout. */
  get scratch(): { buffer: DeviceBuffer | undefined; planar: boolean } {
    return { buffer: this.#scratch, planar: this.#planar };
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#cpu.close();
    if (!this.#backend.closed) {
      this.#backend.context.setCurrent();
      this.#order.drain();
      for (const b of [this.#scratch, this.#jobs]) if (b !== undefined) this.#backend.free(b);
    }
    this.#scratch = this.#jobs = undefined;
    const lib = this.#lib;
    const failed = [lib.stateDestroy(this.#state), lib.streamDestroy(this.#jpegStream), lib.destroy(this.#handle)].find((s) => s !== 0);
    if (failed !== undefined) process.emitWarning(`nvJPEG: releasing the decoder failed with ${statusName(failed)}`, 'StokerWarning');
  }

  #assertOpen(): void {
    if (this.#closed) throw new Error('this GPU JPEG decoder is closed');
  }
}
