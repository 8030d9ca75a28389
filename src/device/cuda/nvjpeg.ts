// Internal: not exported from the package entry.
// The nvJPEG decoder (GpuJpegDecoder on CUDA, device/jpeg/gpu-jpeg-decoder.ts has the rules a caller
// must know): the files go through nvJPEG's batched decoder (the hardware engine on A100/H100/H200,
// else the GPU hybrid backend) into a device scratch buffer, then kernels/crop-resize.cu writes the
// rows. CudaBackend.openJpeg opens it.

import type { Backend, DeviceBuffer, StreamName } from '../backend.js';
import { StreamScratch } from '../accelerator/stream-scratch.js';
import { CpuJpegRows } from '../jpeg/sim-jpeg.js';
import type { NvjpegDecoded } from '../jpeg/jpeg-jobs.js';
import { DEFAULT_JPEG_SLOTS, type JpegSlot, JpegSlots, type SlotTicket, slotThreads } from '../jpeg/jpeg-slots.js';
import type { CudaBackend } from './cuda-backend.js';
import { GpuJpegDecoder } from '../jpeg/gpu-jpeg-decoder.js';
import { type CropBoxes, JOB_BYTES, type JpegBatchOutput, boxFor, checkBoxCount, checkOutput, dtypeBytes, pixelLayout, writeJob, CHANNELS } from '../../image/jpeg-plan.js';
import { NVJPEG_BACKEND_GPU_HYBRID, NVJPEG_BACKEND_HARDWARE, type NvJpeg, nvjpeg, nvjpegFailed, statusName } from './nvjpeg-lib.js';

export type { CropBox, CropBoxes, JpegBatchOutput } from '../../image/jpeg-plan.js';
import type { DecodeCall, DecodeCallTiming, DecodeResult, DecodeStats, JpegDecoder } from '../device.js';

export type { SlotTicket } from '../jpeg/jpeg-slots.js';
export { GpuJpegDecoder } from '../jpeg/gpu-jpeg-decoder.js';

const CROP_RESIZE_PTX = new URL('../../../kernels/crop-resize.ptx', import.meta.url);
const KERNELS = { uint8: 'stoker_crop_resize_u8', float32: 'stoker_crop_resize_f32', float16: 'stoker_crop_resize_f16', bfloat16: 'stoker_crop_resize_bf16' } as const;

/** NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION. */
const FLAG_INTERPOLATE_CHROMA = 32;

/** Fewer bytes than this cannot be a JPEG with a frame: not worth a library call. */
const MIN_JPEG_BYTES = 128;

export class NvJpegDecoder extends GpuJpegDecoder {
  readonly kind: 'nvjpeg-hardware' | 'nvjpeg-gpu-hybrid';
  readonly chroma: 'interpolate' | 'replicate';
  readonly #backend: CudaBackend;
  readonly #lib: NvJpeg;
  readonly #handle: bigint;
  /** Per slot: its nvJPEG state and parsed-stream object (made here, used only by the slot's thread, destroyed here). */
  readonly #states: { state: bigint; jpegStream: bigint }[] = [];
  readonly #slots: JpegSlots;
  readonly #cpu: CpuJpegRows;
  /** Decoded into planar RGB (NVJPEG_OUTPUT_RGB) since interleaved RGB never worked here; else NVJPEG_OUTPUT_RGBI. */
  #planar = false;
  /** Some image decoded with the current output format. */
  #proven = false;
  /** Per slot: decoded pixels and the kernel's job table. */
  readonly #scratch: (DeviceBuffer | undefined)[];
  readonly #jobs: (DeviceBuffer | undefined)[];
  /** The slot of the last call (the `scratch` test hook). */
  #last = 0;
  readonly #order: StreamScratch;
  #closed = false;

