// Internal: not exported from the package entry.
// What `DataLoader.create` builds, once: the dataset opened and probed, the order, and either the
// resident store or the streaming parts with the one route (BatchAssembler) its batches take. The
// rule: a route is chosen by what the dataset and the device can do (capabilities: in-memory
// columns, `device.pooling`, `device.inPlace`), never by their classes, and never changes later
// except by promotion to resident between epochs.

import { totalmem } from 'node:os';
import { isDeviceOutOfMemory } from '../device/backend.js';
import type { Device, InPlaceDevice, JpegDecoder, MappedColumns, ResidentStore } from '../device/device.js';
import { vramPoolKilled } from '../device/accelerator/vram-pool.js';
import { type AnyDataset, closeDataset, hintOf, isKeyed } from '../dataset/dataset.js';
import { type ColumnsSource, hasColumns, kColumns } from '../dataset/arrays-source.js';
import { type HasParts, type PlannedReads, contentOf, followsPlan, hasParts, hasRaggedFields } from '../dataset/capabilities.js';
import { type Schema, raggedSchema } from '../dataset/schema.js';
import { SourceReader, type StagedBatch } from '../dataset/source-reader.js';
import { isReopenable, isSourceSpec, openSource, specOf, type SourceSpec } from '../dataset/source-spec.js';
import { DiskStage } from '../cache/disk-stage.js';
import { SampleCache } from '../cache/sample-cache.js';
import { TierCounters } from '../cache/tier-counters.js';
import { type LoaderState, type OrderShape, checkResume } from '../distributed/resume.js';
import { LoaderError, describeCause, emptyDatasetError, invalidDatasetError, invalidOption, namesCount, needsSampleLayer, pinSourceFailed, show } from '../errors.js';
import { DEFAULT_BLOCK_SAMPLES, type ResolvedBlockShuffle, type ResolvedOptions } from '../options.js';
import { type BlockLayout, BlockSampler, fixedBlockStarts } from '../sampler/block-sampler.js';
import { RandomSampler } from '../sampler/random-sampler.js';
import type { Sampler } from '../sampler/sampler.js';
import { SequentialSampler } from '../sampler/sequential-sampler.js';
import { allocStorage, elementSize } from '../tensor/dtype.js';
import type { Tensor } from '../tensor/tensor.js';
import type { BatchAssembler } from './assemble/assembler.js';
import { InPlaceAssembler } from './assemble/in-place.js';
import { PooledAssembler } from './assemble/pooled.js';
import { StagedAssembler } from './assemble/staged.js';
import { DecodeAssembler } from './assemble/decode/decode.js';
import { type EncodedImages, encodedImagesOf } from '../dataset/formats/images/encoded-images.js';
import { type Probe, canFitResident, pinSourceFits, reserveFits } from '../base/budget.js';
import type { DeliveryConfig } from './delivery.js';
import { type Fetcher, MainThreadFetcher } from '../reader/fetcher.js';
import { Governor } from './governor.js';
import { ReaderPool, resolveWorkers } from '../reader/reader-pool.js';
import { StreamingParts } from './streaming-parts.js';
import { type BatchPlanner, FixedPlanner, PackPlanner, TokenPlanner } from './batch-planner.js';
import { planRagged, raggedDelivery } from './ragged-batch.js';
import type { CollateSpec } from '../collate/collate.js';
import { type MixSource, checkMixParts, mixSampler, mixtureOf } from '../dataset/mix-source.js';
import { resolveLengths } from '../sampler/token-batches.js';
import { FieldLengths } from './field-lengths.js';
import { warn } from '../base/warnings.js';

export interface Built {
  readonly datasetLength: number;
  readonly sampler: Sampler;
  /** Cuts each epoch's order into this rank's batches. */
  readonly planner: BatchPlanner;
  readonly delivery: DeliveryConfig;
  readonly order: OrderShape;
  readonly resume: LoaderState | undefined;
  /** The dataset this loader opened from a source spec (and so closes). */
  readonly owned: AnyDataset | undefined;
  readonly resident?: ResidentStore;
  /** Samples whose read failed while the resident store was built: id → cause. */
  readonly residentFailed?: ReadonlyMap<number, unknown>;
  readonly streaming?: StreamingParts;
  readonly residentBuildMs: number;
  /** The main thread's dataset when it follows each epoch's plan (`PlannedReads`). */
  readonly follower?: PlannedReads;
}

