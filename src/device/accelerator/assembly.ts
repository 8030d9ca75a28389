// Internal: not exported from the package entry.
// What the device-side assembly routes (staged upload, in-place rows, resident columns) share: the
// stream-ordered memory, the host-to-device byte count, the batch factory, and the VRAM pool's
// capture copy. The rule (NOTE [Upload commits last]): a route acquires every buffer it needs
// before it admits anything to the pool or queues any work, so an out-of-memory leaves no trace
// and the caller may simply retry.

import type { DeviceBuffer, DeviceEvent } from '../backend.js';
import type { BatchPart } from './batch-memory.js';
import type { DeviceBatch, UploadField } from '../device.js';

export type { UploadField };
import type { StreamMemory } from './stream-memory.js';
import type { VramPool } from '../device.js';
import type { DType } from '../../tensor/dtype.js';
import { deviceTable } from './address-table.js';

export interface Assembly {
  readonly memory: StreamMemory;
  /** Count bytes copied host to device (batches, tables, resident columns). */
  countH2d(bytes: number): void;
  /** Batch memory over `parts`, ready once `ready` (copy stream) is; undefined: made on the consumer stream. */
  batch(parts: readonly BatchPart[], ready: DeviceEvent | undefined): DeviceBatch;
}

export function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

/**
 * Admit the fresh rows among `positions` to the pool and enqueue their capture copies. `tables`:
 * one device buffer per field for an address table of `positions.length` rows, acquired by the
 * caller before anything was committed (NOTE [Upload commits last]); they are recycled here when
 * nothing is admitted, else once the copies are done.
 */
export function capture(memory: StreamMemory, pool: VramPool, ids: ArrayLike<number>, positions: readonly number[], fields: readonly UploadField[], source: (f: number, position: number) => number, followUps: (() => void)[], tables: readonly DeviceBuffer[]): void {
  const admitted = pool.admit(ids, positions);
  if (admitted.length === 0) {
    // Never handed to queued work: reusable at once.
    for (const t of tables) memory.recycle(t);
    return;
  }
  fields.forEach((field, f) => {
    const table = deviceTable(memory, tables[f]!, admitted.length, (k) => pool.address(f, admitted[k]!.id), (k) => source(f, admitted[k]!.position), followUps);
    memory.backend.copyRows(table, field.rowBytes, admitted.length, 'copy');
  });
}
