// Internal: not exported from the package entry.
// The on-disk form of Stoker's cached indexes (the JSONL line index, the image-folder listing): a
// magic line, one JSON header line, zero padding to `align` bytes, then the binary body. The rules:
// a file is written through a temp file and a rename inside a private directory, so a reader sees a
// whole file or none; and any problem reading one means "no cache" — the caller validates the
// header and body against what it indexes, and rebuilds on any doubt.

import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { mkdir, open, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { isPrivateDir } from '../tar/tar-index.js';

/** The header (parsed, unchecked) and the body of the cache file at `place`; undefined when absent or not such a file. */
export function readCacheFile(place: string, magic: string, align: number): { head: unknown; body: Buffer } | undefined {
  let buf: Buffer;
  try {
    buf = readFileSync(place);
  } catch {
    return undefined;
  }
  const nl = buf.indexOf(10, magic.length);
  if (buf.toString('latin1', 0, magic.length) !== magic || nl < 0) return undefined;
  let head: unknown;
  try {
    head = JSON.parse(buf.toString('utf8', magic.length, nl));
  } catch {
    return undefined;
  }
  const start = nl + 1 + ((align - ((nl + 1) % align)) % align);
  return { head, body: buf.subarray(start) };
}

/** Write `head` and the `body` arrays (in order) to `place`; false when it cannot (the caller just goes uncached). */
export function writeCacheFile(place: string, magic: string, head: unknown, align: number, body: readonly ArrayBufferView[]): boolean {
  const headBytes = Buffer.from(`${magic}${JSON.stringify(head)}\n`);
  const pad = Buffer.alloc((align - (headBytes.length % align)) % align);
  const tmp = `${place}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    mkdirSync(dirname(place), { recursive: true, mode: 0o700 });
    if (!isPrivateDir(dirname(place))) return false;
    const parts = body.map((a) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
    writeFileSync(tmp, Buffer.concat([headBytes, pad, ...parts]), { flag: 'wx', mode: 0o600 });
    renameSync(tmp, place);
    return true;
  } catch {
    try {
      unlinkSync(tmp);
    } catch {
      // nothing was written
    }
    return false;
  }
}

/**
 * `writeCacheFile` on libuv's threads: the parts are written as they are (one writev, no joined
 * copy), so the thread that made them is free while the file is written. Resolves false when it
 * cannot; never rejects.
 */
export async function writeCacheFileAsync(place: string, magic: string, head: unknown, align: number, body: readonly ArrayBufferView[]): Promise<boolean> {
  const headBytes = Buffer.from(`${magic}${JSON.stringify(head)}\n`);
  const pad = Buffer.alloc((align - (headBytes.length % align)) % align);
  const tmp = `${place}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await mkdir(dirname(place), { recursive: true, mode: 0o700 });
    if (!isPrivateDir(dirname(place))) return false;
    const file = await open(tmp, 'wx', 0o600);
    try {
      const parts = [headBytes, pad, ...body.map((a) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength))];
      const total = parts.reduce((n, p) => n + p.byteLength, 0);
      let written = 0;
      // writev may write less than asked: go on from where it stopped.
      while (written < total) {
        let skip = written;
        const rest: Uint8Array[] = [];
        for (const p of parts) {
          if (skip >= p.byteLength) skip -= p.byteLength;
          else {
            rest.push(skip === 0 ? p : p.subarray(skip));
            skip = 0;
          }
        }
        const { bytesWritten } = await file.writev(rest);
        if (bytesWritten <= 0) throw new Error('short write');
        written += bytesWritten;
      }
    } finally {
      await file.close();
    }
    await rename(tmp, place);
    return true;
  } catch {
    await unlink(tmp).catch(() => undefined);
    return false;
  }
}
