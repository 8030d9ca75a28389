// Internal: not exported from the package entry.
// The seam between the streaming run and the device: a BatchAssembler turns one batch's sample ids
// into device memory, by one route chosen once when the loader is built (build.ts): staged through
// the fetcher (CPU, or an accelerator without a pool), staged and stitched with the VRAM pool, or
// gathered in place from a pinned in-memory source. Each route owns its part of the pool policy
// (install, partition, capture, evict, promotion); the run keeps only the read-ahead window,
// in-order delivery and the out-of-memory back-off, which it lends through `AssembleContext`.
// The rule: `assemble` either returns a batch or throws with nothing left behind — every staged
// buffer it read is handed back on failure.

import type { DeviceBatch, ResidentStore } from '../../device/device.js';
import type { VramPool } from '../../device/device.js';
import type { StagedBatch } from '../../dataset/source-reader.js';
import type { PickKeys } from '../../sampler/pick-key.js';
import type { Fetcher } from '../../reader/fetcher.js';
import type { EpochRoute, EpochStats } from '../stats.js';

export interface AssembleContext {
  readonly signal: AbortSignal;
  readonly stats: EpochStats;
  /** Batches the pipeline may have in flight now (a fetcher with parallel readers splits below it). */
  inFlight(): number;
  /**
   * After a device out-of-memory: the run's back-off (reference §6.5: halve the in-flight target,
   * wait, and at the floor ask the route to `relieve`); resolves when the caller should retry,
   * rethrows anything else and the last failure.
   */
  backOff(error: unknown, attempt: number): Promise<void>;
}

export interface BatchAssembler {
  readonly route: Exclude<EpochRoute, 'resident'>;
  /** The VRAM pool this route fills and stitches from, if any (for stats and describe). */
  readonly pool: VramPool | undefined;
  /** Epoch start and end (the pool's payoff phase is chosen per epoch). */
  beginEpoch(stats: EpochStats): void;
  endEpoch(stats: EpochStats): void;
  /**
   * `keys`: the batch's picks (row r of `ids` is pick keys.picks[r]); a keyed dataset's reads need
   * them (NOTE [keyed reads], dataset.ts). Routes with a pool or a mapped source never serve a
   * keyed dataset (build.ts), so only the staged routes pass them on.
   */
  assemble(ids: Uint32Array, context: AssembleContext, keys?: PickKeys): Promise<DeviceBatch>;
  /** The back-off reached its floor: give device memory back (the pool's newest slab). */
  relieve(): void;
  /**
   * Between epochs: once the pool holds every sample, the dataset as a resident store (the pool's
   * slabs then freed); undefined while it cannot (or on a route without a pool).
   */
  promote(length: number): ResidentStore | undefined;
  /**
   * Give back what the route holds (mapped source, pool slabs, decoder), once nothing it started
   * can still enqueue device work (the decode route waits for its decodes). Steps 6–7 of NOTE
   * [Loader shutdown] (loader.ts).
   */
  close(): void | Promise<void>;
}

/** Read rows through the fetcher, counting them as fetched. */
export async function fetchRows(fetcher: Fetcher, ids: Uint32Array, context: AssembleContext, keys?: PickKeys): Promise<StagedBatch> {
  const staged = await fetcher.fetch(ids, context.signal, context.inFlight(), keys);
  context.stats.rowsFetched += ids.length;
  return staged;
}
