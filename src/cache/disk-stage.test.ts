import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { CHILD_MS } from '../../test/fixtures.js';
import { payloadFor, type WorkerJob } from '../../test/fixtures/disk-stage-worker.js';
import { DiskStage, HEADER_BYTES, RECORD_MAGIC, mountOf, type DiskStageShared } from './disk-stage.js';

const GiB = 2 ** 30;
const PAYLOAD = 24;
const RECORD = HEADER_BYTES + PAYLOAD;

let base: string;
before(() => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'stoker-disk-stage-test-'));
});
after(() => {
  fs.rmSync(base, { recursive: true, force: true });
});

function makeStage(opts: { gigabytes?: number; length?: number; payloadBytes?: number; warnings?: string[]; keepName?: boolean } = {}): DiskStage {
  return DiskStage.create({
    gigabytes: opts.gigabytes ?? 0.01,
    dir: base,
    payloadBytes: opts.payloadBytes ?? PAYLOAD,
    length: opts.length ?? 16,
    warn: (m) => opts.warnings?.push(m),
    keepName: opts.keepName,
  });
}

function readBack(stage: DiskStage, id: number): { result: string; data: Uint8Array } {
  const out = new Uint8Array(stage.shared.payloadBytes).fill(0xaa);
  return { result: stage.read(id, out), data: out };
}

/** Overwrite bytes of the pack file at `offset` (a second writer the stage does not know about). */
function poke(file: string, offset: number, bytes: Uint8Array): void {
  const fd = fs.openSync(file, 'r+');
  try {
    fs.writeSync(fd, bytes, 0, bytes.length, offset);
  } finally {
    fs.closeSync(fd);
  }
}

function recordOf(shared: DiskStageShared, id: number): number {
  const slot = Atomics.load(shared.index, id);
  assert.ok(slot > 0, `sample ${id} is staged`);
  return slot - 1;
}

const listenerCounts = () => ({
  exit: process.listenerCount('exit'),
  SIGINT: process.listenerCount('SIGINT'),
  SIGTERM: process.listenerCount('SIGTERM'),
  SIGHUP: process.listenerCount('SIGHUP'),
});

/** The pid of a process that has exited (and been reaped). */
function deadPid(): Promise<number> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
    p.once('error', reject);
    p.once('close', () => resolve(p.pid!));
  });
}

describe('disk stage: content', () => {
  test('staged samples of mixed content read back byte for byte', () => {
    const stage = makeStage();
    try {
      const ids = [0, 3, 7, 15, 9];
      for (const id of ids) assert.equal(stage.admit(id, payloadFor(id, PAYLOAD)), 'admitted');
      for (const id of ids) {
        const { result, data } = readBack(stage, id);
        assert.equal(result, 'hit');
        assert.deepEqual(data, payloadFor(id, PAYLOAD));
      }
      assert.equal(readBack(stage, 1).result, 'miss');
      assert.deepEqual(stage.stats, { records: 5, bytes: 5 * RECORD, corrupt: 0, latched: false });
      assert.equal(fs.statSync(stage.shared.path).size, 5 * RECORD);
    } finally {
      stage.close();
    }
  });

  test('a second admit of the same id is declined and the first content stays', () => {
    const stage = makeStage();
    try {
      assert.equal(stage.admit(2, payloadFor(2, PAYLOAD)), 'admitted');
      assert.equal(stage.admit(2, payloadFor(99, PAYLOAD)), 'declined');
      assert.deepEqual(readBack(stage, 2).data, payloadFor(2, PAYLOAD));
      assert.equal(stage.stats.records, 1);
    } finally {
      stage.close();
    }
  });

  test('out-of-range and non-integer ids read as a miss and are declined', () => {
    const stage = makeStage({ length: 4 });
    try {
      for (const id of [-1, 4, 1.5, Number.NaN, 2 ** 40]) {
        assert.equal(stage.admit(id, payloadFor(0, PAYLOAD)), 'declined', `admit ${id}`);
        assert.equal(readBack(stage, id).result, 'miss', `read ${id}`);
      }
      assert.equal(stage.stats.records, 0);
    } finally {
      stage.close();
    }
  });

  test('a payload or output buffer of the wrong size is refused with the expected size', () => {
    const stage = makeStage();
    try {
      assert.throws(() => stage.admit(0, new Uint8Array(PAYLOAD + 1)), { code: 'ERR_DISK_STAGE', message: /payloadBytes = 24/ });
      assert.throws(() => stage.read(0, new Uint8Array(3)), { code: 'ERR_DISK_STAGE', message: /payloadBytes = 24/ });
    } finally {
      stage.close();
    }
  });
});

