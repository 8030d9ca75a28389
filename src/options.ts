// The loader's options: their types, defaults with their reasons, and validation. The rule: every
// option is checked at `DataLoader.create`, and a bad one throws a LoaderError that names the knob,
// the bad value and the fix — nothing is discovered later, mid-epoch.

import { availableParallelism } from 'node:os';
import { augmentWithSampler, invalidOption, show, unknownOption } from './errors.js';
import { MAX_IN_FLIGHT, RAM_MAX_USAGE_RANGE, VRAM_MAX_USAGE_RANGE, clamp } from './base/budget.js';
import type { Sampler } from './sampler/sampler.js';
import { DEVICE_PATTERN } from './device/open-device.js';
import { type SimOptions, checkSimOptions } from './device/sim/sim-backend.js';
import { type U64, toU64 } from './sampler/rng.js';
import type { Tensor } from './tensor/tensor.js';
import type { AnyTensor } from './device/device-tensor.js';
import { type World, rankDevice, resolveWorld } from './distributed/launch.js';
import type { LoaderState } from './distributed/resume.js';
import type { ShardMode } from './distributed/shard.js';
import { type PackSettings, parsePack } from './sampler/pack-plan.js';
import type { Transform } from './transforms/transform.js';

export type { Transform };

/**
 * The block shuffle (`shuffle: 'block'` is `shuffle: {}`): NOTE [Block order], sampler/block-sampler.ts.
 * A node reads at most `window` blocks at a time instead of any sample at any moment, so a node cache
 * of `window` blocks reads each block once an epoch; the price is mixing: a batch draws from
 * `window` blocks, not from the whole dataset (bench/shuffle.ts measures both, BENCHMARKS.md).
 */
export interface BlockShuffle {
  /**
   * What a block is: 'parts' — the dataset's parts (tar shards, Arrow record batches, Parquet row
   * groups, a concat's members) — or a number of consecutive samples. Default: 'parts' when the
   * dataset has parts, else 65 536 samples (the order of a shard's samples: 64 MiB shards of 1 KiB
   * samples).
   */
  block?: 'parts' | number;
  /**
   * Blocks whose samples are shuffled together. Default 32: on shards written class by class (10
   * classes), a window of 32 shards trains a model to within a few percent of the global shuffle's
   * held-out loss where 8 stays 1.7× above it (bench/shuffle.ts, BENCHMARKS.md), and its working set
   * (2 GiB of 64 MiB shards) still fits a node cache on local disk. A node cache of `window` blocks
   * reads each block once an epoch; a wider window mixes better and needs a larger cache.
   */
  window?: number;
  /**
   * Shuffle the samples within each window (default true). false: each block's samples in their own
   * order, blocks one after another ("shard-only": the cheapest reads, the weakest mixing).
   */
  within?: boolean;
}