  private constructor(backend: CudaBackend, lib: NvJpeg, handle: bigint, hardware: boolean, interpolate: boolean, slots: number) {
    super();
    this.chroma = interpolate ? 'interpolate' : 'replicate';
    this.#backend = backend;
    this.#lib = lib;
    this.#handle = handle;
    this.kind = hardware ? 'nvjpeg-hardware' : 'nvjpeg-gpu-hybrid';
    const out = new BigUint64Array(new ArrayBuffer(8));
    try {
      for (let i = 0; i < slots; i++) {
        let status = lib.stateCreate(handle, out);
        if (status !== 0) throw nvjpegFailed('nvjpegJpegStateCreate', status);
        const state = out[0]!;
        status = lib.streamCreate(handle, out);
        if (status !== 0) {
          lib.stateDestroy(state);
          throw nvjpegFailed('nvjpegJpegStreamCreate', status);
        }
        this.#states.push({ state, jpegStream: out[0]! });
      }
    } catch (error) {
      this.#release();
      throw error;
    }
    this.#scratch = new Array<DeviceBuffer | undefined>(slots).fill(undefined);
    this.#jobs = new Array<DeviceBuffer | undefined>(slots).fill(undefined);
    const context = backend.context.handle;
    this.#slots = new JpegSlots(slots, slotThreads(true), (i) => ({ op: 'nvjpeg-open', context, handle, hardware, ...this.#states[i]! }));
    this.#cpu = new CpuJpegRows(backend);
    this.#order = new StreamScratch(backend);
  }

  static create(backend: CudaBackend, chroma: 'interpolate' | 'replicate', slots: number): NvJpegDecoder {
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
    return new NvJpegDecoder(backend, lib, out[0]!, hardware, flags !== 0, slots);
  }

  reserve(): SlotTicket {
    return this.#slots.reserve();
  }

