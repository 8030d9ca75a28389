// `stoker serve` and the Python client (python/stoker/torch.py) end to end over shared memory: the
// scenarios run in the system python3 with torch (test/fixtures/torch_client.py prints one JSON line
// of facts each) against a Node loader in a child process. Skipped, with the reason, where
// /usr/bin/python3 or its torch is missing (CI installs python3-torch; see .ci/run).

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { tableFromArrays, tableToIPC } from 'apache-arrow';
import { CHILD_MS, TEST_MS } from './fixtures.js';
import { BIN, ScenarioRunner, scenario } from './fixtures/python-client.js';
import { range, shmLeft, skip, sorted } from './fixtures/serve-shm-route.js';

// The scenarios run one after the other in one interpreter (torch imported once), except those that end
// in their own process's death (consumer_dies), each in a python process of its own.
const runner = new ScenarioRunner();
const run = (name: string, args: Record<string, unknown> = {}) => runner.run(name, args);
after(() => runner.close());


describe('the Python client over CUDA IPC, the parts that run without a GPU', { skip }, () => {
  it('passes a CUDA IPC handle to the driver byte for byte, NUL bytes included', async () => {
    // A CUipcMemHandle is binary: a c_char field would keep only the bytes before the first NUL.
    const handle = Buffer.from(Array.from({ length: 64 }, (_, i) => (i % 5 === 1 ? 0 : (i * 37 + 11) & 0xff)));
    const { out } = await run('ipc_handle', { handle: handle.toString('hex') });
    assert.equal(out.bytes, handle.toString('hex'));
    assert.match(String(out.short), /has 64 bytes, got 63/);
  });
});

describe('the Python client over CUDA IPC, its logic against canned frames and a fake IPC layer (no GPU)', { skip }, () => {
  for (const recycle of ['next', 'auto'] as const) {
    it(`recycle="${recycle}": waits on each batch's ready event before handing it out, makes tensors ${recycle === 'next' ? 'once per layout' : 'per batch'}, and sends each release line with the event recorded for it`, async () => {
      const { out } = await run('cuda_logic', { recycle });
      const log = out.log as [string, ...number[]][];
      const values = out.values as number[];
      assert.deepEqual(values, [0, 4096, 0, 4096, 0, 4096], 'each batch views its layout\'s offset');
      const made = log.filter((e) => e[0] === 'tensor');
      if (recycle === 'next') assert.deepEqual(made, [['tensor', 0, 0], ['tensor', 0, 4096]], 'one tensor per layout, not per batch');
      else assert.deepEqual(made, [0, 1, 2, 3, 4, 5].map((seq) => ['tensor', 0, (seq % 2) * 4096]), 'tensors of its own for each batch');
      let prev = -1;
      for (let seq = 0; seq < 6; seq++) {
        const y = log.findIndex((e) => e[0] === 'yield' && e[1] === seq);
        assert.ok(y > prev, `batch ${seq} handed out, after batch ${seq - 1}`);
        const waits = log.slice(prev + 1, y).filter((e) => e[0] === 'wait');
        assert.deepEqual(waits, [['wait', seq % 2]], `batch ${seq}: the stream waited on its ready event before it was handed out`);
        prev = y;
      }
      const lines = (out.lines as string[]).map((l) => l.trim().split(' '));
      const records = log.filter((e) => e[0] === 'record').map((e) => e[1]);
      assert.equal(lines.length, records.length, 'one event recorded per release line');
      assert.deepEqual(lines.map((l) => Number(l[1])), records);
      // "auto": the loop's variable still holds batch 5 when the epoch ends, so it stays leased.
      assert.deepEqual(lines.flatMap((l) => l.slice(2).map(Number)), recycle === 'next' ? [0, 1, 2, 3, 4, 5] : [0, 1, 2, 3, 4], 'every batch released once, in order');
      assert.ok(lines.every((l) => l.length - 2 <= 2), 'at most half the slots (2 of 4) a line');
    });
  }
});

