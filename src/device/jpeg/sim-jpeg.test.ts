// The GPU JPEG decoder's plumbing on the sim device (CPU decode, same rows as the CUDA kernel would
// write), the reference resampler against torchvision's antialias filter (and, for a `pil` box, against
// image-resample.ts's Pillow resize of the whole image), and the per-file fallback: CI covers
// everything but nvJPEG itself here.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeImage } from '../../image/image-decode.js';
import { SimBackend } from '../sim/sim-backend.js';
import { GpuJpegDecoder } from './gpu-jpeg-decoder.js';
import { type CropBox, type JpegBatchOutput, type JpegBox, checkOutput, dtypeBytes, pixelLayout } from '../../image/jpeg-plan.js';
import { cropResize, encodeRow } from '../../image/jpeg-resample.js';
import { resampleBilinearJs } from '../../image/image-resample.js';
import { boxFor, viewFrom } from '../../image/crop-box.js';
import { centerCropResize } from '../../image/view-resample.js';
import { PickKey } from '../../sampler/pick-key.js';
import { awkwardFiles, baselineJpeg, greyJpeg, oneComponentJpeg } from '../../../test/fixtures/jpegs.js';
import { liveJpegThreads, slotThreads } from './jpeg-slots.js';

const POISON = 0xab;

function batchOut(backend: SimBackend, rows: number, over: Partial<JpegBatchOutput> = {}) {
  const size = over.size ?? [24, 32];
  const dtype = over.dtype ?? 'uint8';
  const rowBytes = over.rowBytes ?? 3 * size[0] * size[1] * dtypeBytes(dtype) + 64; // a gap between rows
  const buffer = backend.alloc(rows * rowBytes);
  backend.copyToDevice(buffer, 0, new Uint8Array(rows * rowBytes).fill(POISON), 'copy');
  const out: JpegBatchOutput = { ptr: buffer.ptr, rowBytes, layout: over.layout ?? 'chw', dtype, size, mean: over.mean, std: over.std };
  return { buffer, out };
}

function readBack(backend: SimBackend, buffer: { ptr: bigint; bytes: number }, bytes: number): Uint8Array {
  const host = new Uint8Array(bytes);
  backend.copyToHost(host, buffer, 0, 'copy');
  backend.synchronize(backend.record('copy'));
  return host;
}

async function expectedRow(bytes: Uint8Array, w: number, h: number, box: JpegBox, out: JpegBatchOutput): Promise<Uint8Array> {
  const full = await decodeImage(bytes, { size: [h, w], fit: 'resize', layout: 'hwc', source: 'test' });
  return encodeRow(cropResize(full.data, w * 3, box, out.size[0], out.size[1], { width: w, height: h }), out, checkOutput(out));
}

/** A center-crop view's box on a w × h image for an outW × outH output, with the Pillow resize it stands for. */
function centerCropBox(w: number, h: number, outW: number, outH: number, resize: number, crop: number, flip = false): JpegBox {
  const view = viewFrom({ centerCrop: { resize, crop } }) as Extract<ReturnType<typeof viewFrom>, { kind: 'center-crop' }>;
  return { ...boxFor(view, new PickKey(0, 0, 0, 0), w, h), flip, pil: centerCropResize(view, w, h, outW, outH) };
}

