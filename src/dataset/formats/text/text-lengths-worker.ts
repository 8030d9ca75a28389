// Internal: the entry of a lengths worker (text-lengths.ts). It opens the source from its spec,
// counts its range of records into the shared table and reports once: done, or failed with the
// source's error (its code and message, so the main thread rethrows the same typed error).

import { parentPort, workerData } from 'node:worker_threads';
import { canCountLengths } from '../../capabilities.js';
import { closeDataset } from '../../dataset.js';
import { openSource } from '../../source-spec.js';
import type { FromLengthsWorker, LengthsWorkerData } from './text-lengths.js';

const { spec, field, start, end, out } = workerData as LengthsWorkerData;

async function run(): Promise<FromLengthsWorker> {
  const ds = await openSource(spec);
  try {
    if (!canCountLengths(ds)) return { t: 'failed', code: 'ERR_INVALID_DATASET', message: `${spec.export}: the source cannot count its records' lengths` };
    await ds.countLengths(field, start, end, new Uint32Array(out));
    return { t: 'done' };
  } finally {
    await closeDataset(ds);
  }
}

run().then(
  (m) => parentPort!.postMessage(m),
  (error: unknown) => {
    const e = error as { code?: unknown; message?: unknown } | null;
    parentPort!.postMessage({ t: 'failed', code: typeof e?.code === 'string' ? e.code : undefined, message: typeof e?.message === 'string' ? e.message : String(error) } satisfies FromLengthsWorker);
  },
);
