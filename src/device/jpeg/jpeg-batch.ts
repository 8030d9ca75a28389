// Internal: not exported from the package entry.
// The `jpeg` capability of an accelerator: open the backend's GPU JPEG decoder (nvJPEG on CUDA, the
// CPU decoder behind `sim`), and assemble one batch from encoded files — the image rows decoded
// straight into the batch's device memory, the files the GPU refuses decoded on the CPU into the
// same rows, the other (small) fields copied beside them. The rules: every buffer is acquired
// before any work is queued (NOTE [Upload commits last], assembly.ts), so an out-of-memory leaves
// nothing behind; the files stay referenced until the batch's ready event is done (the decoder may
// read them while the copy stream runs); a batch with a file neither decoder could read is handed
// back whole, its memory freed in stream order, and its caller fails it.

import type { Tensor } from '../../tensor/tensor.js';
import type { Assembly } from '../accelerator/assembly.js';
import type { Backend } from '../backend.js';
import type { DeviceBatch, JpegBatchCall, JpegBatchTiming, JpegDecoder, JpegDevice, JpegImageSpec } from '../device.js';

export type { JpegBatchCall, JpegBatchTiming, JpegDevice, JpegImageSpec };
import { type CropBoxes, type JpegOutputDtype, dtypeBytes } from '../../image/jpeg-plan.js';
import { GpuJpegDecoder } from './gpu-jpeg-decoder.js';
import { SimBackend } from '../sim/sim-backend.js';

/**
 * What `decodeBatch` throws once it has queued work: the files' memory is then given back by it, in
 * stream order (the caller must not, and must not retry with it). An error before that (out of
 * memory acquiring the batch's buffers) is thrown as it is, and the caller still owns the files.
 */
export class FilesGivenBack {
  constructor(readonly cause: unknown) {}
}

export function jpegDevice(a: Assembly, backend: Backend): JpegDevice {
  return {
    native: !(backend instanceof SimBackend),
    open: () => GpuJpegDecoder.open(backend),
    fileMemory: (bytes) => {
      const want = Math.max(1, Math.ceil(bytes / PIN_CLASS)) * PIN_CLASS;
      return a.memory.host.acquire('uint8', want, Math.ceil((want * FILE_FIT) / PIN_CLASS) * PIN_CLASS);
    },
    releaseFiles: (memory) => a.memory.host.recycle('uint8', memory),
    decodeBatch: (decoder, files, host, boxes, image, imageAt, others, call) => decodeBatch(a, decoder, files, host, boxes, image, imageAt, others, call),
  };
}

/**
 * NOTE [files in page-locked memory] The readers read a batch's files straight into one page-locked
 * buffer, so the decoder's copies of them to the device run as DMA on the stream (not staged by the
 * driver) and no copy is made on the host. Its size is rounded up to PIN_CLASS, and any kept buffer
 * up to FILE_FIT times the ask serves it (the readers take its length as their capacity), so that
 * the host pool reuses a few buffers for the whole run (a batch's files vary by a few per cent in
 * total). The pool evicts the buffers released longest ago when over its budget: before, the first
 * batches' larger pre-measurement buffers held the budget and every later file buffer was
 * page-locked anew, 5–17 ms a batch (H200 run 15, env switch `decodeTiming`'s "new file buffers").
 */
const PIN_CLASS = 4 * 2 ** 20;
const FILE_FIT = 1.5;

async function decodeBatch(
  a: Assembly, decoder: JpegDecoder, files: readonly Uint8Array[], pinned: Uint8Array, boxes: CropBoxes, image: JpegImageSpec, imageAt: number, others: readonly Tensor[], call?: JpegBatchCall,
): Promise<{ batch: DeviceBatch; failed: number[] }> {
  const timing = call?.timing;
  const t0 = timing !== undefined ? performance.now() : 0;
  const memory = a.memory;
  const backend = memory.backend;
  memory.retire();
  const rows = files.length;
  const [h, w] = image.size;
  const rowBytes = 3 * h * w * dtypeBytes(image.dtype);
  const shape = image.layout === 'chw' ? [3, h, w] : [h, w, 3];
  // NOTE [Upload commits last] (assembly.ts): every buffer before anything is queued.
  // On an out-of-memory here the caller still owns `pinned` (and may retry).
  const held = memory.acquireAll([rows * rowBytes, ...others.map((t) => t.byteLength)]);
  const imageBuffer = held[0]!;
  let fileBytes = 0;
  for (const f of files) fileBytes += f.byteLength;
  let failed: number[];
  try {
    others.forEach((t, i) => {
      backend.copyToDevice(held[i + 1]!, 0, t.bytes(), 'copy');
      a.countH2d(t.byteLength);
    });
    const out = { ptr: imageBuffer.ptr, rowBytes, layout: image.layout, dtype: image.dtype, size: image.size, mean: image.mean, std: image.std };
    if (timing !== undefined) timing.prepMs += performance.now() - t0;
    const { fallback } = await decoder.decodeInto(files, boxes, out, 'copy', call);
    const t1 = timing !== undefined ? performance.now() : 0;
    failed = fallback.length > 0 ? (await decoder.decodeOnCpu(files, fallback, boxes, out, 'copy')).failed : [];
    if (timing !== undefined) timing.cpuMs += performance.now() - t1;
  } catch (error) {
    // Queued copies or decodes may still write these buffers: back only once the copy stream passes them.
    const done = backend.record('copy');
    memory.after('copy', done, () => {
      for (const b of held) memory.recycle(b);
      memory.host.recycle('uint8', pinned);
      backend.recycle(done);
    });
    throw new FilesGivenBack(error);
  }
  a.countH2d(fileBytes);
  const ready = backend.record('copy');
  // SAFETY: the decoder may read the files (page-locked host memory) until `ready` is done.
  memory.after('copy', ready, () => memory.host.recycle('uint8', pinned));
  const parts = others.map((t, i) => ({ buffer: held[i + 1]!, dtype: t.dtype, shape: t.shape }));
  parts.splice(imageAt, 0, { buffer: imageBuffer, dtype: image.dtype, shape: [rows, ...shape] });
  return { batch: a.batch(parts, ready), failed };
}
