// The public surface changes only on purpose: this pins the runtime export list of src/index.ts,
// and its type-only exports (`export type { … }`): the names, read from index.ts with the
// TypeScript parser, against TYPE_EXPORTS below, each of which `tsc --noEmit` checks resolves to
// a type of the package entry (PublicTypes).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { it } from 'node:test';
import ts from 'typescript';
import * as stoker from '../src/index.js';
import type * as types from '../src/index.js';

/** Every type-only export of the package entry, each resolved: a name that is not exported fails `tsc`. */
interface PublicTypes {
  AnyDataset: types.AnyDataset;
  AnyTensor: types.AnyTensor;
  ArrayColumns: types.ArrayColumns;
  ArraySource: types.ArraySource;
  ArrowDecoder: types.ArrowDecoder;
  ArrowImageDecoder: types.ArrowImageDecoder;
  ArrowModuleDecoder: types.ArrowModuleDecoder;
  ArrowOptions: types.ArrowOptions;
  ArrowRaggedField: types.ArrowRaggedField;
  ArrowRaggedOptions: types.ArrowRaggedOptions;
  ArrowRaggedSource: types.ArrowRaggedSource;
  ArrowSource: types.ArrowSource;
  BatchColumns: types.BatchColumns;
  BatchDataset: types.BatchDataset;
  BatchStage: types.BatchStage;
  BatchValue: types.BatchValue;
  BlockShuffle: types.BlockShuffle;
  Closeable: types.Closeable;
  ConcatBatchSource: types.ConcatBatchSource;
  ConcatSampleSource: types.ConcatSampleSource;
  ConcatSource: types.ConcatSource;
  CropBox: types.CropBox;
  DType: types.DType;
  Dataset: types.Dataset;
  DeclaresLengths: types.DeclaresLengths;
  Epoch: types.Epoch;
  EpochFigures: types.EpochFigures;
  EpochStats: types.EpochStats;
  FileColumnsSource: types.FileColumnsSource;
  HasParts: types.HasParts;
  ImageDecodeMode: types.ImageDecodeMode;
  ImageFolder: types.ImageFolder;
  ImageFolderOptions: types.ImageFolderOptions;
  ImageOutput: types.ImageOutput;
  ImageTransformOptions: types.ImageTransformOptions;
  JsonlIndexMode: types.JsonlIndexMode;
  JsonlOptions: types.JsonlOptions;
  JsonlSource: types.JsonlSource;
  KernelArgument: types.KernelArgument;
  KeyedReads: types.KeyedReads;
  LabelClasses: types.LabelClasses;
  LaunchOptions: types.LaunchOptions;
  Launcher: types.Launcher;
  LoadMode: types.LoadMode;
  LoadOptions: types.LoadOptions;
  LoaderErrorCode: types.LoaderErrorCode;
  LoaderOptions: types.LoaderOptions;
  LoaderState: types.LoaderState;
  LoaderStats: types.LoaderStats;
  LoadsLengths: types.LoadsLengths;
  MegatronTokens: types.MegatronTokens;
  MixOptions: types.MixOptions;
  MixPart: types.MixPart;
  MixSource: types.MixSource;
  MixState: types.MixState;
  NpyOptions: types.NpyOptions;
  ParquetOptions: types.ParquetOptions;
  ParquetSource: types.ParquetSource;
  RaggedBounds: types.RaggedBounds;
  RaggedFields: types.RaggedFields;
  ReadContext: types.ReadContext;
  RemoteCounters: types.RemoteCounters;
  RemoteFiles: types.RemoteFiles;
  RemoteOptions: types.RemoteOptions;
  ReaderHints: types.ReaderHints;
  SafetensorsOptions: types.SafetensorsOptions;
  Sample: types.Sample;
  SampleRows: types.SampleRows;
  SampleValue: types.SampleValue;
  S3Options: types.S3Options;
  Sampler: types.Sampler;
  ShardMode: types.ShardMode;
  SimOptions: types.SimOptions;
  SkippedBatch: types.SkippedBatch;
  SourceSpec: types.SourceSpec;
  StokerTfDataset: types.StokerTfDataset;
  StorageOf: types.StorageOf;
  TarFieldDecoder: types.TarFieldDecoder;
  TarImageOptions: types.TarImageOptions;
  TarIndexMode: types.TarIndexMode;
  TarShardsOptions: types.TarShardsOptions;
  TarShardsSource: types.TarShardsSource;
  TfContainer: types.TfContainer;
  TfDatasetOptions: types.TfDatasetOptions;
  TfElement: types.TfElement;
  TfLoader: types.TfLoader;
  TfNamespace: types.TfNamespace;
  TfTensorLike: types.TfTensorLike;
  TokenDType: types.TokenDType;
  TokenWindows: types.TokenWindows;
  TokenizerOptions: types.TokenizerOptions;
  TokensOptions: types.TokensOptions;
  Transform: types.Transform;
  TypedArray: types.TypedArray;
  U64: types.U64;
  UserKernel: types.UserKernel;
  ViewOption: types.ViewOption;
  World: types.World;
}

