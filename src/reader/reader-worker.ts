// Internal: the entry of a reader worker (worker_threads). It opens the dataset from its source
// spec, attaches the shared sample tiers, and answers read requests by writing rows straight into
// the staging slot named in the request. The rule: this file imports nothing that runs only on the
// main thread; it never writes to a slot whose token no longer names its job (the job was
// cancelled), and it reports every request exactly once: done, failed or cancelled.

import { setFormatCacheReaders } from '../base/budget.js';
import { parentPort, workerData } from 'node:worker_threads';
import { DiskStage, type DiskStageShared } from '../cache/disk-stage.js';
import { SampleCache, type SampleCacheShared } from '../cache/sample-cache.js';
import { TierCounters } from '../cache/tier-counters.js';
import type { Schema } from '../dataset/schema.js';
import { type SourceSpec, openSource } from '../dataset/source-spec.js';
import { closeDataset } from '../dataset/dataset.js';
import { SourceReader } from '../dataset/source-reader.js';
import type { PickKeys } from '../sampler/pick-key.js';
import { type Slot, type SlotLayout, slotViews } from './staging.js';

export interface ReaderInit {
  readonly index: number;
  readonly spec: SourceSpec;
  readonly schema: Schema;
  readonly layout: SlotLayout;
  readonly tokens: Int32Array;
  readonly slots: readonly Slot[];
  readonly cache: SampleCacheShared | undefined;
  readonly disk: DiskStageShared | undefined;
  readonly counters: BigInt64Array;
  readonly purityProbe: boolean;
  /** Reader threads in the pool: they split the format caches' share (NOTE [The budget law]). */
  readonly readers: number;
}

export type ToWorker =
  | { readonly t: 'read'; readonly job: number; readonly slot: number; readonly start: number; readonly rows: number; readonly ids: Uint32Array; readonly keys?: PickKeys | undefined }
  | { readonly t: 'cancel'; readonly job: number }
  | { readonly t: 'slots'; readonly slots: readonly Slot[] }
  | { readonly t: 'chunks'; readonly chunks: readonly SharedArrayBuffer[] }
  | { readonly t: 'close' };

export interface WireError {
  readonly name: string;
  readonly message: string;
  readonly code: string | undefined;
  readonly stack: string | undefined;
}

export type FromWorker =
  | { readonly t: 'ready' }
  | { readonly t: 'done' | 'cancelled'; readonly job: number; readonly start: number }
  | { readonly t: 'failed'; readonly job: number; readonly start: number; readonly error: WireError }
  | { readonly t: 'warn'; readonly message: string };

const port = parentPort!;
const init = workerData as ReaderInit;
const post = (m: FromWorker) => port.postMessage(m);
const warn = (message: string) => post({ t: 'warn', message });

setFormatCacheReaders(init.readers);
const dataset = await openSource(init.spec);
const cache = init.cache ? SampleCache.attach(init.cache) : undefined;
const disk = init.disk ? DiskStage.attach(init.disk, warn) : undefined;
const counters = new TierCounters(init.counters);
const tiers = cache || disk ? { cache, disk, counters, purityProbe: init.purityProbe } : undefined;
const reader = new SourceReader(dataset, init.schema, tiers ?? { cache: undefined, disk: undefined, counters, purityProbe: false });
const slots: Slot[] = [...init.slots];
const running = new Map<number, AbortController>();

port.on('message', (m: ToWorker) => {
  switch (m.t) {
    case 'read':
      void read(m);
      break;
    case 'cancel':
      running.get(m.job)?.abort();
      break;
    case 'slots':
      slots.push(...m.slots.slice(slots.length));
      break;
    case 'chunks':
      cache?.addChunks(m.chunks);
      break;
    case 'close':
      disk?.close();
      // The worker opened this dataset and owns it: let it release files and handles (threads share
      // the process's file table, so descriptors would outlive the worker).
      void closeDataset(dataset);
      port.close();
      break;
  }
});

async function read(m: Extract<ToWorker, { t: 'read' }>): Promise<void> {
  const live = () => Atomics.load(init.tokens, m.slot) === m.job;
  if (!live()) return post({ t: 'cancelled', job: m.job, start: m.start });
  const controller = new AbortController();
  running.set(m.job, controller);
  try {
    const outs = slotViews(init.schema, init.layout, slots[m.slot]!, m.rows);
    await reader.readInto(m.ids, { signal: controller.signal }, outs, m.start, () => !live(), m.keys);
    post(live() ? { t: 'done', job: m.job, start: m.start } : { t: 'cancelled', job: m.job, start: m.start });
  } catch (error) {
    if (!live() || controller.signal.aborted) post({ t: 'cancelled', job: m.job, start: m.start });
    else post({ t: 'failed', job: m.job, start: m.start, error: toWire(error) });
  } finally {
    running.delete(m.job);
  }
}

function toWire(error: unknown): WireError {
  if (error instanceof Error) {
    return { name: error.name, message: error.message, code: (error as { code?: string }).code, stack: error.stack };
  }
  return { name: 'Error', message: `non-Error value thrown: ${String(error)}`, code: undefined, stack: undefined };
}

post({ t: 'ready' });
