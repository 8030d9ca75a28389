// Internal: not exported from the package entry.
// The index of one WebDataset tar shard: its samples (consecutive entries sharing a key) and, for
// each sample's fields, the byte range of the field's data in the file — built once by walking the
// tar headers, then cached in the user's cache directory (`$XDG_CACHE_HOME/stoker/tar-index`, else
// `~/.cache/stoker/tar-index`; beside the shard only when asked, never into the user's data folder
// unbidden) and invalidated when the shard's size or mtime changes. The rule: an index is only ever built from a shard that is a complete,
// well-formed tar archive; anything node-tar would warn about and skip is refused here, naming the
// shard, the byte offset and the entry, so a damaged shard never yields silently misgrouped samples.
//
// How the offsets are learned. node-tar's `Parser` is a stream: it never says where in the file an
// entry's data starts, and it needs every data byte written through it. Instead this walks the
// archive block by block with positioned reads and lets node-tar decode each 512-byte block with
// its `Header` class (checksum, octal and base-256 numbers, the ustar prefix, type flags) and each
// pax body with `Pax.parse`; the pending pax / GNU long-name overrides are carried from one header
// to the next exactly as `Parser` carries them (its `[EX]` / `[GEX]`). The walk itself is tar's
// framing: the data of the header at `off` starts at `off + 512`, and the next header follows the
// data rounded up to 512 bytes. Only the headers are read, so indexing a shard of large images
// costs one small read per entry, not a read of the whole file.
//
// Strictness beyond node-tar's (which warns and skips): a bad checksum, a size past the end of the
// file, a missing end-of-archive marker, non-zero bytes after it (a zeroed header mid-archive, or a
// concatenated archive), a metadata entry over 1 MiB, a sparse file, any entry that is not a
// regular file or a directory (links, devices, FIFOs), and a name (or pax / long-name body) that is
// not valid UTF-8 — which node-tar decodes lossily, so `k\xe9.cls` and `k\xe8.idx` would merge into
// one sample — are all errors. Directories are skipped.

