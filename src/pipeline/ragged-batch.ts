// Internal: not exported from the package entry.
// What turns a batch of fixed-capacity ragged rows (NOTE [ragged rows], dataset/schema.ts) into the
// tensors the training loop gets: each ragged field through its collate (collate/collate.ts: pad,
// pack, a function), or, with sequence packing, the batch's context windows (sampler/pack-plan.ts).
// The rule: the outputs depend only on the rows and their lengths, never on which tier served them,
// and the hidden length fields never reach the user.

import { invalidOption, show, transformOutputError } from '../errors.js';
import type { AnyDataset } from '../dataset/dataset.js';
import { hasRaggedFields, hasRaggedMax } from '../dataset/capabilities.js';
import type { RaggedField, RaggedPlan, Schema } from '../dataset/schema.js';
import { type CollateSpec, type RaggedRow, checkPadValue, collateField, parseCollate } from '../collate/collate.js';
import { type PackPlan, type PackSettings, packBatch } from '../sampler/pack-plan.js';
import { Tensor, trustedTensor } from '../tensor/tensor.js';
import type { AnyTensor, DeviceTensor } from '../device/device-tensor.js';
import { collatePieces, fillBitsOf, windowPieces } from '../collate/pieces.js';
import type { EpochPlan, Packing } from './epoch-plan.js';
import type { EpochStats } from './stats.js';
import { batchPositions } from './batch-planner.js';
import type { FieldLengths } from './field-lengths.js';
import { type DType, type Storage, inferDType } from '../tensor/dtype.js';

/** How each visible field of a batch is delivered. */
export interface RaggedDelivery {
  readonly fields: readonly (RaggedOut | undefined)[];
  /** Output names; a function collate's are learned from its first call. */
  names: string[];
  readonly pack: PackOut | undefined;
}

interface RaggedOut {
  readonly ragged: RaggedField;
  readonly spec: CollateSpec;
  /** Output names of this field, once known. */
  outputs: string[] | undefined;
}

export interface PackOut {
  readonly ragged: RaggedField;
  readonly settings: PackSettings;
  /** The epoch's windows and, per batch, its first window and each pick's row in the batch. */
  readonly plans: PackPlans;
}

/** The packing plan of each epoch this loader plans, shared with the planner. */
export interface PackPlans {
  plan(epoch: number): PackPlan;
}

/** The ragged fields a loader carries and how, decided at create from the dataset and the options. */
export interface RaggedSetup {
  readonly plans: ReadonlyMap<string, RaggedPlan>;
  readonly specs: ReadonlyMap<string, CollateSpec>;
  readonly packField: string | undefined;
}

/**
 * Which fields are ragged (declared by the dataset's `ragged`, or named by `collate` / `pack.field`)
 * and each one's capacity: the collate's fixed length or `maxLength`, else the source's
 * `raggedMax`, else the longest of the field's own `lengths(field)` (NOTE [per-field lengths],
 * field-lengths.ts); none of them → a typed error at create.
 */
