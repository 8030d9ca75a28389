// Internal: not exported from the package entry.
// Row gather: the one operation every batch is built from. `dst` row r receives `src` row
// `rows[start + r]`. Source and destination are storage arrays of the same class.

import type { Storage } from './dtype.js';
import { nativeCopy } from './native-copy.js';

/** Rows at least this large, in shared memory, are copied with the C library's memcpy. */
const NATIVE_COPY_MIN_BYTES = 32 * 1024;

// Below this many elements per row a plain element loop beats one `subarray` view + memcpy per row.
const ELEMENT_LOOP_MAX = 16;

export function gatherRows(
  src: Storage,
  rowSize: number,
  rows: ArrayLike<number>,
  start: number,
  end: number,
  dst: Storage,
): void {
  const s = src as unknown as { [i: number]: number } & { subarray(a: number, b: number): Storage };
  const d = dst as unknown as { [i: number]: number } & { set(a: Storage, o: number): void };
  const count = end - start;
  if (rowSize === 1) {
    for (let r = 0; r < count; r++) d[r] = s[rows[start + r]!]!;
    return;
  }
  if (rowSize <= ELEMENT_LOOP_MAX) {
    for (let r = 0; r < count; r++) {
      const from = rows[start + r]! * rowSize;
      const to = r * rowSize;
      for (let k = 0; k < rowSize; k++) d[to + k] = s[from + k]!;
    }
    return;
  }
  const rowBytes = rowSize * src.BYTES_PER_ELEMENT;
  if (rowBytes >= NATIVE_COPY_MIN_BYTES && (src.buffer instanceof SharedArrayBuffer || dst.buffer instanceof SharedArrayBuffer)) {
    const srcBytes = new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
    const dstBytes = new Uint8Array(dst.buffer, dst.byteOffset, dst.byteLength);
    let r = 0;
    for (; r < count; r++) {
      const from = rows[start + r]! * rowBytes;
      if (!nativeCopy(dstBytes.subarray(r * rowBytes, (r + 1) * rowBytes), srcBytes.subarray(from, from + rowBytes), rowBytes)) break;
    }
    if (r === count) return;
  }
  for (let r = 0; r < count; r++) {
    const from = rows[start + r]! * rowSize;
    d.set(s.subarray(from, from + rowSize), r * rowSize);
  }
}
