// Internal: not exported from the package entry.
// The CPU side of `stoker serve`'s client gather (pipeline/client-gather.ts): the resident columns
// written once into one shared-memory file that the client maps and gathers from for the rest of the
// session. The rule, as for the ring's slabs (shm-ring.ts): the file is unlinked as soon as the client
// says it mapped it, or when the session ends, so nothing is left in /dev/shm whichever side dies.

import { closeSync, existsSync, ftruncateSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Column offsets in the file are aligned to pages (any dtype's alignment, and mmap-friendly). */
const COLUMN_ALIGN = 4096;

export class StoreFile {
  readonly path: string;
  readonly bytes: number;
  /** Byte offset of each column, in the order given. */
  readonly offsets: readonly number[];
  #linked = true;

  constructor(columns: readonly Uint8Array[], session: number) {
    const dir = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
    this.path = join(dir, `stoker-${process.pid}-${randomBytes(4).toString('hex')}-store${session}`);
    const offsets: number[] = [];
    let bytes = 0;
    for (const c of columns) {
      offsets.push(bytes);
      bytes += Math.ceil(c.byteLength / COLUMN_ALIGN) * COLUMN_ALIGN;
    }
    this.offsets = offsets;
    this.bytes = Math.max(bytes, COLUMN_ALIGN);
    const fd = openSync(this.path, 'w+', 0o600);
    try {
      ftruncateSync(fd, this.bytes);
      columns.forEach((c, i) => {
        let done = 0;
        while (done < c.byteLength) done += writeSync(fd, c, done, c.byteLength - done, offsets[i]! + done);
      });
    } catch (error) {
      this.unlink();
      throw error;
    } finally {
      closeSync(fd);
    }
  }

  /** The client mapped it (or the session ended): the name goes; a mapping keeps the memory. */
  unlink(): void {
    if (!this.#linked) return;
    this.#linked = false;
    try {
      unlinkSync(this.path);
    } catch {
      // already gone
    }
  }
}
