// Internal: not exported from the package entry.
// The entry of an image decode child process (see NOTE [Decode pool protocol] in decode-pool.ts).
// The rule: it answers every request with exactly one frame, one request at a time, in order, by
// running the same `decodeImage` as the parent would — so the bytes and the errors are the same.
// It exits when its socket ends (the pool closed it, or the parent died).

import { closeSync, fstatSync, openSync, readSync, writeSync } from 'node:fs';
import { Socket } from 'node:net';
import { fileAccess } from '../../errors.js';
import { readSwitch } from '../../base/env.js';
import { FrameReader, FromChild, PER_CHILD, SLAB_REGION, ToChild, type WireOptions, encodeFrame, frameHeader, toWire } from './decode-pool.js';
import { decodeImage, loadImageDecoder } from '../image-decode.js';

const socket = new Socket({ fd: 3, readable: true, writable: true });

/** The slab the parent made for this child (NOTE [pixels through a slab]), or none: replies then carry their pixels. */
let slab: number | undefined;
const slabPath = readSwitch('decodeSlab');
if (slabPath !== undefined) {
  try {
    slab = openSync(slabPath, 'r+');
  } catch {
    slab = undefined;
  }
}
/** Replies written to the slab so far: reply k goes to region k mod PER_CHILD. */
let slabReplies = 0;

/** Write the pixels into the next region of the slab; false when the write fails (then they go on the socket). */
function intoSlab(bytes: Uint8Array, region: number): boolean {
  if (slab === undefined) return false;
  try {
    for (let done = 0; done < bytes.length; ) done += writeSync(slab, bytes, done, bytes.length - done, region * SLAB_REGION + done);
    return true;
  } catch {
    return false;
  }
}
/**
 * One buffer for every file this child reads, grown to the largest: requests are answered one at a
 * time, and nothing keeps a file's bytes past its answer, so a fresh ~110 KB buffer per image (and
 * its trip through the collector) buys nothing.
 */
let scratch = Buffer.allocUnsafeSlow(1 << 20);

/** The whole file at `path`, as a view of `scratch` valid until the next call. */
function readWhole(path: string): Uint8Array {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    if (size > scratch.length) scratch = Buffer.allocUnsafeSlow(2 ** Math.ceil(Math.log2(size)));
    let done = 0;
    for (let n = -1; done < size && n !== 0; done += n) n = readSync(fd, scratch, done, size - done, done);
    return scratch.subarray(0, done);
  } finally {
    closeSync(fd);
  }
}

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
        bytes = readWhole(m.path);
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
    // Transient: the pixels may be the WebAssembly module's memory, written out below before the next decode (NOTE [transient pixels]).
    const image = await decodeImage(bytes, options, true);
    const data = image.data as ArrayBufferView;
    const bytesOut = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const region = slabReplies % PER_CHILD;
    if (intoSlab(bytesOut, region)) {
      slabReplies++;
      const where = Buffer.allocUnsafe(8);
      where.writeUInt32LE(bytesOut.length, 0);
      where.writeUInt32LE(region, 4);
      socket.write(encodeFrame(id, FromChild.PixelsInSlab, where));
      return;
    }
    // One writev for header and pixels. The socket may hold the pixels past this call, and transient
    // pixels are overwritten by the next decode: it gets a copy.
    socket.cork();
    socket.write(frameHeader(id, FromChild.Pixels, bytesOut.length));
    socket.write(Buffer.from(bytesOut));
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
