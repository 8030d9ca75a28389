// Fuzz target for npy.test.ts: open a mutant in both load modes, read every row (one batch in
// order, one in reverse, which defeats run coalescing) and require the two modes to agree.

import { ArraySource } from '../../src/dataset/arrays-source.js';
import type { FileColumnsSource } from '../../src/dataset/formats/columns/columns-file.js';
import { npySource } from '../../src/dataset/formats/columns/npy.js';
import type { Tensor } from '../../src/tensor/tensor.js';

export function readBothModes(path: string): void {
  const memory = npySource(path, { load: 'memory' });
  const positioned = npySource(path, { load: 'positioned' });
  if (!(memory instanceof ArraySource) || positioned instanceof ArraySource) throw new Error('load option ignored');
  compareAll(memory, positioned);
}

/**
 * Bytes equal, except that float NaNs match any NaN: the in-memory gather copies small float rows
 * element by element, and V8 may canonicalize a NaN's payload on the way.
 */
function sameContent(t: Tensor, u: Tensor): boolean {
  if (t.dtype === 'float32' || t.dtype === 'float64') {
    const a = t.data as Float32Array | Float64Array;
    const b = u.data as Float32Array | Float64Array;
    return a.every((v, i) => Object.is(v, b[i]) || (Number.isNaN(v) && Number.isNaN(b[i])));
  }
  return Buffer.from(t.bytes()).equals(Buffer.from(u.bytes()));
}

/** Read every row of both datasets, forwards and backwards, and throw unless the bytes agree. */
export function compareAll(a: ArraySource | FileColumnsSource, b: ArraySource | FileColumnsSource): void {
  if (a.length !== b.length) throw new Error(`lengths differ: ${a.length} vs ${b.length}`);
  const ids = Array.from({ length: a.length }, (_, i) => i);
  for (const order of [ids, [...ids].reverse()]) {
    const x = Object.values(a.getBatch(order)) as Tensor[];
    const y = Object.values(b.getBatch(order)) as Tensor[];
    if (x.length !== y.length) throw new Error('column counts differ');
    x.forEach((t, i) => {
      const u = y[i]!;
      if (t.dtype !== u.dtype || t.shape.join() !== u.shape.join() || !sameContent(t, u)) {
        throw new Error(`column ${i} differs between memory and positioned reads`);
      }
    });
  }
}
