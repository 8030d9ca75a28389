// Fuzz target for safetensors.test.ts: open a mutant in both load modes, read every row and require
// the two modes to agree.

import { ArraySource } from '../../src/dataset/arrays-source.js';
import { safetensorsSource } from '../../src/dataset/formats/columns/safetensors.js';
import { compareAll } from './npy-targets.js';

export function readBothModes(path: string): void {
  const memory = safetensorsSource(path, { load: 'memory' });
  const positioned = safetensorsSource(path, { load: 'positioned' });
  if (!(memory instanceof ArraySource) || positioned instanceof ArraySource) throw new Error('load option ignored');
  compareAll(memory, positioned);
}
