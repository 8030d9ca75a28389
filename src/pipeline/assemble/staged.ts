// Internal: not exported from the package entry.
// The staged route without a pool: rows read through the fetcher (main thread or reader workers)
// into staging memory the device adopts (CPU) or copies in one async copy per field (accelerator).

import type { Device, DeviceBatch, ResidentStore } from '../../device/device.js';
import type { PickKeys } from '../../sampler/pick-key.js';
import type { Fetcher } from '../../reader/fetcher.js';
import type { EpochStats } from '../stats.js';
import { type AssembleContext, type BatchAssembler, fetchRows } from './assembler.js';

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

  async assemble(ids: Uint32Array, context: AssembleContext, keys?: PickKeys): Promise<DeviceBatch> {
    const staged = await fetchRows(this.#fetcher, ids, context, keys);
    // The retry loop is written out: no closure per batch on this hot path.
    for (let attempt = 0; ; attempt++) {
      try {
        return this.#device.upload(staged);
      } catch (error) {
        try {
          await context.backOff(error, attempt);
        } catch (final) {
          staged.done?.();
          throw final;
        }
      }
    }
  }

  relieve(): void {}

  promote(): ResidentStore | undefined {
    return undefined;
  }

  close(): void {}
}