/**
 * Refuse an activation reserve larger than the device's memory (`knob` names the option or method).
 * A device without a memory probe (the CPU) has no reserve to check: it ignores the option.
 */
export function checkActivationReserve(knob: string, bytes: number, device: Device): void {
  const info = device.probesMemory ? device.memInfo() : undefined;
  if (info === undefined || reserveFits(bytes, info)) return;
  throw invalidOption(
    knob, `a byte count ≤ the memory of ${device.name} (${info.total} bytes, ${Math.max(info.total - info.used, 0)} free)`, bytes,
    "It is the memory a training step needs beyond what the device already uses: declare that, or leave it out",
  );
}

/** Open, probe and build; on failure everything opened here is closed again (the device is the caller's). */
export async function buildLoader(dataset: AnyDataset | SourceSpec, opts: ResolvedOptions, device: Device): Promise<Built> {
  let ds: AnyDataset | undefined;
  try {
    return await buildFrom(dataset, opts, device, (opened) => (ds = opened));
  } catch (error) {
    if (isSourceSpec(dataset)) await closeDataset(ds);
    throw error;
  }
}

async function buildFrom(dataset: AnyDataset | SourceSpec, opts: ResolvedOptions, device: Device, opened: (ds: AnyDataset) => void): Promise<Built> {
  if (opts.activationReserve !== undefined) checkActivationReserve('activationReserve', opts.activationReserve, device);
  const probeContext = { signal: new AbortController().signal };
  // Only a loader that starts reader workers asks for the spec: in-memory columns copy themselves
  // into shared memory when it is made.
  const reopenable = isReopenable(dataset);
  let ds: AnyDataset;
  try {
    ds = isSourceSpec(dataset) ? await openSource(dataset) : dataset;
    opened(ds);
  } catch (cause) {
    throw wrapDatasetError('opening the source failed', cause);
  }
  const length = checkDataset(ds);
  let schema: Schema;
  try {
    schema = await SourceReader.probe(ds, probeContext);
  } catch (cause) {
    throw wrapDatasetError("reading sample 0 to learn the dataset's shape failed", cause);
  }
  const count = schema.fields.length;
  if (opts.names !== undefined && opts.names.length !== count) {
    throw namesCount(opts.names.length, count);
  }
  const perSample = SourceReader.isPerSample(ds);
  if (opts.diskStage !== undefined && (!perSample || !opts.sampleCache)) {
    throw needsSampleLayer(perSample);
  }
  checkKeyed(ds, opts);
  if (opts.mode === 'resident' && encodedImagesOf(ds)?.request === 'gpu') {
    throw invalidOption('mode', "'streaming' or 'auto' with decode: 'gpu'", opts.mode, "GPU decoding assembles each batch from the files: drop mode, or pass decode: 'cpu'");
  }
  const names = Object.freeze(opts.names ?? schema.keys ?? Array.from({ length: count }, (_, i) => String(i)));
  // A mixture's parts must agree on their fields before any batch draws from them; a ragged field —
  // declared by the dataset, or named by `collate` or `pack.field` — only in its trailing shape.
  const mixture = mixtureOf(ds);
  if (mixture !== undefined) {
    const ragged = new Set<string>([...(hasRaggedFields(ds) ? ds.ragged : []), ...Object.keys(opts.collate ?? {}), ...(opts.pack?.field !== undefined ? [opts.pack.field] : [])]);
    await checkMixParts(ds as MixSource, schema, probeContext, (field) => ragged.has(names[field]!));
  }
  // NOTE [ragged rows] (schema.ts): ragged fields become fixed-capacity rows plus hidden lengths.
  // A source that learns its lengths by reading (tokenized text) computes them once, only when asked.
  // NOTE [per-field lengths] (field-lengths.ts): each ragged field's capacity from its own lengths.
  const lengths = await FieldLengths.load(ds, names, opts, length);
  const ragged = planRagged(ds, names, opts.collate, opts.pack, lengths, (field) => schema.fields[names.indexOf(field)]?.dtype);
  if (ragged.plans.size > 0) {
    checkRaggedDataset(ds, opts, device, ragged.specs);
    schema = raggedSchema(schema, names, ragged.plans, length);
  }
  const picks = length * opts.augment;
  if (picks > 2 ** 32 - 2) throw invalidOption('augment', `small enough that dataset length × augment stays below 2^32 − 1 (${length} × ${opts.augment} = ${picks})`, opts.augment);
  // A mixture orders its own picks (NOTE [Mixture order], sampler/mix-sampler.ts).
  if (mixture !== undefined && opts.sampler !== undefined) throw invalidOption('sampler', 'left out for a mixture', 'a custom sampler', 'sources.mix orders its own picks: drop `sampler`, or load the parts with sources.concat');
  const probe = device.probesMemory ? () => device.memInfo() : undefined;
  const resident = opts.mode === 'resident' || (opts.mode === 'auto' && autoResident(ds, length, schema.sampleBytes, probe));
  if (mixture !== undefined && opts.block !== undefined) {
    throw invalidOption('shuffle', 'true or false for sources.mix', 'a block shuffle', "A mixture orders its own picks, each part's epochs shuffled whole: drop the block shuffle, or load the parts with sources.concat");
  }
  const blocks = opts.block === undefined || mixture !== undefined ? undefined : blockSampler(ds, length, opts, opts.block);
  const kind = opts.sampler !== undefined ? 'custom' : mixture !== undefined ? 'mix' : blocks !== undefined ? 'block' : opts.shuffle ? 'random' : 'sequential';
  const order: OrderShape = {
    seed: opts.seed, datasetLength: length, augment: opts.augment, picks: opts.sampler?.length ?? mixture?.options.length ?? picks, order: kind, ...contentOf(ds),
    ...(blocks !== undefined ? { block: { blocks: blocks.blocks, bounds: blocks.boundsHash, window: opts.block!.window, within: opts.block!.within } } : {}),
  };
  const resume = opts.resume === undefined ? undefined : checkResume(opts.resume, order);
  // NOTE [Blocks per node]: the epoch a state resumes keeps the layout it was saved with.
  const saved = resume?.block;
  if (blocks !== undefined && saved !== undefined) blocks.resumeWith(resume!.epoch, { streams: saved.streams ?? 1, chunk: saved.chunk ?? 1 });
  const sampler = opts.sampler ??
    (mixture !== undefined
      ? mixSampler(mixture, { seed: opts.seed, shuffle: opts.shuffle, augment: opts.augment, batchSize: opts.batchSize, resume })
      : blocks ?? (opts.shuffle ? new RandomSampler(picks, opts.seed).planAhead() : new SequentialSampler(picks)));
  const planner = batchPlanner(opts, length, sampler, resume, lengths);
  const delivery: DeliveryConfig = {
    names, transform: opts.transform, augment: opts.augment, seed: opts.seed,
    probeTransform: opts.transform !== undefined && process.env.NODE_ENV !== 'production' ? true : undefined,
    ragged: raggedDelivery(schema, names, ragged, planner instanceof PackPlanner ? planner : undefined, opts.pack),
  };
  const base = { datasetLength: length, sampler, planner, delivery, order, resume, owned: isSourceSpec(dataset) ? ds : undefined, ...(followsPlan(ds) ? { follower: ds } : {}) };

  if (resident) {
    const t0 = performance.now();
    let all: StagedBatch & { readonly failed: ReadonlyMap<number, unknown> };
    try {
      all = await new SourceReader(ds, schema).readAll(probeContext, allocStorage);
    } catch (cause) {
      throw wrapDatasetError("reading the dataset into memory (resident mode) failed. Fix the dataset, or pass mode: 'streaming' to read it batch by batch", cause);
    }
    try {
      const store = device.resident(all.tensors as readonly Tensor[]);
      return { ...base, resident: store, residentFailed: all.failed, residentBuildMs: performance.now() - t0 };
    } catch (error) {
      // A real device out-of-memory while uploading falls back to streaming, same knobs and sampler.
      if (!isDeviceOutOfMemory(error)) throw error;
      warn('residentFallback', `stoker: the dataset did not fit on ${device.name} (${describeCause(error)}); streaming instead`);
    }
  }
  return { ...base, streaming: await buildStreaming(dataset, ds, schema, length, opts, device, reopenable, perSample, probe, planner.maxRows), residentBuildMs: 0 };
}