import { isUtf8 } from 'node:buffer';
import { createHash, randomBytes } from 'node:crypto';
import { lstatSync, mkdirSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { Header, Pax } from 'tar';
import { type LoaderError, badFile, describeCause, fileAccess, show } from '../../../errors.js';
import { PositionedFile, fsPath, headerInt } from '../file.js';

/**
 * Where the index of a shard is cached. 'auto' (default): the per-user cache directory
 * (`cacheIndexPath`), else, when that cannot be written, the per-user temp directory; never fails
 * for want of a cache. 'cache', 'temp', 'beside' (`.<shard>.stoker-idx.json` in the shard's own
 * folder): only there, failing when it cannot be written. 'off': index every time, write nothing.
 */
export type TarIndexMode = 'auto' | 'cache' | 'beside' | 'temp' | 'off';

/** What identifies one version of a shard: an index is valid only for the same size and mtime. */
export interface ShardStamp {
  readonly size: number;
  /** Modification time in nanoseconds, as a decimal string (exact, unlike a float of milliseconds). */
  readonly mtimeNs: string;
}

export interface ShardIndex extends ShardStamp {
  /** Absolute path of the shard. */
  readonly path: string;
  /** Sample keys in archive order. */
  readonly keys: readonly string[];
  /** Field names seen in this shard (lower-cased extensions), in first-seen order. */
  readonly fields: readonly string[];
  /**
   * Per sample, per field of `fields`: data offset, then size; the offset is −1 (size 0) when the
   * sample has no such field. Length `keys.length × fields.length × 2`.
   */
  readonly table: Float64Array;
  /** Per sample: the offset of its first header (for messages). */
  readonly headers: Float64Array;
}

const BLOCK = 512;
/** Header reads go through a window this large, so that runs of small entries cost one read. */
const WINDOW = 16 * 1024;
/** node-tar's own limit for a pax or GNU long-name body. */
const MAX_META = 1024 * 1024;
const FORMAT = 'stoker-tar-index';
const VERSION = 1;
const TRUNCATED = 'The shard is truncated or damaged: write or copy it again';
const CORRUPT = 'The shard is damaged, or not a tar archive: write or copy it again';

let builds = 0;

/** How many shards this thread has indexed from their bytes (cache hits do not count). For tests. */
export function indexBuilds(): number {
  return builds;
}

/** The size and mtime of a shard, or ERR_FILE_ACCESS naming it. */
export function stampOf(path: string, openAs: string | Uint8Array = path): ShardStamp {
  let st;
  try {
    st = statSync(fsPath(openAs), { bigint: true });
  } catch (cause) {
    throw fileAccess(path, 'read the shard', cause);
  }
  if (!st.isFile()) throw fileAccess(path, 'read the shard', new Error('not a regular file'));
  return { size: Number(st.size), mtimeNs: st.mtimeNs.toString() };
}

/** The cache file beside a shard: hidden, so that a glob over the shards never picks it up. */
export function besideIndexPath(shard: string): string {
  return join(dirname(shard), `.${basename(shard)}.stoker-idx.json`);
}

/** The name of a cached index: a hash of the shard's absolute path, size and mtime. */
function cacheName(shard: string, stamp: ShardStamp, openAs: string | Uint8Array = shard): string {
  // A byte path is hashed by its bytes: two names that differ only in bytes that are not UTF-8 show alike.
  const key = typeof openAs === 'string' ? shard : `bytes:${Buffer.from(openAs).toString('hex')}`;
  return `${createHash('sha256').update(`${key}\0${stamp.size}\0${stamp.mtimeNs}`).digest('hex').slice(0, 32)}.json`;
}

/**
 * The per-user cache directory of tar indexes: `$XDG_CACHE_HOME/stoker/tar-index` (an absolute
 * XDG_CACHE_HOME only, as the XDG spec says), else `~/.cache/stoker/tar-index`. Created 0700.
 */
export function indexCacheDir(): string {
  const xdg = process.env.XDG_CACHE_HOME;
  return join(xdg !== undefined && isAbsolute(xdg) ? xdg : join(homedir(), '.cache'), 'stoker', 'tar-index');
}

/** The cache file of one shard version in the per-user cache directory. */
export function cacheIndexPath(shard: string, stamp: ShardStamp, openAs: string | Uint8Array = shard): string {
  return join(indexCacheDir(), cacheName(shard, stamp, openAs));
}

/**
 * The cache file in the temp dir. The directory is per user and private (0700): an index planted
 * by another user would steer reads.
 */
export function tempIndexPath(shard: string, stamp: ShardStamp, openAs: string | Uint8Array = shard): string {
  return join(tmpdir(), `stoker-tar-index-${process.getuid?.() ?? 'user'}`, cacheName(shard, stamp, openAs));
}

/** Where `mode` reads a cached index from, in order, and writes one to (the first that works; 'auto' never fails). */
function placesOf(shard: string, stamp: ShardStamp, mode: Exclude<TarIndexMode, 'off'>, openAs: string | Uint8Array): { path: string; shared: boolean }[] {
  const cache = { path: cacheIndexPath(shard, stamp, openAs), shared: false };
  const temp = { path: tempIndexPath(shard, stamp, openAs), shared: false };
  // A shard whose name is not UTF-8 gets no index beside it: the index's own name would not be either.
  if (mode === 'beside' && typeof openAs !== 'string') return [cache];
  if (mode === 'auto') return [cache, temp];
  if (mode === 'cache') return [cache];
  if (mode === 'temp') return [temp];
  // Beside the shard: a folder the user chose, possibly shared with others, so not held to the
  // private-directory rule (the index is still checked against the shard before it is used).
  return [{ path: besideIndexPath(shard), shared: true }];
}

/**
 * The index of `shard` (an absolute path): from the cache when one matches the shard's current
 * size and mtime and is well-formed, else built from the shard and written to the cache.
 */
export function shardIndex(shard: string, mode: TarIndexMode, openAs: string | Uint8Array = shard): ShardIndex {
  const stamp = stampOf(shard, openAs);
  if (mode === 'off') return buildIndex(shard, stamp, openAs);
  const places = placesOf(shard, stamp, mode, openAs);
  for (const place of places) {
    if (!place.shared && !isPrivateDir(dirname(place.path))) continue;
    const cached = readCache(place.path, shard, stamp);
    if (cached !== undefined) return cached;
  }
  const index = buildIndex(shard, stamp, openAs);
  writeCache(index, mode, places);
  return index;
}

/**
 * A directory only this user can write to: owned by this user with no group or other write bit,
 * in a parent that no other user can swap it out of (owned by this user or root, and not writable
 * by others unless sticky, as /tmp is). Where there are no uids (Windows), any directory is.
 */
export function isPrivateDir(dir: string): boolean {
  const uid = process.getuid?.();
  if (uid === undefined) return true;
  try {
    const st = lstatSync(dir);
    if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o022) !== 0) return false;
    const up = lstatSync(dirname(dir));
    return up.isDirectory() && (up.uid === uid || up.uid === 0) && ((up.mode & 0o022) === 0 || (up.mode & 0o1000) !== 0);
  } catch {
    return false;
  }
}