export interface LoaderOptions<T extends AnyTensor = Tensor> {
  /** Rows per batch. Required. */
  batchSize: number;
  /**
   * Where batches arrive: 'cpu' (default), 'cuda' / 'cuda:N' (an NVIDIA GPU through the driver API),
   * or 'sim' (a simulated GPU: the same device-side policies, run in host memory — for tests and
   * planning without a GPU).
   */
  device?: string;
  /** The simulated GPU of `device: 'sim'`: its memory, memory already in use, and allocation faults. */
  sim?: SimOptions;
  /**
   * Each epoch's order, a pure function of (seed, epoch). Default true: a uniform permutation of
   * every pick — the best mixing, and the right order wherever a read of one sample is cheap (memory,
   * local disk). false: in order, the same every epoch. 'block' or `{ block, window, within }`: a
   * block shuffle for data read a block at a time (remote tar shards, Parquet row groups): blocks
   * permuted, then the samples of each window of `window` blocks shuffled together (see
   * `BlockShuffle`, docs/options.md#block-shuffle). `true` / `false` are ignored when `sampler` is
   * given; a block shuffle with a `sampler` is refused.
   */
  shuffle?: boolean | 'block' | BlockShuffle;
  /** Seed of the shuffle and of the transform keys. Default 42 (flodl's). */
  seed?: number | bigint;
  /** A custom pick stream; overrides `shuffle`; cannot be combined with `augment > 1`. */
  sampler?: Sampler;
  /**
   * Drop the final short batch. Default true: a last batch of one row gives BatchNorm a NaN
   * variance, and a ragged last batch recompiles shape-specialized kernels.
   */
  dropLast?: boolean;
  /** Field names, one per tensor. Default: the record keys of sample 0, else "0", "1", …. */
  names?: readonly string[];
  /** Views per sample per epoch (the pick space is n × augment). Default 1. */
  augment?: number;
  /** Applied at delivery, keyed per pick. */
  transform?: Transform<T>;
  /**
   * 'auto', 'resident' or 'streaming'. Default 'auto': resident only for a dataset that already
   * holds its samples in memory (sources.arrays; NPY and safetensors data loaded into memory)
   * — on the CPU always, on a GPU when it fits its memory — and streaming for everything else.
   * A departure from flodl, whose CPU loader is always resident: a source that reads or decodes files
   * (image folders, tar shards, Arrow image columns, module sources, your own `get(i)`) would be
   * decoded whole at create, on the main thread, delaying the first batch, and one bad file would fail
   * create whatever `errors` says. Streamed, the RAM sample cache holds it after the first epoch, and
   * on a GPU the VRAM pool fills and turns the loader resident by itself. An explicit 'resident' over
   * such a source reads it all at create and honours `errors` as streaming does: a sample that fails
   * fails (or, with 'skip', skips) each batch holding it.
   */
  mode?: 'auto' | 'resident' | 'streaming';
  /**
   * Pin the streaming in-flight depth (turns adaptive sizing off): an integer in [1, 1024]. Default:
   * sized by the budget law. 0 is refused rather than read as 1 (flodl's rendezvous has no meaning
   * here). With reader workers the staging ring — sized from the RAM share each epoch, at most 8
   * slots while the sample cache is on — can hold the window below it (`stats().ringSlots`).
   */
  prefetch?: number;
  /** Fraction of total device memory prefetch may use, clamped to [0.50, 0.99]. Default 0.90. */
  vramMaxUsage?: number;
  /**
   * Fraction of available host RAM the staging ring and sample cache share, clamped to [0, 0.90].
   * Default 0.50. Ranks on one host split it: each takes ramMaxUsage / local world size.
   */
  ramMaxUsage?: number;
  /**
   * Bytes of device memory the model's step needs beyond what the probe sees; trusted in full. At most
   * the device's total memory (refused at create above it); ignored on the CPU, which has no probe.
   */
  activationReserve?: number;
  /**
   * Keep samples read from a per-sample dataset in RAM across epochs (streaming mode), within the
   * RAM share. Default true: under a fresh shuffle each epoch, K cached samples of N serve K/N reads.
   */
  sampleCache?: boolean;
  /**
   * Stage samples that did not fit the RAM cache in a pack file on local disk (streaming mode,
   * per-sample datasets). Pays when the source is slower than the local drive. Default off.
   * `dir` defaults to the system temp directory; the file lives in a private 0700 directory and is
   * removed on close, on exit and on SIGINT/SIGTERM. Refused with `mode: 'resident'`, which never reads it,
   * and when `gigabytes` exceeds the free space of `dir`'s drive (the stage would fill it and stop).
   */
  diskStage?: { gigabytes: number; dir?: string };
  /** Keep samples on the GPU across epochs (CUDA only). Default true. */
  vramPool?: boolean;
  /**
   * Streaming an in-memory source (`sources.arrays`) to a GPU: page-lock its columns once and let
   * the device read each batch's rows where they lie — the copy engines for large rows, a gather
   * kernel for small ones — with no reader and no staging copy. `'auto'` (default): when the
   * columns take at most half of the machine's RAM (page-locked memory cannot be swapped out), and
   * falling back to staging with a warning if the driver refuses; `true`: always, and a refusal is
   * an error; `false`: stage through reader memory as for any other source.
   */
  pinSource?: boolean | 'auto';
  /**
   * Reader threads (worker_threads) for streaming mode; 'auto' = cores − 1 (at least 1); 0 reads on
   * the main thread; at most 4 × cores: a reader is CPU work or a wait on I/O, and four per core
   * already hide the I/O waits, while each worker is an isolate that costs ~60 MiB and a start-up
   * (24 on 2 cores took 20 s and 1.5 GiB to create). Workers need a worker-openable dataset
   * (`sources.module(...)` or a built-in source). Default: 'auto' for worker-openable sources, except in-memory arrays (a gather is
   * cheaper than a hand-off); 0 for plain dataset objects.
   */
  workers?: number | 'auto';
  /**
   * This process's rank and the number of ranks (give both). Default: from the launcher's
   * environment — torchrun (RANK, WORLD_SIZE, LOCAL_RANK), Open MPI (OMPI_COMM_WORLD_*), MPICH
   * (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID), SLURM (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) — else
   * 0 of 1. Each epoch's global order is the same in every rank; ranks take disjoint shares of it
   * with equal batch counts (see `shards`).
   */
  rank?: number;
  worldSize?: number;
  /** Rank among this host's processes; picks the GPU for `device: 'cuda'` (`cuda:<localRank>`). Default: from the launcher. */
  localRank?: number;
  /**
   * When the picks do not divide evenly over the ranks: 'pad' (default, like PyTorch's
   * DistributedSampler) wraps around so every pick is delivered at least once; 'drop' leaves out the
   * last few picks of the epoch so every pick is delivered at most once.
   */
  shards?: 'pad' | 'drop';
  /**
   * Continue from a `loader.state()`: the epoch it names starts at exactly the next pick of its
   * global order, re-partitioned over this run's ranks when the world size changed.
   */
  resume?: LoaderState;
  /** What a failed batch does: 'throw' ends the epoch's loop with a BatchError; 'skip' drops the batch and counts it. Default 'throw'. */
  errors?: 'throw' | 'skip';
  /**
   * Token-budget batches: each batch holds at most this many tokens, padding counted (rows × its
   * longest row), and at most `batchSize` rows; sizes vary. Needs each sample's token count
   * (`lengths`, or the dataset's `lengths`). `dropLast` does not apply. See docs/text.md.
   */
  batchTokens?: number;
  /**
   * With `batchTokens`: picks of the epoch's order sorted by length together (then cut, and their
   * batches shuffled). Default 50 × batchSize: wide enough for like lengths to meet, narrow enough
   * that an epoch stays mixed.
   */
  bucketWindow?: number;
  /** With `batchTokens`: tokens of each sample, one entry per sample (or `i => tokens`). Default: the dataset's `lengths`. */
  lengths?: Uint32Array | ((index: number) => number);
  /**
   * How each ragged field (one whose first dimension varies: `dataset.ragged`, or any field named
   * here) becomes one batch tensor: `'pad'` (to the longest, plus `<field>_lengths`), `{ pad: { to,
   * value, lengths, mask, truncate, maxLength } }`, `'pack'` (rows concatenated, plus
   * `<field>_cu_seqlens`), `{ pack: { truncate, maxLength } }`, or a function `(rows, ids) => ({
   * name: typedArray, … })` (host only). See docs/text.md.
   */
  collate?: Record<string, unknown>;
  /**
   * Sequence packing: batches of `batchSize` context windows of `contextLength` tokens, documents of
   * the ragged field (`field`, default the dataset's only one) best-fit into them (`mode:
   * 'best-fit'`, over groups of `window` documents) or laid end to end (`'concat'`); each batch is
   * `tokens`, `segment_ids`, `position_ids`. `window` and `truncate` are best-fit's (refused with
   * 'concat'); batchSize × contextLength ≤ 2^31 − 1 (a batch's positions are int32). See docs/text.md.
   */
  pack?: { contextLength: number; mode?: 'best-fit' | 'concat'; window?: number; truncate?: boolean; field?: string };
}

