// Internal: not exported from the package entry.
// The thread of one JPEG decode slot (jpeg-slots.ts): runs the slot's jobs (jpeg-jobs.ts) one message
// at a time and answers each with its reply or its error. The rule: the main thread sends a slot's
// next job only after this one's reply, so the slot's nvJPEG state is only ever used here, in order.

import { parentPort } from 'node:worker_threads';
import { type JpegJob, jpegJobs } from './jpeg-jobs.js';

const run = jpegJobs();
const port = parentPort!;
port.on('message', (message: { id: number; job: JpegJob }) => {
  run(message.job).then(
    ({ reply, transfer }) => port.postMessage({ id: message.id, reply }, transfer ?? []),
    (error: unknown) => {
      const e = error as { message?: unknown; code?: unknown; name?: unknown };
      port.postMessage({ id: message.id, error: { message: String(e?.message ?? error), code: typeof e?.code === 'string' ? e.code : undefined, name: typeof e?.name === 'string' ? e.name : undefined } });
    },
  );
});