describe('reference resampler (kernels/crop-resize.cu on the CPU)', () => {
  const ramp = (w: number, h: number) => {
    const px = new Uint8Array(w * h * 3);
    for (let i = 0; i < w * h; i++) px.set([(i * 7) % 256, (i * 13) % 256, (i * 29) % 256], i * 3);
    return px;
  };

  it('slotThreads: STOKER_JPEG_WORKERS 0 / 1 override the decoder\'s default (threads on CUDA and sim)', () => {
    for (const byDefault of [true, false]) {
      assert.equal(slotThreads(byDefault, {}), byDefault);
      assert.equal(slotThreads(byDefault, { STOKER_JPEG_WORKERS: '0' }), false);
      assert.equal(slotThreads(byDefault, { STOKER_JPEG_WORKERS: '1' }), true);
    }
  });

  it('a box of the output size is copied unchanged, and flip mirrors it', () => {
    const px = ramp(9, 5);
    const box = { left: 2, top: 1, width: 4, height: 3, flip: false };
    const q = cropResize(px, 27, box, 3, 4);
    for (let y = 0; y < 3; y++) for (let x = 0; x < 4; x++) for (let c = 0; c < 3; c++) assert.equal(q[(y * 4 + x) * 3 + c], px[((1 + y) * 9 + 2 + x) * 3 + c]);
    const m = cropResize(px, 27, { ...box, flip: true }, 3, 4);
    for (let y = 0; y < 3; y++) for (let x = 0; x < 4; x++) for (let c = 0; c < 3; c++) assert.equal(m[(y * 4 + x) * 3 + c], q[(y * 4 + 3 - x) * 3 + c]);
  });

  it('planar pixels (nvJPEG’s RGB) resample exactly as the same pixels interleaved (RGBI)', () => {
    const w = 13, h = 11;
    const px = ramp(w, h);
    const planes = new Uint8Array(w * h * 3);
    for (let p = 0; p < w * h; p++) for (let c = 0; c < 3; c++) planes[c * w * h + p] = px[p * 3 + c]!;
    const box = { left: 1, top: 2, width: 11, height: 8, flip: true };
    assert.deepEqual(cropResize(planes, pixelLayout(w, h, true), box, 5, 4), cropResize(px, pixelLayout(w, h, false), box, 5, 4));
  });

  it('a 2× downscale is torchvision’s antialias filter: taps [1, 3, 3, 1] / 8, renormalized at the edges', () => {
    const w = 16;
    const px = new Uint8Array(w * 3);
    for (let x = 0; x < w; x++) px.fill((x * 37 + 11) % 251, x * 3, x * 3 + 3);
    const q = cropResize(px, w * 3, { left: 0, top: 0, width: w, height: 1, flip: false }, 1, w / 2);
    const v = (x: number) => px[x * 3]!;
    for (let i = 0; i < w / 2; i++) {
      const taps = [[2 * i - 1, 1], [2 * i, 3], [2 * i + 1, 3], [2 * i + 2, 1]].filter(([x]) => x! >= 0 && x! < w);
      const total = taps.reduce((s, [, t]) => s + t!, 0);
      const want = taps.reduce((s, [x, t]) => s + v(x!) * t!, 0) / total;
      assert.ok(Math.abs(q[i * 3]! - want) <= 0.5 + 1e-4, `output ${i}: ${q[i * 3]} vs ${want}`);
    }
  });

  it('a pil box is Pillow’s resize of the whole image (image-resample.ts, the CPU decoder’s): its taps reach past the box, to the image’s edges; flipped, planar, enlarged and reduced', () => {
    let seed = 7;
    const rand = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32;
    for (const [w, h] of [[60, 45], [45, 60], [7, 5], [150, 4], [97, 61], [300, 200], [31, 33], [1, 1]] as const) {
      // The output the crop (the whole resize's outputs kept), or another size (the crop's fractional rectangle resized to it).
      for (const [resize, crop, outW, outH] of [[32, 28, 28, 28], [24, 24, 24, 24], [40, 17, 17, 17], [32, 28, 20, 16]] as const) {
        const px = new Uint8Array(w * h * 3).map(() => (rand() * 256) | 0);
        for (const flip of [false, true]) {
          const box = centerCropBox(w, h, outW, outH, resize, crop, flip);
          const { x, y } = box.pil!;
          const whole = resampleBilinearJs(px, w, h, 3, { x0: x.in0, y0: y.in0, x1: x.in1, y1: y.in1 }, x.out, y.out, false);
          const want = new Uint8Array(outW * outH * 3);
          for (let oy = 0; oy < outH; oy++) {
            for (let ox = 0; ox < outW; ox++) {
              const at = ((y.first + oy) * x.out + x.first + (flip ? outW - 1 - ox : ox)) * 3;
              want.set(whole.subarray(at, at + 3), (oy * outW + ox) * 3);
            }
          }
          const what = `${w}×${h}, Resize(${resize}) + CenterCrop(${crop}) to ${outW}×${outH}${flip ? ', flipped' : ''}`;
          assert.deepEqual(cropResize(px, w * 3, box, outH, outW, { width: w, height: h }), want, what);
          const planes = new Uint8Array(w * h * 3);
          for (let p = 0; p < w * h; p++) for (let c = 0; c < 3; c++) planes[c * w * h + p] = px[p * 3 + c]!;
          assert.deepEqual(cropResize(planes, pixelLayout(w, h, true), box, outH, outW, { width: w, height: h }), want, `${what}, planar`);
        }
      }
    }
    assert.throws(() => cropResize(new Uint8Array(12), 6, centerCropBox(2, 2, 4, 4, 8, 4), 4, 4), /size is missing/);
  });

  it('normalizes as transforms.image does: (x / 255 − mean) / std, in CHW or HWC', () => {
    const q = Uint8Array.from([0, 128, 255, 10, 20, 30]);
    const out = { layout: 'chw' as const, dtype: 'float32' as const, size: [1, 2] as [number, number], mean: [0.5, 0.25, 0], std: [0.5, 0.25, 1] };
    const sb = checkOutput({ ...out, ptr: 0n, rowBytes: 24 });
    const row = new Float32Array(encodeRow(q, out, sb).buffer);
    const want = [0, 10, 128, 20, 255, 30].map((x, i) => (x / 255 - out.mean[i >> 1]!) / out.std[i >> 1]!);
    row.forEach((x, i) => assert.ok(Math.abs(x - want[i]!) < 1e-6, `${i}: ${x} vs ${want[i]}`));
  });
});

