// Which part (record batch, row group, shard) holds a global row: the parts' first rows are sorted
// `starts`, and the answer is the last part whose start is at or before the row. One binary search
// for every multi-part source.

/** The last p in [0, last] with starts[p] ≤ row (starts ascending, starts[0] = 0). */
export function partAt(starts: ArrayLike<number>, row: number, last: number): number {
  let lo = 0;
  let hi = last;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (starts[mid]! <= row) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
