// Internal: not exported from the package entry.
// The host half of the device piece table (kernels/ragged.cu): the launch of one Backend.pieces —
// grid, block and the kernel's arguments — and the fill pattern it stores. Pure, so it is tested
// without a GPU: test/ragged-kernel.test.ts runs these very arguments through the kernel compiled for
// the host, and test/cuda/ragged.test.ts runs them on a GPU, both against applyPieces byte for byte.
// The rule: the kernel is correct for any chunk ≥ 1 (each block owns whole positions of one piece's
// span); only speed depends on it.

import type { PiecesOp } from '../backend.js';
import type { Dim3, KernelArg } from './module.js';

/** Threads per block of stoker_pieces (kernels/ragged.cu needs ≥ 16: one thread per head or tail byte). */
export const PIECES_BLOCK = 256;
/** Bytes of output one block of stoker_pieces owns at most: two 16-byte units per thread. */
const PIECES_CHUNK_BYTES = 8192;

/**
 * The grid of stoker_pieces: one column of blocks per piece (one block when there are none), each
 * piece's span (NOTE [piece-spans] in collate/pieces.ts) cut into chunks of whole positions.
 */
export function piecesGrid(posBytes: number, count: number, maxSpan: number): { x: number; y: number; chunk: number } {
  let chunk = Math.max(1, Math.floor(PIECES_CHUNK_BYTES / posBytes));
  // grid.y is at most 65 535.
  chunk = Math.max(chunk, Math.ceil(maxSpan / 65535));
  return { x: Math.max(count, 1), y: Math.max(1, Math.ceil(maxSpan / chunk)), chunk };
}

/** The fill's element bits repeated over 8 bytes (the kernel stores it as an 8-byte periodic pattern). */
export function fillPattern(bits: bigint, elementBytes: 1 | 2 | 4 | 8): bigint {
  const width = BigInt(elementBytes * 8);
  const v = BigInt.asUintN(Number(width), bits);
  let rep = 0n;
  for (let k = 0n; k < 64n; k += width) rep |= v << k;
  return BigInt.asUintN(64, rep);
}

/** The launch of stoker_pieces for an op (checked by checkPiecesOp, total > 0): arguments in the kernel's parameter order. */
export function piecesLaunch(op: PiecesOp): { grid: Dim3; block: Dim3; args: KernelArg[] } {
  const posBytes = op.per * op.elementBytes;
  const g = piecesGrid(posBytes, op.count, op.maxSpan);
  return {
    grid: [g.x, g.y, 1],
    block: [PIECES_BLOCK, 1, 1],
    args: [
      { ptr: op.src.ptr + BigInt(op.srcOffset) },
      { u64: BigInt(op.rowBytes) },
      { ptr: op.dst.ptr + BigInt(op.dstOffset) },
      { u64: BigInt(posBytes) },
      { u64: fillPattern(op.fill, op.elementBytes) },
      { ptr: op.segment === undefined ? 0n : op.segment.buffer.ptr + BigInt(op.segment.offset) },
      { u32: op.segment?.width ?? 0 },
      { ptr: op.position === undefined ? 0n : op.position.buffer.ptr + BigInt(op.position.offset) },
      { ptr: op.table.ptr + BigInt(op.tableOffset) },
      { u32: op.count },
      { u32: op.total },
      { u32: g.chunk },
    ],
  };
}
