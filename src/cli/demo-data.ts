// The demo's dataset: ten classes of small coloured shapes (circle, square, triangle, …) with jittered
// position, size and colour and per-pixel noise, rendered in JS and written as PNG files with sharp
// into `<dir>/<split>/<class>/<n>.png` — the image-folder layout. The rule: content is a pure
// function of (seed, split, index), so a run is reproducible and the splits never share an image.

import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import sharp from 'sharp';

/** Class folder names; the leading digit keeps their sorted order equal to the label order. */
export const SHAPE_CLASSES = [
  '0-circle', '1-square', '2-triangle', '3-cross', '4-ring', '5-diamond', '6-hbar', '7-vbar', '8-x', '9-dots',
] as const;

/** Base colour of each class (RGB, 0–255); samples jitter around it. */
const COLOURS: readonly (readonly [number, number, number])[] = [
  [230, 60, 60], [60, 200, 70], [70, 100, 235], [235, 215, 50], [200, 70, 220],
  [60, 215, 215], [245, 140, 40], [150, 150, 150], [250, 250, 250], [140, 90, 40],
];

export interface ShapesOptions {
  /** Images in the training split (spread evenly over the classes). */
  readonly train: number;
  /** Images in the held-out split. */
  readonly test: number;
  /** Side of the square images, in pixels. Default 32. */
  readonly size?: number;
  readonly seed?: number;
  /** PNG files written at once (sharp encodes on libuv's thread pool). Default 32. */
  readonly concurrency?: number;
  /** Called with (files written, files in all) once before the first file and after each one. */
  readonly onProgress?: (written: number, total: number) => void;
}

export interface ShapesDataset {
  readonly trainDir: string;
  readonly testDir: string;
  readonly classes: readonly string[];
  readonly files: number;
  readonly bytes: number;
  readonly ms: number;
}

/** Write the two splits under `dir` and say what was written. */
export async function writeShapesDataset(dir: string, options: ShapesOptions): Promise<ShapesDataset> {
  const t0 = performance.now();
  const size = options.size ?? 32;
  const seed = options.seed ?? 7;
  const concurrency = options.concurrency ?? 32;
  const splits = [
    { dir: join(dir, 'train'), count: options.train, salt: 1 },
    { dir: join(dir, 'test'), count: options.test, salt: 2 },
  ];
  for (const split of splits) {
    for (const name of SHAPE_CLASSES) await mkdir(join(split.dir, name), { recursive: true });
  }
  const jobs: (() => Promise<number>)[] = [];
  for (const split of splits) {
    for (let i = 0; i < split.count; i++) {
      const label = i % SHAPE_CLASSES.length;
      const path = join(split.dir, SHAPE_CLASSES[label]!, `${String(Math.floor(i / SHAPE_CLASSES.length)).padStart(5, '0')}.png`);
      jobs.push(async () => {
        const pixels = renderShape(label, size, mix(seed, split.salt, i));
        const info = await sharp(pixels, { raw: { width: size, height: size, channels: 3 } }).png({ compressionLevel: 6 }).toFile(path);
        return info.size;
      });
    }
  }
  let bytes = 0;
  let next = 0;
  let written = 0;
  options.onProgress?.(0, jobs.length);
  const worker = async () => {
    while (next < jobs.length) {
      bytes += await jobs[next++]!();
      options.onProgress?.(++written, jobs.length);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, jobs.length) }, worker));
  return {
    trainDir: splits[0]!.dir,
    testDir: splits[1]!.dir,
    classes: SHAPE_CLASSES,
    files: jobs.length,
    bytes,
    ms: performance.now() - t0,
  };
}

/** One image: HWC uint8 RGB, `size`×`size`. */
export function renderShape(label: number, size: number, seed: number): Uint8Array {
  const rand = xorshift(seed);
  const out = new Uint8Array(size * size * 3);
  // Half the samples take another class's colour: colour alone cannot tell every class apart.
  const base = COLOURS[rand() < 0.5 ? label : Math.floor(rand() * COLOURS.length)]!;
  const colour = base.map((c) => clamp(c + (rand() - 0.5) * 50)) as [number, number, number];
  const bg = [rand() * 60, rand() * 60, rand() * 60];
  const r = size * (0.26 + rand() * 0.12);
  const cx = size / 2 + (rand() - 0.5) * size * 0.25;
  const cy = size / 2 + (rand() - 0.5) * size * 0.25;
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const u = (x + 0.5 - cx) / r;
      const v = (y + 0.5 - cy) / r;
      const on = inside(label, u, v);
      const o = (y * size + x) * 3;
      for (let c = 0; c < 3; c++) out[o + c] = clamp((on ? colour[c]! : bg[c]!) + (rand() - 0.5) * 40);
    }
  }
  return out;
}

/** Whether the point (u, v), in units of the shape's radius around its centre, is on the shape. */
function inside(label: number, u: number, v: number): boolean {
  const au = Math.abs(u);
  const av = Math.abs(v);
  const d = Math.hypot(u, v);
  switch (label) {
    case 0: return d <= 1; // circle
    case 1: return au <= 0.85 && av <= 0.85; // square
    case 2: return v <= 0.8 && v >= -0.9 && au <= (v + 0.9) * 0.6; // triangle, apex up
    case 3: return (au <= 0.28 && av <= 1) || (av <= 0.28 && au <= 1); // plus
    case 4: return d <= 1 && d >= 0.6; // ring
    case 5: return au + av <= 1; // diamond
    case 6: return au <= 1 && av <= 0.3; // horizontal bar
    case 7: return av <= 1 && au <= 0.3; // vertical bar
    case 8: return Math.abs(au - av) <= 0.3 && d <= 1.3; // x
    default: {
      // four dots
      const du = au - 0.55;
      const dv = av - 0.55;
      return du * du + dv * dv <= 0.12;
    }
  }
}

function clamp(x: number): number {
  return x < 0 ? 0 : x > 255 ? 255 : Math.round(x);
}

function mix(a: number, b: number, c: number): number {
  let h = (a * 0x9e3779b1) ^ (b * 0x85ebca77) ^ (c * 0xc2b2ae3d);
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d);
  h = Math.imul(h ^ (h >>> 15), 0x846ca68b);
  return (h ^ (h >>> 16)) >>> 0 || 1;
}

function xorshift(seed: number): () => number {
  let s = seed | 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}
