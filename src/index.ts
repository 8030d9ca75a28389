// Stoker's public entry: named re-exports only. Everything not listed here is internal.

export { DataLoader } from './loader.js';
export type { Epoch, LoaderStats } from './loader.js';
export type { LoaderOptions, Transform } from './options.js';
export { Batch } from './batch.js';
export { Tensor, tensor } from './tensor/tensor.js';
export { DeviceTensor } from './device/device-tensor.js';
export type { AnyTensor } from './device/device-tensor.js';
export type { UserKernel, LaunchOptions, KernelArgument } from './device/user-kernel.js';
export { DTYPES, elementSize } from './tensor/dtype.js';
export type { DType, StorageOf, TypedArray } from './tensor/dtype.js';
export type { Dataset, BatchDataset, Sample, SampleValue, BatchColumns, BatchValue, ReadContext } from './dataset/dataset.js';
export { sources } from './dataset/sources.js';
export { transforms } from './transforms/transforms.js';
export type { ImageTransformOptions, ImageOutput } from './transforms/image.js';
export type { ArraySource, ArrayColumns } from './dataset/arrays-source.js';
export type { SourceSpec } from './dataset/source-spec.js';
export type { SimOptions } from './device/sim/sim-backend.js';
export type { Sampler } from './sampler/sampler.js';
export { RandomSampler } from './sampler/random-sampler.js';
export { SequentialSampler } from './sampler/sequential-sampler.js';
export { PickKey } from './sampler/pick-key.js';
export { Rng } from './sampler/rng.js';
export type { U64 } from './sampler/rng.js';
export type { EpochStats } from './pipeline/stats.js';
export { LoaderError, BatchError } from './errors.js';
export type { LoaderErrorCode } from './errors.js';
