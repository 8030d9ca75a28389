// Internal: not exported from the package entry.
// One reader thread of the decode route's file readers (decode-reads.ts). A job is one batch: the
// threads claim its files one at a time from a shared counter, claim each file's place in the
// batch's page-locked memory from a shared byte cursor (so the files lie packed, in the order they
// were claimed), and read it there with blocking reads — off the main thread, in parallel. The rule:
// no byte is written past `capacity`; a file that does not fit is only measured (the caller then
// reads the batch again into more memory), and a file that cannot be read is reported, never thrown.

import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';

export interface ReadJob {
  readonly id: number;
  /** Int32 [0]: next file to claim; BigInt64 at byte 8: the byte cursor. */
  readonly control: SharedArrayBuffer;
  /** Float64 [2n]: per file its offset in `memory` (−1: did not fit) and its length. */
  readonly results: SharedArrayBuffer;
  readonly memory: SharedArrayBuffer;
  readonly base: number;
  readonly capacity: number;
  readonly paths: readonly (string | Uint8Array)[];
}

export interface ReadDone {
  readonly id: number;
  readonly errors: { k: number; message: string; code?: string }[];
}

const port = parentPort!;
port.on('message', (job: ReadJob) => {
  const next = new Int32Array(job.control, 0, 1);
  const cursor = new BigInt64Array(job.control, 8, 1);
  const n = job.paths.length;
  const offsets = new Float64Array(job.results, 0, n);
  const lengths = new Float64Array(job.results, 8 * n, n);
  const memory = new Uint8Array(job.memory, job.base, job.capacity);
  const errors: ReadDone['errors'] = [];
  for (;;) {
    const k = Atomics.add(next, 0, 1);
    if (k >= n) break;
    const p = job.paths[k]!;
    let fd = -1;
    try {
      fd = openSync(typeof p === 'string' ? p : Buffer.from(p.buffer, p.byteOffset, p.byteLength), 'r');
      const size = fstatSync(fd).size;
      const at = Number(Atomics.add(cursor, 0, BigInt(size)));
      if (at + size > job.capacity) {
        offsets[k] = -1;
        lengths[k] = size;
        continue;
      }
      let done = 0;
      while (done < size) {
        const got = readSync(fd, memory, at + done, size - done, done);
        if (got === 0) break;
        done += got;
      }
      offsets[k] = at;
      lengths[k] = done;
    } catch (error) {
      const e = error as { message?: unknown; code?: unknown };
      errors.push({ k, message: String(e?.message ?? error), ...(typeof e?.code === 'string' ? { code: e.code } : {}) });
    } finally {
      if (fd >= 0) closeSync(fd);
    }
  }
  port.postMessage({ id: job.id, errors } satisfies ReadDone);
});
