// Internal: not exported from the package entry.
// The entry of an image decode child process (see NOTE [Decode pool protocol] in decode-pool.ts).
// The rule: it answers every request with exactly one frame, one request at a time, in order, by
// running the same `decodeImage` as the parent would — so the bytes and the errors are the same.
// It exits when its socket ends (the pool closed it, or the parent died).

import { readFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { fileAccess } from '../../errors.js';
import { FrameReader, FromChild, ToChild, type WireOptions, encodeFrame, frameHeader, toWire } from './decode-pool.js';
import { decodeImage, loadImageDecoder } from './image-decode.js';

const socket = new Socket({ fd: 3, readable: true, writable: true });
const queue: { id: number; kind: number; payload: Uint8Array }[] = [];
let running = false;

async function answer(id: number, kind: number, payload: Uint8Array): Promise<void> {
  try {
    let options: WireOptions;
    let bytes: Uint8Array;
    if (kind === ToChild.DecodePath) {
      const m = JSON.parse(Buffer.from(payload.buffer, payload.byteOffset, payload.length).toString('utf8')) as { path: string; options: WireOptions };
      options = m.options;
      try {
        bytes = readFileSync(m.path);
      } catch (cause) {
        throw fileAccess(m.path, 'read the image', cause);
      }
    } else if (kind === ToChild.DecodeBytes) {
      const view = Buffer.from(payload.buffer, payload.byteOffset, payload.length);
      const jsonLength = view.readUInt32LE(0);
      options = (JSON.parse(view.subarray(4, 4 + jsonLength).toString('utf8')) as { options: WireOptions }).options;
      bytes = payload.subarray(4 + jsonLength);
    } else {
      throw new Error(`unknown request kind ${kind}`);
    }
    const image = await decodeImage(bytes, options);
    // One writev for header and pixels.
    socket.cork();
    const data = image.data as ArrayBufferView;
    const bytesOut = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    socket.write(frameHeader(id, FromChild.Pixels, bytesOut.length));
    socket.write(bytesOut);
    socket.uncork();
  } catch (error) {
    socket.write(encodeFrame(id, FromChild.Error, JSON.stringify(toWire(error))));
  }
}

async function drain(): Promise<void> {
  if (running) return;
  running = true;
  while (queue.length > 0) {
    const next = queue.shift()!;
    await answer(next.id, next.kind, next.payload);
  }
  running = false;
}

const reader = new FrameReader((id, kind, payload) => {
  queue.push({ id, kind, payload });
  void drain();
});

socket.on('data', (chunk: Buffer) => reader.push(chunk));
socket.on('end', () => process.exit(0));
socket.on('error', () => process.exit(0));

loadImageDecoder();
socket.write(encodeFrame(0, FromChild.Ready));
