// The decoder's ceiling for `bench images` (issue 36): the decode of exactly the boxes the loader's
// run decodes, by the decoder the CPU route uses, alone, in a tight loop on this one thread — no
// messages, no file reads (the files' bytes are read into memory first), no resample, no cast. The
// rule: the same calls as the route (`decodeJpegRegion`: libjpeg-turbo's crop decode with the same
// DCT scaling and the same region, the margin included, into one reused buffer, as the route decodes
// into the WebAssembly resampler's memory); where libjpeg-turbo does not load, libvips' decode of the
// box's rows (`decodeJpegBox`), as the route then runs. The boxes are the loader's: view 'train',
// seed 42 (the loader's default), epochs 0 … E−1, repeat 0, every sample once per epoch.
//
// Stoker's images/s at C cores is then compared with C × this loop's images/s (per core used), in
// the same run, beside torchvision.

import { readFileSync } from 'node:fs';
import { boxFor, viewFrom } from '../src/image/crop-box.js';
import { jpegHeader, shrinkFor } from '../src/image/image-decode.js';
import { decodeJpegRegion, turboJpegAvailable } from '../src/image/turbo-jpeg.js';
import { decodeJpegBox } from '../src/image/vips-direct.js';
import { viewResample } from '../src/image/view-resample.js';
import type { ImageFolder } from '../src/dataset/formats/images/image-folder.js';
import { PickKey } from '../src/sampler/pick-key.js';

/** The loader's default seed (options.ts): the boxes the Stoker side cuts. */
const LOADER_SEED = 42;

export interface Ceiling {
  /** 'libjpeg-turbo crop decode' or 'libvips decode of the box's rows'. */
  readonly decoder: string;
  readonly images: number;
  /** Wall seconds of the timed loop. */
  readonly s: number;
  /** images / s. */
  readonly imagesPerS: number;
  /** CPU ms per image of this thread over the loop. */
  readonly cpuMsPerImage: number;
  /** Boxes decoded at ½, ¼, ⅛ scale (the route's shrink-on-load), of `images`. */
  readonly shrunk: number;
}

interface Job {
  readonly bytes: Uint8Array;
  readonly region: { left: number; top: number; width: number; height: number };
  readonly shrink: number;
  readonly bands: number;
}

/** The jobs of `epochs` epochs of `source` (every file a plain 8-bit JPEG, as the bench's are). */
export function ceilingJobs(source: ImageFolder, epochs: number, size = 224): Job[] {
  const view = viewFrom('train');
  const files = Array.from({ length: source.length }, (_, i) => readFileSync(source.pathOf(i)));
  const jobs: Job[] = [];
  for (let e = 0; e < epochs; e++) {
    for (let i = 0; i < files.length; i++) {
      const bytes = files[i]!;
      const h = jpegHeader(bytes);
      if (h === undefined) throw new Error(`bench images: ${String(source.pathOf(i))} is not a plain 8-bit JPEG; the ceiling covers those only`);
      const box = boxFor(view, new PickKey(i, 0, e, LOADER_SEED), h.width, h.height);
      const shrink = shrinkFor(view, box, size, size);
      // As directView: at full scale the region the resample reads (for this view, the box).
      const region = shrink === 1 ? viewResample(view, box, h.width, h.height, size, size).region : box;
      jobs.push({ bytes, region, shrink, bands: h.channels });
    }
  }
  return jobs;
}

/** One thread's CPU seconds (Node ≥ 23.9 has process.threadCpuUsage; before, the process's, which is this loop alone). */
function threadCpuS(): number {
  const p = process as unknown as { threadCpuUsage?: () => { user: number; system: number } };
  const u = p.threadCpuUsage?.() ?? process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** Decode every job's region once (a warm-up pass over the first few first), timed. */
export function runCeiling(jobs: readonly Job[]): Ceiling {
  const turbo = turboJpegAvailable();
  let scratch = new Uint8Array(1 << 20);
  const memory = (n: number): Uint8Array => {
    if (scratch.length < n) scratch = new Uint8Array(2 ** Math.ceil(Math.log2(n)));
    return scratch.subarray(0, n);
  };
  const one = (j: Job): void => {
    const d = (turbo ? decodeJpegRegion(j.bytes, j.region, j.shrink, j.bands, memory) : undefined) ?? decodeJpegBox(j.bytes, j.region, j.shrink, j.bands);
    if (d === undefined) throw new Error('bench images: the ceiling could not decode a box the route decodes');
    d.release?.();
  };
  for (let k = 0; k < Math.min(64, jobs.length); k++) one(jobs[k]!);
  const c0 = threadCpuS();
  const t0 = performance.now();
  for (const j of jobs) one(j);
  const s = (performance.now() - t0) / 1000;
  const cpu = threadCpuS() - c0;
  return {
    decoder: turbo ? 'libjpeg-turbo crop decode' : "libvips decode of the box's rows",
    images: jobs.length, s, imagesPerS: jobs.length / s, cpuMsPerImage: (cpu * 1000) / jobs.length,
    shrunk: jobs.filter((j) => j.shrink > 1).length,
  };
}
