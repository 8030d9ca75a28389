// Internal: not exported from the package entry.
// The control channel of `stoker serve` over a Unix socket (the data itself is in shared memory or
// CUDA IPC memory, never on the socket). The rule: control messages are JSON lines, one object with
// an `op` per line, and a peer ignores ops it does not know; the per-batch traffic is lean — a
// 32-byte binary frame from the server naming (seq, slot, layout), a one-line release from the
// client acknowledging any number of batches — because at 20 000 batches/s a JSON message each way
// is most of a consumer's 50 µs. The server answers each client request in order; batches stream
// without being asked for, bounded by the slots the client has not released. See NOTE [Lean frames].
//
// Client → server (JSON lines unless marked)
//   {op:'open', source?, options?, defaults?, ids?}  create (or re-create) the loader; options as
//                                      DataLoader.create's (JSON-safe ones, `resume` included) over the CLI's,
//                                      over `defaults` (the client's own: the Python client's are torch's);
//                                      a seed of 2^53 and above as a decimal string;
//                                      `ids: true` appends each batch's sample ids (and picks) to its frame;
//                                      `gather: true` offers to gather batches itself (NOTE [Client gather],
//                                      session.ts): `opened.gather` says whether the loader took the offer
//   {op:'epoch', epoch, keep?}         stream that epoch's batches; every batch the client holds is taken
//                                      back first but the seqs in `keep` (NOTE [Serve leases], session.ts)
//   R <event|-> <seq> [<seq> ...]\n    (a text line) those batches may be recycled; on CUDA after the
//                                      client's IPC event `event`, recorded once after all of them
//   {op:'release', seq, event?}        the same for one batch (protocol 1's form, still accepted)
//   {op:'event', id, handle}           a client IPC event (hex cudaIpcEventHandle), sent once per id
//   {op:'slab-open', slab}             the client mapped the shared-memory file of `slab` (it is unlinked)
//   {op:'store-open'}                  the client mapped the columns' file of `opened.gather` (it is unlinked)
//   {op:'state', epoch, taken}         (client gather) loader.state() once the client took `taken` batches of `epoch`
//   {op:'state', seq?}                 loader.state() right after batch `seq` was taken (the client's
//                                      consumed point; kept for the last slots + 2 batches), or now
//   {op:'stop', keep?} {op:'close'}   `keep` as in `epoch`
// Server → client
//   {op:'opened', protocol, names, length, numBatches, batchSize, device, world, state, slots, gather?}
//                                      gather: {rows, fields:[{name, dtype, shape (a row's), mem|-, offset, bytes}],
//                                      path?, fileBytes?} — the resident columns to gather from (CUDA: in IPC
//                                      allocations `mem`; CPU: at `offset` of the file `path`)
//   {op:'plan', epoch, batches, batchSize, rows, samples, bounds?, picks?, positions?, bases?}   (client
//                                      gather) the answer to `epoch`: this rank's sample ids in order (base64 of
//                                      u32 little-endian), batch b is rows [b × batchSize, min((b + 1) × batchSize,
//                                      rows)), or [bounds[b], bounds[b + 1]) with `bounds`; `picks` with ids and
//                                      augment > 1; `positions` (base64 u32, one a batch) and `bases` [this epoch's
//                                      state, the next one's] give the state after each batch (NOTE [Known state])
//   {op:'state-base', state}           (leased batches) the state whose position the next frames give (NOTE [Known state])
//   {op:'slab', slab, path, bytes, slotBytes}  a shared-memory file to map (CPU)
//   {op:'mem', id, handle, bytes, device} / {op:'forget', id}   a CUDA allocation to open once / to close
//   {op:'ready', id, handle}           a server IPC event, sent once per id
//   {op:'layout', id, stride, fields:[{name, dtype, shape, slab|mem, offset, bytes}]}
//                                      where a batch's fields lie: field f of a batch in slot s is at
//                                      byte offset + s × stride of its slab (CPU) or allocation (CUDA);
//                                      sent once per id, before the first frame naming it
//   {op:'layout-reset'}                forget every layout (the server's table was full)
//   frame (binary, 32 bytes little-endian, then the ids):
//     u8 0x01 | u8 flags (1: ids follow, 2: picks follow) | u16 ready event (0xffff: none) |
//     u32 seq | u32 epoch | u32 index | u32 rows | u32 layout | u32 slot | u32 position (NOTE [Known state]) |
//     [rows × u32 ids] [rows × u32 picks]
//   {op:'end', epoch, batches}  {op:'stopped'}  {op:'state', state, seq?}  {op:'closed', error?}
//   {op:'error', code, message, epoch?, batch?, ids?, request?}   `request`: the op it answers, if any;
//                                      code ERR_SERVE_STOPPED: the server is stopping, the socket closes next
//
// NOTE [Lean frames]
// A frame starts with 0x01 and a JSON line with '{', so the client tells them apart by one byte.
// Everything a frame used to carry per batch that does not change per batch went elsewhere: the
// field descriptors into a `layout` sent once (the client keeps a tensor view per layout and slot),
// the state into an `{op:'state', seq}` round trip made only by `state_dict()` (the server keeps the
// state after each of the last batches it sent, which always covers the client's consumed point:
// the server runs at most `slots` batches ahead of it), the ids into the frame only when asked for.
// Outgoing messages are written once per event-loop turn (one write for several frames when the
// loader had several batches ready), and the client acknowledges its releases in one line when it
// would otherwise wait, or when it holds half its slots' worth of them.
//
// NOTE [Known state]
// The client answers `state_dict()` even once the loader died (a checkpoint in the handler of
// LoaderDied must not be lost), so it knows, for every batch it hands out, the loader's state right
// after it without asking: within an epoch the state changes only in `position` — the rest (seed,
// length, a mixture's place at the epoch's start, the knobs that cut batches) is the epoch's — and
// after an epoch's last batch it is the next epoch's start. So each batch carries its position (a
// frame's `position`; a plan's `positions`, one a batch), or NEXT_EPOCH (the next epoch's start,
// position 0), or UNTRACKED (a position past 2^32 − 3: the client must ask); the rest comes once, as
// a base state: `state-base` before the first frame that needs it, a plan's `bases`. While the loader
// lives the client still asks it (`state`): the known state is what it answers after a death.

