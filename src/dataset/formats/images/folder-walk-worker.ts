// Internal: the entry of a folder-walk worker (folder-listing.ts, NOTE [parallel walk]). It takes
// chunks of class folders off the shared counter, walks each, posts each packed, then 'done' (or, for the
// blocking walk, posts each on its port and bumps the shared count).

import { parentPort, workerData } from 'node:worker_threads';
import { type WalkWorkerData, walkChunks } from './folder-listing.js';

const data = workerData as WalkWorkerData;
if (data.port !== undefined) {
  // The blocking walk (NOTE [blocking parallel walk]): its thread waits on the counter, then reads the port.
  const port = data.port;
  const posted = new Int32Array(data.posted!);
  walkChunks(data, (m) => {
    port.postMessage(m);
    Atomics.add(posted, 0, 1);
    Atomics.notify(posted, 0);
  });
  port.close();
} else {
  walkChunks(data, (m) => parentPort!.postMessage(m));
  parentPort!.postMessage('done');
}
