// Internal: not exported from the package entry.
// Ragged collates of a batch already in device memory: the device twins of ragged-batch.ts's host
// collate (collateField) and packed windows (packBatch), through one piece table each
// (pipeline/pieces.ts) and one Backend.pieces launch per field. The rule: the outputs equal the host
// collate's byte for byte, with the same names, shapes and dtypes; the host supplies the rows'
// lengths (it knows them when it collates a batch), and everything allocated belongs to the batch.

import type { PadSpec, PackSpec } from '../pipeline/collate.js';
import { collatePieces, fillBitsOf, windowPieces } from '../pipeline/pieces.js';
import type { PackPlan } from '../sampler/pack-plan.js';
import type { DeviceTensor } from './device-tensor.js';

/**
 * Collate one ragged field of a device batch: `rows` is the field as the tiers carry it
 * (`[B, capacity, ...rest]`), `lengths` each row's length. Returns the outputs in collateField's
 * order: `field` then `field_lengths` / `field_mask` (pad) or `field_cu_seqlens` (pack).
 */
export function collateOnDevice(rows: DeviceTensor, field: string, spec: PadSpec | PackSpec, lengths: ArrayLike<number>, ids: readonly number[]): { name: string; tensor: DeviceTensor }[] {
  const c = collatePieces(field, spec, lengths, ids, rows.shape.slice(2));
  const B = lengths.length;
  const companions = c.cuSeqlens !== undefined ? [{ data: c.cuSeqlens, shape: [B + 1] }] : c.lengths !== undefined ? [{ data: c.lengths, shape: [B] }] : [];
  const out = rows.runPieces(
    c.pieces,
    { shape: c.shape, fill: spec.kind === 'pad' ? fillBitsOf(spec.value, rows.dtype) : 0n, tagShape: c.shape.slice(0, 2), ...(c.mask ? { segment: 'uint8' as const } : {}) },
    companions,
  );
  if (spec.kind === 'pack') return [{ name: field, tensor: out.data }, { name: `${field}_cu_seqlens`, tensor: out.companions[0]! }];
  return [
    { name: field, tensor: out.data },
    ...(c.lengths !== undefined ? [{ name: `${field}_lengths`, tensor: out.companions[0]! }] : []),
    ...(out.segment !== undefined ? [{ name: `${field}_mask`, tensor: out.segment }] : []),
  ];
}

/**
 * Sequence-packing windows firstWindow … firstWindow + count − 1 of a device batch whose rows are
 * its documents (`[rows, capacity]`, row r holding pick `rowOfPick⁻¹(r)`, batch-planner.ts
 * `batchPositions` order): packBatch's `tokens [count, C]`, `segment_ids` and `position_ids`.
 */
export function packOnDevice(rows: DeviceTensor, plan: PackPlan, firstWindow: number, count: number, C: number, rowOfPick: (pick: number) => number, value = 0): [DeviceTensor, DeviceTensor, DeviceTensor] {
  const t = windowPieces(plan, firstWindow, count, C, rowOfPick);
  const out = rows.runPieces(t, { shape: [count, C], fill: fillBitsOf(value, rows.dtype), tagShape: [count, C], segment: 'int32', position: true });
  return [out.data, out.segment!, out.position!];
}