/** Index `shard` from its bytes (no cache). */
export function buildIndex(shard: string, stamp: ShardStamp = stampOf(shard), openAs: string | Uint8Array = shard): ShardIndex {
  builds++;
  const file = new PositionedFile(shard, openAs);
  try {
    if (file.size !== stamp.size) throw fileAccess(shard, 'index it', new Error('the file changed while it was being indexed'));
    const keys: string[] = [];
    const heads: number[] = [];
    const samples: Map<number, readonly [number, number]>[] = [];
    const fieldIds = new Map<string, number>();
    const seen = new Set<string>();
    let current: Map<number, readonly [number, number]> | undefined;
    let currentKey = '';
    walkEntries(file, (name, headerOffset, dataOffset, size) => {
      const { key, field } = splitName(shard, name, headerOffset);
      if (current === undefined || key !== currentKey) {
        if (seen.has(key)) {
          throw badFile(
            shard,
            headerOffset,
            `sample ${show(key)} reappears at entry ${show(name)} after other samples; a sample's files must be consecutive (WebDataset groups consecutive entries by key)`,
            "Write the shard with each sample's files together (sort the file list before tar)",
          );
        }
        seen.add(key);
        current = new Map();
        currentKey = key;
        samples.push(current);
        keys.push(key);
        heads.push(headerOffset);
      }
      let id = fieldIds.get(field);
      if (id === undefined) fieldIds.set(field, (id = fieldIds.size));
      if (current.has(id)) {
        throw badFile(shard, headerOffset, `sample ${show(key)} has two ${show(field)} entries (entry ${show(name)} repeats one; field names are lower-cased extensions)`, 'Each sample holds one file per field');
      }
      current.set(id, [dataOffset, size]);
    });
    const nf = fieldIds.size;
    const table = new Float64Array(samples.length * nf * 2);
    samples.forEach((fields, s) => {
      for (let f = 0; f < nf; f++) {
        const hit = fields.get(f);
        table[(s * nf + f) * 2] = hit === undefined ? -1 : hit[0];
        table[(s * nf + f) * 2 + 1] = hit === undefined ? 0 : hit[1];
      }
    });
    return { path: shard, ...stamp, keys, fields: [...fieldIds.keys()], table, headers: Float64Array.from(heads) };
  } finally {
    file.close();
  }
}

/** WebDataset's naming: key = the path up to the first dot of the file name, field = the rest, lower-cased. */
function splitName(shard: string, name: string, at: number): { key: string; field: string } {
  const base = name.slice(name.lastIndexOf('/') + 1);
  const dot = base.indexOf('.');
  if (dot <= 0 || dot === base.length - 1) {
    throw badFile(
      shard,
      at,
      `tar entry ${show(name)} is not named <key>.<field>: WebDataset takes a sample's key from a file name up to its first dot and the field from the rest ("000123.jpg" is field "jpg" of sample "000123")`,
      'Write the shard with every file named <key>.<field>',
    );
  }
  return { key: name.slice(0, name.length - base.length + dot), field: base.slice(dot + 1).toLowerCase() };
}

/** Header blocks through a small read window. Returns Buffers: node-tar's Header decodes only Buffers. */
class Blocks {
  readonly #file: PositionedFile;
  #start = 0;
  #buf: Buffer = Buffer.alloc(0);

  constructor(file: PositionedFile) {
    this.#file = file;
  }

