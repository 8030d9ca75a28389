// Internal: not exported from the package entry.
// Pillow's bilinear resample of a decode-time view's box, and the cast of its bytes to the output's
// floats, in WebAssembly with 128-bit SIMD (kernels/resample.c, built by scripts/build-wasm.sh into
// the committed kernels/resample.wasm). The rule: the same bytes as image-resample.ts's JavaScript
// loops (which stay, for a Node without WebAssembly, e.g. --jitless, and as the reference the tests
// compare against), and the same values as image-decode.ts's `toFloats`; `wasmResampler()` answers
// undefined when the module cannot be instantiated here and callers then use the JavaScript.
//
// NOTE [resample in WebAssembly] Measured on the 2-core development machine: a box → 224² in
// 0.26–0.59 ms against 0.89–3.75 for the JavaScript loops; the whole training recipe (bench
// decode-scaling --rows a2) 4.35 → 3.38 CPU ms an image; on the H200 host 4.78 → 3.17 (docs/benchmarks/history.md,
// run 16). Why here and not libvips: libvips' reduce of a box
// at least the output on both sides cost as much as its decode (1.5 ms of a 3.0 ms call) and its
// enlargement more (NOTE [why not libvips' resize] in image-resample.ts); Pillow's two passes are
// short integer loops that SIMD runs 16 bytes at a time (vertical) or a pixel's 3 bands at a time
// (horizontal). One instance per thread (module state is per isolate), its memory grown as the
// largest box needs and kept.
// - The env switch `wasm` (base/env.ts) set to off turns it off (the JavaScript loops then run; benchmarks compare both).

import { readFileSync } from 'node:fs';
import { type ResampleBox, boxCoeffs } from './image-resample.js';
import { readSwitch } from '../base/env.js';

/** The parts of the WebAssembly API used (the project's TypeScript libs do not declare it). */
interface WebAssemblyApi {
  readonly Module: new (bytes: Uint8Array) => object;
  readonly Instance: new (module: object, imports: object) => { readonly exports: unknown };
}

interface Exports {
  readonly memory: { readonly buffer: ArrayBuffer; grow(pages: number): number };
  readonly __heap_base: { readonly value: number };
  readonly resample_h: (src: number, stride: number, rowFirst: number, rows: number, mid: number, outW: number, channels: number, start: number, count: number, k: number, ksize: number, flip: number) => void;
  readonly resample_v: (mid: number, midRow: number, rowFirst: number, out: number, outH: number, start: number, count: number, k: number, ksize: number) => void;
  readonly cast_u16: (px: number, pixels: number, channels: number, interleaved: number, out: number, table: number) => void;
  readonly cast_f32: (px: number, pixels: number, channels: number, interleaved: number, out: number, table: number) => void;
}

/** A cast fused after a resample: toFloats' table (256 values a channel), planes unless `interleaved`. */
export interface Cast {
  readonly table: Float32Array | Uint16Array;
  readonly interleaved: boolean;
  readonly transient: boolean;
}

export interface WasmResampler {
  /**
   * image-resample.ts's `resampleBilinearJs`: the same bytes. `src` may lie in `sourceArea()`'s
   * memory (then it is read in place, not copied in); rows are `stride` bytes apart.
   */
  resample(src: Uint8Array, srcW: number, srcH: number, channels: number, box: ResampleBox, outW: number, outH: number, flip: boolean, cast?: undefined, stride?: number): Uint8Array;
  /**
   * The same, then `cast` over its bytes in the module's memory: `toFloats`' values. `transient`: a
   * view of the module's memory, valid until this thread's next call (NOTE [transient pixels]).
   */
  resample(src: Uint8Array, srcW: number, srcH: number, channels: number, box: ResampleBox, outW: number, outH: number, flip: boolean, cast: Cast, stride?: number): Float32Array | Uint16Array;
  /**
   * `bytes` of the module's memory where the next `resample`'s source may be written (a decoder
   * writes its pixels there: NOTE [crop decode] in turbo-jpeg.ts): valid until the next call here.
   */
  sourceArea(bytes: number): Uint8Array;
  /** image-decode.ts's `toFloats` loop: the bytes of `px` through the table (256 values a channel), planes unless `interleaved`. */
  cast(px: Uint8Array, pixels: number, channels: number, interleaved: boolean, table: Float32Array | Uint16Array): Float32Array | Uint16Array;
}

const SLACK = 16;
const align = (n: number) => (n + 15) & ~15;

let state: WasmResampler | null | undefined;
let enabled = readSwitch('wasm');

/** Turn the WebAssembly resample on or off in this thread (benchmarks and tests compare both). */
export function setWasmResample(on: boolean): void {
  enabled = on;
}

/** The WebAssembly resampler of this thread, or undefined (turned off, or it does not instantiate here). */
export function wasmResampler(): WasmResampler | undefined {
  if (!enabled) return undefined;
  if (state === undefined) state = instantiate();
  return state ?? undefined;
}