describe('disk stage: files', () => {
  test('the pack file has no name once create() returns: its private directory is gone and the file lives on through its descriptor', () => {
    const stage = makeStage();
    try {
      const { dir, file, path: reach } = stage.shared;
      assert.equal(stage.shared.unlinked, true);
      assert.equal(path.dirname(dir), base);
      assert.match(path.basename(dir), new RegExp(`^stoker-stage-${process.pid}-`));
      assert.equal(path.dirname(file), dir);
      assert.equal(fs.existsSync(file), false);
      assert.equal(fs.existsSync(dir), false);
      assert.deepEqual(fs.readdirSync(base).filter((f) => f.startsWith('stoker-stage-')), []);
      assert.equal(stage.admit(1, payloadFor(1, PAYLOAD)), 'admitted');
      assert.equal(fs.statSync(reach).mode & 0o777, 0o600);
      assert.equal(fs.statSync(reach).nlink, 0, 'no directory entry points at the file');
      assert.deepEqual(readBack(stage, 1).data, payloadFor(1, PAYLOAD));
    } finally {
      stage.close();
    }
  });

  test('with its name kept (no /dev/fd), the stage directory is fresh and private (0700) and holds only the pack file (0600)', () => {
    const a = makeStage({ keepName: true });
    const b = makeStage({ keepName: true });
    try {
      const { dir, path: file } = a.shared;
      assert.equal(a.shared.unlinked, false);
      assert.equal(file, a.shared.file);
      assert.equal(path.dirname(dir), base);
      assert.match(path.basename(dir), new RegExp(`^stoker-stage-${process.pid}-`));
      assert.notEqual(dir, b.shared.dir);
      assert.equal(path.dirname(file), dir);
      assert.deepEqual(fs.readdirSync(dir), [path.basename(file)]);
      assert.equal(fs.statSync(dir).mode & 0o777, 0o700);
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      assert.ok(fs.statSync(file).isFile());
    } finally {
      a.close();
      b.close();
    }
  });

  test('with its name kept, close() removes the pack file and its directory, and close() after close() is a no-op', () => {
    const stage = makeStage({ keepName: true });
    const { dir, path: file } = stage.shared;
    assert.equal(stage.admit(1, payloadFor(1, PAYLOAD)), 'admitted');
    stage.close();
    assert.equal(fs.existsSync(file), false);
    assert.equal(fs.existsSync(dir), false);
    assert.doesNotThrow(() => stage.close());
    assert.equal(readBack(stage, 1).result, 'miss');
    assert.equal(stage.admit(2, payloadFor(2, PAYLOAD)), 'declined');
  });

  test('with its name kept, create() sweeps stage directories of dead processes and leaves live ones', async () => {
    const dead = await deadPid();
    const stale = path.join(base, `stoker-stage-${dead}-AbCdEf`);
    const alive = path.join(base, `stoker-stage-${process.pid}-live00`);
    for (const d of [stale, alive]) {
      fs.mkdirSync(d);
      fs.writeFileSync(path.join(d, 'stage.pack'), 'x');
    }
    const stage = makeStage({ keepName: true });
    try {
      assert.equal(fs.existsSync(stale), false, 'the dead process\'s stage was removed');
      assert.ok(fs.existsSync(path.join(alive, 'stage.pack')), 'a live process\'s stage stays');
    } finally {
      stage.close();
      fs.rmSync(alive, { recursive: true });
    }
  });

  test('a diskStage.dir on procfs fails at once with ERR_DISK_STAGE naming diskStage.dir', { skip: fs.existsSync('/proc/self') ? false : 'needs procfs (Linux)', timeout: CHILD_MS }, async () => {
    // In a child under a time limit: the old bug was a synchronous spin in mkdir that no in-process timeout can interrupt.
    const stageModule = new URL('./disk-stage.ts', import.meta.url).href;
    const code = [
      `const { DiskStage } = await import(${JSON.stringify(stageModule)});`,
      `for (const dir of ['/proc/stoker-x', '/proc/stoker-x/deeper/still']) {`,
      `  try { DiskStage.create({ gigabytes: 1, dir, payloadBytes: 8, length: 4 }); console.log('created'); }`,
      `  catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`,
      `}`,
    ].join('\n');
    const r = await new Promise<{ stdout: string; signal: NodeJS.Signals | null }>((resolve, reject) => {
      const proc = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'], timeout: CHILD_MS });
      let stdout = '';
      proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      proc.once('error', reject);
      proc.once('close', (_status, signal) => resolve({ stdout, signal }));
    });
    assert.equal(r.signal, null, 'create() returned instead of spinning in mkdir until the time limit killed it');
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines.length, 2, r.stdout);
    for (const line of lines) {
      const err = JSON.parse(line) as { code: string; message: string };
      assert.equal(err.code, 'ERR_DISK_STAGE');
      assert.match(err.message, /diskStage\.dir "\/proc\/stoker-x/);
      assert.match(err.message, /writable local drive/);
    }
  });

  test('a directory that cannot be created is an ERR_DISK_STAGE naming diskStage.dir, the OS error and the fix', () => {
    const blocker = path.join(base, 'a-file');
    fs.writeFileSync(blocker, '');
    const dir = path.join(blocker, 'sub');
    assert.throws(() => DiskStage.create({ gigabytes: 1, dir, payloadBytes: 8, length: 4 }), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'ERR_DISK_STAGE');
      assert.match(err.message, /diskStage\.dir/);
      assert.ok(err.message.includes(dir), err.message);
      assert.match(err.message, /ENOTDIR|EEXIST/);
      assert.match(err.message, /writable local drive/);
      return true;
    });
  });

  test('a missing dir is created, as flodl does', () => {
    const dir = path.join(base, 'not', 'yet');
    const stage = DiskStage.create({ gigabytes: 1, dir, payloadBytes: 8, length: 4 });
    try {
      assert.equal(path.dirname(stage.shared.dir), dir);
    } finally {
      stage.close();
    }
    assert.deepEqual(fs.readdirSync(dir), []);
  });

  test('a non-positive or non-finite budget is an ERR_INVALID_OPTION on diskStage.gigabytes', () => {
    for (const gigabytes of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(() => DiskStage.create({ gigabytes, dir: base, payloadBytes: 8, length: 4 }), {
        code: 'ERR_INVALID_OPTION',
        message: /`diskStage\.gigabytes` must be a finite number > 0/,
      });
    }
    assert.deepEqual(fs.readdirSync(base).filter((f) => f.startsWith('stoker-stage-')), []);
  });
});

