// Internal: not exported from the package entry.
// The staged route without a pool: rows read through the fetcher (main thread or reader workers)
// into staging memory the device adopts (CPU) or copies in one async copy per field (accelerator).

import type { Device, DeviceBatch, ResidentStore } from '../../device/device.js';
import type { Fetcher } from '../fetcher.js';
import type { EpochStats } from '../stats.js';
import { type AssembleContext, type BatchAssembler, fetchRows, withBackOff } from './assembler.js';

export class StagedAssembler implements BatchAssembler {
  readonly route = 'staged';
  readonly pool = undefined;
  readonly #fetcher: Fetcher;
  readonly #device: Device;

  constructor(fetcher: Fetcher, device: Device) {
    this.#fetcher = fetcher;
    this.#device = device;
  }

  beginEpoch(stats: EpochStats): void {
    stats.vramPool = 'none';
  }

  endEpoch(_stats: EpochStats): void {}

  async assemble(ids: Uint32Array, context: AssembleContext): Promise<DeviceBatch> {
    const staged = await fetchRows(this.#fetcher, ids, context);
    try {
      return await withBackOff(context, () => this.#device.upload(staged));
    } catch (error) {
      staged.done?.();
      throw error;
    }
  }

  relieve(): void {}

  promote(): ResidentStore | undefined {
    return undefined;
  }

  close(): void {}
}
