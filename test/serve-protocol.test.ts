// `stoker serve`'s lean wire protocol (src/serve/protocol.ts) from a Node client on a raw socket: the
// binary batch frame and the release line, the layout sent once and the slot bytes it points at, the
// state kept per batch and asked for by seq, coalesced releases handing credit back, and typed
// errors for lines the server cannot read. No Python involved (test/serve.test.ts runs the client).

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readSync, closeSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CHILD_MS, TEST_MS } from './fixtures.js';
import { BIN } from './fixtures/python-client.js';
import { FRAME_BYTES, FRAME_TAG, type Frame, NEXT_EPOCH, PROTOCOL_VERSION, decodeFrame, encodeFrame, parseRelease } from '../src/serve/protocol.js';

describe('the batch frame and the release line', () => {
  it('a frame round-trips through encode and decode, ids and picks included, and is 32 bytes without them', () => {
    const f: Frame = { seq: 7, epoch: 3, index: 2, rows: 3, layout: 5, slot: 1, position: 1234, event: 4, ids: Uint32Array.of(9, 1, 4_000_000_000), picks: Uint32Array.of(19, 11, 14) };
    const b = encodeFrame(f);
    assert.equal(b[0], FRAME_TAG);
    assert.equal(b.length, FRAME_BYTES + 24);
    const back = decodeFrame(b)!;
    assert.equal(back.bytes, b.length);
    assert.deepEqual(back.frame, f);
    const lean = encodeFrame({ seq: 1, epoch: 0, index: 0, rows: 256, layout: 0, slot: 3, position: NEXT_EPOCH });
    assert.equal(lean.length, FRAME_BYTES);
    assert.equal(FRAME_BYTES, 32);
    assert.deepEqual(decodeFrame(lean)!.frame, { seq: 1, epoch: 0, index: 0, rows: 256, layout: 0, slot: 3, position: NEXT_EPOCH });
    assert.equal(decodeFrame(b.subarray(0, b.length - 1)), undefined, 'a frame cut short is not decoded');
  });

  it('a release line names its event (or none) and any number of seqs; anything else is not one', () => {
    assert.deepEqual(parseRelease('R - 4 5 6'), { seqs: [4, 5, 6], event: undefined });
    assert.deepEqual(parseRelease('R 3 10'), { seqs: [10], event: 3 });
    for (const bad of ['R', 'R x 1', 'R - 1 y', 'X - 1', 'R - -1']) assert.equal(parseRelease(bad), undefined, bad);
  });
});

/** A raw protocol client: JSON lines and frames as they come. */
class RawClient {
  readonly messages: (Record<string, unknown> | Frame)[] = [];
  #buf = Buffer.alloc(0);
  #waiters: (() => void)[] = [];
  readonly socket: Socket;