/** Options after validation, defaults and clamps. */
export interface ResolvedOptions {
  readonly batchSize: number;
  readonly device: string;
  readonly sim: SimOptions | undefined;
  /** Whether the order is shuffled at all (a block shuffle too); `block` says how when by blocks. */
  readonly shuffle: boolean;
  /** The block shuffle; undefined for `shuffle: true / false`. Its blocks are resolved against the dataset when the loader is built. */
  readonly block: ResolvedBlockShuffle | undefined;
  readonly seed: U64;
  readonly sampler: Sampler | undefined;
  readonly dropLast: boolean;
  readonly names: readonly string[] | undefined;
  readonly augment: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly transform: Transform<any> | undefined;
  readonly mode: 'auto' | 'resident' | 'streaming';
  readonly prefetch: number | undefined;
  readonly vramMaxUsage: number;
  readonly ramMaxUsage: number;
  /** This rank's part of the RAM share: ranks on one host split it (ramMaxUsage / local world size). */
  readonly ramShare: number;
  readonly activationReserve: number | undefined;
  readonly sampleCache: boolean;
  readonly vramPool: boolean;
  readonly pinSource: boolean | 'auto';
  readonly diskStage: { readonly gigabytes: number; readonly dir: string | undefined } | undefined;
  /** undefined = the default for the dataset (see `LoaderOptions.workers`). */
  readonly workers: number | 'auto' | undefined;
  readonly world: World;
  readonly shards: ShardMode;
  /** Validated against the dataset when the loader is built. */
  readonly resume: unknown;
  readonly errors: 'throw' | 'skip';
  /** Token budgets: undefined for fixed batches of batchSize. */
  readonly tokens: { readonly batchTokens: number; readonly bucketWindow: number; readonly lengths: LoaderOptions['lengths'] } | undefined;
  /** Checked against the dataset's ragged fields when the loader is built (collate/collate.ts). */
  readonly collate: Record<string, unknown> | undefined;
  /** Sequence packing; undefined: none. */
  readonly pack: (PackSettings & { readonly field: string | undefined }) | undefined;
  /** Sample lengths given for packing or ragged capacities (with batchTokens they are in `tokens`). */
  readonly lengths: LoaderOptions['lengths'];
}

