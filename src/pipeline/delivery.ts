// Internal: not exported from the package entry.
// The last stage of both modes: apply the transform to a batch's fresh rows, keyed per pick, check
// what it returned, and wrap the rows into a leased Batch. The rule: the transform only ever sees
// memory the batch owns, so it may write in place without touching any retained tier.

import { Batch } from '../batch.js';
import type { DeviceBatch } from '../device/device.js';
import { LoaderError, impureTransform, show, transformOutputError } from '../errors.js';
import type { Transform } from '../transforms/transform.js';
import { PickKey } from '../sampler/pick-key.js';
import type { U64 } from '../sampler/rng.js';
import { leased, Tensor } from '../tensor/tensor.js';
import { type AnyTensor, DeviceTensor } from '../device/device-tensor.js';
import type { EpochPlan } from './epoch-plan.js';
import { type RaggedDelivery, collateBatch } from './ragged-batch.js';

export interface DeliveryConfig {
  /**
   * Development mode: the first transformed batch is also transformed twice on copies with the same
   * keys and compared (reference §5.3). Set to false once probed; undefined = no probe.
   */
  probeTransform?: boolean;
  readonly names: readonly string[];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly transform: Transform<any> | undefined;
  readonly augment: number;
  readonly seed: U64;
  /** Ragged fields' collates or sequence packing (pipeline/ragged-batch.ts); undefined: none. */
  readonly ragged?: RaggedDelivery;
}

/** The names of a batch's fields as delivered. */
export function deliveredNames(config: DeliveryConfig): readonly string[] {
  return config.ragged?.names ?? config.names;
}

/** Marks a failure of the user's transform (as opposed to the dataset). */
export class TransformFailure {
  constructor(readonly cause: unknown) {}
}

/** Synchronous when there is no transform (the common resident path pays no promise). */
export function deliver(config: DeliveryConfig, plan: EpochPlan, index: number, memory: DeviceBatch): Batch<AnyTensor> | Promise<Batch<AnyTensor>> {
  const start = plan.start(index);
  const end = plan.end(index);
  // Views of the plan's arrays: nothing writes to them after the plan is made.
  const picks = plan.picks.subarray(start, end);
  const sampleIds = plan.samples === plan.picks ? picks : plan.samples.subarray(start, end);
  let rows = memory.tensors;
  if (config.ragged !== undefined) {
    try {
      rows = collateBatch(config.ragged, config.names, plan, index, memory.tensors, sampleIds);
    } catch (cause) {
      memory.free();
      throw cause instanceof LoaderError && cause.code !== 'ERR_TRANSFORM_OUTPUT' && cause.code !== 'ERR_TOO_LONG' ? cause : new TransformFailure(cause);
    }
  }
  if (config.transform === undefined) return makeBatch(config, plan, index, picks, sampleIds, memory, rows);
  return transformed(config, plan, index, picks, sampleIds, memory, rows);
}

async function transformed(config: DeliveryConfig, plan: EpochPlan, index: number, picks: Uint32Array, sampleIds: Uint32Array, memory: DeviceBatch, rows: readonly AnyTensor[]): Promise<Batch<AnyTensor>> {
  const transform = config.transform!;
  const keys = new Array<PickKey>(picks.length);
  for (let r = 0; r < picks.length; r++) keys[r] = PickKey.fromPick(picks[r]!, config.augment, plan.epoch, config.seed);
  const apply = transform as (rows: readonly AnyTensor[], keys: readonly PickKey[]) => unknown;
  let out: unknown;
  try {
    if (config.probeTransform === true && rows.every((t) => t instanceof Tensor)) {
      config.probeTransform = false;
      await probeTransformPurity(apply, rows as readonly Tensor[], keys);
    }
    out = await apply(rows, keys);
  } catch (cause) {
    if (cause instanceof LoaderError && cause.code === 'ERR_IMPURE_TRANSFORM') {
      memory.free();
      throw cause;
    }
    memory.free();
    throw new TransformFailure(cause);
  }
  let tensors: readonly AnyTensor[];
  try {
    tensors = checkTransformOutput(out, rows.map((t) => t.shape[0]!));
  } catch (error) {
    memory.free();
    // A wrong output fails this batch (under `errors`), as a throwing transform does: not the epoch.
    throw new TransformFailure(error);
  }
  return makeBatch(config, plan, index, picks, sampleIds, memory, tensors);
}

function makeBatch(config: DeliveryConfig, plan: EpochPlan, index: number, picks: Uint32Array, sampleIds: Uint32Array, memory: DeviceBatch, tensors: readonly AnyTensor[]): Batch<AnyTensor> {
  return new Batch<AnyTensor>({
    names: deliveredNames(config),
    epoch: plan.epoch,
    index,
    sampleIds,
    picks,
    tensors: (lease) => tensors.map((t) => (t instanceof DeviceTensor ? t.withLease(lease) : leased(t, lease))),
    free: () => memory.free(),
  });
}

/**
 * Apply the transform to two copies of the rows with the same keys and compare (NaN equals NaN: bytes
 * are compared). A difference means the transform draws randomness from somewhere other than
 * key.rng(), and views would not be reproducible.
 */
async function probeTransformPurity(apply: (rows: readonly AnyTensor[], keys: readonly PickKey[]) => unknown, rows: readonly Tensor[], keys: readonly PickKey[]): Promise<void> {
  const run = async () => {
    const out = await apply(rows.map((t) => t.clone()), keys);
    return Array.isArray(out) ? out.map((t) => (t instanceof Tensor ? { dtype: t.dtype, shape: t.shape.join(','), bytes: Buffer.from(t.bytes()) } : undefined)) : undefined;
  };
  const [a, b] = [await run(), await run()];
  const same = a !== undefined && b !== undefined && a.length === b.length && a.every((x, i) => {
    const y = b[i];
    return x === undefined || y === undefined ? x === y : x.dtype === y.dtype && x.shape === y.shape && x.bytes.equals(y.bytes);
  });
  if (!same && a !== undefined && b !== undefined) {
    throw impureTransform();
  }
}

/** `rows`: the first dimension of each input field (the batch's rows, or a packed field's total). */
function checkTransformOutput(out: unknown, rowsOf: readonly number[]): readonly AnyTensor[] {
  const count = rowsOf.length;
  if (!Array.isArray(out)) {
    throw transformOutputError(`transform must return an array of ${count} tensors (one per field), got ${show(out)}`);
  }
  if (out.length !== count) {
    throw transformOutputError(`transform returned ${out.length} tensors but the batch has ${count} fields; return one tensor per field, in order`);
  }
  return out.map((t: unknown, i) => {
    const tensor = t instanceof Tensor || t instanceof DeviceTensor ? t : ArrayBuffer.isView(t) ? new Tensor(t as never) : undefined;
    if (tensor === undefined) throw transformOutputError(`transform output ${i} is ${show(t)}; return Tensors, DeviceTensors or typed arrays`);
    const rows = rowsOf[i];
    if (tensor.shape[0] !== rows) {
      throw transformOutputError(
        `transform output ${i} has shape [${tensor.shape.join(', ')}] but the batch has ${rows} rows; a transform must keep the row count (first dimension)`,
      );
    }
    return tensor;
  });
}