export function planRagged(
  ds: AnyDataset, names: readonly string[], collate: Record<string, unknown> | undefined, pack: (PackSettings & { field: string | undefined }) | undefined,
  lengths: FieldLengths, fieldDtype: (field: string) => DType | undefined,
): RaggedSetup {
  const declared = hasRaggedFields(ds) ? ds.ragged.filter((n) => typeof n === 'string') : [];
  const raggedMax: Readonly<Record<string, number>> = hasRaggedMax(ds) ? ds.raggedMax : {};
  const plans = new Map<string, RaggedPlan>();
  if (pack !== undefined) {
    if (collate !== undefined && Object.keys(collate).length > 0) {
      throw invalidOption('collate', 'left out with pack', collate, 'Sequence packing collates its field itself (tokens, segment_ids, position_ids): drop `collate`');
    }
    const field = pack.field ?? (declared.length === 1 ? declared[0] : undefined);
    if (field === undefined || !names.includes(field)) {
      throw invalidOption('pack.field', `a field of the dataset (${names.map((n) => show(n)).join(', ')})`, pack.field, declared.length > 1 ? `The dataset has several ragged fields (${declared.join(', ')}): name one` : 'Name the token field to pack');
    }
    if (names.length > 1) {
      throw invalidOption('pack', `a dataset with only the field ${show(field)}`, `fields ${names.map((n) => show(n)).join(', ')}`, 'A context window mixes documents, so per-document fields cannot follow them: select only the token field in the source');
    }
    // A row holds a whole document, the longest at most; best-fit never splits a document, so a row
    // holds at most a window too (a longer one is truncated to it, or refused at create).
    // Each read is checked against the length the windows were planned with (never cut to it).
    const planned = lengths.plan();
    const longest = planned.reduce((m, v) => Math.max(m, v), 0);
    const capacity = Math.max(1, pack.mode === 'concat' ? longest : Math.min(longest, pack.contextLength));
    plans.set(field, { capacity, truncate: pack.mode === 'best-fit' && pack.truncate, planned: { lengths: planned, by: lengths.by } });
    return { plans, specs: new Map(), packField: field };
  }
  const named = Object.keys(collate ?? {}).filter((n) => names.includes(n));
  const ragged = [...new Set([...declared.filter((n) => names.includes(n)), ...named])];
  if (ragged.length === 0 && collate === undefined) return { plans, specs: new Map(), packField: undefined };
  const specs = parseCollate(collate, ragged, raggedMax);
  for (const [field, spec] of specs) {
    const dtype = fieldDtype(field);
    if (spec.kind === 'pad' && dtype !== undefined) checkPadValue(field, spec.value, dtype);
    let capacity = spec.kind === 'function' ? raggedMax[field] : spec.maxLength;
    if (capacity === undefined) {
      const all = lengths.of(field);
      if (all !== undefined && all.length > 0) capacity = Math.max(1, all.reduce((m, v) => Math.max(m, v), 0));
    }
    if (capacity === undefined) {
      throw invalidOption(
        `collate.${field}`,
        'a collate with a capacity for the ragged field',
        spec.kind,
        `Every tier holds a ragged row in a fixed slot: give \`collate: { ${field}: { pad: { maxLength: N } } }\` (or pad \`to: N\`, or pack \`maxLength\`), or a source that knows its longest row (raggedMax) or its lengths`,
      );
    }
    plans.set(field, { capacity, truncate: spec.kind !== 'function' && spec.truncate });
  }
  return { plans, specs, packField: undefined };
}

/** The delivery of a ragged schema's batches; undefined when the schema has no ragged field. */
export function raggedDelivery(schema: Schema, names: readonly string[], setup: RaggedSetup, plans: PackPlans | undefined, settings: PackSettings | undefined): RaggedDelivery | undefined {
  const ragged = schema.ragged ?? [];
  if (ragged.length === 0) return undefined;
  if (setup.packField !== undefined) {
    const r = ragged.find((x) => x.name === setup.packField)!;
    return { fields: [], names: [r.name, 'segment_ids', 'position_ids'], pack: { ragged: r, settings: settings!, plans: plans! } };
  }
  const fields = names.map((name) => {
    const r = ragged.find((x) => x.name === name);
    if (r === undefined) return undefined;
    const spec = setup.specs.get(name)!;
    return { ragged: r, spec, outputs: spec.kind === 'function' ? undefined : outputNames(name, spec) };
  });
  const out: RaggedDelivery = { fields, names: [], pack: undefined };
  out.names = namesOf(out, names);
  return out;
}

function outputNames(name: string, spec: CollateSpec): string[] {
  if (spec.kind === 'pack') return [name, `${name}_cu_seqlens`];
  if (spec.kind === 'pad') return [name, ...(spec.lengths ? [`${name}_lengths`] : []), ...(spec.mask ? [`${name}_mask`] : [])];
  return [name];
}

function namesOf(d: RaggedDelivery, names: readonly string[]): string[] {
  return names.flatMap((n, f) => d.fields[f]?.outputs ?? [n]);
}

