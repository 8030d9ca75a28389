// Internal: not exported from the package entry.
// The in-place route: an in-memory source mapped for the device (option `pinSource`) is read by the
// device itself — no reader, no staging copy. With a VRAM pool, pooled rows come from it instead,
// but only a pool that can hold every sample (and so turn the loader resident) pays for its
// planning when every row is small enough to cross at bus speed for the cost of one launch.

import type { DeviceBatch, InPlaceDevice, PoolingDevice, ResidentStore } from '../../device/device.js';
import type { UploadField } from '../../device/accelerator/assembly.js';
import { ROW_DMA_MIN_BYTES } from '../../device/accelerator/in-place-rows.js';
import type { MappedColumns } from '../../device/device.js';
import type { VramPool } from '../../device/device.js';
import type { TierCounters } from '../../cache/tier-counters.js';
import type { Governor } from '../governor.js';
import type { EpochStats } from '../stats.js';
import type { AssembleContext, BatchAssembler } from './assembler.js';

export class InPlaceAssembler implements BatchAssembler {
  readonly route = 'in-place';
  readonly pool: VramPool | undefined;
  readonly #device: InPlaceDevice;
  readonly #pooling: PoolingDevice | undefined;
  readonly #mapped: MappedColumns;
  readonly #fields: readonly UploadField[];
  readonly #governor: Governor;
  readonly #batchBytes: number;
  readonly #counters: TierCounters;

  constructor(init: {
    device: InPlaceDevice; pooling: PoolingDevice | undefined; pool: VramPool | undefined; mapped: MappedColumns;
    fields: readonly UploadField[]; governor: Governor; batchBytes: number; counters: TierCounters;
  }) {
    this.#device = init.device;
    this.#pooling = init.pooling;
    this.pool = init.pool;
    this.#mapped = init.mapped;
    this.#fields = init.fields;
    this.#governor = init.governor;
    this.#batchBytes = init.batchBytes;
    this.#counters = init.counters;
    if (this.pool !== undefined && init.fields.every((f) => f.rowBytes < ROW_DMA_MIN_BYTES)) this.pool.wholeOnly = true;
  }

  beginEpoch(stats: EpochStats): void {
    stats.vramPool = this.pool !== undefined ? this.pool.payoff.begin(this.pool) : 'none';
  }

  endEpoch(stats: EpochStats): void {
    this.pool?.payoff.end(stats);
  }

  async assemble(ids: Uint32Array, context: AssembleContext): Promise<DeviceBatch> {
    const pool = this.pool;
    pool?.maybeInstall(this.#governor.honestResizeDone, this.#governor.target, this.#batchBytes);
    // The retry loop is written out: no closure per batch on this hot path.
    for (let attempt = 0; ; attempt++) {
      try {
        const served = pool?.figures.rowsServed ?? 0;
        // A dormant pool (NOTE [A pool that does not pay stays dormant]) leaves every row to the in-place reads.
        const memory = this.#device.uploadRows(ids, this.#mapped, this.#fields, pool?.payoff.stitching === true ? pool : undefined);
        const fromHost = ids.length - ((pool?.figures.rowsServed ?? 0) - served);
        this.#counters.add('sourceRows', fromHost);
        context.stats.rowsFetched += fromHost;
        return memory;
      } catch (error) {
        await context.backOff(error, attempt);
      }
    }
  }

  relieve(): void {
    const buffers = this.pool?.evictOneSlab();
    if (buffers !== undefined) this.#pooling?.releaseSlabs(buffers);
  }

  promote(length: number): ResidentStore | undefined {
    const pool = this.pool;
    return pool !== undefined && pool.complete && this.#pooling !== undefined ? this.#pooling.promote(pool, length, this.#fields) : undefined;
  }

  /** Unmap the source (after the copy stream passes its last reader), then the pool's slabs. */
  close(): void {
    this.#mapped.release();
    const slabs = this.pool?.release();
    if (slabs !== undefined) this.#pooling?.releaseSlabs(slabs);
  }
}