describe('the Python client\u2019s sources of several files, as Stoker\u2019s sources take them', { skip, timeout: TEST_MS * 2 }, () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'stoker-files-'));
    // Two Arrow files (the Python side has no pyarrow): label 0–9, then 10–19.
    for (const [name, from] of [['a.arrow', 0], ['b.arrow', 10]] as const) {
      writeFileSync(join(dir, name), tableToIPC(tableFromArrays({ label: Int32Array.from(range(10), (i) => from + i) }), 'file'));
    }
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('{"image": "x.npy", "label": "y.npy"}, a lone .npy (named after its stem), a list of .npy, Arrow or tar files, a shard pattern, an image folder with its options; mixed formats refused naming the file', async () => {
    const { out } = await run('files', { dir });
    const named = out.named as { names: string[]; image: number[]; label: number[] };
    assert.deepEqual(named.names, ['image', 'label']);
    assert.deepEqual(named.image, range(24), 'each row its sample, in order (shuffle=False)');
    assert.deepEqual(named.label, range(24).map((i) => 3 * i));
    assert.deepEqual(out.single, ['images'], 'a lone .npy is a field named after its stem');
    assert.deepEqual(out.path, ['images'], 'a pathlib.Path too');
    assert.deepEqual(out.list, { names: ['0', '1'], label: range(24).map((i) => 3 * i) }, 'a list of .npy files: positional columns, as sources.npy([...])');
    assert.deepEqual(out.arrow, { names: ['label'], label: range(20) }, 'Arrow files one after another, as sources.arrow([...])');
    for (const key of ['tarList', 'tarPattern']) assert.deepEqual(out[key], { names: ['cls'], cls: range(10).map((i) => 7 * i) }, key);
    const errors = out.errors as Record<string, { code: string; message: string }>;
    assert.equal(errors.mixed!.code, 'ERR_INVALID_DATASET');
    assert.match(errors.mixed!.message, /a\.arrow: arrow, where a list with an \.npy file zips \.npy files as columns/);
    assert.equal(errors.namedArrow!.code, 'ERR_INVALID_DATASET');
    assert.match(errors.namedArrow!.message, /a\.arrow: arrow, where a record of paths names the columns of \.npy files/);
    const folder = out.folderOptions as { dtype: string; shape: number[]; label: number[]; min: number };
    assert.deepEqual([folder.dtype, folder.shape, folder.label], ['torch.float32', [6, 3, 8, 8], [0, 0, 0, 1, 1, 1]], '{"path", ...options}: an image folder with its view, output and normalize');
    assert.ok(folder.min < 0, 'normalized');
    assert.equal(errors.folderTypo!.code, 'ERR_INVALID_OPTION');
    assert.match(errors.folderTypo!.message, /veiw/);
  });
});

