// Resumable state: where in which epoch's global order a run stopped, and what shaped that order.
// The rule: a resumed loader continues at exactly the next pick, or refuses with a typed error
// naming the mismatch — never a silent restart of the epoch, never a different order. The world
// size and batch size may change (the rest of the order is re-partitioned, see shard.ts); the
// seed, the dataset length, `augment` and the kind of order may not, nor, mid-epoch, what cut the
// batches (`pack`, `batchTokens` or neither, with their settings: NOTE [resume batches],
// pipeline/batch-planner.ts). A mixture's weights may change too (from the resume point on: NOTE
// [Mixture order], sampler/mix-sampler.ts).

import { resumeMismatchError, show } from '../errors.js';
import type { U64 } from '../sampler/rng.js';
import type { MixState } from '../sampler/mix-sampler.js';

/** A small JSON-serializable snapshot of a loader's progress (`loader.state()`). */
export interface LoaderState {
  /** Format version. */
  readonly stoker: 1;
  /** The epoch to run next, or the one in progress. */
  readonly epoch: number;
  /** Picks of that epoch's global order already consumed by all ranks together. */
  readonly position: number;
  /** The shuffle seed, as a decimal string (64-bit). */
  readonly seed: string;
  readonly datasetLength: number;
  readonly augment: number;
  /** Picks per epoch (datasetLength × augment, or a custom sampler's length). */
  readonly picks: number;
  readonly order: 'random' | 'sequential' | 'custom' | 'mix' | 'block';
  /** The world and batch size that wrote the state; a resume may use others. */
  readonly worldSize: number;
  readonly batchSize: number;
  /** The dataset's content identity when it declares one (a remote dataset's manifest hash): a resume onto other content is refused. */
  readonly content?: string;
  /** A block shuffle's shape (order 'block'), which a resume must match: NOTE [Block order], sampler/block-sampler.ts. */
  readonly block?: BlockShape;
  /** A mixture's place (sources.mix): each part's epoch and offset at the start of `epoch`, and its weights there. */
  readonly mix?: MixState;
  /** Token budgets (batchTokens): the knobs that cut the batches, which a resume mid-epoch must keep. */
  readonly tokens?: { readonly batchTokens: number; readonly bucketWindow: number; readonly batchSize: number };
  /**
   * Sequence packing: the knobs that cut the context windows, which a resume mid-epoch must keep.
   * With it, `position` counts context windows, not picks (NOTE [pack-position], batch-planner.ts).
   */
  readonly pack?: { readonly contextLength: number; readonly mode: 'concat' | 'best-fit'; readonly window: number; readonly truncate: boolean };
}

/** What makes a block shuffle's order besides the seed: its blocks (count and a fingerprint of their bounds), window and `within`. */
export interface BlockShape {
  readonly blocks: number;
  /** FNV-1a of the block bounds in the pick space, 8 hex digits. */
  readonly bounds: string;
  readonly window: number;
  readonly within: boolean;
  /** How the order was dealt to nodes (NOTE [Blocks per node], sampler/block-sampler.ts); absent: one stream. A resume keeps the saved layout for its epoch, whatever its world. */
  readonly streams?: number;
  readonly chunk?: number;
}

export interface OrderShape {
  readonly seed: U64;
  readonly datasetLength: number;
  readonly augment: number;
  readonly picks: number;
  readonly order: LoaderState['order'];
  readonly content?: string;
  readonly block?: BlockShape;
}

export function seedString(seed: U64): string {
  return ((BigInt(seed.hi) << 32n) | BigInt(seed.lo)).toString();
}

/** Check a state handed to `resume` against this loader's order; returns it validated. */
export function checkResume(state: unknown, shape: OrderShape): LoaderState {
  const s = state as Partial<Record<keyof LoaderState, unknown>> | null;
  if (s === null || typeof s !== 'object' || s.stoker !== 1) {
    throw resumeMismatchError(`\`resume\` must be a state from loader.state() (an object with stoker: 1), got ${show(state)}`);
  }
  const expect: [keyof LoaderState, unknown, string][] = [
    ['seed', seedString(shape.seed), 'seed'],
    ['datasetLength', shape.datasetLength, 'the dataset length'],
    ['augment', shape.augment, 'augment'],
    ['order', shape.order, 'the order (shuffle / sampler / sources.mix)'],
    ['picks', shape.picks, 'picks per epoch'],
  ];
  for (const [key, want, what] of expect) {
    if (s[key] !== want) {
      throw resumeMismatchError(
        `\`resume\`: the state was saved with ${what} ${show(s[key])}, but this loader has ${show(want)}. A different order cannot continue the saved one: ` +
          `create the loader with the same ${what}, or start without \`resume\``,
      );
    }
  }
  if (s.content !== undefined && shape.content !== undefined && s.content !== shape.content) {
    throw resumeMismatchError(
      `\`resume\`: the state was saved over a dataset whose content hash was ${show(s.content)}, but this dataset's is ${show(shape.content)}: its files changed (added, removed or rewritten), so the saved position would read other samples. ` +
        'Resume over the same files (they may have moved), or start without `resume`',
    );
  }
  if (shape.block !== undefined) checkBlock(s.block, shape.block);
  for (const key of ['epoch', 'position', 'worldSize', 'batchSize'] as const) {
    const v = s[key];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < (key === 'worldSize' || key === 'batchSize' ? 1 : 0)) {
      throw resumeMismatchError(`\`resume.${key}\` must be a non-negative integer, got ${show(v)}; the state is corrupt`);
    }
  }
  // A packed state counts windows (NOTE [pack-position]); the planner checks its position.
  if (s.pack === undefined && (s.position as number) >= shape.picks) {
    throw resumeMismatchError(`\`resume.position\` ${s.position} is not below the ${shape.picks} picks of an epoch; the state is corrupt`);
  }
  return s as LoaderState;
}

/** A block shuffle continues only the same block order: same blocks, window and `within`. */
function checkBlock(saved: unknown, now: BlockShape): void {
  const b = saved as Partial<BlockShape> | null | undefined;
  const same = b !== null && typeof b === 'object' && b.blocks === now.blocks && b.bounds === now.bounds && b.window === now.window && b.within === now.within;
  if (same) return;
  const describe = (x: Partial<BlockShape> | null | undefined) =>
    x === null || typeof x !== 'object' ? String(x) : `${x.blocks} blocks (bounds ${x.bounds}), window ${x.window}, within ${x.within}`;
  throw resumeMismatchError(
    `\`resume\`: the state was saved with a block shuffle of ${describe(b)}, but this loader's is ${describe(now)}. A different order cannot continue the saved one: ` +
      'create the loader with the same `shuffle` over the same dataset parts, or start without `resume`',
  );
}