import type { Socket } from 'node:net';

export const PROTOCOL_VERSION = 4;

/** How long `LineChannel.close` waits for what it sent to be written before it closes regardless. */
const CLOSE_FLUSH_MS = 2000;

/** The first byte of a batch frame. */
export const FRAME_TAG = 0x01;
/** Bytes of a batch frame before its ids. */
export const FRAME_BYTES = 32;
export const FRAME_IDS = 1;
export const FRAME_PICKS = 2;
/** The ready-event field of a frame without one (CPU). */
export const NO_EVENT = 0xffff;
/** NOTE [Known state]: a position that says the state after the batch is the next epoch's start. */
export const NEXT_EPOCH = 0xffffffff;
/** NOTE [Known state]: a position too large for the field; the client asks for the state. */
export const UNTRACKED = 0xfffffffe;

export type Message = { readonly op: string } & Record<string, unknown>;

export interface Frame {
  readonly seq: number;
  readonly epoch: number;
  readonly index: number;
  readonly rows: number;
  readonly layout: number;
  readonly slot: number;
  /** The loader's position right after this batch, NEXT_EPOCH or UNTRACKED (NOTE [Known state]). */
  readonly position: number;
  readonly event?: number;
  readonly ids?: Uint32Array;
  readonly picks?: Uint32Array;
}

/** The binary form of a batch (see the header). */
export function encodeFrame(f: Frame): Buffer {
  const idBytes = f.ids === undefined ? 0 : f.rows * 4;
  const pickBytes = f.picks === undefined ? 0 : f.rows * 4;
  const b = Buffer.allocUnsafe(FRAME_BYTES + idBytes + pickBytes);
  b[0] = FRAME_TAG;
  b[1] = (f.ids === undefined ? 0 : FRAME_IDS) | (f.picks === undefined ? 0 : FRAME_PICKS);
  b.writeUInt16LE(f.event ?? NO_EVENT, 2);
  b.writeUInt32LE(f.seq >>> 0, 4);
  b.writeUInt32LE(f.epoch >>> 0, 8);
  b.writeUInt32LE(f.index >>> 0, 12);
  b.writeUInt32LE(f.rows >>> 0, 16);
  b.writeUInt32LE(f.layout >>> 0, 20);
  b.writeUInt32LE(f.slot >>> 0, 24);
  b.writeUInt32LE(f.position >>> 0, 28);
  let at = FRAME_BYTES;
  for (const ids of [f.ids, f.picks]) {
    if (ids === undefined) continue;
    if (ids.length !== f.rows) throw new RangeError(`a frame of ${f.rows} rows got ${ids.length} ids`);
    Buffer.from(ids.buffer, ids.byteOffset, ids.byteLength).copy(b, at);
    at += ids.byteLength;
  }
  return b;
}

/** The inverse of `encodeFrame` (tests, and any Node client); `b` starts at a frame's tag. */
export function decodeFrame(b: Buffer): { frame: Frame; bytes: number } | undefined {
  if (b.length < FRAME_BYTES || b[0] !== FRAME_TAG) return undefined;
  const flags = b[1]!;
  const rows = b.readUInt32LE(16);
  const bytes = FRAME_BYTES + rows * 4 * ((flags & FRAME_IDS ? 1 : 0) + (flags & FRAME_PICKS ? 1 : 0));
  if (b.length < bytes) return undefined;
  const event = b.readUInt16LE(2);
  let at = FRAME_BYTES;
  const take = () => {
    const ids = new Uint32Array(rows);
    Buffer.from(ids.buffer).set(b.subarray(at, at + rows * 4));
    at += rows * 4;
    return ids;
  };
  const ids = flags & FRAME_IDS ? take() : undefined;
  const picks = flags & FRAME_PICKS ? take() : undefined;
  const frame: Frame = {
    seq: b.readUInt32LE(4), epoch: b.readUInt32LE(8), index: b.readUInt32LE(12), rows, layout: b.readUInt32LE(20), slot: b.readUInt32LE(24), position: b.readUInt32LE(28),
    ...(event === NO_EVENT ? {} : { event }), ...(ids === undefined ? {} : { ids }), ...(picks === undefined ? {} : { picks }),
  };
  return { frame, bytes };
}

