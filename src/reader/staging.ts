// Internal: not exported from the package entry.
// Host staging: one SharedArrayBuffer per in-flight batch (a ring slot), shared with every reader
// worker, which writes rows straight into it. The rule: a slot is reused only after every worker
// that was given a part of it has answered, and after its rows were copied out (the transfer).
// These are the buffers the CUDA device will page-lock once, so they are allocated once and reused.

import type { Schema } from '../dataset/schema.js';
import { type Storage, elementSize, storageView } from '../tensor/dtype.js';

/** Byte offset of each field inside a slot, 64-byte aligned (any element size, cache lines). */
export interface SlotLayout {
  readonly offsets: readonly number[];
  readonly bytes: number;
  readonly rows: number;
}

export function slotLayout(schema: Schema, rows: number): SlotLayout {
  const offsets: number[] = [];
  let at = 0;
  for (const f of schema.fields) {
    offsets.push(at);
    at += Math.ceil((rows * f.rowSize * elementSize(f.dtype)) / 64) * 64;
  }
  return { offsets, bytes: Math.max(at, 64), rows };
}

/** Host pages: staging is laid out on whole pages so that page-locking covers every byte. */
export const PAGE_BYTES = 4096;

/** A ring slot: shared memory and the offset of its first page-aligned byte (where the layout starts). */
export interface Slot {
  readonly memory: SharedArrayBuffer;
  readonly base: number;
}

/** Bytes to allocate for a slot of `layout`: whole pages, plus one page of slack for alignment. */
export function slotAllocation(layout: SlotLayout): number {
  return Math.ceil(layout.bytes / PAGE_BYTES) * PAGE_BYTES + PAGE_BYTES;
}

/** Typed views of the first `rows` rows of every field of a slot. */
export function slotViews(schema: Schema, layout: SlotLayout, slot: Slot, rows: number): Storage[] {
  return schema.fields.map((f, i) => storageView(f.dtype, slot.memory, slot.base + layout.offsets[i]!, rows * f.rowSize));
}
