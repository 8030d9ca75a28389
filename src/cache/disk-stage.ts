// Internal: not exported from the package entry.
// The disk stage: a tier below the RAM sample cache. Samples that did not fit in RAM are appended to
// a pack file on local disk, so later epochs read them from the drive instead of a slow source. It
// pays only when the source is slower than local disk. Best effort: it never fails training — a
// write error switches it off (reads of already-staged samples keep working), a record that fails
// verification reads as 'corrupt' and the caller falls through to the source.
// The one rule: only the stage made by create() owns the file, and the file has no name once
// create() returns (NOTE [Stage cleanup]): other threads reach it through `shared.path`, a
// descriptor path of the owner's open file, so they must attach while the owner is open. Handles
// from attach() only ever close their own descriptor.
//
// NOTE [Pack-file record]
// Record k (one sample) lives at byte offset k × recordBytes; no file header, no padding:
//   offset 0   u32 LE  magic 0x53544b52 ('STKR')
//   offset 4   u32 LE  sample id
//   offset 8   u32 LE  payload length (= payloadBytes)
//   offset 12  u32 LE  CRC-32 of the payload (zlib.crc32)
//   offset 16  payload (payloadBytes bytes)
// Every field is checked on read; any mismatch, a short read (truncated file) or an I/O error reads
// as 'corrupt', is counted, and is never handed out as data.
//
// NOTE [Disk stage protocol]
// The index and counters live in SharedArrayBuffers so the main thread and every reader worker see
// one stage; each thread has its own descriptor and uses positioned reads and writes only.
// - index[id]: 0 absent, -1 claimed by a writer, k+1 = record k. A writer claims with
//   compareExchange(0 → -1), so one id is written at most once however many threads admit it.
// - control[NEXT] is the next free record, taken by compare-and-swap below maxRecords (never
//   incremented past it, so a full stage cannot overflow the counter).
// - index[id] = k+1 is published with Atomics.store only after the whole record was written, so a
//   reader that sees k+1 reads a complete record. A claim that ends without a write resets to 0.
// - control[LATCHED] flips 0 → 1 by compare-and-swap on the first write error; the thread whose
//   swap succeeded prints the one warning. After that, admits decline and reads keep serving.
// - A record that reads corrupt is unpublished (k+1 → 0) so the sample can be staged again into a
//   fresh record instead of failing verification every epoch.
// - control[REMOVED] is set when the owner closes (or a signal removed the file): every handle then
//   reads 'miss' and declines, so no thread keeps spending disk on an unlinked file.
// A thread that dies between its claim and its publish leaves index[id] = -1: that id is never
// staged (it reads 'miss'), which costs a source read, never a wrong one.
//
// NOTE [Stage cleanup]
// The pack file is ephemeral and must never outlive its process, however the process dies (SIGKILL,
// SIGHUP, an OOM kill included). So create() opens it, then unlinks it and removes its private
// directory at once: the disk space lives exactly as long as an open descriptor, and the kernel
// frees it when the last one closes, at exit of any kind. Reader workers share the process's
// descriptor table, so each opens its own descriptor on the unnamed file through
// /dev/fd/<owner's fd> (on Linux a fresh open of the same inode, on macOS a dup). Because a closed
// descriptor number can be reused for another file, attach() re-checks control[REMOVED] after its
// open: the owner sets it before closing its descriptor.
// Fallback, where a file cannot be reached through /dev/fd (Windows): the name stays, create()
// first sweeps `stoker-stage-<pid>-*` directories under the same base whose pid is dead, and one
// process-wide registry removes live stages on 'exit' and on SIGINT/SIGTERM/SIGHUP (then, when no
// other listener for that signal remains, re-raises it so the process still dies of it).

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { crc32 } from 'node:zlib';
import { LoaderError, describeCause, diskStageError, invalidOption, stageDirUnwritable } from '../errors.js';