describe('disk stage: budget', () => {
  test('a budget smaller than one record declines every admit without failing', () => {
    const stage = makeStage({ gigabytes: 8 / GiB });
    try {
      assert.equal(stage.shared.maxRecords, 0);
      assert.equal(stage.admit(0, payloadFor(0, PAYLOAD)), 'declined');
      assert.equal(stage.latched, false);
      assert.equal(readBack(stage, 0).result, 'miss');
      // The claim was released: a bigger stage would have taken it, this one stays empty.
      assert.equal(Atomics.load(stage.shared.index, 0), 0);
    } finally {
      stage.close();
    }
  });

  test('a budget of exactly N records admits N samples and then declines', () => {
    const stage = makeStage({ gigabytes: (3 * RECORD) / GiB });
    try {
      assert.equal(stage.shared.maxRecords, 3);
      const results = [4, 5, 6, 7, 8].map((id) => stage.admit(id, payloadFor(id, PAYLOAD)));
      assert.deepEqual(results, ['admitted', 'admitted', 'admitted', 'declined', 'declined']);
      for (const id of [4, 5, 6]) assert.deepEqual(readBack(stage, id).data, payloadFor(id, PAYLOAD));
      assert.equal(readBack(stage, 7).result, 'miss');
      assert.deepEqual(stage.stats, { records: 3, bytes: 3 * RECORD, corrupt: 0, latched: false });
      assert.equal(fs.statSync(stage.shared.path).size, 3 * RECORD);
    } finally {
      stage.close();
    }
  });
});

