// Internal: not exported from the package entry.
// An accelerator (CUDA or sim) as the pipeline's device: the composition of its concepts, each in
// its own file — stream-ordered memory reuse (stream-memory.ts), batch memory and its release
// (batch-memory.ts), staged uploads and the VRAM pool's stitch and capture (staged-upload.ts,
// assembly.ts), in-memory columns read in place (mapped-columns.ts, in-place-rows.ts), resident
// columns and the pool's promotion (resident-columns.ts). Staged rows cross on the copy stream;
// every batch carries a ready event; the consumer stream waits on it at delivery; a released
// batch's device memory is reused only after an event recorded on the consumer stream at release.
// The rule: no host or device memory is reused while a queued operation may still read it.

import type { StagedBatch } from '../../dataset/source-reader.js';
import type { DType, StorageOf } from '../../tensor/dtype.js';
import type { Tensor } from '../../tensor/tensor.js';
import type { Backend, DeviceBuffer } from '../backend.js';
import type { Assembly } from './assembly.js';
import { type BatchOwner, BatchMemory } from './batch-memory.js';
import type { Device, DeviceBatch, InPlaceDevice, MemInfo, PoolingDevice, ResidentStore } from '../device.js';
import { uploadRows } from './in-place-rows.js';
import { type JpegDevice, jpegDevice } from '../jpeg/jpeg-batch.js';
import { mapColumns } from './mapped-columns.js';
import { promotePool, residentColumns } from './resident-columns.js';
import { uploadStaged } from './staged-upload.js';
import { StreamMemory } from './stream-memory.js';
import type { KernelHost } from '../user-kernel.js';
import { VramPool } from './vram-pool.js';
import { PAGE_BYTES } from '../../reader/staging.js';

export class AcceleratorDevice implements Device {
  readonly backend: Backend;
  readonly probesMemory = true;
  readonly autoRelease = true;
  readonly #unpins = new Map<SharedArrayBuffer, () => void>();
  readonly #memory: StreamMemory;
  /** Buffers of batches not yet released, freed at close (their tensors then refuse to be read). */
  readonly #live = new Set<readonly DeviceBuffer[]>();
  readonly allocate: <D extends DType>(dtype: D, length: number) => StorageOf[D];
  readonly pooling: PoolingDevice;
  readonly inPlace: InPlaceDevice;
  readonly kernels: KernelHost | undefined;
  readonly jpeg: JpegDevice;
  #closed = false;
  /** Host-to-device bytes copied so far (batches, tables, resident columns). */
  h2dBytes = 0;
  readonly #assembly: Assembly;

  constructor(backend: Backend) {
    this.backend = backend;
    const memory = new StreamMemory(backend, (sab) => this.pinStaging(sab), (sab) => this.#unpin(sab));
    this.#memory = memory;
    this.allocate = (dtype, length) => {
      memory.retire();
      return memory.host.acquire(dtype, length);
    };
    const owner: BatchOwner = { memory, live: this.#live, closed: () => this.#closed };
    const assembly: Assembly = {
      memory,
      countH2d: (bytes) => (this.h2dBytes += bytes),
      batch: (parts, ready) => new BatchMemory(owner, parts, ready),
    };
    this.#assembly = assembly;
    this.pooling = {
      createPool: (rowBytes, length, enabled) => new VramPool(backend, rowBytes, length, enabled),
      upload: (staged, route) => uploadStaged(assembly, staged, route),
      releaseSlabs: (buffers) => {
        for (const b of buffers) memory.freeAfterCopies(b);
      },
      promote: (pool, length, fields) => promotePool(assembly, pool, length, fields),
    };
    this.inPlace = {
      mapColumns: (columns) => mapColumns(memory, columns),
      uploadRows: (ids, mapped, fields, pool) => uploadRows(assembly, ids, mapped, fields, pool),
    };
    this.jpeg = jpegDevice(assembly, backend);
    this.kernels = 'loadKernel' in backend ? (backend as unknown as KernelHost) : undefined;
  }

  get name(): string {
    return this.backend.name;
  }

  memInfo(): MemInfo | undefined {
    return this.backend.memInfo();
  }

  live(): { device: number; pinned: number } {
    return this.backend.live();
  }

  pinStaging(memory: SharedArrayBuffer): number {
    const base = this.backend.pageOffset(memory);
    const length = Math.floor((memory.byteLength - base) / PAGE_BYTES) * PAGE_BYTES;
    this.#unpins.set(memory, this.backend.pin(memory, base, length));
    return base;
  }

  #unpin(memory: SharedArrayBuffer): void {
    const unpin = this.#unpins.get(memory);
    this.#unpins.delete(memory);
    unpin?.();
  }

  upload(staged: StagedBatch): DeviceBatch {
    return uploadStaged(this.#assembly, staged, undefined);
  }

  resident(columns: readonly Tensor[]): ResidentStore {
    return residentColumns(this.#assembly, columns);
  }

  /** Block until the consumer stream's queued work is done, then retire what completed. */
  synchronize(): void {
    const event = this.backend.record('consumer');
    this.backend.synchronize(event);
    this.backend.recycle(event);
    this.#memory.retire();
  }

  /** Drain the streams, free device memory, unpin staging. Step 9 of NOTE [Loader shutdown] (loader.ts): after every stage that enqueues work here has stopped. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#memory.drain();
    for (const buffers of this.#live) for (const b of buffers) this.backend.free(b);
    this.#live.clear();
    this.#memory.trim();
    this.#memory.host.clear();
    for (const unpin of this.#unpins.values()) unpin();
    this.#unpins.clear();
    this.backend.close();
  }
}