/** Structured-cloneable description, posted to workers (SharedArrayBuffer-backed arrays share memory). */
export interface DiskStageShared {
  /** Where another thread opens the pack file: /dev/fd/<owner's fd> once it is unlinked, else its name. */
  readonly path: string;
  /** The pack file's name when it was created (for messages; gone once unlinked). */
  readonly file: string;
  /** The private directory it was created in (removed with the name). */
  readonly dir: string;
  /** True when the file has no name any more (NOTE [Stage cleanup]): nothing can leak. */
  readonly unlinked: boolean;
  /** Bytes of one sample. */
  readonly payloadBytes: number;
  /** HEADER_BYTES + payloadBytes (no padding: positioned reads gain nothing from alignment). */
  readonly recordBytes: number;
  /** floor(budget bytes / recordBytes), capped so record numbers fit the Int32 index. */
  readonly maxRecords: number;
  /** SAB-backed, one entry per sample id: 0 absent, -1 being written, k+1 = record k. */
  readonly index: Int32Array;
  /** SAB-backed counters, see the slot constants below. */
  readonly control: Int32Array;
}

/** Record magic, 'STKR'. */
export const RECORD_MAGIC = 0x53544b52;
/** magic, id, length, crc — four u32. */
export const HEADER_BYTES = 16;

// control slots
/** Next free record. */
const NEXT = 0;
/** 1 once a write failed: no more admits. */
const LATCHED = 1;
/** Reads that failed verification or I/O, all threads. */
const CORRUPT = 2;
/** Records written and published. */
const RECORDS = 3;
/** 1 once the owner closed or a signal removed the file. */
const REMOVED = 4;
const CONTROL_SLOTS = 8;

/** Largest payload: the record must fit a Buffer and its length a u32. */
const MAX_PAYLOAD_BYTES = 0x7fffffff - HEADER_BYTES;
/** index stores k+1 in an Int32. */
const MAX_RECORDS = 0x7ffffffe;

export type ReadResult = 'hit' | 'miss' | 'corrupt';
export type AdmitResult = 'admitted' | 'declined' | 'failed';

export interface DiskStageOptions {
  /** Budget in GiB (× 2^30 bytes); fractions allowed. */
  gigabytes: number;
  /** Where the private stage directory goes. Default os.tmpdir(). Created if missing, as flodl does. */
  dir?: string;
  /** Bytes of one sample; every sample of a loader has the same size. */
  payloadBytes: number;
  /** Number of sample ids (ids are 0 … length−1). */
  length: number;
  /** Where warnings go (tmpfs directory, write failure). Default: stderr. */
  warn?: (message: string) => void;
  /** Test hook: behave as on a platform without /dev/fd (keep the name, sweep, clean up on exit). */
  keepName?: boolean;
}

const defaultWarn = (message: string): void => console.error(message);

/** A warning must never turn into a failure: a throwing `warn` callback is ignored. */
function quiet(warn: (message: string) => void): (message: string) => void {
  return (message) => {
    try {
      warn(message);
    } catch {
      // the message is lost, the stage keeps its promise of never failing training
    }
  };
}

export class DiskStage {
  readonly shared: DiskStageShared;
  readonly #warn: (message: string) => void;
  readonly #owner: boolean;
  #fd: number;
  #closed = false;
  /** One record's bytes, reused by read and admit (each handle is used by one thread). */
  readonly #record: Buffer;
  readonly #view: DataView;

  private constructor(shared: DiskStageShared, fd: number, owner: boolean, warn: (message: string) => void) {
    this.shared = shared;
    this.#fd = fd;
    this.#owner = owner;
    this.#warn = warn;
    this.#record = Buffer.alloc(shared.recordBytes);
    this.#view = new DataView(this.#record.buffer, this.#record.byteOffset, this.#record.byteLength);
  }