describe('disk stage: verification', () => {
  test('a flipped byte in a record payload reads as corrupt, is counted, and never fills out', () => {
    const stage = makeStage();
    try {
      stage.admit(3, payloadFor(3, PAYLOAD));
      const k = recordOf(stage.shared, 3);
      const at = k * RECORD + HEADER_BYTES + 5;
      poke(stage.shared.path, at, new Uint8Array([payloadFor(3, PAYLOAD)[5]! ^ 0x01]));
      const { result, data } = readBack(stage, 3);
      assert.equal(result, 'corrupt');
      assert.ok(data.every((b) => b === 0xaa), 'out is untouched');
      assert.equal(stage.stats.corrupt, 1);
    } finally {
      stage.close();
    }
  });

  test('a flipped byte in any header field (magic, id, length, checksum) reads as corrupt', () => {
    const stage = makeStage();
    try {
      const fields = [0, 4, 8, 12];
      fields.forEach((_, i) => stage.admit(i, payloadFor(i, PAYLOAD)));
      for (const [i, field] of fields.entries()) {
        const at = recordOf(stage.shared, i) * RECORD + field;
        const byte = Buffer.alloc(1);
        const fd = fs.openSync(stage.shared.path, 'r');
        fs.readSync(fd, byte, 0, 1, at);
        fs.closeSync(fd);
        poke(stage.shared.path, at, new Uint8Array([byte[0]! ^ 0x10]));
        assert.equal(readBack(stage, i).result, 'corrupt', `header field at +${field}`);
      }
      assert.equal(stage.stats.corrupt, 4);
    } finally {
      stage.close();
    }
  });

  test('a truncated pack file reads as corrupt (short read), not as a hit', () => {
    const stage = makeStage();
    try {
      stage.admit(0, payloadFor(0, PAYLOAD));
      stage.admit(1, payloadFor(1, PAYLOAD));
      fs.truncateSync(stage.shared.path, RECORD + 10); // record 1 loses its tail
      assert.equal(readBack(stage, 0).result, 'hit');
      const { result, data } = readBack(stage, 1);
      assert.equal(result, 'corrupt');
      assert.ok(data.every((b) => b === 0xaa));
      assert.equal(stage.stats.corrupt, 1);
    } finally {
      stage.close();
    }
  });

  test('a corrupt record is dropped from the index, so the sample can be staged again and then serves', () => {
    const stage = makeStage();
    try {
      stage.admit(6, payloadFor(6, PAYLOAD));
      poke(stage.shared.path, recordOf(stage.shared, 6) * RECORD + HEADER_BYTES, new Uint8Array([0, 0, 0]));
      assert.equal(readBack(stage, 6).result, 'corrupt');
      assert.equal(readBack(stage, 6).result, 'miss');
      assert.equal(stage.admit(6, payloadFor(6, PAYLOAD)), 'admitted');
      assert.deepEqual(readBack(stage, 6), { result: 'hit', data: payloadFor(6, PAYLOAD) });
      assert.equal(stage.stats.corrupt, 1);
    } finally {
      stage.close();
    }
  });

  test('records carry the STKR magic and their sample id on disk', () => {
    const stage = makeStage();
    try {
      stage.admit(11, payloadFor(11, PAYLOAD));
      const head = fs.readFileSync(stage.shared.path).subarray(0, HEADER_BYTES);
      assert.equal(head.readUInt32LE(0), RECORD_MAGIC);
      assert.equal(head.readUInt32LE(4), 11);
      assert.equal(head.readUInt32LE(8), PAYLOAD);
    } finally {
      stage.close();
    }
  });
});