  /** The 512-byte block at `off` (the caller checked that the file holds it). */
  at(off: number): Buffer {
    if (off < this.#start || off + BLOCK > this.#start + this.#buf.length) {
      const bytes = this.#file.read(off, Math.min(WINDOW, this.#file.size - off), 'a tar header');
      this.#buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      this.#start = off;
    }
    return this.#buf.subarray(off - this.#start, off - this.#start + BLOCK);
  }
}

type PaxFields = Pax | Record<string, unknown>;

/** Entry types a pending pax / long-name header applies to (node-tar's `normalFsTypes`, by name). */
const NORMAL_TYPES = new Set(['File', 'OldFile', 'Link', 'SymbolicLink', 'CharacterDevice', 'BlockDevice', 'Directory', 'FIFO', 'ContiguousFile', 'GNUDumpDir']);

/**
 * Walk every entry of the archive, calling `visit` for each regular file with its name, header
 * offset, data offset and size. See the header note for what is refused.
 */
export function walkEntries(file: PositionedFile, visit: (name: string, headerOffset: number, dataOffset: number, size: number) => void): void {
  const { path, size: fileSize } = file;
  if (fileSize === 0) {
    throw badFile(path, 0, 'the file is empty: not a tar archive (even an archive without entries holds its 1024-byte end-of-archive marker)', TRUNCATED);
  }
  if (fileSize < BLOCK) {
    throw badFile(path, 0, `a tar header needs 512 bytes but the file holds ${fileSize}${compressed(file.read(0, fileSize, 'the first bytes'), 0)}`, TRUNCATED);
  }
  const blocks = new Blocks(file);
  let ex: PaxFields | undefined;
  let gex: PaxFields | undefined;
  let off = 0;
  for (;;) {
    if (off + BLOCK > fileSize) {
      const what = off >= fileSize ? 'the archive ends without its end-of-archive marker (a zero block)' : `a tar header needs 512 bytes but the file ends after ${fileSize - off}`;
      throw badFile(path, off, what, TRUNCATED);
    }
    const block = blocks.at(off);
    let h: Header;
    try {
      h = new Header(block, 0, ex as never, gex as never);
    } catch (cause) {
      throw badFile(path, off, `unreadable tar header: ${describeCause(cause)}${compressed(block, off)}`, CORRUPT);
    }
    if (h.nullBlock) {
      checkZeroTail(file, off + BLOCK);
      return;
    }
    if (!h.cksumValid) throw badFile(path, off, `tar header checksum mismatch: the header is corrupt${compressed(block, off)}`, CORRUPT);
    // A pending pax or GNU long name replaces the whole name, ustar prefix included: Header prepends
    // the prefix to it, and ReadEntry then puts the override back; do as ReadEntry does.
    const override = NORMAL_TYPES.has(h.type) ? (ex as { path?: unknown } | undefined)?.path : undefined;
    const name = typeof override === 'string' ? override : (h.path ?? '');
    if (name.length === 0) throw badFile(path, off, 'tar header without a file name', CORRUPT);
    // node-tar decodes header names as UTF-8, lossily: two different byte names could become one
    // key and merge two samples. (Pax and long-name bodies were checked when they were read.)
    if (typeof override !== 'string' && !headerNameIsUtf8(block)) throw notUtf8(path, off, name);
    const what = `tar entry ${show(name)}`;
    const size = headerInt(path, off, `the size of ${what}`, h.size);
    const dataOffset = off + BLOCK;
    file.checkRange(dataOffset, size, `the data of ${what}`);
    switch (h.type) {
      case 'ExtendedHeader':
      case 'OldExtendedHeader':
      case 'GlobalExtendedHeader': {
        const text = metaText(file, dataOffset, size, what, off);
        if (text.includes('GNU.sparse.')) throw badFile(path, off, `${what} describes a sparse file, which a shard cannot hold`, 'Write the shard without --sparse');
        if (h.type === 'GlobalExtendedHeader') gex = Pax.parse(text, gex as never, true);
        else ex = Pax.parse(text, ex as never, false);
        break;
      }
      case 'NextFileHasLongPath':
      case 'OldGnuLongPath':
      case 'NextFileHasLongLinkpath': {
        // As Parser's [EMITMETA]: the name is the body up to its first NUL.
        const text = metaText(file, dataOffset, size, what, off).replace(/\0[\s\S]*$/, '');
        ex = Object.assign(Object.create(null) as Record<string, unknown>, ex, { [h.type === 'NextFileHasLongLinkpath' ? 'linkpath' : 'path']: text });
        break;
      }
      case 'File':
      case 'OldFile':
      case 'ContiguousFile':
        visit(name, off, dataOffset, size);
        ex = undefined;
        break;
      case 'Directory':
        ex = undefined;
        break;
      default:
        throw badFile(
          path,
          off,
          `${what} is of type ${h.type} (flag ${show(h.typeKey)}); a shard holds regular files (directories are skipped)`,
          'Write the shard from regular files (tar --dereference stores the files that links point to)',
        );
    }
    off = dataOffset + Math.ceil(size / BLOCK) * BLOCK;
  }
}