/** A client's release line `R <event|-> <seq> ...`, or undefined when `line` is not one. */
export function parseRelease(line: string): { seqs: number[]; event: number | undefined } | undefined {
  if (!line.startsWith('R ')) return undefined;
  const parts = line.slice(2).trim().split(' ');
  const ev = parts[0];
  if (ev === undefined || (ev !== '-' && !/^\d+$/.test(ev))) return undefined;
  const seqs: number[] = [];
  for (let i = 1; i < parts.length; i++) {
    const p = parts[i]!;
    if (!/^\d+$/.test(p)) return undefined;
    seqs.push(Number(p));
  }
  return { seqs, event: ev === '-' ? undefined : Number(ev) };
}

/**
 * JSON lines (and release lines) in, JSON lines and frames out. `onMessage` runs for each complete
 * line, in order; a release line arrives as {op: 'release-many', seqs, event}. What is sent is
 * written once per event-loop turn, in order.
 */
export class LineChannel {
  readonly #socket: Socket;
  #pending = '';
  #closed = false;
  #out: (string | Buffer)[] = [];
  #flushScheduled = false;

  constructor(socket: Socket, onMessage: (message: Message) => void, onEnd: (why: string) => void) {
    this.#socket = socket;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.#pending += chunk;
      let start = 0;
      let nl: number;
      while ((nl = this.#pending.indexOf('\n', start)) >= 0) {
        const line = this.#pending.slice(start, nl);
        start = nl + 1;
        if (line.trim() === '') continue;
        if (line.charCodeAt(0) === 0x52 /* R */) {
          const r = parseRelease(line);
          if (r === undefined) {
            this.send({ op: 'error', code: 'ERR_PROTOCOL', message: `stoker serve: a release line that is not \`R <event|-> <seq> ...\`: ${line.slice(0, 80)}` });
            continue;
          }
          onMessage({ op: 'release-many', seqs: r.seqs, event: r.event });
          continue;
        }
        let message: Message;
        try {
          message = JSON.parse(line) as Message;
        } catch {
          this.send({ op: 'error', code: 'ERR_PROTOCOL', message: `stoker serve: a message that is not JSON: ${line.slice(0, 80)}` });
          continue;
        }
        if (message === null || typeof message !== 'object' || typeof message.op !== 'string') {
          this.send({ op: 'error', code: 'ERR_PROTOCOL', message: `stoker serve: a message without an op: ${line.slice(0, 80)}` });
          continue;
        }
        onMessage(message);
      }
      this.#pending = this.#pending.slice(start);
    });
    const end = (why: string) => {
      if (this.#closed) return;
      this.#closed = true;
      onEnd(why);
    };
    socket.on('end', () => end('disconnected'));
    socket.on('close', () => end('disconnected'));
    socket.on('error', (e) => end(`disconnected (${e.message})`));
  }

  get closed(): boolean {
    return this.#closed;
  }

  send(message: Message): void {
    this.#queue(`${JSON.stringify(message)}\n`);
  }

  /** A batch frame (encodeFrame). */
  sendFrame(frame: Buffer): void {
    this.#queue(frame);
  }

  #queue(data: string | Buffer): void {
    if (this.#closed || this.#socket.destroyed) return;
    this.#out.push(data);
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => this.flush());
  }

  /** Write what was queued now (one write), instead of at the end of this event-loop turn. */
  flush(): void {
    this.#flushScheduled = false;
    const out = this.#out;
    if (out.length === 0) return;
    this.#out = [];
    if (this.#closed || this.#socket.destroyed) return;
    if (out.length === 1) this.#socket.write(out[0]!);
    else this.#socket.write(Buffer.concat(out.map((d) => (typeof d === 'string' ? Buffer.from(d) : d))));
  }

  /** Flush what was sent, then close. */
  end(): void {
    this.flush();
    if (!this.#socket.destroyed) this.#socket.end();
  }

  /**
   * Flush what was sent, then close both ways once it is written, whatever the peer does. A peer
   * that reads nothing (its socket buffer full) is cut off after CLOSE_FLUSH_MS, its last words lost.
   */
  close(): void {
    this.flush();
    const socket = this.#socket;
    if (socket.destroyed) return;
    socket.end(() => socket.destroy());
    setTimeout(() => socket.destroy(), CLOSE_FLUSH_MS).unref();
  }

  destroy(): void {
    this.#socket.destroy();
  }
}

/** A client message the server cannot act on; crosses as {op: 'error', code: 'ERR_PROTOCOL'}. */
export class ProtocolError extends Error {
  readonly code = 'ERR_PROTOCOL';
}