describe('disk stage: write failure latch', () => {
  const noFull = fs.existsSync('/dev/full') ? false : 'needs /dev/full (Linux) to make writes fail with ENOSPC';

  test('a failed write latches the stage off with one warning, and staged samples keep serving', { skip: noFull }, () => {
    const ownerWarnings: string[] = [];
    const stage = makeStage({ warnings: ownerWarnings });
    try {
      assert.equal(stage.admit(0, payloadFor(0, PAYLOAD)), 'admitted');
      // Two more "threads" whose descriptor points at a full disk: /dev/full fails every write with ENOSPC.
      const broken = { ...stage.shared, path: '/dev/full' };
      const w1: string[] = [];
      const w2: string[] = [];
      const a = DiskStage.attach(broken, (m) => w1.push(m));
      const b = DiskStage.attach(broken, (m) => w2.push(m));
      try {
        assert.equal(a.admit(1, payloadFor(1, PAYLOAD)), 'failed');
        assert.equal(b.admit(2, payloadFor(2, PAYLOAD)), 'declined');
        assert.equal(a.admit(3, payloadFor(3, PAYLOAD)), 'declined');
      } finally {
        a.close();
        b.close();
      }
      assert.equal(w1.length + w2.length + ownerWarnings.length, 1);
      assert.match(
        w1[0]!,
        /^stoker: disk stage disabled \(pack-file write failed: ENOSPC.*\); training continues source-backed, already-staged samples keep serving$/,
      );
      assert.equal(stage.latched, true);
      assert.equal(stage.stats.latched, true);
      assert.equal(stage.admit(4, payloadFor(4, PAYLOAD)), 'declined');
      assert.equal(Atomics.load(stage.shared.index, 1), 0, 'the failed claim was released');
      assert.deepEqual(readBack(stage, 0), { result: 'hit', data: payloadFor(0, PAYLOAD) });
      assert.equal(readBack(stage, 1).result, 'miss');
      assert.equal(stage.stats.records, 1);
    } finally {
      stage.close();
    }
  });
});

describe('disk stage: sharing', () => {
  test('a handle from attach() sees the owner admits and the owner sees its admits; closing it keeps the file', () => {
    const stage = makeStage();
    try {
      const other = DiskStage.attach(stage.shared);
      assert.equal(stage.admit(1, payloadFor(1, PAYLOAD)), 'admitted');
      assert.equal(other.admit(2, payloadFor(2, PAYLOAD)), 'admitted');
      assert.equal(other.admit(1, payloadFor(1, PAYLOAD)), 'declined');
      assert.deepEqual(readBack(other, 1).data, payloadFor(1, PAYLOAD));
      assert.deepEqual(readBack(stage, 2).data, payloadFor(2, PAYLOAD));
      other.close();
      other.close();
      assert.ok(fs.existsSync(stage.shared.path));
      assert.equal(stage.stats.records, 2);
    } finally {
      stage.close();
    }
  });

  test('once the owner closes, attached handles miss and decline, and attaching fails naming the pack file', () => {
    const stage = makeStage();
    const file = stage.shared.file;
    const other = DiskStage.attach(stage.shared);
    stage.admit(1, payloadFor(1, PAYLOAD));
    stage.close();
    try {
      assert.equal(readBack(other, 1).result, 'miss');
      assert.equal(other.admit(2, payloadFor(2, PAYLOAD)), 'declined');
    } finally {
      other.close();
    }
    assert.throws(() => DiskStage.attach(stage.shared), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'ERR_DISK_STAGE');
      assert.ok(err.message.includes(file), err.message);
      assert.match(err.message, /closed by its owner/);
      return true;
    });
  });

  test('two worker threads racing to admit the same ids write each id exactly once, and the main thread reads them', { timeout: CHILD_MS }, async () => {
    const length = 1024;
    const stage = makeStage({ length });
    try {
      const ids = Array.from({ length }, (_, i) => i);
      const job: WorkerJob = { shared: stage.shared, ids, gate: new Int32Array(new SharedArrayBuffer(4)), parties: 2 };
      const [r1, r2] = await Promise.all([runWorker(job), runWorker(job)]);
      for (const id of ids) {
        assert.deepEqual([r1[id], r2[id]].sort(), ['admitted', 'declined'], `sample ${id} admitted by exactly one worker`);
      }
      assert.equal(stage.stats.records, length);
      for (const id of ids) assert.deepEqual(readBack(stage, id), { result: 'hit', data: payloadFor(id, PAYLOAD) });
      assert.equal(fs.statSync(stage.shared.path).size, length * RECORD);
    } finally {
      stage.close();
    }
  });
});

/**
 * Workers do not pick up tsx's loader hooks from execArgv on Node 20 (`--import tsx` runs, but the
 * worker's entry is resolved before the hooks apply), so the worker boots from a tiny eval that
 * registers tsx first and then imports the .ts fixture.
 */
