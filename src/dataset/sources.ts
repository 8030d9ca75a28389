// Built-in sources: datasets Stoker knows how to read. Each returns a dataset object to pass to
// `DataLoader.create`.

import { type ArrayColumns, ArraySource } from './arrays-source.js';

import { moduleSource } from './source-spec.js';

export const sources = {
  /**
   * A dataset reader workers can open: `sources.module(new URL('./my-data.ts', import.meta.url),
   * 'openMyData', options)` — the module's export is called with `options` in each thread.
   */
  module: moduleSource,
  /**
   * An in-memory dataset over columns that share their first dimension (the row count):
   * `sources.arrays({ image: tensor(u8, [n, 3, 32, 32]), label: new Int32Array(n) })`.
   * A batch is one gather per column; resident mode holds the columns without copying them.
   */
  arrays(columns: ArrayColumns): ArraySource {
    return new ArraySource(columns);
  },
};