  async decodeInto(files: readonly Uint8Array[], boxes: CropBoxes, out: JpegBatchOutput, stream: StreamName = 'copy', call?: DecodeCall<JpegSlot>): Promise<DecodeResult> {
    const timing = call?.timing;
    const tw = performance.now();
    // The slot first, then the checks: a ticket's slot is this call's to release once claimed.
    const slot = await (call?.ticket?.take() ?? this.#slots.acquire());
    try {
      this.#assertOpen();
      checkBoxCount(boxes, files.length);
      const scaleBias = checkOutput(out);
      if (timing !== undefined) timing.slotMs += performance.now() - tw;
      this.#last = slot.index;
      this.stats.calls++;
      this.#backend.context.setCurrent();
      // A new stream first waits for the old one: the slot's scratch is reused in stream order.
      this.#order.use(stream);
      const fallback: number[] = [];
      // Not even the start of a JPEG: the CPU's, without a library call.
      const candidates: number[] = [];
      files.forEach((bytes, k) => {
        if (bytes.byteLength < MIN_JPEG_BYTES || bytes[0] !== 0xff || bytes[1] !== 0xd8 || bytes[2] !== 0xff) fallback.push(k);
        else candidates.push(k);
      });
      if (candidates.length === 0) return { fallback };
      const data = new BigUint64Array(candidates.length);
      const lengths = new BigUint64Array(candidates.length);
      candidates.forEach((k, i) => {
        // SAFETY: the files are the caller's to keep until an event after this call; the slot's thread reads them during its job.
        data[i] = this.#lib.address(files[k]!);
        lengths[i] = BigInt(files[k]!.byteLength);
      });
      const cuStream = this.#backend.stream(stream).handle;
      const tj = performance.now();
      let r = await this.#decodeOn(slot.index, slot, data, lengths, cuStream, stream);
      if (!this.#proven && !this.#planar && r.need > 0 && !r.decoded.some(Boolean)) {
        // Nothing decoded before, nothing now: this library may not write interleaved RGB with this
        // backend. Planar RGB (what torchvision asks for) from now on.
        this.#planar = true;
        r = await this.#decodeOn(slot.index, slot, data, lengths, cuStream, stream);
      }
      if (r.decoded.some(Boolean)) this.#proven = true;
      this.stats.probeMs += r.probeMs;
      this.stats.decodeMs += r.decodeMs;
      const t2 = performance.now();
      if (timing !== undefined) {
        timing.probeMs += r.probeMs;
        timing.decodeMs += r.decodeMs;
        timing.handoffMs += Math.max(0, t2 - tj - r.probeMs - r.decodeMs);
      }
      // `good`: the candidates (their indexes in the job) nvJPEG wrote; the others go to the CPU.
      const good: number[] = [];
      candidates.forEach((k, i) => {
        if (r.decoded[i]) good.push(i);
        else fallback.push(k);
      });
      fallback.sort((a, b) => a - b);
      if (good.length === 0) return { fallback };

      this.#backend.context.setCurrent();
      this.#order.use(stream);
      const scratch = this.#scratch[slot.index]!;
      const table = new DataView(new ArrayBuffer(good.length * JOB_BYTES));
      good.forEach((i, j) => {
        const k = candidates[i]!;
        const width = r.widths[i]!;
        const height = r.heights[i]!;
        writeJob(table, j, scratch.ptr + BigInt(r.offsets[i]!), width, height, pixelLayout(width, height, this.#planar), boxFor(boxes, k, width, height, out.size), k);
      });
      const jobs = (this.#jobs[slot.index] = this.#order.grow(this.#jobs[slot.index], table.byteLength, stream));
      // SAFETY: pageable source: the driver has staged it when the call returns.
      this.#backend.copyToDevice(jobs, 0, new Uint8Array(table.buffer), stream);
      const [oh, ow] = out.size;
      const fn = this.#backend.context.module(CROP_RESIZE_PTX).getFunction(KERNELS[out.dtype]);
      // SAFETY: a slot's scratch and jobs are reused only by its next call, queued after this launch
      // on the stream (or after a synchronize); `out` is the caller's, alive until an event after this launch.
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
      if (timing !== undefined) timing.launchMs += performance.now() - t2;
      return { fallback };
    } finally {
      this.#slots.release(slot);
    }
  }

  /** The slot's probe and batched decode, its scratch grown (and the call repeated) when the batch needs more. */
  async #decodeOn(index: number, slot: JpegSlot, data: BigUint64Array, lengths: BigUint64Array, cuStream: bigint, stream: StreamName): Promise<NvjpegDecoded> {
    for (;;) {
      const scratch = this.#scratch[index];
      const r = await slot.run<NvjpegDecoded>({ op: 'nvjpeg-decode', data, lengths, scratch: scratch?.ptr ?? 0n, scratchBytes: scratch?.bytes ?? 0, stream: cuStream, planar: this.#planar });
      if (r.need <= (scratch?.bytes ?? 0) || r.need === 0) return r;
      this.#backend.context.setCurrent();
      this.#order.use(stream);
      this.#scratch[index] = this.#order.grow(scratch, r.need, stream);
    }
  }

  async decodeOnCpu(files: readonly Uint8Array[], which: readonly number[], boxes: CropBoxes, out: JpegBatchOutput, stream: StreamName = 'copy'): Promise<{ failed: number[] }> {
    this.#assertOpen();
    this.#order.use(stream);
    return { failed: (await this.#cpu.write(files, boxes, out, stream, which, 'any')).skipped };
  }

  /** Test hook: the last call's decoded pixels (each accepted file at the next 256-byte boundary, in order) and their layout. */
  get scratch(): { buffer: DeviceBuffer | undefined; planar: boolean } {
    return { buffer: this.#scratch[this.#last], planar: this.#planar };
  }

  whenIdle(): Promise<void> {
    return this.#slots.whenIdle();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    // Every slot's opening job done (its thread holds the state it was given) and no call in flight.
    if (this.#slots.held === 0) this.#finish();
    else void this.#slots.whenIdle().then(() => this.#finish());
  }

  #finish(): void {
    this.#slots.close();
    this.#cpu.close();
    if (!this.#backend.closed) {
      this.#backend.context.setCurrent();
      this.#order.drain();
      for (const b of [...this.#scratch, ...this.#jobs]) if (b !== undefined) this.#backend.free(b);
    }
    this.#scratch.fill(undefined);
    this.#jobs.fill(undefined);
    this.#release();
  }

  /** The states, then the handle. */
  #release(): void {
    const lib = this.#lib;
    const statuses = this.#states.flatMap((s) => [lib.stateDestroy(s.state), lib.streamDestroy(s.jpegStream)]);
    this.#states.length = 0;
    const failed = [...statuses, lib.destroy(this.#handle)].find((s) => s !== 0);
    if (failed !== undefined) process.emitWarning(`nvJPEG: releasing the decoder failed with ${statusName(failed)}`, 'StokerWarning');
  }

  #assertOpen(): void {
    if (this.#closed) throw new Error('this GPU JPEG decoder is closed');
  }
}