/** The row of one field of a batch, trimmed to its length. */
function rowsOf(data: Storage, lengths: Int32Array, rows: number, capacity: number, per: number): RaggedRow[] {
  const out = new Array<RaggedRow>(rows);
  const stride = capacity * per;
  const d = data as unknown as RaggedRow;
  for (let r = 0; r < rows; r++) out[r] = d.subarray(r * stride, r * stride + lengths[r]! * per) as RaggedRow;
  return out;
}

/** Collate a host batch's ragged fields; `tensors` are the schema's fields (hidden lengths last). */
export function collateHost(d: RaggedDelivery, visible: readonly string[], tensors: readonly Tensor[], ids: ArrayLike<number>): Tensor[] {
  const rows = tensors[0]!.shape[0]!;
  const idList = Array.from(ids);
  const out: Tensor[] = [];
  let learned = false;
  for (let f = 0; f < d.fields.length; f++) {
    const how = d.fields[f];
    if (how === undefined) {
      out.push(tensors[f]!);
      continue;
    }
    const { ragged: r, spec } = how;
    const t = tensors[f]!;
    const lengths = tensors[r.lengthField]!.data as Int32Array;
    const rest = t.shape.slice(2);
    const got = collateField(r.name, spec, rowsOf(t.data, lengths, rows, r.capacity, r.per), idList, r.per);
    let names = how.outputs;
    if (names === undefined) {
      names = Object.keys(got);
      how.outputs = names;
      learned = true;
    } else if (spec.kind === 'function' && (Object.keys(got).length !== names.length || !names.every((n) => n in got))) {
      throw transformOutputError(`collate.${r.name}: the function returned ${show(Object.keys(got))}; its first batch returned ${show(names)}. Return the same outputs every batch`);
    }
    for (const name of names) {
      const o = got[name]!;
      const dtype = dtypeOf(o.data, t.dtype);
      const shape = spec.kind === 'function' ? o.shape : name === r.name ? [...o.shape.slice(0, r.per > 1 ? -1 : undefined), ...rest] : o.shape;
      out.push(trustedTensor(dtype, o.data as never, shape));
    }
  }
  if (learned) d.names = namesOf(d, visible);
  return out;
}

/** A collate output's dtype: its array's, with 16-bit floats keeping the field's tag. */
function dtypeOf(data: RaggedRow, like: DType): DType {
  const d = inferDType(data) ?? like;
  return d === 'uint16' && (like === 'float16' || like === 'bfloat16') ? like : d;
}

/**
 * The delivered tensors of one batch: collated ragged fields, or (sequence packing) its context
 * windows. `tensors` are the schema's fields, hidden lengths last; `ids` the rows' sample ids.
 */
export function collateBatch(d: RaggedDelivery, visible: readonly string[], plan: EpochPlan, index: number, tensors: readonly AnyTensor[], ids: ArrayLike<number>): AnyTensor[] {
  if (tensors.every((t): t is Tensor => t instanceof Tensor)) {
    if (d.pack !== undefined) return packHost(d.pack, plan, index, tensors);
    return collateHost(d, visible, tensors, ids);
  }
  const rows = tensors as readonly DeviceTensor[];
  if (d.pack !== undefined) return packDevice(d.pack, plan, index, rows);
  return collateDevice(d, rows, ids);
}

/**
 * The same collates on an accelerator: each ragged field's piece table (collate/pieces.ts) runs on
 * the device over the batch's fixed-capacity rows (kernels/ragged.cu), the host sending only the
 * table and the small companions (lengths, cu_seqlens) it computed from the shared length table.
 */
