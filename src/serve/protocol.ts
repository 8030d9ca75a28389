// Internal: not exported from the package entry.
// The control channel of `stoker serve`: JSON lines over a Unix socket, one object per line, a few
// hundred bytes per batch (the data itself is in shared memory or CUDA IPC memory, never on the
// socket). The rule: every message has an `op`; a peer ignores ops it does not know, and the
// server answers each client request in order, while batch messages stream without being asked for,
// bounded by the slots the client has not released.
//
// Client → server
//   {op:'open', source?, options?}     create (or re-create) the loader; options as DataLoader.create's
//                                      (JSON-safe ones, `resume` included) over the CLI's defaults
//   {op:'epoch', epoch}                stream that epoch's batches
//   {op:'release', seq, event?}        the batch `seq` may be recycled (after client IPC event `event`)
//   {op:'event', id, handle}           a client IPC event (hex cudaIpcEventHandle), sent once per id
//   {op:'slab-open', slab}             the client mapped the shared-memory file of `slab` (it is unlinked)
//   {op:'state'} {op:'stop'} {op:'close'}
// Server → client
//   {op:'opened', names, length, numBatches, batchSize, device, world, state, slots}
//   {op:'slab', slab, path, bytes}     a shared-memory file to map (CPU)
//   {op:'mem', id, handle, bytes, device} / {op:'forget', id}   a CUDA allocation to open once / to close
//   {op:'ready', id, handle}           a server IPC event, sent once per id
//   {op:'batch', seq, epoch, index, rows, ids, picks?, fields:[{name,dtype,shape,slab|mem,offset,bytes}], event?, state}
//   {op:'end', epoch, batches}  {op:'stopped'}  {op:'state', state}  {op:'closed'}
//   {op:'error', code, message, epoch?, batch?, ids?}

import type { Socket } from 'node:net';

export const PROTOCOL_VERSION = 1;

export type Message = { readonly op: string } & Record<string, unknown>;

/** One JSON object per line in both directions. `onMessage` runs for each complete line, in order. */
export class LineChannel {
  readonly #socket: Socket;
  #pending = '';
  #closed = false;

  constructor(socket: Socket, onMessage: (message: Message) => void, onEnd: (why: string) => void) {
    this.#socket = socket;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.#pending += chunk;
      let nl: number;
      while ((nl = this.#pending.indexOf('\n')) >= 0) {
        const line = this.#pending.slice(0, nl);
        this.#pending = this.#pending.slice(nl + 1);
        if (line.trim() === '') continue;
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
    if (this.#closed || this.#socket.destroyed) return;
    this.#socket.write(`${JSON.stringify(message)}\n`);
  }

  /** Flush what was sent, then close. */
  end(): void {
    if (!this.#socket.destroyed) this.#socket.end();
  }

  destroy(): void {
    this.#socket.destroy();
  }
}

/** A client message the server cannot act on; crosses as {op: 'error', code: 'ERR_PROTOCOL'}. */
export class ProtocolError extends Error {
  readonly code = 'ERR_PROTOCOL';
}

/** Sample ids (or picks) as base64 of little-endian uint32: 4 bytes a row instead of a decimal list. */
export function encodeIds(ids: Uint32Array): string {
  return Buffer.from(ids.buffer, ids.byteOffset, ids.byteLength).toString('base64');
}