  /**
   * Main thread. Creates `<dir or os.tmpdir()>/stoker-stage-<pid>-XXXXXX/` (mode 0700) and the pack file
   * inside it (mode 0600, created exclusively), warns if the directory is RAM-backed, then removes
   * both names, keeping only the open file (NOTE [Stage cleanup]; the fallback keeps them until
   * close(), exit or a signal).
   */
  static create(options: DiskStageOptions): DiskStage {
    const { gigabytes, payloadBytes, length } = options;
    const warn = quiet(options.warn ?? defaultWarn);
    if (typeof gigabytes !== 'number' || !Number.isFinite(gigabytes) || gigabytes <= 0) {
      throw invalidOption('diskStage.gigabytes', 'a finite number > 0', gigabytes, 'Omit `diskStage` (or set gigabytes: 0) to turn the disk stage off');
    }
    if (options.dir !== undefined && (typeof options.dir !== 'string' || options.dir === '')) {
      throw invalidOption('diskStage.dir', 'a directory path', options.dir, 'Omit it to stage under the system temp directory');
    }
    if (!Number.isSafeInteger(payloadBytes) || payloadBytes < 1 || payloadBytes > MAX_PAYLOAD_BYTES) {
      throw invalidOption('payloadBytes', `an integer in [1, ${MAX_PAYLOAD_BYTES}]`, payloadBytes);
    }
    if (!Number.isSafeInteger(length) || length < 0 || length > 0x7fffffff) {
      throw invalidOption('length', 'an integer in [0, 2^31 − 1]', length);
    }

    const base = path.resolve(options.dir ?? os.tmpdir());
    // A budget the drive cannot hold is a promise the stage would break mid-epoch (ENOSPC turns it off).
    const free = freeBytesUnder(base);
    if (free !== undefined && gigabytes * 2 ** 30 > free) {
      throw invalidOption('diskStage.gigabytes', `at most the free space under ${JSON.stringify(base)} (${(free / 2 ** 30).toFixed(1)} GiB)`, gigabytes, 'Lower it, or point diskStage.dir at a drive with more room');
    }
    let dir: string;
    try {
      makeDirs(base);
      dir = fs.mkdtempSync(path.join(base, `stoker-stage-${process.pid}-`)); // mkdtemp(3): mode 0700, fresh name; the pid tells ranks' stages apart
    } catch (err) {
      throw stageDirUnwritable(base, 'the stage directory cannot be created there', err);
    }
    const file = path.join(dir, 'stage.pack');
    let fd: number;
    try {
      fd = fs.openSync(file, 'wx+', 0o600);
    } catch (err) {
      removeQuietly(file, dir);
      throw stageDirUnwritable(base, `the pack file ${file} cannot be created`, err);
    }

    warnIfRamBacked(dir, warn);

    // NOTE [Stage cleanup]: drop the name at once where another thread can still reach the file.
    const byFd = options.keepName === true ? undefined : descriptorPath(fd);
    if (byFd !== undefined) removeQuietly(file, dir);
    else sweepStale(base, dir);
    const recordBytes = HEADER_BYTES + payloadBytes;
    const budget = gigabytes * 2 ** 30;
    const maxRecords = Math.min(Math.floor(budget / recordBytes), MAX_RECORDS, Math.floor(Number.MAX_SAFE_INTEGER / recordBytes));
    const shared: DiskStageShared = {
      path: byFd ?? file,
      file,
      dir,
      unlinked: byFd !== undefined,
      payloadBytes,
      recordBytes,
      maxRecords,
      index: new Int32Array(new SharedArrayBuffer(length * 4)),
      control: new Int32Array(new SharedArrayBuffer(CONTROL_SLOTS * 4)),
    };
    const stage = new DiskStage(shared, fd, true, warn);
    if (!shared.unlinked) register(stage.shared);
    return stage;
  }

  /** In a reader worker (or anywhere): open its own descriptor on a live stage. Never removes the file. */
  static attach(shared: DiskStageShared, warn?: (message: string) => void): DiskStage {
    let fd: number;
    try {
      if (Atomics.load(shared.control, REMOVED) === 1) throw new Error('the stage was closed by its owner');
      fd = fs.openSync(shared.path, 'r+');
    } catch (err) {
      throw attachFailed(shared, err);
    }
    // The owner marks REMOVED before closing its descriptor: seen unset after our open, the number
    // we opened was still the owner's pack file, not a reused descriptor (NOTE [Stage cleanup]).
    if (Atomics.load(shared.control, REMOVED) === 1) {
      fs.closeSync(fd);
      throw attachFailed(shared, new Error('the stage was closed by its owner'));
    }
    return new DiskStage(shared, fd, false, quiet(warn ?? defaultWarn));
  }