function collateDevice(d: RaggedDelivery, tensors: readonly DeviceTensor[], ids: ArrayLike<number>): DeviceTensor[] {
  const idList = Array.from(ids);
  const out: DeviceTensor[] = [];
  for (let f = 0; f < d.fields.length; f++) {
    const how = d.fields[f];
    if (how === undefined) {
      out.push(tensors[f]!);
      continue;
    }
    const { ragged: r, spec } = how;
    if (spec.kind === 'function') throw new Error('stoker: internal: a function collate on a device');
    const t = tensors[f]!;
    const cp = collatePieces(r.name, spec, lengthsOf(r, idList), idList, t.shape.slice(2));
    const ran = t.runPieces({ table: cp.pieces, fill: fillBitsOf(spec.kind === 'pad' ? spec.value : 0, t.dtype), shape: cp.shape, segment: cp.mask ? 'uint8' : undefined });
    for (const name of how.outputs!) {
      if (name === r.name) out.push(ran.data);
      else if (name === `${r.name}_lengths`) out.push(t.sibling(trustedTensor('int32', cp.lengths!, [idList.length])));
      else if (name === `${r.name}_mask`) out.push(ran.segment!);
      else out.push(t.sibling(trustedTensor('int32', cp.cuSeqlens!, [cp.cuSeqlens!.length])));
    }
  }
  return out;
}

/** A packed batch on an accelerator: its windows as one piece table, tokens with segment and position ids. */
function packDevice(p: PackOut, plan: EpochPlan, index: number, tensors: readonly DeviceTensor[]): DeviceTensor[] {
  const packing = plan.packing!;
  const w0 = packing.windowStart[index]!;
  const count = packing.windowCount[index]!;
  const C = packing.contextLength;
  const rowOf = new Map<number, number>();
  batchPositions(packing.plan, w0, count).forEach((pos, row) => rowOf.set(pos, row));
  const t = tensors[p.ragged.field]!;
  const table = windowPieces(packing.plan, w0, count, C, (pos) => rowOf.get(pos)!);
  const ran = t.runPieces({ table, fill: 0n, shape: [count, C], segment: 'int32', position: true });
  return [ran.data, ran.segment!, ran.position!];
}

/** The rows' lengths from the shared length table (every row of a batch was written before it is delivered). */
function lengthsOf(r: RaggedField, ids: readonly number[]): Int32Array {
  const out = new Int32Array(ids.length);
  for (let i = 0; i < ids.length; i++) {
    const n = r.lengths[ids[i]!]!;
    if (n < 0) throw new Error(`stoker: internal: ragged field ${r.name}: sample ${ids[i]} delivered before its length was written`);
    out[i] = n;
  }
  return out;
}

/** A packed batch on the host: its windows' pieces copied out of the rows (sampler/pack-plan.ts packBatch). */
function packHost(p: PackOut, plan: EpochPlan, index: number, tensors: readonly Tensor[]): Tensor[] {
  const packing = plan.packing!;
  const w0 = packing.windowStart[index]!;
  const count = packing.windowCount[index]!;
  const C = packing.contextLength;
  const r = p.ragged;
  const rowOf = new Map<number, number>();
  batchPositions(packing.plan, w0, count).forEach((pos, row) => rowOf.set(pos, row));
  const data = tensors[r.field]!.data as unknown as Int32Array;
  const stride = r.capacity;
  const out = packBatch(packing.plan, w0, count, C, (pos) => {
    const row = rowOf.get(pos)!;
    return data.subarray(row * stride, (row + 1) * stride);
  });
  const dtype = tensors[r.field]!.dtype;
  return [trustedTensor(dtype, out.tokens as never, [count, C]), trustedTensor('int32', out.segment_ids, [count, C]), trustedTensor('int32', out.position_ids, [count, C])];
}

/** Add a delivered packed batch's windows, real tokens and slots to the epoch's stats. */
export function countPacked(stats: EpochStats, packing: Packing, index: number): void {
  const w0 = packing.windowStart[index]!;
  const count = packing.windowCount[index]!;
  const { windows, pieces } = packing.plan;
  let real = 0;
  for (let i = windows[w0]!; i < windows[w0 + count]!; i++) real += pieces[i]!.length;
  const p = (stats.packing ??= { windows: 0, realTokens: 0, slots: 0, utilization: 0 });
  p.windows += count;
  p.realTokens += real;
  p.slots += count * packing.contextLength;
  p.utilization = p.slots === 0 ? 0 : p.realTokens / p.slots;
}