async function buildStreaming(
  dataset: AnyDataset | SourceSpec, ds: AnyDataset, schema: Schema, length: number, opts: ResolvedOptions, device: Device,
  reopenable: boolean, perSample: boolean, probe: Probe, rows: number,
): Promise<StreamingParts> {
  const preferred = reopenable ? hintOf(ds, 'readerWorkers', 0) : undefined;
  // NOTE [decode: 'gpu']: the device decodes the files; the host only reads them, on the main thread.
  const decode = decodeRoute(ds, device);
  const mapped = decode === undefined && device.inPlace !== undefined && hasColumns(ds) ? mapSource(device.inPlace, device.name, ds, opts) : undefined;
  // A mapped source is read by the device itself, a decoded one by the decode route: no reader has anything to do.
  const workers = mapped !== undefined || decode !== undefined ? 0 : resolveWorkers(opts.workers ?? preferred ?? (reopenable && !hasColumns(ds) ? 'auto' : 0));
  if (workers > 0 && !reopenable) {
    throw invalidOption(
      'workers',
      '0 for a plain dataset object',
      opts.workers,
      'Reader workers open the dataset themselves: describe it with sources.module(moduleUrl, exportName, options), or read on the main thread with workers: 0',
    );
  }
  const counters = new TierCounters();
  // NOTE [keyed reads] (dataset.ts): a keyed dataset's samples differ per pick, so no tier holds them.
  const keyed = isKeyed(ds);
  const cache = perSample && opts.sampleCache && !keyed && decode === undefined ? SampleCache.create(length, schema.sampleBytes) : undefined;
  const warnGeneric = (message: string) => warn('generic', message);
  let disk: DiskStage | undefined;
  if (opts.diskStage !== undefined) {
    disk = DiskStage.create({ gigabytes: opts.diskStage.gigabytes, dir: opts.diskStage.dir, payloadBytes: schema.sampleBytes, length, warn: warnGeneric });
  }
  const purityProbe = process.env.NODE_ENV !== 'production';
  let fetcher: Fetcher;
  let readers: ReaderPool | undefined;
  if (workers > 0) {
    try {
      readers = await ReaderPool.start({
        spec: specOf(dataset)!, workers, schema, batchSize: rows, cache: cache?.shared, disk: disk?.shared, counters: counters.cells, purityProbe, warn: warnGeneric, keyed,
        pin: (slot) => device.pinStaging(slot),
      });
    } catch (error) {
      disk?.close();
      throw error;
    }
    fetcher = readers;
  } else {
    fetcher = new MainThreadFetcher(new SourceReader(ds, schema, { cache, disk, counters, purityProbe }), device.allocate);
  }
  // NOTE [a window for decode processes] (image-decoding.ts): a source may ask for a deeper window on the CPU.
  const hostDepth = hintOf(ds, 'prefetch', 1);
  const governor = new Governor(
    { sampleBytes: schema.sampleBytes, batchSize: rows, probe, vramMaxUsage: opts.vramMaxUsage, hostDepth },
    opts.prefetch,
    opts.activationReserve,
  );
  const fields = schema.fields.map((f) => ({ dtype: f.dtype, shape: f.shape, rowBytes: f.rowSize * elementSize(f.dtype) }));
  const pooling = device.pooling;
  const pool = keyed || decode !== undefined ? undefined : pooling?.createPool(fields.map((f) => f.rowBytes), length, opts.vramPool && !vramPoolKilled());
  const batchBytes = schema.sampleBytes * rows;
  let assembler: BatchAssembler;
  if (decode !== undefined) {
    assembler = new DecodeAssembler(decode.source, device.jpeg!, decode.decoder, schema);
  } else if (mapped !== undefined) {
    assembler = new InPlaceAssembler({ device: device.inPlace!, pooling, pool, mapped, fields, governor, batchBytes, counters });
  } else if (pooling !== undefined && pool !== undefined) {
    assembler = new PooledAssembler({ fetcher, device: pooling, pool, fields, governor, batchBytes });
  } else {
    assembler = new StagedAssembler(fetcher, device);
  }
  return new StreamingParts({ fetcher, pool: readers, governor, counters, cache, disk, sampleBytes: schema.sampleBytes, rowsPerBatch: rows, device, assembler });
}

