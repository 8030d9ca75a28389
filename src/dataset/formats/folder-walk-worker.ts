// Internal: the entry of a folder-walk worker (folder-listing.ts, NOTE [parallel walk]). It takes
// chunks of class folders off the shared counter, walks each, posts each packed, then 'done'.

import { parentPort, workerData } from 'node:worker_threads';
import { type WalkWorkerData, walkChunks } from './folder-listing.js';

walkChunks(workerData as WalkWorkerData, (m) => parentPort!.postMessage(m));
parentPort!.postMessage('done');