  /** Read sample `id` into `out`. 'miss': not staged or out of range; 'corrupt': failed verification (counted; `out` untouched). */
  read(id: number, out: Uint8Array): ReadResult {
    const s = this.shared;
    if (out.length !== s.payloadBytes) throw sizeMismatch('read', 'out', out.length, s.payloadBytes);
    if (this.#closed || !inRange(id, s.index.length) || Atomics.load(s.control, REMOVED) === 1) return 'miss';
    const slot = Atomics.load(s.index, id);
    if (slot <= 0) return 'miss';
    const k = slot - 1;
    if (!this.#readRecord(k) || !this.#verify(id)) {
      Atomics.add(s.control, CORRUPT, 1);
      // Unpublish so the sample can be staged again (NOTE [Disk stage protocol]).
      Atomics.compareExchange(s.index, id, slot, 0);
      return 'corrupt';
    }
    out.set(this.#record.subarray(HEADER_BYTES));
    return 'hit';
  }

  /** Stage sample `id` once. 'declined': full, latched, already staged or claimed, out of range, closed. 'failed': the write failed and latched the stage off. */
  admit(id: number, payload: Uint8Array): AdmitResult {
    const s = this.shared;
    if (payload.length !== s.payloadBytes) throw sizeMismatch('admit', 'payload', payload.length, s.payloadBytes);
    if (this.#closed || !inRange(id, s.index.length) || this.latched || Atomics.load(s.control, REMOVED) === 1) return 'declined';
    if (Atomics.compareExchange(s.index, id, 0, -1) !== 0) return 'declined';
    const k = takeRecord(s.control, s.maxRecords);
    if (k < 0 || this.latched) {
      Atomics.store(s.index, id, 0);
      return 'declined';
    }
    const v = this.#view;
    v.setUint32(0, RECORD_MAGIC, true);
    v.setUint32(4, id, true);
    v.setUint32(8, s.payloadBytes, true);
    v.setUint32(12, crc32(payload), true);
    this.#record.set(payload, HEADER_BYTES);
    try {
      writeFully(this.#fd, this.#record, k * s.recordBytes);
    } catch (err) {
      Atomics.store(s.index, id, 0);
      if (Atomics.compareExchange(s.control, LATCHED, 0, 1) === 0) {
        this.#warn(
          `stoker: disk stage disabled (pack-file write failed: ${describeCause(err)}); training continues source-backed, already-staged samples keep serving`,
        );
      }
      return 'failed';
    }
    Atomics.add(s.control, RECORDS, 1);
    Atomics.store(s.index, id, k + 1);
    return 'admitted';
  }

  /** True once a write failed anywhere: no more admits, reads keep serving. */
  get latched(): boolean {
    return Atomics.load(this.shared.control, LATCHED) === 1;
  }

  /** records: written and published (all threads); bytes: their disk footprint (records × recordBytes); corrupt: failed reads (all threads). */
  get stats(): { records: number; bytes: number; corrupt: number; latched: boolean } {
    const c = this.shared.control;
    const records = Atomics.load(c, RECORDS);
    return { records, bytes: records * this.shared.recordBytes, corrupt: Atomics.load(c, CORRUPT), latched: this.latched };
  }

  /**
   * Close this thread's descriptor (the owner marks the stage removed first, so no later attach can
   * open a reused descriptor number); in the keep-name fallback the owner also deletes the file and
   * directory and drops the exit/signal listeners. Idempotent; never throws. Step 8 of NOTE [Loader
   * shutdown] (loader.ts).
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#owner) Atomics.store(this.shared.control, REMOVED, 1);
    try {
      fs.closeSync(this.#fd);
    } catch {
      // already closed or never valid: nothing left to release
    }
    this.#fd = -1;
    if (this.#owner && !this.shared.unlinked) {
      unregister(this.shared);
      removeQuietly(this.shared.file, this.shared.dir);
    }
  }

  /** Reads record k into #record; false on a short read or an I/O error. */
  #readRecord(k: number): boolean {
    const buf = this.#record;
    const position = k * this.shared.recordBytes;
    let done = 0;
    try {
      while (done < buf.length) {
        const n = fs.readSync(this.#fd, buf, done, buf.length - done, position + done);
        if (n === 0) return false; // truncated file
        done += n;
      }
    } catch {
      // An I/O error is treated like corruption: the caller falls through to the source.
      return false;
    }
    return true;
  }

  #verify(id: number): boolean {
    const v = this.#view;
    const n = this.shared.payloadBytes;
    return (
      v.getUint32(0, true) === RECORD_MAGIC &&
      v.getUint32(4, true) === id &&
      v.getUint32(8, true) === n &&
      v.getUint32(12, true) === crc32(this.#record.subarray(HEADER_BYTES))
    );
  }
}

function inRange(id: number, length: number): boolean {
  return Number.isInteger(id) && id >= 0 && id < length;
}

/** Next free record number, or -1 when the budget is spent. Never moves NEXT past maxRecords. */
function takeRecord(control: Int32Array, maxRecords: number): number {
  for (;;) {
    const k = Atomics.load(control, NEXT);
    if (k >= maxRecords) return -1;
    if (Atomics.compareExchange(control, NEXT, k, k + 1) === k) return k;
  }
}

function writeFully(fd: number, buf: Buffer, position: number): void {
  let done = 0;
  while (done < buf.length) {
    const n = fs.writeSync(fd, buf, done, buf.length - done, position + done);
    if (n <= 0) throw new Error(`short write (${done} of ${buf.length} bytes at offset ${position})`);
    done += n;
  }
}

function sizeMismatch(op: string, what: string, got: number, want: number): LoaderError {
  return diskStageError(`disk stage ${op}: \`${what}\` has ${got} bytes but every sample of this stage has payloadBytes = ${want}. Pack the sample into exactly ${want} bytes`);
}

function attachFailed(shared: DiskStageShared, err: unknown): LoaderError {
  return diskStageError(
    `disk stage pack file ${shared.file} cannot be opened through ${shared.path} (${describeCause(err)}). Attach before the stage's owner closes it, and keep diskStage.dir on a local drive`,
    err,
  );
}

/**
 * Create `dir` and its missing parents one level at a time. Not mkdirSync(recursive): on procfs
 * and sysfs (diskStage.dir '/proc/x') it retries forever at full CPU; one plain mkdir per missing
 * level fails at once with the OS error instead.
 */
/**
 * Bytes an unprivileged writer may still use on the drive holding `dir` (or its nearest existing
 * ancestor); undefined when it cannot be asked, or for a pseudo filesystem that reports no size
 * (procfs: creating the stage there fails with its own error).
 */
function freeBytesUnder(dir: string): number | undefined {
  for (let d = dir; ; d = path.dirname(d)) {
    try {
      const st = fs.statfsSync(d);
      return st.blocks > 0 ? st.bavail * st.bsize : undefined;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || path.dirname(d) === d) return undefined;
    }
  }
}

function makeDirs(dir: string): void {
  const missing: string[] = [];
  for (let d = dir; ; d = path.dirname(d)) {
    let st: fs.Stats | undefined;
    try {
      st = fs.statSync(d);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (st !== undefined) {
      if (!st.isDirectory()) throw Object.assign(new Error(`ENOTDIR: ${d} is not a directory`), { code: 'ENOTDIR' });
      break;
    }
    missing.push(d);
    if (path.dirname(d) === d) break;
  }
  for (const d of missing.reverse()) {
    try {
      fs.mkdirSync(d);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || !fs.statSync(d).isDirectory()) throw err;
    }
  }
}

/** `/dev/fd/<fd>` when this platform reaches an open file through it (Linux, macOS, BSDs); else undefined. */
function descriptorPath(fd: number): string | undefined {
  const p = `/dev/fd/${fd}`;
  try {
    const [a, b] = [fs.fstatSync(fd), fs.statSync(p)];
    return a.ino === b.ino && a.dev === b.dev ? p : undefined;
  } catch {
    return undefined;
  }
}

/** Fallback cleanup (NOTE [Stage cleanup]): remove stage directories under `base` left by processes that are gone. */
function sweepStale(base: string, own: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(base);
  } catch {
    return;
  }
  for (const name of names) {
    const m = /^stoker-stage-(\d+)-[^/]+$/.exec(name);
    const dir = path.join(base, name);
    if (m === null || dir === own || processAlive(Number(m[1]))) continue;
    removeQuietly(path.join(dir, 'stage.pack'), dir);
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // alive, someone else's
  }
}

function removeQuietly(file: string, dir: string): void {
  try {
    fs.unlinkSync(file);
  } catch {
    // gone already
  }
  try {
    fs.rmdirSync(dir);
  } catch {
    // gone already, or someone put a file in our private directory: leave theirs alone
  }
}

// ---- RAM-backed directory check -------------------------------------------------------------

/** /proc/mounts escapes space, tab, newline and backslash as three-digit octal (`\040`). */
function unescapeMount(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/**
 * The mount holding `path` (absolute, already canonical): the entry of `mountsText` (/proc/mounts
 * format) whose mount point is the longest path-component prefix of it. On equal mount points the
 * later line wins (it was mounted on top).
 */
export function mountOf(mountsText: string, path: string): { mountPoint: string; fsType: string } | undefined {
  let best: { mountPoint: string; fsType: string } | undefined;
  for (const line of mountsText.split('\n')) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < 3) continue;
    const mountPoint = unescapeMount(fields[1]!);
    const fsType = unescapeMount(fields[2]!);
    if (!isUnder(path, mountPoint)) continue;
    if (best === undefined || mountPoint.length >= best.mountPoint.length) best = { mountPoint, fsType };
  }
  return best;
}