/** A hint for a block that fails to decode at the start of the file: a compressed archive. */
function compressed(b: Uint8Array, off: number): string {
  if (off !== 0) return '';
  const kind =
    b[0] === 0x1f && b[1] === 0x8b ? 'gzip'
    : b[0] === 0x28 && b[1] === 0xb5 && b[2] === 0x2f && b[3] === 0xfd ? 'zstd'
    : b[0] === 0x42 && b[1] === 0x5a && b[2] === 0x68 ? 'bzip2'
    : b[0] === 0xfd && b[1] === 0x37 && b[2] === 0x7a && b[3] === 0x58 && b[4] === 0x5a ? 'xz'
    : undefined;
  return kind === undefined ? ' (or this is not a tar archive)' : ` (the file is ${kind}-compressed; random access needs a plain .tar: decompress it first)`;
}

function metaText(file: PositionedFile, offset: number, size: number, what: string, header: number): string {
  if (size > MAX_META) throw badFile(file.path, offset, `${what} is a metadata entry of ${size} bytes, more than the ${MAX_META} one may hold`, CORRUPT);
  const bytes = file.read(offset, size, `the body of ${what}`);
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  if (!isUtf8(bytes)) throw notUtf8(file.path, header, text.replace(/\0[\s\S]*$/, '').slice(0, 200));
  return text;
}


/** The name field of a header block, and a POSIX ustar header's prefix field (GNU headers keep other data there), are UTF-8. */
function headerNameIsUtf8(block: Uint8Array): boolean {
  const field = (at: number, len: number) => {
    const b = block.subarray(at, at + len);
    const nul = b.indexOf(0);
    return nul < 0 ? b : b.subarray(0, nul);
  };
  const ustar = block[257] === 0x75 && block[258] === 0x73 && block[259] === 0x74 && block[260] === 0x61 && block[261] === 0x72 && block[262] === 0;
  return isUtf8(field(0, 100)) && (!ustar || isUtf8(field(345, 155)));
}

function notUtf8(path: string, at: number, name: string): LoaderError {
  return badFile(
    path,
    at,
    `tar entry ${show(name)} (shown with U+FFFD for the bad bytes) has a name that is not valid UTF-8: read lossily, two different names could become one sample key`,
    'Write the shard with UTF-8 file names (convmv -f latin1 -t utf8 --notest -r <dir> renames them before tar)',
  );
}

/** After the end-of-archive marker only zero padding may follow. */
function checkZeroTail(file: PositionedFile, from: number): void {
  for (let off = from; off < file.size; ) {
    const n = Math.min(64 * 1024, file.size - off);
    const bytes = file.read(off, n, 'the padding after the end of the archive');
    const i = bytes.findIndex((b) => b !== 0);
    if (i >= 0) {
      throw badFile(
        file.path,
        off + i,
        `non-zero bytes after the end-of-archive marker at byte ${from - BLOCK}: a header was zeroed inside the archive, or data was appended after its end`,
        'Write the shard again (concatenated tar files are not supported: pack their files into one archive)',
      );
    }
    off += n;
  }
}

// --- the cache ---------------------------------------------------------------------------------