const KNOWN: readonly string[] = [
  'batchSize', 'device', 'sim', 'shuffle', 'seed', 'sampler', 'dropLast', 'names', 'augment', 'transform', 'mode', 'prefetch',
  'vramMaxUsage', 'ramMaxUsage', 'activationReserve', 'sampleCache', 'diskStage', 'vramPool', 'pinSource', 'workers', 'rank',
  'worldSize', 'localRank', 'shards', 'resume', 'errors', 'batchTokens', 'bucketWindow', 'lengths',
  'collate', 'pack',
];
const DISK_STAGE_KEYS: readonly string[] = ['gigabytes', 'dir'];
const BLOCK_SHUFFLE_KEYS: readonly string[] = ['block', 'window', 'within'];
/** Samples per block of a block shuffle over a dataset without parts (see `BlockShuffle.block`). */
export const DEFAULT_BLOCK_SAMPLES = 65536;
/** Blocks per window of a block shuffle (see `BlockShuffle.window`). */
export const DEFAULT_BLOCK_WINDOW = 32;

/** A block shuffle after validation: `block` undefined = the dataset's parts when it has them, else DEFAULT_BLOCK_SAMPLES. */
export interface ResolvedBlockShuffle {
  readonly block: 'parts' | number | undefined;
  readonly window: number;
  readonly within: boolean;
}
/** Reader workers per core beyond which more only cost memory and start-up (see `LoaderOptions.workers`). */
const WORKERS_PER_CORE = 4;
const U64_LIMIT = 2n ** 64n;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function resolveOptions(options: LoaderOptions<any>): ResolvedOptions {
  if (options === null || typeof options !== 'object') {
    throw invalidOption('options', 'an object such as { batchSize: 32 }', options);
  }
  for (const key of Object.keys(options)) if (!KNOWN.includes(key)) throw unknownOption('options', key, KNOWN);
  const o = options as Partial<LoaderOptions<AnyTensor>> & Record<string, unknown>;

  const batchSize = o.batchSize;
  if (batchSize === undefined) throw invalidOption('batchSize', 'an integer ≥ 1', batchSize, 'It is required: pass e.g. { batchSize: 32 }');
  if (!isInt(batchSize) || batchSize < 1) throw invalidOption('batchSize', 'an integer ≥ 1', batchSize);

  // `null` is a value, not "not given": every knob takes its default only when it is left out.
  const device = o.device === undefined ? 'cpu' : o.device;
  if (typeof device !== 'string' || !DEVICE_PATTERN.test(device)) throw invalidOption('device', "'cpu', 'cuda', 'cuda:N' or 'sim'", device);
  let sim: SimOptions | undefined;
  if (o.sim !== undefined) {
    if (device !== 'sim') throw invalidOption('sim', "used with device: 'sim' only", o.sim, "Pass device: 'sim', or drop `sim`");
    sim = checkSimOptions(o.sim);
  }

  const block = blockShuffle(o.shuffle);
  const shuffle = block !== undefined || bool(o, 'shuffle', true);
  const seed = checkSeed(o.seed === undefined ? 42 : o.seed);

  const sampler = o.sampler;
  if (sampler !== undefined) {
    if (sampler === null || typeof sampler !== 'object' || typeof (sampler as Sampler).indices !== 'function') {
      throw invalidOption('sampler', 'an object with `length` and `indices(epoch)`', sampler);
    }
    if (!isInt(sampler.length) || sampler.length < 1) {
      throw invalidOption('sampler.length', 'an integer ≥ 1', sampler.length, 'A sampler with no picks gives epochs of no batches: give it at least one pick, or drop `sampler`');
    }
  }

  if (block !== undefined && sampler !== undefined) {
    throw invalidOption('shuffle', 'true or false with a custom sampler', o.shuffle, 'A custom sampler orders its own picks: drop `sampler` to use the block shuffle, or drop the block shuffle');
  }

  const dropLast = bool(o, 'dropLast', true);

  let names: readonly string[] | undefined;
  if (o.names !== undefined) {
    if (!Array.isArray(o.names) || !o.names.every((n) => typeof n === 'string' && n.length > 0)) {
      throw invalidOption('names', 'an array of non-empty strings, one per tensor', o.names);
    }
    const dup = o.names.find((n, i) => o.names!.indexOf(n) !== i);
    if (dup !== undefined) throw invalidOption('names', 'unique names', o.names, `${show(dup)} appears twice`);
    names = Object.freeze([...o.names]);
  }

  const augment = o.augment === undefined ? 1 : o.augment;
  if (!isInt(augment) || augment < 1) throw invalidOption('augment', 'an integer ≥ 1 (views per sample per epoch)', augment);
  if (augment > 1 && sampler !== undefined) {
    throw augmentWithSampler(augment);
  }

  const transform = o.transform;
  if (transform !== undefined && typeof transform !== 'function') throw invalidOption('transform', 'a function (rows, keys) => rows', transform);

  const mode = o.mode === undefined ? 'auto' : o.mode;
  if (mode !== 'auto' && mode !== 'resident' && mode !== 'streaming') throw invalidOption('mode', "'auto', 'resident' or 'streaming'", mode);

  const prefetch = o.prefetch;
  if (prefetch !== undefined && (!isInt(prefetch) || prefetch < 1 || prefetch > MAX_IN_FLIGHT)) {
    throw invalidOption(
      'prefetch',
      `an integer in [1, ${MAX_IN_FLIGHT}] (batches in flight)`,
      prefetch,
      prefetch === 0 ? 'prefetch: 1 is the smallest window (one batch read ahead); omit `prefetch` for adaptive sizing' : 'Omit `prefetch` for adaptive sizing',
    );
  }

  const vramMaxUsage = fraction(o, 'vramMaxUsage', 0.9, VRAM_MAX_USAGE_RANGE);
  const ramMaxUsage = fraction(o, 'ramMaxUsage', 0.5, RAM_MAX_USAGE_RANGE);

  const activationReserve = o.activationReserve;
  if (activationReserve !== undefined && (!isInt(activationReserve) || activationReserve < 0)) {
    throw invalidOption('activationReserve', 'a byte count ≥ 0', activationReserve);
  }

  const sampleCache = bool(o, 'sampleCache', true);
  const vramPool = bool(o, 'vramPool', true);
  const pinSource = o.pinSource === undefined ? 'auto' : o.pinSource;
  if (pinSource !== 'auto' && typeof pinSource !== 'boolean') throw invalidOption('pinSource', "true, false or 'auto'", pinSource);

  let diskStage: { gigabytes: number; dir: string | undefined } | undefined;
  if (o.diskStage !== undefined) {
    const ds = o.diskStage as { gigabytes?: unknown; dir?: unknown } | null;
    if (ds === null || typeof ds !== 'object' || Array.isArray(ds)) throw invalidOption('diskStage', '{ gigabytes: number ≥ 0, dir?: string }', o.diskStage);
    for (const key of Object.keys(ds)) if (!DISK_STAGE_KEYS.includes(key)) throw unknownOption('diskStage', key, DISK_STAGE_KEYS);
    if (typeof ds.gigabytes !== 'number' || !Number.isFinite(ds.gigabytes) || ds.gigabytes < 0 || (ds.dir !== undefined && typeof ds.dir !== 'string')) {
      throw invalidOption('diskStage', '{ gigabytes: number ≥ 0, dir?: string }', o.diskStage);
    }
    if (ds.gigabytes > 0 && mode === 'resident') {
      throw invalidOption('diskStage', "left out with mode: 'resident'", o.diskStage, "Resident mode holds the whole dataset in memory and never reads the disk stage: drop `diskStage`, or pass mode: 'streaming' or 'auto'");
    }
    if (ds.gigabytes > 0) diskStage = { gigabytes: ds.gigabytes, dir: ds.dir as string | undefined };
  }

  let workers: number | 'auto' | undefined;
  if (o.workers !== undefined) {
    const cores = availableParallelism();
    const most = WORKERS_PER_CORE * cores;
    const n = o.workers;
    if (n !== 'auto' && (!isInt(n) || n < 0 || n > most)) {
      const fix = isInt(n) && n > most ? "More readers than that only cost memory and start-up time: pass 'auto'" : undefined;
      throw invalidOption('workers', `an integer in [0, ${most}] (${WORKERS_PER_CORE} × ${cores} cores) or 'auto' (cores − 1)`, n, fix);
    }
    workers = o.workers as number | 'auto';
  }

  const world = resolveWorld(o);
  const shards = o.shards === undefined ? 'pad' : o.shards;
  if (shards !== 'pad' && shards !== 'drop') throw invalidOption('shards', "'pad' or 'drop'", shards);
  const resume = o.resume;
  if (resume !== undefined && (resume === null || typeof resume !== 'object')) throw invalidOption('resume', 'a state object from loader.state()', resume);

  const errors = o.errors === undefined ? 'throw' : o.errors;
  if (errors !== 'throw' && errors !== 'skip') throw invalidOption('errors', "'throw' or 'skip'", errors);

  let tokens: ResolvedOptions['tokens'];
  if (o.batchTokens !== undefined) {
    if (!isInt(o.batchTokens) || o.batchTokens < 1) throw invalidOption('batchTokens', 'an integer ≥ 1 (tokens per batch)', o.batchTokens);
    const bucketWindow = o.bucketWindow === undefined ? 50 * batchSize : o.bucketWindow;
    if (!isInt(bucketWindow) || bucketWindow < 1) throw invalidOption('bucketWindow', 'an integer ≥ 1 (picks sorted by length together)', bucketWindow);
    if (o.lengths !== undefined && !(o.lengths instanceof Uint32Array) && typeof o.lengths !== 'function') {
      throw invalidOption('lengths', 'a Uint32Array of token counts or a function i => tokens', o.lengths);
    }
    if (sampler !== undefined) throw invalidOption('sampler', 'left out with batchTokens', 'a custom sampler', 'Token-budget batches cut the built-in order; drop one of the two');
    tokens = { batchTokens: o.batchTokens, bucketWindow, lengths: o.lengths };
  } else if (o.bucketWindow !== undefined || (o.lengths !== undefined && o.pack === undefined && o.collate === undefined)) {
    throw invalidOption(o.bucketWindow !== undefined ? 'bucketWindow' : 'lengths', 'given only with batchTokens', o.bucketWindow ?? o.lengths, 'Pass batchTokens: N for token-budget batches, or drop it');
  }

  const collate = o.collate;
  if (collate !== undefined && (collate === null || typeof collate !== 'object' || Array.isArray(collate))) {
    throw invalidOption('collate', "an object of ragged field name → 'pad' | 'pack' | { pad } | { pack } | function", collate);
  }
  let pack: ResolvedOptions['pack'];
  if (o.pack !== undefined) {
    const raw = o.pack as unknown;
    const field = raw !== null && typeof raw === 'object' ? (raw as { field?: unknown }).field : undefined;
    if (field !== undefined && typeof field !== 'string') throw invalidOption('pack.field', 'the name of a ragged field', field);
    const { field: _f, ...rest } = (raw !== null && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
    const settings = parsePack(raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? rest : raw, batchSize)!;
    if (tokens !== undefined) throw invalidOption('pack', 'left out with batchTokens', o.pack, 'A packed batch is batchSize context windows; token budgets cut samples into batches: use one of the two');
    if (sampler !== undefined) throw invalidOption('sampler', 'left out with pack', 'a custom sampler', 'Packing plans the built-in order; drop one of the two');
    pack = { ...settings, field };
  }

  return {
    tokens, collate, pack, lengths: o.lengths,
    batchSize, device: rankDevice(device, world), sim, shuffle, block, seed, sampler, dropLast, names, augment, transform, mode, prefetch,
    vramMaxUsage, ramMaxUsage, activationReserve, sampleCache, vramPool, pinSource, diskStage, workers, errors,
    world, shards, resume, ramShare: ramMaxUsage / (world.localWorldSize ?? 1),
  };
}

/** `shuffle: 'block'` or `{ block, window, within }` checked; undefined for anything else (true / false are checked as booleans). */
function blockShuffle(v: unknown): ResolvedBlockShuffle | undefined {
  const expected = "true, false, 'block' or { block?: 'parts' | samples, window?: blocks, within?: boolean }";
  if (v === undefined || typeof v === 'boolean') return undefined;
  if (v === 'block') return { block: undefined, window: DEFAULT_BLOCK_WINDOW, within: true };
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw invalidOption('shuffle', expected, v);
  const o = v as Record<string, unknown>;
  for (const key of Object.keys(o)) if (!BLOCK_SHUFFLE_KEYS.includes(key)) throw unknownOption('shuffle', key, BLOCK_SHUFFLE_KEYS);
  const { block, window, within } = o;
  if (block !== undefined && block !== 'parts' && (!isInt(block) || block < 1)) {
    throw invalidOption('shuffle.block', "'parts' (the dataset's shards, record batches or row groups) or an integer ≥ 1 (samples per block)", block);
  }
  if (window !== undefined && (!isInt(window) || window < 1)) throw invalidOption('shuffle.window', 'an integer ≥ 1 (blocks whose samples are shuffled together)', window);
  if (within !== undefined && typeof within !== 'boolean') throw invalidOption('shuffle.within', 'true or false', within);
  if (within === false && window !== undefined) {
    throw invalidOption('shuffle.window', 'left out with within: false', window, 'Without a shuffle within windows each block is read in its own order and windows change nothing: drop `window`, or drop `within: false`');
  }
  return { block: block as 'parts' | number | undefined, window: (window as number | undefined) ?? DEFAULT_BLOCK_WINDOW, within: within !== false };
}

/** A seed fits u64: a bigint in [0, 2^64), or a safe integer number ≥ 0 — never masked or rounded into range. */
function checkSeed(v: unknown): U64 {
  const fits = typeof v === 'bigint' ? v >= 0n && v < U64_LIMIT : isInt(v) && v >= 0;
  if (!fits) {
    const fix = typeof v === 'number' && Number.isInteger(v) && v > 0 ? 'Pass seeds of 2^53 and above as a bigint' : undefined;
    throw invalidOption('seed', 'an integer in [0, 2^53) or a bigint in [0, 2^64)', v, fix);
  }
  return toU64(v as number | bigint);
}

function isInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v);
}

function bool(o: Record<string, unknown>, knob: string, fallback: boolean): boolean {
  const v = o[knob];
  if (v === undefined) return fallback;
  if (typeof v !== 'boolean') throw invalidOption(knob, 'true or false', v);
  return v;
}

/** A finite number, clamped into `range` as flodl clamps (an out-of-range value is not an error). */
function fraction(o: Record<string, unknown>, knob: string, fallback: number, range: readonly [number, number]): number {
  const v = o[knob];
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw invalidOption(knob, `a number (clamped to [${range[0]}, ${range[1]}])`, v);
  return clamp(v, range[0], range[1]);
}