let gpuDecodeWarned = false;

/**
 * NOTE [decode: 'gpu'] An image source that can hand over its encoded files (encoded-images.ts)
 * asks for the decode route with `decode: 'gpu'`, or may get it with 'auto'. 'gpu' needs a device
 * with the `jpeg` capability (an accelerator; on `sim` the CPU decodes behind it, so CI runs the
 * route), RGB output, and a decoder that opens (nvJPEG on CUDA): otherwise a typed error naming
 * the knob. 'auto' takes the route only on a device whose decoder is the GPU's own (CUDA) and when
 * nvJPEG loads; without it, one warning per process, then the CPU placement as before.
 */
export function decodeRoute(ds: AnyDataset, device: Device): { source: EncodedImages; decoder: JpegDecoder } | undefined {
  const source = encodedImagesOf(ds);
  if (source === undefined || source.request === 'off') return undefined;
  const asked = source.request === 'gpu';
  const jpeg = device.jpeg;
  if (jpeg === undefined) {
    if (!asked) return undefined;
    throw invalidOption('decode', `'cpu', 'threads', 'processes' or 'auto' on the ${device.name} device`, 'gpu', "GPU decoding needs an accelerator: pass device: 'cuda' (or 'sim' to test the plumbing), or decode: 'cpu'");
  }
  if (!asked && !jpeg.native) return undefined;
  if (source.channels !== 3) {
    if (!asked) return undefined;
    throw invalidOption('decode', `'cpu' for channels: ${source.channels}`, 'gpu', "The GPU decoder writes RGB: pass channels: 3, or decode: 'cpu'");
  }
  try {
    return { source, decoder: jpeg.open() };
  } catch (error) {
    if (asked) throw error;
    if (!gpuDecodeWarned) {
      gpuDecodeWarned = true;
      warn('gpuDecode', `stoker: decode 'auto' found no GPU JPEG decoder on ${device.name} (${describeCause(error)}); decoding images on the CPU. Pass decode: 'cpu' to silence this`);
    }
    return undefined;
  }
}