describe('the Python client finds the loader (NOTE [Finding the loader], python/stoker/torch.py)', { skip, timeout: TEST_MS * 2 }, () => {
  it("from a project's node_modules/.bin/stoker (a symlink, as npm makes it) walking up from the working directory, STOKER_JS as an override, the checkout it is imported from, then `stoker` on PATH; where it looked when nothing is found", async () => {
    const { out } = await run('find', { bin: BIN });
    const node = ['node'];
    assert.deepEqual(out.project, { command: [...node, out.projectBin] }, `the project's, before the checkout the package is imported from: ${JSON.stringify(out.project)}`);
    assert.deepEqual(out.projectRuns, { rows: [32, 32], started: [...node, out.projectBin] }, JSON.stringify(out.projectRuns));
    assert.deepEqual(out.override, { command: [...node, '/opt/elsewhere/bin/stoker.js'] });
    assert.deepEqual(out.beside, { command: [...node, out.checkout] }, 'outside a project, the checkout the package is imported from, before PATH');
    assert.deepEqual(out.path, { command: [...node, out.linkedBin] }, 'an installed package outside any project: stoker on PATH');
    assert.deepEqual(out.shimmed, { command: [out.shim] }, 'a shell shim on PATH runs as it is');
    const none = (out.none as { error: { code: string; message: string } }).error;
    assert.equal(none.code, 'ERR_INVALID_OPTION');
    assert.match(none.message, /cannot find Stoker's loader .*STOKER_JS, node_modules\/\.bin\/stoker .*stoker` on PATH.*npm install stoker-ml/);
  });
});

describe('stoker serve with clients that die or stall', { skip, timeout: TEST_MS * 2 }, () => {
  let dir: string;
  let server: ChildProcess;
  let socket: string;
  let stderr = '';
  let exited: Promise<number | null>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'stoker-serve-'));
    socket = join(dir, 's.sock');
    server = spawn(process.execPath, [BIN, 'serve', '--socket', socket, '--source', JSON.stringify({ builtin: 'synthetic', options: { n: 640 } }), '--batch-size', '64', '--slots', '2', '--idle-timeout', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
    server.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    exited = new Promise((r) => server.on('exit', (code) => r(code)));
    const ready = await new Promise<string>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`stoker serve printed no ready line within ${CHILD_MS} ms\n${stderr}`)), CHILD_MS);
      server.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n')) {
          clearTimeout(timer);
          resolve(out.split('\n')[0]!);
        }
      });
    });
    assert.equal((JSON.parse(ready) as { socket: string }).socket, socket);
  });

  after(() => {
    if (server.exitCode === null) server.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('a consumer killed while holding batches has them freed, the server says so, and the next client gets a whole epoch', async () => {
    const died = await scenario('consumer_dies', { socket, take: 2, gather: false });
    assert.equal(died.out.took, 2);
    const full = await run('consumer_full', { socket, gather: false });
    assert.deepEqual(sorted(full.out.ids), range(640));
    assert.match(stderr, /client 0 disconnected( \(read ECONNRESET\))? holding [12] batch(es)?; freed them/);
  });

  it('a gathering consumer killed mid-epoch leaves nothing behind (no shared-memory file), and the next gathering client gets a whole epoch', async () => {
    const before = stderr.length;
    const died = await scenario('consumer_dies', { socket, take: 2, gather: true });
    assert.equal(died.out.took, 2);
    const full = await run('consumer_full', { socket, gather: true });
    assert.equal(full.out.gathers, true);
    assert.deepEqual(sorted(full.out.ids), range(640));
    assert.match(stderr.slice(before), /client \d+ disconnected/);
    assert.deepEqual(shmLeft(server.pid), []);
  });

  it('a consumer that holds every slot and says nothing past --idle-timeout is dropped (LoaderDied in Python), and the server keeps serving', async () => {
    const stalled = await run('consumer_stalls', { socket, sleep: 3 });
    assert.equal(stalled.out.raised, 'LoaderDied');
    assert.match(stderr, /holds all 2 slots and sent nothing for \d+ s; dropping it/);
    const full = await run('consumer_full', { socket });
    assert.deepEqual(sorted(full.out.ids), range(640));
  });

  it('SIGTERM stops the server cleanly with a client connected mid-epoch: the client\u2019s next batch raises LoaderDied (ERR_SERVE_STOPPED); exit code 0, no socket file, no shared-memory file left', async () => {
    const pid = server.pid;
    // NOTE: the client sends the SIGTERM itself after its first batch and waits for the server's exit
    // (its pidfd), then asks for a batch; a server that waits for its client to leave first hangs here.
    // A gathering client holds no slots, so --idle-timeout (1 s here) cannot drop it first.
    const { out } = await run('server_stops', { socket, pid, gather: true });
    assert.equal(out.raised, 'LoaderDied', JSON.stringify(out));
    assert.equal(out.code, 'ERR_SERVE_STOPPED', JSON.stringify(out));
    assert.match(String(out.message), /SIGTERM/);
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([exited, new Promise((r) => (timer = setTimeout(() => r('hang'), CHILD_MS)))]);
    clearTimeout(timer);
    assert.equal(code, 0, stderr);
    assert.deepEqual(readdirSync(dir), []);
    assert.deepEqual(shmLeft(pid), []);
  });
});
