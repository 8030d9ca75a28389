// Positioned reads for file-backed sources. Every read is checked against the file's size before
// anything is allocated, so a header that claims more bytes than the file holds gives a typed
// `ERR_BAD_FILE` naming the file and the offset, never a huge allocation or a short read passed on
// as data. Reads are synchronous: sources run in reader workers, where blocking one thread on the
// page cache is the cheapest way to fetch a sample.

import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { badFile, fileAccess } from '../../errors.js';

export class PositionedFile {
  readonly path: string;
  /** Size in bytes when the file was opened. */
  readonly size: number;
  #fd: number | undefined;

  /** `path` names the file in messages; `openAs` opens it (a Uint8Array of its bytes when its name is not valid UTF-8). */
  constructor(path: string, openAs: string | Uint8Array = path) {
    this.path = path;
    let fd: number;
    try {
      fd = openSync(fsPath(openAs), 'r');
    } catch (cause) {
      throw fileAccess(path, 'open it for reading', cause);
    }
    try {
      const st = fstatSync(fd);
      if (!st.isFile()) throw new Error('not a regular file');
      this.size = st.size;
    } catch (cause) {
      closeSync(fd);
      throw fileAccess(path, 'read it', cause);
    }
    this.#fd = fd;
  }

  /** Open `path` and refuse it (`ERR_BAD_FILE`) when its size is no longer `size`, the size it was indexed at. */
  static openSized(path: string, size: number): PositionedFile {
    const file = new PositionedFile(path);
    if (file.size !== size) {
      file.close();
      throw badFile(path, 0, `the file changed size since it was opened (${size} bytes then, ${file.size} now)`, 'Open the source again after rewriting the file');
    }
    return file;
  }

  /**
   * Throw `ERR_BAD_FILE` unless `[offset, offset + length)` lies inside the file. `what` names the
   * region for the message ("the header", "tensor \"x\"").
   */
  checkRange(offset: number, length: number, what: string): void {
    if (!Number.isSafeInteger(offset) || offset < 0) throw badFile(this.path, offset, `${what} starts at an invalid offset ${offset}`);
    if (!Number.isSafeInteger(length) || length < 0) throw badFile(this.path, offset, `${what} has an invalid length ${length}`);
    if (offset + length > this.size) {
      throw badFile(this.path, offset, `${what} needs ${length} bytes but the file ends after ${this.size - offset} (file size ${this.size}); the file is truncated or its header is corrupt`);
    }
  }

  /** Read exactly `length` bytes at `offset` into `into` (at `intoOffset`), or a new buffer. */
  read(offset: number, length: number, what: string, into?: Uint8Array, intoOffset = 0): Uint8Array {
    this.checkRange(offset, length, what);
    const fd = this.#fd;
    if (fd === undefined) throw fileAccess(this.path, 'read it', new Error('the source was closed'));
    const out = into ?? new Uint8Array(length);
    let done = 0;
    while (done < length) {
      let n: number;
      try {
        n = readSync(fd, out, intoOffset + done, length - done, offset + done);
      } catch (cause) {
        throw fileAccess(this.path, `read ${length} bytes at offset ${offset}`, cause);
      }
      if (n === 0) throw badFile(this.path, offset + done, `${what}: the file ended early (it shrank while open?)`);
      done += n;
    }
    return into === undefined ? out : out.subarray(intoOffset, intoOffset + length);
  }

  close(): void {
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
  }
}

/** A safe integer from a header field, or `ERR_BAD_FILE` naming it. */
export function headerInt(path: string, offset: number, field: string, value: unknown, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const n = typeof value === 'bigint' ? (value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(value) : Number.NaN) : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < min || n > max) {
    throw badFile(path, offset, `${field} is ${typeof value === 'bigint' ? `${value}` : JSON.stringify(value)}; expected an integer in [${min}, ${max}]`);
  }
  return n;
}

/** A path `node:fs` takes: a string, or a name's bytes (a structured-cloned Buffer arrives as a plain Uint8Array). */
export function fsPath(p: string | Uint8Array): string | Buffer {
  return typeof p === 'string' ? p : Buffer.from(p.buffer, p.byteOffset, p.byteLength);
}
