// The public surface changes only on purpose: this pins the runtime export list of src/index.ts.

import assert from 'node:assert/strict';
import { it } from 'node:test';
import * as stoker from '../src/index.js';

it('exports exactly the public surface', () => {
  assert.deepEqual(Object.keys(stoker).sort(), [
    'Batch', 'BatchError', 'DTYPES', 'DataLoader', 'DeviceTensor', 'LoaderError', 'PickKey', 'RandomSampler', 'Rng', 'SequentialSampler',
    'Tensor', 'elementSize', 'epochFigures', 'sources', 'tensor', 'toTfDataset', 'transforms',
  ]);
});

it('exposes the built-in sources: in-memory arrays, worker-openable modules and the file formats', () => {
  assert.deepEqual(Object.keys(stoker.sources).sort(), ['arrays', 'arrow', 'concat', 'imageFolder', 'imageFolderAsync', 'jsonl', 'mix', 'module', 'npy', 'parquet', 'safetensors', 'tarShards', 'tokens']);
});
