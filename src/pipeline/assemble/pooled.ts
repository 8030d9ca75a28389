// Internal: not exported from the package entry.
// The staged route with a VRAM pool: each batch is planned against the pool before it is read, so
// pooled rows never cross the bus (only the misses are fetched and stitched in on the device), and
// fresh rows are captured as they cross. The pool's policy lives here: its one budget decision
// (NOTE [VRAM pool budget]), its payoff phase per epoch (NOTE [A pool that does not pay stays
// dormant]), eviction under pressure and promotion to resident once it holds every sample.

import type { DeviceBatch, PoolingDevice, ResidentStore } from '../../device/device.js';
import type { UploadField } from '../../device/accelerator/assembly.js';
import type { VramPool } from '../../device/device.js';
import type { StagedBatch } from '../../dataset/source-reader.js';
import type { Fetcher } from '../../reader/fetcher.js';
import type { Governor } from '../governor.js';
import type { EpochStats } from '../stats.js';
import { type AssembleContext, type BatchAssembler, fetchRows } from './assembler.js';

export class PooledAssembler implements BatchAssembler {
  readonly route = 'staged';
  readonly pool: VramPool;
  readonly #fetcher: Fetcher;
  readonly #device: PoolingDevice;
  readonly #fields: readonly UploadField[];
  readonly #governor: Governor;
  readonly #batchBytes: number;

  constructor(init: { fetcher: Fetcher; device: PoolingDevice; pool: VramPool; fields: readonly UploadField[]; governor: Governor; batchBytes: number }) {
    this.#fetcher = init.fetcher;
    this.#device = init.device;
    this.pool = init.pool;
    this.#fields = init.fields;
    this.#governor = init.governor;
    this.#batchBytes = init.batchBytes;
  }

  beginEpoch(stats: EpochStats): void {
    stats.vramPool = this.pool.payoff.begin(this.pool);
  }

  endEpoch(stats: EpochStats): void {
    this.pool.payoff.end(stats);
  }

  async assemble(ids: Uint32Array, context: AssembleContext): Promise<DeviceBatch> {
    const pool = this.pool;
    pool.maybeInstall(this.#governor.honestResizeDone, this.#governor.target, this.#batchBytes);
    // A dormant pool (its stitching did not pay) leaves every row to the bus.
    let split = pool.active && pool.payoff.stitching ? pool.partition(ids) : undefined;
    let generation = pool.generation;
    let staged: StagedBatch | undefined = await this.#read(ids, split, context);
    try {
      for (let attempt = 0; ; attempt++) {
        if (split !== undefined && split.hits.length > 0 && pool.generation !== generation) {
          // An eviction freed rows this batch planned to gather: read it whole instead.
          staged.done?.();
          split = undefined;
          staged = undefined;
          staged = await this.#read(ids, split, context);
          generation = pool.generation;
        }
        try {
          return this.#device.upload(staged, { ids, pool, fields: this.#fields, split });
        } catch (error) {
          await context.backOff(error, attempt);
        }
      }
    } catch (error) {
      staged?.done?.();
      throw error;
    }
  }

  /** The rows the pool does not hold (all of them without a split); none to read when every row is pooled. */
  #read(ids: Uint32Array, split: { readonly hits: readonly number[]; readonly misses: readonly number[] } | undefined, context: AssembleContext): Promise<StagedBatch> {
    if (split === undefined || split.hits.length === 0) return fetchRows(this.#fetcher, ids, context);
    if (split.misses.length === 0) return Promise.resolve({ tensors: [], owned: false });
    const misses = new Uint32Array(split.misses.length);
    for (let k = 0; k < misses.length; k++) misses[k] = ids[split.misses[k]!]!;
    return fetchRows(this.#fetcher, misses, context);
  }

  relieve(): void {
    const buffers = this.pool.evictOneSlab();
    if (buffers !== undefined) this.#device.releaseSlabs(buffers);
  }

  promote(length: number): ResidentStore | undefined {
    return this.pool.complete ? this.#device.promote(this.pool, length, this.#fields) : undefined;
  }

  close(): void {
    this.#device.releaseSlabs(this.pool.release());
  }
}
