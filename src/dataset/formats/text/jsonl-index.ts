// Internal: not exported from the package entry.
// The line index of a JSONL file: where each record's line starts and ends, built once in a single
// streaming pass (newlines found with Buffer.indexOf, 4 MiB at a time) and cached like the tar
// index (tar-index.ts): in `$XDG_CACHE_HOME/stoker/jsonl-index` (else ~/.cache/stoker/…, else the
// per-user temp dir), named by a hash of the file's absolute path, size and mtime, in private
// directories only. The rule: a record is a line holding anything but whitespace; blank lines (a
// trailing newline, an empty line between records) are not records, so record i is the i-th
// non-blank line. A cached index is used only after it has been checked against the file (same
// size and mtime, ranges rising and inside the file): a stale or planted index never steers reads.

import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileAccess } from '../../../errors.js';
import { PositionedFile } from '../file.js';
import { readCacheFile, writeCacheFile } from '../columns/cache-file.js';
import { type ShardStamp, indexCacheDir, isPrivateDir, stampOf } from '../tar/tar-index.js';

/** 'auto' (default): cache the index where it can be written (never failing for want of a cache); 'off': build it every time. */
export type JsonlIndexMode = 'auto' | 'off';

export interface JsonlIndex extends ShardStamp {
  readonly path: string;
  /** Per record: start byte, end byte (the newline excluded), in shared memory so that reader workers share one copy. */
  readonly lines: Float64Array;
}

const CHUNK = 4 * 2 ** 20;
const MAGIC = 'stoker-jsonl-index 1\n';

let builds = 0;

/** How many JSONL files this thread has indexed from their bytes (cache hits do not count). For tests. */
export function jsonlIndexBuilds(): number {
  return builds;
}

/** The cache directory of JSONL indexes, beside the tar indexes. */
export function jsonlCacheDir(): string {
  return join(dirname(indexCacheDir()), 'jsonl-index');
}

function cacheName(path: string, stamp: ShardStamp): string {
  return `${createHash('sha256').update(`${path}\0${stamp.size}\0${stamp.mtimeNs}`).digest('hex').slice(0, 32)}.idx`;
}

/** The index of `path` (absolute): from the cache when one matches, else built and cached. */
export function jsonlIndex(path: string, mode: JsonlIndexMode = 'auto'): JsonlIndex {
  const stamp = stampOf(path);
  if (mode === 'off') return buildJsonlIndex(path, stamp);
  const places = [join(jsonlCacheDir(), cacheName(path, stamp)), join(tmpdir(), `stoker-jsonl-index-${process.getuid?.() ?? 'user'}`, cacheName(path, stamp))];
  for (const place of places) {
    if (!isPrivateDir(dirname(place))) continue;
    const hit = readCache(place, path, stamp);
    if (hit !== undefined) return hit;
  }
  const index = buildJsonlIndex(path, stamp);
  for (const place of places) if (writeCache(place, index)) break;
  return index;
}

/** Index `path` from its bytes. */
export function buildJsonlIndex(path: string, stamp: ShardStamp = stampOf(path)): JsonlIndex {
  builds++;
  const file = new PositionedFile(path);
  try {
    if (file.size !== stamp.size) throw fileAccess(path, 'index it', new Error('the file changed while it was being indexed'));
    let out = new Float64Array(1024);
    let count = 0;
    const push = (start: number, end: number) => {
      if (2 * count + 2 > out.length) {
        const grown = new Float64Array(out.length * 2);
        grown.set(out);
        out = grown;
      }
      out[2 * count] = start;
      out[2 * count + 1] = end;
      count++;
    };
    // A line is a record once a byte other than space, tab or CR is seen in it.
    let start = 0;
    let content = false;
    for (let at = 0; at < file.size; at += CHUNK) {
      const buf = Buffer.from(file.read(at, Math.min(CHUNK, file.size - at), 'a chunk of lines').buffer);
      let from = 0;
      for (;;) {
        const nl = buf.indexOf(10, from);
        const stop = nl < 0 ? buf.length : nl;
        if (!content) for (let k = from; k < stop; k++) if (buf[k] !== 32 && buf[k] !== 9 && buf[k] !== 13) { content = true; break; }
        if (nl < 0) break;
        if (content) push(start, at + nl);
        start = at + nl + 1;
        content = false;
        from = nl + 1;
      }
    }
    if (content) push(start, file.size);
    const lines = new Float64Array(new SharedArrayBuffer(count * 16));
    lines.set(out.subarray(0, 2 * count));
    return { path, ...stamp, lines };
  } finally {
    file.close();
  }
}

function readCache(place: string, path: string, stamp: ShardStamp): JsonlIndex | undefined {
  const file = readCacheFile(place, MAGIC, 8);
  if (file === undefined) return undefined;
  const head = file.head as { path?: unknown; size?: unknown; mtimeNs?: unknown; count?: unknown } | null;
  const count = head?.count;
  if (head?.path !== path || head.size !== stamp.size || head.mtimeNs !== stamp.mtimeNs || !Number.isSafeInteger(count) || file.body.length !== (count as number) * 16) return undefined;
  const lines = new Float64Array(new SharedArrayBuffer((count as number) * 16));
  new Uint8Array(lines.buffer).set(file.body);
  let previous = 0;
  for (let k = 0; k < lines.length; k += 2) {
    const s = lines[k]!;
    const e = lines[k + 1]!;
    if (!(Number.isInteger(s) && Number.isInteger(e) && s >= previous && e > s && e <= stamp.size)) return undefined;
    previous = e;
  }
  return { path, ...stamp, lines };
}

/** False when it cannot (the index is then rebuilt at each open). */
function writeCache(place: string, index: JsonlIndex): boolean {
  return writeCacheFile(place, MAGIC, { path: index.path, size: index.size, mtimeNs: index.mtimeNs, count: index.lines.length / 2 }, 8, [index.lines]);
}
