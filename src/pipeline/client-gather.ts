// Internal: not exported from the package entry.
// A resident loader's batches gathered by the consumer itself, in another process (`stoker serve`'s
// client gather, serve/session.ts). The rule: the loader still owns the order — the sampler, the
// ranks' shards, resume and `loader.state()` — and hands out, per epoch, only the plan (this rank's
// sample ids in order and where each batch starts); the consumer gathers the rows of each batch from
// the resident columns, which it maps once. So no batch crosses the process boundary at all, and the
// consumer's gathers run on its own stream, in its own CUDA context, like the expert PyTorch loop's
// `index_select` (NOTE [Client gather] in docs/torch.md has the measurements).
//
// Only a store whose batches are its rows as they are qualifies: no batch transform, no ragged
// collate or packing, no sample whose read failed at build (its batch must fail, which a gather
// cannot tell). Anything else keeps the loader's own route.

import type { LoaderState } from '../distributed/resume.js';
import type { ResidentColumn } from '../device/device.js';
import type { EpochPlan } from './epoch-plan.js';

/** The hook's key on DataLoader (a symbol: not part of the public surface). */
export const kClientGather = Symbol('stoker.clientGather');

export interface ClientGather {
  /** The resident columns in the order of `names`. */
  readonly columns: readonly (ResidentColumn & { readonly name: string })[];
  /**
   * Start epoch `epoch` as iterating it would (resume, one epoch at a time, the loop's next epoch),
   * without gathering anything: its plan, and `at(k)`, the loader's state once the consumer took
   * k batches of it (which also becomes `loader.state()`).
   */
  epoch(epoch: number): ClientEpoch;
}

export interface ClientEpoch {
  readonly plan: EpochPlan;
  at(taken: number): LoaderState;
  /**
   * What `at(k)` would give for every k ≥ 1, without taking anything: `positions[k − 1]`, the position
   * after k batches in this epoch's state `base`, or −1 where the state is `next` (the next epoch's
   * start). A state in between differs from `base` only in its position (NOTE [Known state], serve/protocol.ts).
   */
  track(): { readonly base: LoaderState; readonly next: LoaderState; readonly positions: Float64Array };
}