function isUnder(p: string, mountPoint: string): boolean {
  if (!mountPoint.startsWith('/')) return false;
  const mp = mountPoint.length > 1 && mountPoint.endsWith('/') ? mountPoint.slice(0, -1) : mountPoint;
  if (mp === '/') return p.startsWith('/');
  return p === mp || p.startsWith(mp + '/');
}

function warnIfRamBacked(dir: string, warn: (message: string) => void): void {
  let mounts: string;
  let real: string;
  try {
    mounts = fs.readFileSync('/proc/mounts', 'utf8');
    real = fs.realpathSync(dir);
  } catch {
    return; // not Linux, or /proc hidden: nothing to say
  }
  const m = mountOf(mounts, real);
  if (m !== undefined && (m.fsType === 'tmpfs' || m.fsType === 'ramfs')) {
    warn(`stoker: diskStage.dir ${real} is on ${m.fsType} (RAM-backed): the stage will spend RAM, not disk. Point diskStage.dir at a real drive.`);
  }
}

// ---- exit and signal cleanup (NOTE [Stage cleanup]) ----------------------------------------

const live = new Map<string, DiskStageShared>();
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

function removeAll(): void {
  for (const s of live.values()) {
    Atomics.store(s.control, REMOVED, 1);
    removeQuietly(s.file, s.dir);
  }
  live.clear();
}

function onExit(): void {
  removeAll();
}

function onSignal(signal: NodeJS.Signals): void {
  removeAll();
  uninstall();
  // Another listener owns the decision to exit; otherwise die of the signal as if we had none.
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

function install(): void {
  process.on('exit', onExit);
  for (const sig of SIGNALS) process.on(sig, onSignal);
}

function uninstall(): void {
  process.removeListener('exit', onExit);
  for (const sig of SIGNALS) process.removeListener(sig, onSignal);
}

function register(s: DiskStageShared): void {
  if (live.size === 0) install();
  live.set(s.dir, s);
}

function unregister(s: DiskStageShared): void {
  if (!live.delete(s.dir)) return;
  if (live.size === 0) uninstall();
}