/**
 * Map an in-memory source for an accelerator (option `pinSource`): undefined when it is off, when
 * 'auto' finds the columns too large for page-locked memory (NOTE [The budget law]), or when 'auto'
 * meets a driver that refuses (then with a warning; `true` makes that an error).
 */
function mapSource(device: InPlaceDevice, name: string, ds: ColumnsSource, opts: ResolvedOptions): MappedColumns | undefined {
  if (opts.pinSource === false) return undefined;
  const columns = ds[kColumns].tensors;
  let bytes = 0;
  for (const c of columns) bytes += c.byteLength;
  if (opts.pinSource === 'auto' && !pinSourceFits(bytes, totalmem())) return undefined;
  try {
    return device.mapColumns(columns);
  } catch (error) {
    const size = bytes >= 2 ** 30 ? `${(bytes / 2 ** 30).toFixed(2)} GiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`;
    const why = `page-locking the in-memory source (${size}) for ${name} failed: ${describeCause(error)}`;
    if (opts.pinSource === true) throw pinSourceFailed(why, error);
    warn('pinSource', `stoker: ${why}; streaming through staging instead`);
    return undefined;
  }
}

/**
 * `mode: 'auto'`: resident only for a dataset that already holds its samples in memory (in-memory
 * columns), and on a device with a memory probe only when they fit it; on the host always (the
 * columns are held, not copied). A departure from flodl, whose CPU device is always resident: a
 * file or module source (image folders, tar shards, Arrow image columns, your own `get(i)`) would be
 * read — decoded — whole at create, on the main thread, before the first batch, and one bad file
 * would fail create whatever `errors` says. Such a source streams instead: the RAM sample cache
 * holds what it read after the first epoch, and on an accelerator the VRAM pool fills and turns
 * the loader resident by itself once it holds every sample.
 */
