// Internal: not exported from the package entry.
// The row gather on the device (kernels/gather.cu): dst row r = src row ids[idsOffset + r]. The host
// picks the vector width and the grid; the kernel does the rest. The rule: every id must be a valid
// row of `src` — an out-of-range id is an illegal address, which poisons the whole context — so ids
// are validated on the host before they are uploaded (the epoch's permutation is, by construction).

import type { CudaContext } from './context.js';
import type { CudaStream } from './stream.js';

/** The PTX, resolved beside the package root whether running from src/ or dist/. */
export const GATHER_PTX = new URL('../../../kernels/gather.ptx', import.meta.url);

// Mirrors kernels/gather.cu (BLOCK, UNROLL, FLAT_MAX_UNITS). Only speed depends on the two sides
// agreeing: every kernel path is a grid-stride loop, correct for any grid.
const BLOCK = 256;
const UNROLL = 4;
const FLAT_MAX_UNITS = 256;
/** Resident blocks per SM to aim for (the kernels use ≤ 48 registers: 5 blocks of 256 fit an SM). */
const BLOCKS_PER_SM = 4;

/** Device memory as the gather sees it (DeviceMemory, or a backend's buffer). */
export interface DeviceSpan {
  readonly ptr: bigint;
  readonly bytes: number;
}

export interface GatherArgs {
  readonly dst: DeviceSpan;
  readonly src: DeviceSpan;
  /** uint32 row ids on the device. */
  readonly ids: DeviceSpan;
  /** First id to use, in ids (not bytes). Default 0. */
  readonly idsOffset?: number;
  readonly rowBytes: number;
  readonly rows: number;
  /** Byte offsets into dst and src (a tensor inside a larger block). Default 0. */
  readonly dstOffset?: number;
  readonly srcOffset?: number;
}

export interface GatherPlan {
  /** Kernel name in gather.ptx. */
  readonly kernel: string;
  /** Bytes moved per load/store. */
  readonly width: 16 | 8 | 4 | 1;
  readonly path: 'flat' | 'tiled';
  readonly grid: number;
  readonly block: number;
}

/** Chooses the kernel and grid for a gather; pure, so it is tested without a GPU. */
export function gatherPlan(dst: bigint, src: bigint, rowBytes: number, rows: number, multiprocessors: number): GatherPlan {
  const bits = dst | src | BigInt(rowBytes);
  const width = (bits & 15n) === 0n ? 16 : (bits & 7n) === 0n ? 8 : (bits & 3n) === 0n ? 4 : 1;
  const unitsPerRow = rowBytes / width;
  const flat = unitsPerRow <= FLAT_MAX_UNITS;
  const perBlock = BLOCK * UNROLL;
  const work = flat ? Math.ceil((unitsPerRow * rows) / perBlock) : rows * Math.ceil(unitsPerRow / perBlock);
  const grid = Math.max(1, Math.min(work, Math.max(1, multiprocessors) * BLOCKS_PER_SM));
  return { kernel: `stoker_gather_rows_w${width}`, width, path: flat ? 'flat' : 'tiled', grid, block: BLOCK };
}

/** Enqueues the gather on `stream`. Checks every span's size; cannot check the id values. */
export function gatherRows(context: CudaContext, stream: CudaStream, a: GatherArgs): void {
  const idsOffset = a.idsOffset ?? 0;
  const dstOffset = a.dstOffset ?? 0;
  const srcOffset = a.srcOffset ?? 0;
  if (!(isCount(a.rowBytes) && isCount(a.rows) && isCount(idsOffset) && isCount(dstOffset) && isCount(srcOffset))) {
    for (const [name, v] of [['rowBytes', a.rowBytes], ['rows', a.rows], ['idsOffset', idsOffset], ['dstOffset', dstOffset], ['srcOffset', srcOffset]] as const) {
      if (!isCount(v)) throw new RangeError(`gather ${name} must be an integer ≥ 0, got ${v}`);
    }
  }
  if (a.rowBytes === 0) throw new RangeError('gather rowBytes must be ≥ 1');
  if (a.rows > 0xffffffff) throw new RangeError(`gather rows must be below 2^32, got ${a.rows}`);
  if (dstOffset + a.rows * a.rowBytes > a.dst.bytes) {
    throw new RangeError(`gather of ${a.rows} rows of ${a.rowBytes} bytes at offset ${dstOffset} overflows the destination (${a.dst.bytes} bytes)`);
  }
  if ((idsOffset + a.rows) * 4 > a.ids.bytes) {
    throw new RangeError(`gather needs ids ${idsOffset}…${idsOffset + a.rows - 1} but the id buffer holds ${Math.floor(a.ids.bytes / 4)}`);
  }
  if (srcOffset + a.rowBytes > a.src.bytes) throw new RangeError(`gather source (${a.src.bytes} bytes from offset ${srcOffset}) holds no whole row of ${a.rowBytes} bytes`);
  if (a.rows === 0) return;
  const dst = a.dst.ptr + BigInt(dstOffset);
  const src = a.src.ptr + BigInt(srcOffset);
  const plan = cachedPlan(dst, src, a.rowBytes, a.rows, context.multiprocessors);
  const kernel = context.module(GATHER_PTX).getFunction(plan.kernel);
  kernel.launch([plan.grid, 1, 1], [plan.block, 1, 1], stream, [
    { ptr: dst },
    { ptr: src },
    // The window of a permutation: ids + idsOffset is always 4-byte aligned.
    { ptr: a.ids.ptr + BigInt(idsOffset) * 4n },
    { u64: BigInt(a.rowBytes) },
    { u32: a.rows },
  ]);
}

function isCount(v: number): boolean {
  return Number.isSafeInteger(v) && v >= 0;
}

// Plans depend on the pointers only through their alignment (mod 16): one cached plan per
// (alignment, row bytes, rows, SMs) spares a resident loader the plan's BigInt work every batch.
const PLANS = new Map<string, GatherPlan>();

function cachedPlan(dst: bigint, src: bigint, rowBytes: number, rows: number, multiprocessors: number): GatherPlan {
  const key = `${Number((dst | src) & 15n)}:${rowBytes}:${rows}:${multiprocessors}`;
  let plan = PLANS.get(key);
  if (plan === undefined) {
    plan = gatherPlan(dst, src, rowBytes, rows, multiprocessors);
    if (PLANS.size > 4096) PLANS.clear();
    PLANS.set(key, plan);
  }
  return plan;
}