const TYPE_EXPORTS = [
  'AnyDataset', 'AnyTensor', 'ArrayColumns', 'ArraySource', 'ArrowDecoder', 'ArrowImageDecoder',
  'ArrowModuleDecoder', 'ArrowOptions', 'ArrowRaggedField', 'ArrowRaggedOptions', 'ArrowRaggedSource',
  'ArrowSource', 'BatchColumns', 'BatchDataset', 'BatchStage', 'BatchValue', 'BlockShuffle', 'Closeable',
  'ConcatBatchSource', 'ConcatSampleSource', 'ConcatSource', 'CropBox', 'DType', 'Dataset',
  'DeclaresLengths', 'Epoch', 'EpochFigures', 'EpochStats', 'FileColumnsSource', 'HasParts', 'ImageDecodeMode',
  'ImageFolder', 'ImageFolderOptions', 'ImageOutput', 'ImageTransformOptions', 'JsonlIndexMode',
  'JsonlOptions', 'JsonlSource', 'KernelArgument', 'KeyedReads', 'LabelClasses', 'LaunchOptions', 'Launcher',
  'LoadMode', 'LoadOptions', 'LoaderErrorCode', 'LoaderOptions', 'LoaderState', 'LoaderStats',
  'LoadsLengths', 'MegatronTokens', 'MixOptions', 'MixPart', 'MixSource', 'MixState', 'NpyOptions',
  'ParquetOptions', 'ParquetSource', 'RaggedBounds', 'RaggedFields', 'ReadContext', 'ReaderHints',
  'RemoteCounters', 'RemoteFiles', 'RemoteOptions', 'S3Options', 'SafetensorsOptions', 'Sample', 'SampleRows', 'SampleValue', 'Sampler', 'ShardMode', 'SimOptions',
  'SkippedBatch', 'SourceSpec', 'StokerTfDataset', 'StorageOf', 'TarFieldDecoder', 'TarImageOptions',
  'TarIndexMode', 'TarShardsOptions', 'TarShardsSource', 'TfContainer', 'TfDatasetOptions', 'TfElement',
  'TfLoader', 'TfNamespace', 'TfTensorLike', 'TokenDType', 'TokenWindows', 'TokenizerOptions',
  'TokensOptions', 'Transform', 'TypedArray', 'U64', 'UserKernel', 'ViewOption', 'World',
] as const satisfies readonly (keyof PublicTypes)[];

// And the other way: a member of PublicTypes missing from TYPE_EXPORTS fails `tsc` here.
const listsAll: [Exclude<keyof PublicTypes, (typeof TYPE_EXPORTS)[number]>] extends [never] ? true : false = true;

it('exports exactly the public surface', () => {
  assert.deepEqual(Object.keys(stoker).sort(), [
    'Batch', 'BatchError', 'DTYPES', 'DataLoader', 'DeviceTensor', 'LoaderError', 'PickKey', 'RandomSampler', 'Rng', 'SequentialSampler',
    'Tensor', 'elementSize', 'epochFigures', 'remoteFiles', 'remoteStats', 'sources', 'tensor', 'toTfDataset', 'transforms',
  ]);
});

it('exposes the built-in sources: in-memory arrays, worker-openable modules and the file formats', () => {
  assert.deepEqual(Object.keys(stoker.sources).sort(), ['arrays', 'arrow', 'concat', 'imageFolder', 'imageFolderAsync', 'jsonl', 'mix', 'module', 'npy', 'parquet', 'safetensors', 'tarShards', 'tokens']);
});

it('exports exactly the public types: the sources\' options and sources, the dataset contract and its capabilities', () => {
  assert.equal(listsAll, true);
  const index = ts.createSourceFile('index.ts', readFileSync(new URL('../src/index.ts', import.meta.url), 'utf8'), ts.ScriptTarget.Latest);
  const names: string[] = [];
  for (const s of index.statements) {
    if (ts.isExportDeclaration(s) && s.exportClause !== undefined && ts.isNamedExports(s.exportClause)) {
      for (const e of s.exportClause.elements) if (s.isTypeOnly || e.isTypeOnly) names.push(e.name.text);
    } else if ((ts.isInterfaceDeclaration(s) || ts.isTypeAliasDeclaration(s)) && s.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) {
      names.push(s.name.text);
    }
  }
  assert.deepEqual(names.sort(), [...TYPE_EXPORTS].sort());
});