function instantiate(): WasmResampler | null {
  let x: Exports;
  try {
    const bytes = readFileSync(new URL('../../kernels/resample.wasm', import.meta.url));
    const wa = (globalThis as { WebAssembly?: WebAssemblyApi }).WebAssembly;
    if (wa === undefined) return null;
    x = new wa.Instance(new wa.Module(bytes), {}).exports as Exports;
  } catch {
    return null;
  }
  const heap = x.__heap_base.value;
  const reserve = (bytes: number): void => {
    const have = x.memory.buffer.byteLength;
    if (heap + bytes > have) x.memory.grow(Math.ceil((heap + bytes - have) / 65536));
  };
  /** Lay out buffers of these byte sizes above the heap base, each 16-aligned: their offsets. */
  const layout = (sizes: number[]): number[] => {
    const at: number[] = [];
    let p = align(heap);
    for (const s of sizes) {
      at.push(p);
      p = align(p + s);
    }
    reserve(p - heap);
    return at;
  };
  /** The bytes at `px0` through `table` (copied in at `t0`) into `c0`: their own array, or a view of the module's memory when `transient`. */
  const castAt = (px0: number, pixels: number, channels: number, interleaved: boolean, table: Float32Array | Uint16Array, t0: number, c0: number, transient: boolean): Float32Array | Uint16Array => {
    const n = pixels * channels;
    const f32 = table instanceof Float32Array;
    if (f32) new Float32Array(x.memory.buffer, t0, table.length).set(table);
    else new Uint16Array(x.memory.buffer, t0, table.length).set(table);
    (f32 ? x.cast_f32 : x.cast_u16)(px0, pixels, channels, interleaved ? 1 : 0, c0, t0);
    const out = f32 ? new Float32Array(x.memory.buffer, c0, n) : new Uint16Array(x.memory.buffer, c0, n);
    return transient ? out : out.slice();
  };
  /** Bytes of a cast's table and of its output of n values. */
  const castSizes = (table: Float32Array | Uint16Array, n: number): [number, number] => [table.length * 4, n * (table instanceof Float32Array ? 4 : 2)];
  function resample(src: Uint8Array, srcW: number, srcH: number, channels: number, box: ResampleBox, outW: number, outH: number, flip: boolean, cast?: undefined, stride?: number): Uint8Array;
  function resample(src: Uint8Array, srcW: number, srcH: number, channels: number, box: ResampleBox, outW: number, outH: number, flip: boolean, cast: Cast, stride?: number): Float32Array | Uint16Array;
  function resample(src: Uint8Array, srcW: number, srcH: number, channels: number, box: ResampleBox, outW: number, outH: number, flip: boolean, cast?: Cast, stride = srcW * channels): Uint8Array | Float32Array | Uint16Array {
    // A source already in the module's memory (sourceArea) is read where it is: the layout starts
    // past it. Its offset is taken now: growing the memory below detaches `src`'s view.
    const inPlace = src.buffer === x.memory.buffer && src.byteOffset >= align(heap);
    const srcStart = inPlace ? src.byteOffset : 0;
    const [h, v] = boxCoeffs(box, srcW, srcH, outW, outH);
    // Only the source rows the vertical pass reads.
    let rowFirst = Infinity;
    let rowEnd = 0;
    for (let i = 0; i < outH; i++) {
      if (v.count[i]! === 0) continue;
      rowFirst = Math.min(rowFirst, v.start[i]!);
      rowEnd = Math.max(rowEnd, v.start[i]! + v.count[i]!);
    }
    if (rowEnd === 0) rowFirst = 0;
    const rows = Math.max(0, rowEnd - rowFirst);
    const midRow = outW * channels;
    const n = outW * outH * channels;
    const [area, hs, hc, hk, vs, vc, vk, m0, o0, t0, c0] = layout([
      inPlace ? srcStart - align(heap) + src.length + SLACK : src.length + SLACK,
      outW * 4, outW * 4, h.k.length * 4, outH * 4, outH * 4, v.k.length * 4, rows * midRow + SLACK, n + SLACK,
      ...(cast === undefined ? [0, 0] : castSizes(cast.table, n)),
    ]) as [number, number, number, number, number, number, number, number, number, number, number];
    const buf = x.memory.buffer;
    new Int32Array(buf, hs, outW).set(h.start);
    new Int32Array(buf, hc, outW).set(h.count);
    new Int32Array(buf, hk, h.k.length).set(h.k);
    new Int32Array(buf, vs, outH).set(v.start);
    new Int32Array(buf, vc, outH).set(v.count);
    new Int32Array(buf, vk, v.k.length).set(v.k);
    const s0 = inPlace ? srcStart : area;
    if (!inPlace) new Uint8Array(buf, s0, src.length).set(src);
    x.resample_h(s0, stride, rowFirst, rows, m0, outW, channels, hs, hc, hk, h.ksize, flip ? 1 : 0);
    x.resample_v(m0, midRow, rowFirst, o0, outH, vs, vc, vk, v.ksize);
    if (cast === undefined) return new Uint8Array(x.memory.buffer, o0, n).slice();
    return castAt(o0, outW * outH, channels, cast.interleaved, cast.table, t0, c0, cast.transient);
  }
  return {
    resample,
    sourceArea(bytes) {
      const [at] = layout([bytes + SLACK]) as [number];
      return new Uint8Array(x.memory.buffer, at, bytes);
    },
    cast(px, pixels, channels, interleaved, table) {
      const n = pixels * channels;
      const [p0, t0, c0] = layout([n, ...castSizes(table, n)]) as [number, number, number];
      new Uint8Array(x.memory.buffer, p0, n).set(px.subarray(0, n));
      return castAt(p0, pixels, channels, interleaved, table, t0, c0, false);
    },
  };
}
