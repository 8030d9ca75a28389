// Internal: not exported from the package entry.
// The host half of the device piece table (kernels/ragged.cu): the grid a launch gets and the fill
// pattern it stores. Pure, so it is tested without a GPU; the kernel itself is compared with the
// host's applyPieces byte for byte in test/cuda/ragged.test.ts. The rule: the kernel is correct for
// any chunk ≥ 1 (each block owns whole positions of one piece's span); only speed depends on it.

/** Threads per block of stoker_pieces (kernels/ragged.cu needs ≥ 16: one thread per head or tail byte). */
export const PIECES_BLOCK = 256;
/** Bytes of output one block of stoker_pieces owns at most: two 16-byte units per thread. */
const PIECES_CHUNK_BYTES = 8192;

/**
 * The grid of stoker_pieces: one column of blocks per piece (one block when there are none), each
 * piece's span (NOTE [piece-spans] in pipeline/pieces.ts) cut into chunks of whole positions.
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