function runWorker(job: WorkerJob): Promise<string[]> {
  const tsx = import.meta.resolve('tsx/esm/api');
  const fixture = new URL('../../test/fixtures/disk-stage-worker.ts', import.meta.url).href;
  const boot = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(fixture)}); });`;
  const worker = new Worker(boot, { eval: true, workerData: job });
  return new Promise((resolve, reject) => {
    worker.once('message', (results: string[]) => resolve(results));
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`disk-stage worker exited with code ${code} before answering`)));
  });
}

describe('disk stage: cleanup on exit and signals where the name is kept (no /dev/fd)', { concurrency: true }, () => {
  const stageModule = new URL('./disk-stage.ts', import.meta.url).href;

  /** Runs a child that creates a stage under `base`, prints its directory, then does `then`. */
  function child(then: string): Promise<{ dir: string; status: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
    const code = [
      `import { writeSync } from 'node:fs';`,
      `const { DiskStage } = await import(${JSON.stringify(stageModule)});`,
      `const stage = DiskStage.create({ gigabytes: 0.001, dir: ${JSON.stringify(base)}, payloadBytes: 8, length: 4, warn: () => {}, keepName: true });`,
      `stage.admit(0, new Uint8Array(8).fill(7));`,
      `writeSync(1, stage.shared.dir + '\\n');`,
      then,
    ].join('\n');
    return new Promise((resolve, reject) => {
      const proc = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'], timeout: CHILD_MS });
      let stdout = '';
      let stderr = '';
      proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      proc.once('error', reject);
      proc.once('close', (status, signal) => resolve({ dir: stdout.split('\n')[0]!, status, signal, stdout, stderr }));
    });
  }

  function assertGone(dir: string, stderr: string): void {
    assert.match(dir, /stoker-stage-/, `child printed its stage directory (stderr: ${stderr})`);
    assert.equal(fs.existsSync(dir), false, `${dir} was removed`);
  }

  // Keeps the child's loop alive until the signal it sends itself is handled (the next turn); long,
  // so that a child starved of CPU by a loaded machine cannot exit normally before the signal.
  const keepAlive = `setTimeout(() => {}, ${CHILD_MS});`;

  test('a normal exit removes the stage directory', { timeout: CHILD_MS }, async () => {
    const r = await child('');
    assertGone(r.dir, r.stderr);
    assert.equal(r.status, 0);
  });

  test('an uncaught exception still removes the stage directory', { timeout: CHILD_MS }, async () => {
    const r = await child(`throw new Error('boom');`);
    assertGone(r.dir, r.stderr);
    assert.equal(r.status, 1);
  });

  test('SIGTERM removes the stage directory and the process still dies of SIGTERM', { timeout: CHILD_MS }, async () => {
    const r = await child(`${keepAlive} process.kill(process.pid, 'SIGTERM');`);
    assertGone(r.dir, r.stderr);
    assert.equal(r.signal, 'SIGTERM');
    assert.equal(r.status, null);
  });

  test('SIGINT removes the stage directory and the process still dies of SIGINT', { timeout: CHILD_MS }, async () => {
    const r = await child(`${keepAlive} process.kill(process.pid, 'SIGINT');`);
    assertGone(r.dir, r.stderr);
    assert.equal(r.signal, 'SIGINT');
  });

  test('SIGHUP removes the stage directory and the process still dies of SIGHUP', { timeout: CHILD_MS }, async () => {
    const r = await child(`${keepAlive} process.kill(process.pid, 'SIGHUP');`);
    assertGone(r.dir, r.stderr);
    assert.equal(r.signal, 'SIGHUP');
  });

  test('with a user SIGINT listener the directory is removed and the user decides how the process ends', { timeout: CHILD_MS }, async () => {
    const r = await child(`process.on('SIGINT', () => { writeSync(1, 'user handler\\n'); process.exit(7); }); ${keepAlive} process.kill(process.pid, 'SIGINT');`);
    assertGone(r.dir, r.stderr);
    assert.match(r.stdout, /user handler/);
    assert.equal(r.status, 7);
  });
});

describe('disk stage: listeners', () => {
  test('an unlinked stage adds no exit or signal listeners', () => {
    const baseline = listenerCounts();
    const a = makeStage();
    try {
      assert.deepEqual(listenerCounts(), baseline);
    } finally {
      a.close();
    }
  });

  test('with names kept, exit and signal listeners are added once with the first stage and removed with the last', () => {
    const baseline = listenerCounts();
    const a = makeStage({ keepName: true });
    const b = makeStage({ keepName: true });
    const one = { exit: baseline.exit + 1, SIGINT: baseline.SIGINT + 1, SIGTERM: baseline.SIGTERM + 1, SIGHUP: baseline.SIGHUP + 1 };
    assert.deepEqual(listenerCounts(), one);
    a.close();
    assert.deepEqual(listenerCounts(), one);
    const attached = DiskStage.attach(b.shared);
    b.close();
    assert.deepEqual(listenerCounts(), baseline);
    attached.close();
    assert.deepEqual(listenerCounts(), baseline);
  });
});

describe('disk stage: RAM-backed directories', () => {
  const mounts = [
    '/dev/vda / ext4 rw,relatime 0 0',
    'tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0',
    'tmpfs /mnt/a tmpfs rw 0 0',
    '/dev/vdb /mnt/a/disk xfs rw 0 0',
    'none /mnt/my\\040drive ramfs rw 0 0',
    '/dev/vdc /srv ext4 rw 0 0',
    'tmpfs /srv tmpfs rw 0 0',
  ].join('\n');

  test('the longest mount-point prefix wins', () => {
    assert.deepEqual(mountOf(mounts, '/mnt/a/disk/stage'), { mountPoint: '/mnt/a/disk', fsType: 'xfs' });
    assert.deepEqual(mountOf(mounts, '/mnt/a/other'), { mountPoint: '/mnt/a', fsType: 'tmpfs' });
    assert.deepEqual(mountOf(mounts, '/dev/shm/x'), { mountPoint: '/dev/shm', fsType: 'tmpfs' });
    assert.deepEqual(mountOf(mounts, '/home/u'), { mountPoint: '/', fsType: 'ext4' });
  });

  test('mount points match whole path components only', () => {
    assert.deepEqual(mountOf(mounts, '/mnt/ab/stage'), { mountPoint: '/', fsType: 'ext4' });
    assert.deepEqual(mountOf(mounts, '/mnt/a'), { mountPoint: '/mnt/a', fsType: 'tmpfs' });
    assert.deepEqual(mountOf(mounts, '/dev/shmem'), { mountPoint: '/', fsType: 'ext4' });
  });

  test('octal escapes in /proc/mounts (\\040 for a space) are decoded', () => {
    assert.deepEqual(mountOf(mounts, '/mnt/my drive/stage'), { mountPoint: '/mnt/my drive', fsType: 'ramfs' });
  });

  test('a later mount on the same point shadows the earlier one', () => {
    assert.deepEqual(mountOf(mounts, '/srv/data'), { mountPoint: '/srv', fsType: 'tmpfs' });
  });

  test('no matching entry gives undefined', () => {
    assert.equal(mountOf('', '/x'), undefined);
    assert.equal(mountOf('tmpfs /run tmpfs rw 0 0\ngarbage\n', '/x'), undefined);
  });

  const shm = (() => {
    try {
      return mountOf(fs.readFileSync('/proc/mounts', 'utf8'), fs.realpathSync('/dev/shm'))?.fsType === 'tmpfs';
    } catch {
      return false;
    }
  })();

  test('a stage under /dev/shm (tmpfs) warns once that it spends RAM', { skip: shm ? false : '/dev/shm is not a tmpfs here' }, () => {
    const warnings: string[] = [];
    const stage = DiskStage.create({ gigabytes: 0.001, dir: '/dev/shm', payloadBytes: 8, length: 4, warn: (m) => warnings.push(m) });
    try {
      assert.equal(warnings.length, 1);
      const named = path.join(fs.realpathSync('/dev/shm'), path.basename(stage.shared.dir));
      assert.ok(warnings[0]!.startsWith(`stoker: diskStage.dir ${named} is on tmpfs (RAM-backed)`), warnings[0]);
      assert.match(warnings[0]!, /Point diskStage\.dir at a real drive\.$/);
    } finally {
      stage.close();
    }
    assert.equal(fs.existsSync(stage.shared.dir), false);
  });
});