describe('GpuJpegDecoder on sim', () => {
  it('writes each JPEG’s crop, resized and flipped, into its row, as the CPU decoder and the resampler give it', async () => {
    const backend = new SimBackend();
    const files = [await baselineJpeg(97, 61, 1), await greyJpeg(40, 50), await baselineJpeg(64, 64, 2), await baselineJpeg(97, 61, 1), await greyJpeg(40, 50)];
    const boxes: JpegBox[] = [
      { left: 10, top: 5, width: 70, height: 50, flip: true },
      { left: 0, top: 0, width: 40, height: 50, flip: false },
      { left: 20, top: 30, width: 8, height: 6, flip: false }, // upscaled
      centerCropBox(97, 61, 32, 24, 40, 32), // a center crop's Pillow resize, its rectangle scaled to 32×24
      centerCropBox(40, 50, 32, 24, 64, 56, true), // enlarged
    ];
    for (const spec of [{ dtype: 'uint8', layout: 'chw' }, { dtype: 'bfloat16', layout: 'hwc', mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] }] as const) {
      const { buffer, out } = batchOut(backend, files.length, spec);
      const decoder = GpuJpegDecoder.open(backend);
      assert.equal(decoder.kind, 'sim');
      const { fallback } = await decoder.decodeInto(files.map((f) => f.bytes), boxes, out);
      assert.deepEqual(fallback, []);
      const host = readBack(backend, buffer, buffer.bytes);
      const payload = 3 * out.size[0] * out.size[1] * dtypeBytes(out.dtype);
      for (let k = 0; k < files.length; k++) {
        const want = await expectedRow(files[k]!.bytes, files[k]!.width, files[k]!.height, boxes[k]!, out);
        assert.deepEqual(host.subarray(k * out.rowBytes, k * out.rowBytes + payload), want, `row ${k} (${spec.dtype})`);
        assert.ok(host.subarray(k * out.rowBytes + payload, (k + 1) * out.rowBytes).every((b) => b === POISON), `row ${k}: nothing written past the row`);
      }
      decoder.close();
      backend.free(buffer);
    }
    assert.deepEqual(backend.live(), { device: 0, pinned: 0 });
  });

  it('hands back a PNG, a CMYK, a progressive, a truncated, a garbage and a one-component (grey) file as fallback, untouched; decodeOnCpu fills all it can read', async () => {
    const backend = new SimBackend();
    const a = await awkwardFiles();
    const good = await baselineJpeg(50, 40, 4);
    const cases = [a.png, good, a.cmyk, a.progressive, a.truncated, a.garbage, await oneComponentJpeg(36, 28)];
    const files = cases.map((c) => c.bytes);
    const boxes = (_k: number, width: number, height: number): CropBox => ({ left: 0, top: 0, width, height, flip: false });
    const { buffer, out } = batchOut(backend, cases.length);
    const decoder = GpuJpegDecoder.open(backend);
    const { fallback } = await decoder.decodeInto(files, boxes, out);
    assert.deepEqual(fallback, [0, 2, 3, 4, 5, 6]);
    const payload = 3 * out.size[0] * out.size[1];
    let host = readBack(backend, buffer, buffer.bytes);
    for (const k of fallback) assert.ok(host.subarray(k * out.rowBytes, (k + 1) * out.rowBytes).every((b) => b === POISON), `row ${k} untouched`);
    assert.deepEqual(host.subarray(out.rowBytes, out.rowBytes + payload), await expectedRow(good.bytes, 50, 40, boxes(1, 50, 40), out));

    const { failed } = await decoder.decodeOnCpu(files, fallback, boxes, out);
    assert.deepEqual(failed, [4, 5]);
    host = readBack(backend, buffer, buffer.bytes);
    for (const k of [0, 2, 3, 6]) {
      const c = cases[k]!;
      assert.deepEqual(host.subarray(k * out.rowBytes, k * out.rowBytes + payload), await expectedRow(c.bytes, c.width, c.height, boxes(k, c.width, c.height), out), c.name);
    }
    decoder.close();
    backend.free(buffer);
    assert.deepEqual(backend.live(), { device: 0, pinned: 0 });
  });

  it('a box outside its image, or an output spec that does not fit, is ERR_INVALID_OPTION naming the knob', async () => {
    const backend = new SimBackend();
    const file = await baselineJpeg(30, 20, 1);
    const { out } = batchOut(backend, 1);
    const decoder = GpuJpegDecoder.open(backend);
    await assert.rejects(decoder.decodeInto([file.bytes], [{ left: 5, top: 0, width: 30, height: 20, flip: false }], out), { code: 'ERR_INVALID_OPTION', message: /`boxes\[0\]` must be a crop box inside the 30×20 image/ });
    await assert.rejects(decoder.decodeInto([file.bytes], [], out), { code: 'ERR_INVALID_OPTION', message: /`boxes` must be one crop box per file \(1\)/ });
    const pil = centerCropBox(30, 20, 32, 24, 40, 32);
    for (const bad of [{ ...pil.pil!, x: { ...pil.pil!.x, in1: 31 } }, { ...pil.pil!, y: { ...pil.pil!.y, first: 1 } }, { x: pil.pil!.x }]) {
      await assert.rejects(decoder.decodeInto([file.bytes], [{ ...pil, pil: bad as JpegBox['pil'] }], out), { code: 'ERR_INVALID_OPTION', message: /`boxes\[0\]\.pil` must be per axis/ });
    }
    await assert.rejects(decoder.decodeInto([file.bytes], () => ({ left: 0, top: 0, width: 30, height: 20, flip: false }), { ...out, rowBytes: 10 }), { code: 'ERR_INVALID_OPTION', message: /`out.rowBytes` must be an integer ≥ 2304/ });
    await assert.rejects(decoder.decodeInto([file.bytes], () => ({ left: 0, top: 0, width: 30, height: 20, flip: false }), { ...out, mean: [0.5] }), { code: 'ERR_INVALID_OPTION', message: /uint8 output/ });
    decoder.close();
  });

  it('calls in flight on every slot (worker threads) write the rows that one inline slot writes, call by call', async () => {
    const backend = new SimBackend();
    const files = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => baselineJpeg(60 + 7 * i, 40 + 5 * i, i)));
    const box = (c: number) => (k: number, width: number, height: number): CropBox => ({ left: (c + k) % 7, top: (c * k) % 5, width: width - 8, height: height - 6, flip: (c + k) % 2 === 1 });
    const run = async (decoder: GpuJpegDecoder, parallel: boolean) => {
      const outs = [0, 1, 2, 3, 4].map(() => batchOut(backend, files.length, { dtype: 'float32', mean: [0.5, 0.4, 0.3], std: [0.2, 0.25, 0.3] }));
      const call = (c: number) => decoder.decodeInto(files.map((f) => f.bytes), box(c), outs[c]!.out);
      if (parallel) await Promise.all(outs.map((_, c) => call(c)));
      else for (let c = 0; c < outs.length; c++) await call(c);
      const rows = outs.map((o) => readBack(backend, o.buffer, o.buffer.bytes));
      for (const o of outs) backend.free(o.buffer);
      return rows;
    };
    const threads = liveJpegThreads();
    const many = GpuJpegDecoder.open(backend, { slots: 3 });
    assert.equal(liveJpegThreads(), threads + 3, 'one thread per slot');
    const previous = process.env.STOKER_JPEG_WORKERS;
    process.env.STOKER_JPEG_WORKERS = '0';
    let one: GpuJpegDecoder;
    try {
      one = GpuJpegDecoder.open(backend, { slots: 1 });
    } finally {
      if (previous === undefined) delete process.env.STOKER_JPEG_WORKERS;
      else process.env.STOKER_JPEG_WORKERS = previous;
    }
    assert.equal(liveJpegThreads(), threads + 3, 'STOKER_JPEG_WORKERS=0: no thread');
    const got = await run(many, true);
    const want = await run(one, false);
    got.forEach((rows, c) => assert.deepEqual(rows, want[c], `call ${c}`));
    many.close();
    one.close();
    assert.deepEqual(backend.live(), { device: 0, pinned: 0 });
    assert.throws(() => GpuJpegDecoder.open(backend, { slots: 0 }), { code: 'ERR_INVALID_OPTION', message: /`slots` must be an integer from 1 to 8/ });
  });
});