function autoResident(ds: AnyDataset, length: number, sampleBytes: number, probe: Probe): boolean {
  if (!hasColumns(ds) || isKeyed(ds)) return false;
  return probe === undefined || canFitResident(length, sampleBytes, probe);
}

/** A keyed dataset (NOTE [keyed reads], dataset.ts) cannot be frozen: not resident, not staged to disk. */
function checkKeyed(ds: AnyDataset, opts: ResolvedOptions): void {
  if (!isKeyed(ds)) return;
  if (opts.mode === 'resident') throw invalidOption('mode', "'streaming' or 'auto' for a dataset with decode-time views (keyed reads)", opts.mode, 'A resident store would freeze one view of each sample; drop mode, or drop the source\'s view');
  if (opts.diskStage !== undefined) throw invalidOption('diskStage', 'left out for a dataset with decode-time views (keyed reads)', opts.diskStage, 'The disk stage would freeze one view of each sample; drop diskStage, or drop the source\'s view');
}

/** Ragged fields need a per-sample dataset whose rows are a pure function of the index. */
function checkRaggedDataset(ds: AnyDataset, opts: ResolvedOptions, device: Device, specs: ReadonlyMap<string, CollateSpec>): void {
  if (hasColumns(ds) || !SourceReader.isPerSample(ds)) {
    throw invalidOption('collate', 'used with a per-sample dataset (get(i)) for ragged fields', 'a dataset of columns or whole batches', 'Ragged rows are written sample by sample into fixed-capacity slots: give a dataset with get(i) (sources.jsonl, sources.tokens, sources.parquet, sources.arrow with ragged)');
  }
  if (isKeyed(ds)) throw invalidOption('collate', 'used with a dataset whose reads are not keyed', 'a keyed dataset', 'A ragged row must have one length per sample');
  if (opts.pack !== undefined && opts.augment !== 1) throw invalidOption('augment', '1 with pack', opts.augment, 'Packing places each document once per epoch; repeat the data with more epochs instead');
  if (device.name !== 'cpu') {
    for (const [field, spec] of specs) {
      if (spec.kind === 'function') throw invalidOption(`collate.${field}`, `'pad' or 'pack' on ${device.name}`, 'a function', "A function collate runs on the host: pass device: 'cpu', or use 'pad' / 'pack' (they run on the device)");
    }
  }
}

function checkDataset(dataset: unknown): number {
  const ds = dataset as { length?: unknown; get?: unknown; getBatch?: unknown } | null;
  if (ds === null || typeof ds !== 'object' || (typeof ds.get !== 'function' && typeof ds.getBatch !== 'function')) {
    throw invalidDatasetError(`DataLoader: the dataset must have \`length\` and \`get(i)\` or \`getBatch(indices)\`, got ${show(dataset)}. Wrap arrays with sources.arrays(...)`);
  }
  if (typeof ds.length !== 'number' || !Number.isSafeInteger(ds.length) || ds.length < 0) {
    throw invalidDatasetError(`DataLoader: dataset.length must be an integer ≥ 0, got ${show(ds.length)}`);
  }
  if (ds.length === 0) throw emptyDatasetError('DataLoader: empty dataset (length 0). Give the loader at least one sample');
  if (ds.length > 2 ** 32 - 2) throw invalidDatasetError(`DataLoader: dataset.length ${ds.length} exceeds the 2^32 − 2 samples a sampler can address`);
  return ds.length;
}

function wrapDatasetError(what: string, cause: unknown): LoaderError {
  if (cause instanceof LoaderError) return cause;
  return invalidDatasetError(`DataLoader: ${what}: ${describeCause(cause)}`, cause);
}