interface CacheFile {
  format: typeof FORMAT;
  version: typeof VERSION;
  path: string;
  size: number;
  mtimeNs: string;
  keys: string[];
  fields: string[];
  table: number[];
  headers: number[];
}

/** A cached index, or undefined when there is none or it is stale, unreadable or malformed. */
function readCache(place: string, shard: string, stamp: ShardStamp): ShardIndex | undefined {
  let o: Partial<CacheFile>;
  try {
    o = JSON.parse(readFileSync(place, 'utf8')) as Partial<CacheFile>;
  } catch {
    return undefined;
  }
  if (o === null || typeof o !== 'object') return undefined;
  if (o.format !== FORMAT || o.version !== VERSION || o.path !== shard || o.size !== stamp.size || o.mtimeNs !== stamp.mtimeNs) return undefined;
  const { keys, fields, table, headers } = o;
  if (!Array.isArray(keys) || !keys.every((k) => typeof k === 'string' && k.length > 0) || new Set(keys).size !== keys.length) return undefined;
  if (!Array.isArray(fields) || !fields.every((f) => typeof f === 'string' && f.length > 0) || new Set(fields).size !== fields.length) return undefined;
  const nf = fields.length;
  if (!Array.isArray(table) || table.length !== keys.length * nf * 2 || !Array.isArray(headers) || headers.length !== keys.length) return undefined;
  const size = stamp.size;
  for (let s = 0; s < keys.length; s++) {
    const head = headers[s];
    if (!Number.isSafeInteger(head) || head! < 0 || head! % BLOCK !== 0 || head! + BLOCK > size) return undefined;
    let present = 0;
    for (let f = 0; f < nf; f++) {
      const at = table[(s * nf + f) * 2];
      const len = table[(s * nf + f) * 2 + 1];
      if (at === -1 && len === 0) continue;
      if (!Number.isSafeInteger(at) || !Number.isSafeInteger(len) || at! < BLOCK || at! % BLOCK !== 0 || len! < 0 || at! + len! > size) return undefined;
      present++;
    }
    if (present === 0) return undefined;
  }
  return { path: shard, size, mtimeNs: stamp.mtimeNs, keys, fields, table: Float64Array.from(table), headers: Float64Array.from(headers) };
}

function writeCache(index: ShardIndex, mode: Exclude<TarIndexMode, 'off'>, places: readonly { path: string; shared: boolean }[]): void {
  const body: CacheFile = {
    format: FORMAT,
    version: VERSION,
    path: index.path,
    size: index.size,
    mtimeNs: index.mtimeNs,
    keys: [...index.keys],
    fields: [...index.fields],
    table: Array.from(index.table),
    headers: Array.from(index.headers),
  };
  const text = JSON.stringify(body);
  const fix: Record<typeof mode, string> = {
    beside: "Make the shards' directory writable, or leave `index` at its default 'auto' (the user's cache directory)",
    cache: `Make ${indexCacheDir()} writable and private (0700) or set XDG_CACHE_HOME, or pass index: 'auto' (falls back to the temp dir)`,
    temp: "Free space in the temp dir, or pass index: 'off'",
    auto: '',
  };
  for (const place of places) {
    try {
      writeAtomic(place.path, text, place.shared, mode === 'auto' ? undefined : fix[mode]);
      return;
    } catch (error) {
      if (mode !== 'auto') throw error;
      // 'auto' never fails a read for want of a cache: the index in hand is correct.
    }
  }
}

/** Write through a temp file and a rename, so that a reader never sees half an index. */
function writeAtomic(dest: string, text: string, shared: boolean, fix?: string): void {
  const tmp = `${dest}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    if (!shared) {
      mkdirSync(dirname(dest), { recursive: true, mode: 0o700 });
      if (!isPrivateDir(dirname(dest))) throw new Error('the directory is not private to this user (owned by another, or writable by group or others); its indexes would not be trusted');
    }
    writeFileSync(tmp, text, { flag: 'wx', mode: 0o600 });
    renameSync(tmp, dest);
  } catch (cause) {
    try {
      unlinkSync(tmp);
    } catch {
      // nothing was written
    }
    const error = fileAccess(dest, 'write the shard index', cause);
    if (fix !== undefined) error.message += `. ${fix}`;
    throw error;
  }
}