  constructor(path: string) {
    this.socket = connect(path);
    this.socket.on('data', (chunk: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, chunk]);
      for (;;) {
        if (this.#buf.length === 0) break;
        if (this.#buf[0] === FRAME_TAG) {
          const d = decodeFrame(this.#buf);
          if (d === undefined) break;
          this.messages.push(d.frame);
          this.#buf = this.#buf.subarray(d.bytes);
        } else {
          const nl = this.#buf.indexOf(10);
          if (nl < 0) break;
          this.messages.push(JSON.parse(this.#buf.subarray(0, nl).toString()) as Record<string, unknown>);
          this.#buf = this.#buf.subarray(nl + 1);
        }
      }
      for (const w of this.#waiters.splice(0)) w();
    });
  }

  send(line: string | Record<string, unknown>): void {
    this.socket.write(typeof line === 'string' ? `${line}\n` : `${JSON.stringify(line)}\n`);
  }

  /** Wait (bounded) until `pred` holds of the messages so far. */
  async until(pred: (ms: RawClient['messages']) => boolean, what: string): Promise<void> {
    const deadline = Date.now() + CHILD_MS;
    while (!pred(this.messages)) {
      if (Date.now() > deadline) throw new Error(`no ${what} within ${CHILD_MS} ms; got ${JSON.stringify(this.messages.slice(-5))}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, 200);
        this.#waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  frames(): Frame[] {
    return this.messages.filter((m): m is Frame => !('op' in m));
  }

  ops(op: string): Record<string, unknown>[] {
    return this.messages.filter((m) => (m as { op?: unknown }).op === op) as Record<string, unknown>[];
  }
}

// Both ways the server writes a slot: through its own mapping of the slab, and through pwrite.
for (const mmap of ['on', 'off'] as const) describe(`stoker serve speaks protocol ${PROTOCOL_VERSION} (slab writes: ${mmap === 'on' ? 'mapped' : 'pwrite'})`, { timeout: TEST_MS }, () => {
  let dir: string;
  let server: ChildProcess;
  let socket: string;
  let stderr = '';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'stoker-proto-'));
    socket = join(dir, 's.sock');
    server = spawn(process.execPath, [BIN, 'serve', '--socket', socket, '--source', JSON.stringify({ builtin: 'synthetic', options: { n: 640 } }), '--batch-size', '64', '--slots', '2', '--seed', '3'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, STOKER_SHM_MMAP: mmap } });
    server.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`stoker serve printed no ready line\n${stderr}`)), CHILD_MS);
      server.stdout!.once('data', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  });

  after(() => {
    if (server.exitCode === null) server.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('one layout and one slab for an epoch of equal batches; frames name (seq, slot, layout), the slot holds the rows, releases coalesce, state is kept per seq', async () => {
    const c = new RawClient(socket);
    c.send({ op: 'open', ids: true });
    await c.until((ms) => c.ops('opened').length === 1 || c.ops('error').length > 0, 'opened');
    const opened = c.ops('opened')[0]!;
    assert.equal(opened.protocol, PROTOCOL_VERSION);
    assert.equal(opened.slots, 2);
    c.send({ op: 'epoch', epoch: 0 });
    const seen: number[] = [];
    let released = 0;
    const row = 3 * 32 * 32;
    while (seen.length < 640) {
      await c.until(() => c.frames().length >= released + 2 || c.ops('end').length > 0 || c.ops('error').length > 0, 'two frames');
      assert.deepEqual(c.ops('error'), []);
      const frames = c.frames();
      // Credit: with 2 slots, the server never sends a third batch before a release.
      assert.ok(frames.length <= released + 2, `${frames.length} frames with ${released} released`);
      const slab = c.ops('slab')[0]!;
      const layout = c.ops('layout')[0]! as { id: number; stride: number; fields: { name: string; offset: number; bytes: number }[] };
      assert.equal(layout.stride, slab.slotBytes);
      for (const f of frames.slice(released)) {
        assert.equal(f.layout, layout.id);
        assert.equal(f.rows, 64);
        assert.equal(f.event, undefined, 'no IPC event on the CPU route');
        // The slab is still linked (we have not said slab-open): the rows are where the layout says.
        const image = layout.fields.find((x) => x.name === 'image')!;
        const bytes = Buffer.alloc(image.bytes);
        const fd = openSync(slab.path as string, 'r');
        readSync(fd, bytes, 0, bytes.length, f.slot * layout.stride + image.offset);
        closeSync(fd);
        for (let r = 0; r < f.rows; r++) {
          const id = f.ids![r]!;
          assert.equal(bytes[r * row], id % 251, `row ${r} of batch ${f.seq} is sample ${id}`);
          assert.equal(bytes[r * row + row - 1], (id + row - 1) % 251);
        }
        seen.push(...f.ids!);
      }
      const two = frames.slice(released, released + 2);
      // One line for both: the slots come back together.
      c.send(`R - ${two.map((f) => f.seq).join(' ')}`);
      released += two.length;
    }
    await c.until(() => c.ops('end').length === 1, 'end');
    assert.deepEqual([...seen].sort((a, b) => a - b), Array.from({ length: 640 }, (_, i) => i));
    assert.equal(c.ops('layout').length, 1, 'the layout went once');
    assert.equal(c.ops('slab').length, 1);
    // State right after batch 3 (the 4th frame): 4 × 64 picks consumed; after the last, the next epoch.
    const frames = c.frames();
    c.send({ op: 'state', seq: frames[frames.length - 1]!.seq });
    await c.until(() => c.ops('state').length === 1, 'state');
    const last = c.ops('state')[0]!.state as { epoch: number; position: number };
    assert.deepEqual([last.epoch, last.position], [1, 0]);
    c.send({ op: 'state', seq: frames[frames.length - 3]!.seq });
    await c.until(() => c.ops('state').length === 2, 'state');
    assert.equal((c.ops('state')[1]!.state as { position: number }).position, 8 * 64);
    // NOTE [Known state]: each frame gives the position after it in the base state sent before it; after
    // the last batch, the next epoch's start (its base goes out right before that frame).
    const bases = c.ops('state-base').map((m) => m.state as Record<string, unknown>);
    assert.deepEqual(bases.map((b) => [b.epoch, b.position]), [[0, 0], [1, 0]]);
    assert.deepEqual(frames.map((f) => f.position), [...Array.from({ length: 9 }, (_, k) => (k + 1) * 64), NEXT_EPOCH]);
    assert.ok(c.messages.indexOf(c.ops('state-base')[1]!) < c.messages.indexOf(frames[9]!) && c.messages.indexOf(c.ops('state-base')[1]!) > c.messages.indexOf(frames[8]!));
    assert.deepEqual({ ...bases[0], position: frames[frames.length - 3]!.position }, c.ops('state')[1]!.state, 'base + position is the state the loader keeps for that batch');
    assert.deepEqual(bases[1], last);
    // Out of the window the server keeps: a typed error naming the request.
    c.send({ op: 'state', seq: frames[0]!.seq });
    await c.until(() => c.ops('error').length === 1, 'error');
    const err = c.ops('error')[0]!;
    assert.equal(err.code, 'ERR_PROTOCOL');
    assert.equal(err.request, 'state');
    assert.match(String(err.message), /no state kept for batch 0/);
    // A line that is neither JSON nor a release line.
    c.send('R nonsense');
    await c.until(() => c.ops('error').length === 2, 'error');
    assert.match(String(c.ops('error')[1]!.message), /release line/);
    const slabPath = c.ops('slab')[0]!.path as string;
    c.send({ op: 'close' });
    await c.until(() => c.ops('closed').length === 1, 'closed');
    c.socket.destroy();
    assert.equal(existsSync(slabPath), false, 'the slab file is gone at close');
  });

  it('stop and epoch take back every batch the client holds but those it keeps: a kept slot is not written again until its release', async () => {
    const c = new RawClient(socket);
    c.send({ op: 'open', ids: true });
    await c.until(() => c.ops('opened').length === 1 || c.ops('error').length > 0, 'opened');
    c.send({ op: 'epoch', epoch: 0 });
    await c.until(() => c.frames().length >= 2, 'two frames');
    const [kept, other] = c.frames() as [Frame, Frame];
    assert.notEqual(kept.slot, other.slot);
    c.send({ op: 'stop', keep: [kept.seq] });
    await c.until(() => c.ops('stopped').length === 1, 'stopped');
    c.send({ op: 'epoch', epoch: 1, keep: [kept.seq] });
    await c.until(() => c.frames().some((f) => f.epoch === 1), 'a frame of epoch 1');
    const first = c.frames().find((f) => f.epoch === 1)!;
    assert.notEqual(first.slot, kept.slot, 'the kept batch\u2019s slot is not handed out again');
    // The kept slot still holds the kept batch's rows (the slab is still linked: no slab-open was sent).
    const slab = c.ops('slab')[0]!;
    const layout = c.ops('layout')[0]! as { stride: number; fields: { name: string; offset: number; bytes: number }[] };
    const image = layout.fields.find((x) => x.name === 'image')!;
    const bytes = Buffer.alloc(image.bytes);
    const fd = openSync(slab.path as string, 'r');
    readSync(fd, bytes, 0, bytes.length, kept.slot * layout.stride + image.offset);
    closeSync(fd);
    const row = 3 * 32 * 32;
    for (let r = 0; r < kept.rows; r++) assert.equal(bytes[r * row], kept.ids![r]! % 251, `row ${r} of the kept batch`);
    // Released, its slot takes part again: the epoch goes on past the two slots.
    c.send(`R - ${kept.seq} ${first.seq}`);
    await c.until(() => c.frames().filter((f) => f.epoch === 1).length >= 3, 'frames of epoch 1 after the release');
    c.send({ op: 'stop', keep: ['x'] });
    await c.until(() => c.ops('error').length === 1, 'error');
    const err = c.ops('error')[0]!;
    assert.equal(err.code, 'ERR_PROTOCOL');
    assert.equal(err.request, 'stop');
    assert.match(String(err.message), /`keep` of stop must be an array of batch seqs/);
    c.send({ op: 'close' });
    await c.until(() => c.ops('closed').length === 1, 'closed');
    c.socket.destroy();
  });
});