/**
 * The block shuffle's sampler: blocks are the dataset's parts (`block: 'parts'`, or by default when
 * it has parts: HasParts), else runs of `block` (default DEFAULT_BLOCK_SAMPLES) samples.
 */
function blockSampler(ds: AnyDataset, length: number, opts: ResolvedOptions, block: ResolvedBlockShuffle): BlockSampler {
  const byParts = block.block === 'parts' || (block.block === undefined && hasParts(ds));
  if (byParts && !hasParts(ds)) {
    throw invalidOption('shuffle.block', 'a number of samples per block for a dataset without parts', 'parts', 'Tar shards, Arrow record batches, Parquet row groups and sources.concat members are parts; pass block: <samples per block> for this dataset');
  }
  const starts = byParts ? checkedPartStarts((ds as AnyDataset & HasParts).partStarts(), length) : fixedBlockStarts(length, (block.block as number | undefined) ?? DEFAULT_BLOCK_SAMPLES);
  return new BlockSampler(starts, length, opts.augment, opts.seed, block, blockLayout(opts));
}

/**
 * NOTE [Blocks per node] (sampler/block-sampler.ts): a stream of blocks per node and a chunk of one
 * step's picks for a node's ranks, when the launcher says how many ranks share a node (ranks
 * numbered node by node, as torchrun, Slurm and mpirun's default mapping do); else one stream.
 */
function blockLayout(opts: ResolvedOptions): BlockLayout {
  const { worldSize, localWorldSize } = opts.world;
  if (localWorldSize === undefined || localWorldSize < 1 || worldSize % localWorldSize !== 0 || worldSize === localWorldSize) return { streams: 1, chunk: 1 };
  return { streams: worldSize / localWorldSize, chunk: opts.batchSize * localWorldSize };
}

/** A dataset's `partStarts()` (a value from its own object): integers ascending from 0, at most its length. */
function checkedPartStarts(starts: ArrayLike<number>, length: number): ArrayLike<number> {
  const bad = (why: string) => invalidDatasetError(`the dataset's partStarts() ${why}; it must give each part's first sample id, ascending from 0 (the block shuffle's blocks)`);
  if (starts === null || typeof starts !== 'object' || typeof starts.length !== 'number' || starts.length < 1) throw bad(`returned ${show(starts)}`);
  if (starts[0] !== 0) throw bad(`starts at ${show(starts[0])}`);
  for (let k = 1; k < starts.length; k++) {
    const s = starts[k]!;
    if (!Number.isSafeInteger(s) || s < starts[k - 1]! || s > length) throw bad(`gives ${show(s)} for part ${k} (after ${starts[k - 1]}, dataset length ${length})`);
  }
  return starts;
}

/** Fixed batches of batchSize, or token-budget batches (`batchTokens`) over the sampler's order. */
function batchPlanner(opts: ResolvedOptions, length: number, sampler: Sampler, resume: LoaderState | undefined, lengths: FieldLengths): BatchPlanner {
  const planner = plannerFor(opts, length, sampler, lengths);
  // NOTE [resume batches] (batch-planner.ts): a position means something only to the batches that wrote it.
  if (resume !== undefined) planner.checkResume(resume);
  return planner;
}

function plannerFor(opts: ResolvedOptions, length: number, sampler: Sampler, lengths: FieldLengths): BatchPlanner {
  const common = { world: opts.world, shards: opts.shards, augment: opts.augment, batchSize: opts.batchSize };
  const orderOf = (e: number) => sampler.indices(e) as Uint32Array;
  if (opts.pack !== undefined) {
    const { field: _field, ...settings } = opts.pack;
    return new PackPlanner(common, settings, lengths.plan(), orderOf);
  }
  const t = opts.tokens;
  if (t === undefined) return new FixedPlanner(common, opts.dropLast, sampler.length);
  const budget = {
    batchTokens: t.batchTokens, maxRows: opts.batchSize, window: t.bucketWindow, seed: opts.seed, shuffle: opts.shuffle, augment: opts.augment,
    lengths: resolveLengths(lengths.plan(), undefined, length, t.batchTokens),
  };
  return new TokenPlanner(common, budget, orderOf);
}
