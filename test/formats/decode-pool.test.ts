// The image decode pool (child processes): the same bytes and the same typed errors as decoding in
// this thread, exactly-once delivery through the loader with `decode: 'processes'`, a child killed
// mid-epoch failing only what it held, children that cannot start (in-process fallback with one
// warning), abort, and no child left behind by close(), by an unclosed pool, or by a dead parent.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, getPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { BatchError, DataLoader, type LoaderError } from '../../src/index.js';
import { CHILD_FLAGS_ENV, DecodePool, HELD_ENV, NICE_ENV, childFlags, childNice, heldPerChild } from '../../src/image/processes/decode-pool.js';
import { type DecodeImageOptions, decodeImage } from '../../src/image/image-decode.js';
import { imageFolderSource } from '../../src/dataset/formats/images/image-folder.js';
import { viewFrom } from '../../src/image/crop-box.js';
import { AUTO_PROCESSES_ABOVE, ImageDecoding, defaultDecodeProcesses, imageDecodeShare, largestSize, readerThreadsFor, resolveDecodeMode } from '../../src/image/processes/image-decoding.js';
import { CHILD_MS, HANG_MS, SUITE_MS, collect, range, sorted, waitFor, within } from '../fixtures.js';
import { alive, decodeChildren, gone } from './processes.js';

/** Photo-like pixels (gradients and noise), so that resampling really mixes neighbours. */
function pixels(width: number, height: number, channels: number, seed: number): Buffer {
  const px = Buffer.alloc(width * height * channels);
  let s = seed * 2654435761 || 1;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      for (let c = 0; c < channels; c++) {
        s ^= s << 13;
        s ^= s >>> 17;
        s ^= s << 5;
        px[(y * width + x) * channels + c] = ((x * 255) / width + (y * 97) / height + c * 60 + ((s >>> 0) % 24)) & 255;
      }
    }
  }
  return px;
}

let root: string;
/** name → encoded bytes */
const images = new Map<string, Buffer>();

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'stoker-decode-pool-'));
  const rgb = (w: number, h: number, seed: number) => sharp(pixels(w, h, 3, seed), { raw: { width: w, height: h, channels: 3 } });
  images.set('rgb.jpg', await rgb(97, 61, 1).jpeg({ quality: 90 }).toBuffer());
  images.set('rgb.png', await rgb(40, 90, 2).png().toBuffer());
  images.set('rgb.webp', await rgb(64, 48, 3).webp({ quality: 80 }).toBuffer());
  images.set('gray.png', await sharp(pixels(50, 30, 1, 4), { raw: { width: 50, height: 30, channels: 1 } }).toColourspace('b-w').png().toBuffer());
  images.set('gray.jpg', await sharp(pixels(50, 30, 1, 5), { raw: { width: 50, height: 30, channels: 1 } }).toColourspace('b-w').jpeg().toBuffer());
  images.set('alpha.png', await sharp(pixels(33, 45, 4, 6), { raw: { width: 33, height: 45, channels: 4 } }).png().toBuffer());
  images.set('alpha.webp', await sharp(pixels(33, 45, 4, 7), { raw: { width: 33, height: 45, channels: 4 } }).webp({ lossless: true }).toBuffer());
  for (const [name, bytes] of images) writeFileSync(join(root, name), bytes);
});

after(() => rmSync(root, { recursive: true, force: true }));

describe('reader threads with decode processes', () => {
  it('a source decoding in processes asks for one reader thread per 16 cores; decoding in threads, one per core', () => {
    assert.deepEqual([1, 2, 4, 16, 17, 32, 64].map((c) => readerThreadsFor('processes', c)), [1, 1, 1, 1, 2, 2, 4]);
    assert.equal(readerThreadsFor('processes'), Math.max(1, Math.min(availableParallelism() - 1, Math.ceil(availableParallelism() / 16))));
    assert.deepEqual([1, 2, 16].map((c) => readerThreadsFor('threads', c)), [1, 2, 16]);
    assert.equal(readerThreadsFor(undefined), undefined);
  });

  it('the readers keep a core on machines of more than 4: 15 decode processes for one reader on 16 cores, 2 × 15 on 32', () => {
    assert.equal(defaultDecodeProcesses(true, 1, 16), 15);
    assert.equal(defaultDecodeProcesses(true, 2, 32), 15);
    assert.equal(defaultDecodeProcesses(true, 1, 2), 2, 'every core on a small machine');
    assert.equal(defaultDecodeProcesses(true, 1, 4), 4);
    assert.equal(defaultDecodeProcesses(true, 3, 8), 1);
    assert.equal(defaultDecodeProcesses(false, 1, 16), 16, 'a copy on the main thread: one per core');
  });
});

describe('DecodePool', { timeout: SUITE_MS }, () => {
  let pool: DecodePool;
  before(() => {
    pool = new DecodePool({ size: 2 });
  });
  after(() => pool.close());

  it('gives the same bytes as decodeImage in this thread: JPEG, PNG, WebP, grayscale and alpha, every channel count, layout and fit, from bytes or a path', async () => {
    const variants: Omit<DecodeImageOptions, 'source'>[] = [
      { size: [24, 24] },
      { size: [17, 31], layout: 'hwc' },
      { size: [20, 12], channels: 1, fit: 'resize' },
      { size: [9, 14], channels: 4, layout: 'hwc' },
      { size: [16, 16], channels: 4, fit: 'resize' },
    ];
    const checks: Promise<void>[] = [];
    for (const [name, bytes] of images) {
      for (const v of variants) {
        const path = join(root, name);
        const options = { ...v, source: path };
        checks.push((async () => {
          const want = await decodeImage(bytes, options);
          for (const input of [bytes, { path }]) {
            const got = await pool.decode(input, options);
            const what = `${name} ${JSON.stringify(v)} from ${input instanceof Uint8Array ? 'bytes' : 'a path'}`;
            assert.equal(got.dtype, 'uint8', what);
            assert.deepEqual(got.shape, want.shape, what);
            assert.ok(Buffer.from(got.data.buffer, got.data.byteOffset, got.data.length).equals(Buffer.from(want.data.buffer, want.data.byteOffset, want.data.length)), `${what}: bytes differ`);
          }
        })());
      }
    }
    await within(HANG_MS, 'decodes', Promise.all(checks));
    assert.ok(pool.pids.length >= 1 && pool.pids.length <= 2, `children: ${pool.pids}`);
  });

  it('fails with the same typed errors as decodeImage: ERR_BAD_FILE naming the source, ERR_FILE_ACCESS naming a path that cannot be read', async () => {
    const jpeg = images.get('rgb.jpg')!;
    const cases: [Uint8Array, Partial<DecodeImageOptions>][] = [
      [new TextEncoder().encode('<svg/>'), {}],
      [new Uint8Array(0), {}],
      [jpeg.subarray(0, jpeg.length >> 1), {}],
      [jpeg, { maxInputPixels: 100 }],
    ];
    for (const [bytes, extra] of cases) {
      const options = { size: [8, 8] as const, source: '/data/cls/broken.jpg', ...extra };
      const here = await decodeImage(bytes, options).then(() => assert.fail('decoded'), (e: Error & { code?: string }) => e);
      const there = await within(HANG_MS, 'decode', pool.decode(bytes, options)).then(() => assert.fail('decoded'), (e: Error & { code?: string }) => e);
      assert.equal(there.name, 'LoaderError');
      assert.equal(there.code, 'ERR_BAD_FILE');
      assert.equal(there.message, here.message);
    }
    const missing = join(root, 'missing.jpg');
    await assert.rejects(pool.decode({ path: missing }, { size: [8, 8], source: missing }), (e: Error & { code?: string; cause?: { code?: string } }) => {
      assert.equal(e.code, 'ERR_FILE_ACCESS');
      assert.ok(e.message.startsWith(`${missing}: cannot read the image: ENOENT`), e.message);
      assert.equal(e.cause?.code, 'ENOENT');
      return true;
    });
  });

  it('files read by path, one after another, are each read whole and alone: a file over the first buffer, then its truncation, then a small one', async () => {
    // The child reads every file into one reused buffer: a stale tail would let the truncated file decode.
    const noise = Buffer.alloc(900 * 700 * 3);
    for (let i = 0, s = 1; i < noise.length; i++) noise[i] = (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) >>> 24;
    const big = await sharp(noise, { raw: { width: 900, height: 700, channels: 3 } }).jpeg({ quality: 100, chromaSubsampling: '4:4:4' }).toBuffer();
    assert.ok(big.length > 1 << 20, `the big file is over 1 MiB (${big.length})`);
    const files: [string, Uint8Array][] = [['big.jpg', big], ['cut.jpg', big.subarray(0, big.length - 4000)], ['small.jpg', images.get('rgb.jpg')!], ['big2.jpg', big]];
    for (const [name, bytes] of files) writeFileSync(join(root, name), bytes);
    const one = new DecodePool({ size: 1 });
    try {
      for (const [name, bytes] of files) {
        const path = join(root, name);
        const options = { size: [32, 32] as const, source: path };
        const here = await decodeImage(bytes, options).then((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.length), (e: Error) => e.message);
        const there = await within(HANG_MS, 'decode', one.decode({ path }, options)).then((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.length), (e: Error) => e.message);
        if (name === 'cut.jpg') assert.equal(typeof here, 'string', 'the truncated file fails here');
        assert.deepEqual(there, here, name);
      }
    } finally {
      await one.close();
    }
  });

  it('a decode whose signal aborts rejects with the reason, and the pool keeps working', async () => {
    const controller = new AbortController();
    const options = { size: [32, 32] as const, source: 'rgb.jpg' };
    const pending = Array.from({ length: 12 }, () => pool.decode(images.get('rgb.jpg')!, options, controller.signal));
    controller.abort(new Error('epoch abandoned'));
    const outcomes = await within(HANG_MS, 'aborted decodes', Promise.allSettled(pending));
    assert.ok(outcomes.every((o) => o.status === 'rejected' && (o.reason as Error).message === 'epoch abandoned'), 'every aborted decode rejects with the reason');
    await assert.rejects(pool.decode(images.get('rgb.jpg')!, options, controller.signal), /epoch abandoned/);
    const after = await within(HANG_MS, 'decode after abort', pool.decode(images.get('rgb.jpg')!, options));
    assert.deepEqual(after.shape, [3, 32, 32]);
  });

  it('replies through a slab and on the socket are the same bytes, every dtype; no slab file is left, alive, killed or closed', { skip: !existsSync('/dev/shm') && 'no /dev/shm: replies always come on the socket' }, async () => {
    const mine = () => readdirSync('/dev/shm').filter((n) => n.startsWith(`stoker-decode-${process.pid}-`));
    const before = mine();
    const slabbed = new DecodePool({ size: 2 });
    const plain = new DecodePool({ size: 1, slab: false });
    try {
      const path = join(root, 'rgb.jpg');
      for (const o of [{ size: [24, 24] }, { size: [13, 21], layout: 'hwc', normalize: { mean: [0.4], std: [0.3] }, output: 'float32' }, { size: [16, 16], normalize: { mean: [0.5], std: [0.25] }, output: 'bfloat16' }] as Omit<DecodeImageOptions, 'source'>[]) {
        const options = { ...o, source: path };
        const want = await decodeImage(images.get('rgb.jpg')!, options);
        // More than PER_CHILD at once, so that the slab's regions are reused while replies are outstanding.
        const got = await within(HANG_MS, 'decodes', Promise.all([...range(7).map(() => slabbed.decode({ path }, options)), plain.decode({ path }, options)]));
        for (const t of got) {
          assert.equal(t.dtype, want.dtype);
          assert.deepEqual(t.shape, want.shape);
          assert.deepEqual(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength), Buffer.from(want.data.buffer, want.data.byteOffset, want.data.byteLength), JSON.stringify(o));
        }
      }
      assert.equal(slabbed.slabs, slabbed.pids.length, 'every child of the default pool replies through a slab');
      assert.equal(plain.slabs, 0);
      // Once every child is ready, no slab has a name left (another pool's child still starting may
      // have had one in \`before\`: those can only go). A child of \`slabbed\` still starting is let finish.
      const isNew = () => mine().filter((n) => !before.includes(n));
      await waitFor(() => isNew().length === 0, { what: () => `slab names gone from /dev/shm once the children are ready (left: ${isNew()})` });
      process.kill(slabbed.pids[0]!, 'SIGKILL');
      await within(HANG_MS, 'decode after a kill', slabbed.decode({ path: join(root, 'rgb.jpg') }, { size: [8, 8], source: 'after' }).catch(() => slabbed.decode({ path: join(root, 'rgb.jpg') }, { size: [8, 8], source: 'again' })));
    } finally {
      await slabbed.close();
      await plain.close();
    }
    assert.deepEqual(mine().filter((n) => !before.includes(n)), [], 'no slab name left after close()');
  });

  it('replies on the socket larger than its buffer are whole while the child decodes the next (transient pixels are copied first)', async () => {
    const plain = new DecodePool({ size: 1, slab: false });
    try {
      const jpeg = await sharp(pixels(500, 375, 3, 11), { raw: { width: 500, height: 375, channels: 3 } }).jpeg({ quality: 90 }).toBuffer();
      const path = join(root, 'big.jpg');
      writeFileSync(path, jpeg);
      const view = (sample: number): DecodeImageOptions => ({
        size: [224, 224], source: path, output: 'float32', normalize: { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] },
        view: { view: viewFrom('train'), sample, repeat: 0, epoch: 0, seed: { hi: 0, lo: 3 } },
      });
      const want = await Promise.all(range(8).map((k) => decodeImage(jpeg, view(k))));
      // Eight 600 KB replies queued at once: each is written while the child goes on to the next.
      const got = await within(HANG_MS, 'socket replies', Promise.all(range(8).map((k) => plain.decode({ path }, view(k)))));
      got.forEach((t, k) => assert.deepEqual(t.data, want[k]!.data, `reply ${k}`));
    } finally {
      await plain.close();
    }
  });

  it('reads the pixels into the memory given (NOTE [pixels into their row]), the same bytes; an aborted decode never writes there', { skip: !existsSync('/dev/shm') && 'no /dev/shm: replies always come on the socket' }, async () => {
    const one = new DecodePool({ size: 1 });
    try {
      const path = join(root, 'rgb.jpg');
      const options: DecodeImageOptions = { size: [16, 12], normalize: { mean: [0.5], std: [0.25] }, output: 'bfloat16', source: path };
      const want = await decodeImage(images.get('rgb.jpg')!, options);
      const shared = new SharedArrayBuffer(want.data.byteLength * 3);
      const into = new Uint8Array(shared, want.data.byteLength, want.data.byteLength);
      const got = await within(HANG_MS, 'decode into', one.decode({ path }, options, undefined, into));
      assert.equal(got.data.buffer, shared, 'the tensor views the memory given');
      assert.equal(got.data.byteOffset, want.data.byteLength);
      assert.deepEqual(Buffer.from(got.data.buffer, got.data.byteOffset, got.data.byteLength), Buffer.from(want.data.buffer, want.data.byteOffset, want.data.byteLength));
      // Memory of the wrong length or alignment is not used.
      const odd = new Uint8Array(shared, 1, want.data.byteLength);
      const other = await within(HANG_MS, 'decode into odd memory', one.decode({ path }, options, undefined, odd));
      assert.notEqual(other.data.buffer, shared);
      // Aborted after it was sent: the child still decodes it, but its pixels never land in `into`.
      // The child answers in order, so once the decode sent after it is back, so is its reply.
      const sentinel = new Uint8Array(want.data.byteLength).fill(0xa5);
      const target = new Uint8Array(shared, 0, want.data.byteLength);
      target.set(sentinel);
      const controller = new AbortController();
      const aborted = one.decode({ path }, options, controller.signal, target);
      const next = one.decode({ path }, options);
      controller.abort(new Error('epoch abandoned'));
      await assert.rejects(aborted, /epoch abandoned/);
      await within(HANG_MS, 'the decode after the aborted one', next);
      assert.deepEqual(target, sentinel, 'the aborted decode left the memory as it was');
    } finally {
      await one.close();
    }
  });

  it('a child killed mid-work fails only the decodes it held, with ERR_WORKER_DIED naming the image; a new child takes over', async () => {
    const big = await sharp(pixels(1200, 900, 3, 9), { raw: { width: 1200, height: 900, channels: 3 } }).png({ compressionLevel: 1 }).toBuffer();
    const killing = new DecodePool({ size: 1 });
    try {
      await killing.decode(big, { size: [8, 8], source: 'warm-up' });
      const [victim] = killing.pids;
      // Stopped first, so that it cannot finish what it is handed before the kill, however the
      // machine schedules the two processes: it then holds exactly the first two (PER_CHILD,
      // dispatched synchronously by decode()); the rest wait in the parent.
      process.kill(victim!, 'SIGSTOP');
      const pending = range(6).map((k) => killing.decode(big, { size: [64, 64], source: `big-${k}.png` }).then(() => 'ok', (e: Error & { code?: string }) => e));
      process.kill(victim!, 'SIGKILL');
      const outcomes = await within(HANG_MS, 'decodes around a crash', Promise.all(pending));
      const failed = outcomes.filter((o): o is Error & { code?: string } => o !== 'ok');
      assert.equal(failed.length, 2, `failed: ${failed.length} of 6 (the child held 2)`);
      for (const e of failed) {
        assert.equal(e.code, 'ERR_WORKER_DIED');
        assert.match(e.message, /image decode process \(pid \d+\) died while decoding big-[01]\.png: it was killed by SIGKILL/);
      }
      assert.equal(outcomes.filter((o) => o === 'ok').length, 6 - failed.length);
      assert.equal(killing.pids.length, 1);
      assert.notEqual(killing.pids[0], victim);
      assert.ok(!alive(victim!));
    } finally {
      await killing.close();
    }
  });

  it('close() rejects what waits, and leaves no child process (every pid is gone)', async () => {
    const closing = new DecodePool({ size: 2 });
    const pending = range(10).map(() => closing.decode(images.get('rgb.png')!, { size: [16, 16], source: 'rgb.png' }).then(() => 'ok', (e: Error & { code?: string }) => e.code));
    await within(HANG_MS, 'first decode', closing.decode(images.get('rgb.png')!, { size: [16, 16], source: 'rgb.png' }));
    const pids = closing.pids;
    assert.ok(pids.length >= 1);
    await within(HANG_MS, 'close', closing.close());
    const outcomes = await within(HANG_MS, 'pending decodes', Promise.all(pending));
    assert.ok(outcomes.every((o) => o === 'ok' || o === 'ERR_LOADER_CLOSED'), JSON.stringify(outcomes));
    for (const pid of pids) assert.ok(!alive(pid), `child ${pid} is still alive after close()`);
    assert.deepEqual(closing.pids, []);
    await closing.close();
    await assert.rejects(closing.decode(images.get('rgb.png')!, { size: [16, 16], source: 'x' }), { code: 'ERR_LOADER_CLOSED' });
  });

  it('children that cannot start never respawn in a loop: the pool decodes in this process, with one warning', async () => {
    const dies = join(root, 'dies.mjs');
    writeFileSync(dies, 'process.exit(3);\n');
    const silent = join(root, 'silent.mjs');
    writeFileSync(silent, 'setInterval(() => {}, 1000);\n');
    // The short start-up timeout only for the child that never says ready (it is exact there); the
    // one that exits keeps the default, or a slow start on a loaded machine would read as a timeout.
    for (const [entry, why, startTimeoutMs] of [[dies, /exited with code 3/, undefined], [silent, /did not report ready within 1500 ms/, 1500]] as const) {
      const warnings: string[] = [];
      const broken = new DecodePool({ size: 4, entry: pathToFileURL(entry), startTimeoutMs, warn: (m) => warnings.push(m) });
      try {
        const options = { size: [20, 20] as const, source: 'rgb.webp' };
        const want = await decodeImage(images.get('rgb.webp')!, options);
        const got = await within(HANG_MS, 'fallback decodes', Promise.all(range(8).map(() => broken.decode(images.get('rgb.webp')!, options))));
        for (const t of got) assert.deepEqual(Array.from(t.data), Array.from(want.data));
        assert.equal(warnings.length, 1, warnings.join('\n'));
        assert.match(warnings[0]!, why);
        assert.match(warnings[0]!, /decoded in this process/);
        assert.ok(broken.inProcess);
        assert.deepEqual(broken.pids, []);
        await broken.decode(images.get('rgb.webp')!, options);
        assert.equal(warnings.length, 1, 'no new child, no new warning');
      } finally {
        await broken.close();
      }
    }
  });

  it('an idle pool never holds the process open; a process that exits without close() takes its children with it', async () => {
    const module = new URL('../../src/image/processes/decode-pool.ts', import.meta.url).href;
    const script = `import { DecodePool } from ${JSON.stringify(module)};
      const pool = new DecodePool({ size: 2 });
      const t = await pool.decode({ path: ${JSON.stringify(join(root, 'rgb.jpg'))} }, { size: [8, 8], source: 'x' });
      console.log(JSON.stringify({ pids: pool.pids, shape: t.shape }));`;
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: CHILD_MS });
    assert.equal(run.status, 0, `the process did not exit on its own: ${run.error ?? run.stderr}`);
    const { pids, shape } = JSON.parse(run.stdout) as { pids: number[]; shape: number[] };
    assert.deepEqual(shape, [3, 8, 8]);
    assert.ok(pids.length >= 1);
    for (const pid of pids) assert.ok(await gone(pid), `child ${pid} outlived its parent`);
  });

  it('rejects a bad size', () => {
    for (const size of [0, 1.5, -1, Number.NaN]) assert.throws(() => new DecodePool({ size }), { code: 'ERR_INVALID_OPTION' });
  });

  it('with idleMs, an idle child retires and a later decode starts another with the same bytes; a busy one stays', async () => {
    assert.throws(() => new DecodePool({ idleMs: 0 }), /idleMs/);
    const [name, bytes] = images.entries().next().value as [string, Buffer];
    const options = { size: [20, 14] as [number, number], source: name };
    const want = await decodeImage(bytes, options);
    const same = (t: { data: ArrayBufferView }) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).equals(Buffer.from(want.data.buffer, want.data.byteOffset, want.data.byteLength));
    // Busy: two decodes outstanding at all times (the next sent before the last answers), so the child
    // never holds nothing, over many idle periods: however slow the machine, the same child does them all.
    const busy = new DecodePool({ size: 1, idleMs: 50 });
    try {
      assert.ok(same(await within(HANG_MS, 'decode', busy.decode(bytes, options))));
      const first = busy.pids[0]!;
      let previous = busy.decode(bytes, options);
      const t0 = performance.now();
      for (let i = 0; i < 20 || performance.now() - t0 < 500; i++) {
        const next = busy.decode(bytes, options);
        assert.ok(same(await within(HANG_MS, 'decode', previous)));
        previous = next;
      }
      assert.ok(same(await within(HANG_MS, 'decode', previous)));
      assert.deepEqual(busy.pids, [first]);
    } finally {
      await busy.close();
    }
    const warned: string[] = [];
    const pool = new DecodePool({ size: 1, idleMs: 200, warn: (m) => warned.push(m) });
    try {
      assert.ok(same(await within(HANG_MS, 'decode', pool.decode(bytes, options))));
      const first = pool.pids[0]!;
      await waitFor(() => pool.pids.length === 0, { what: 'the idle child retiring', timeoutMs: HANG_MS });
      assert.ok(await gone(first), `retired child ${first} is still alive`);
      assert.ok(same(await within(HANG_MS, 'decode after retiring', pool.decode(bytes, options))));
      assert.equal(pool.pids.length, 1);
      assert.notEqual(pool.pids[0], first);
      assert.equal(pool.inProcess, false, 'a retired child is not a start-up failure');
      assert.deepEqual(warned, []);
    } finally {
      await pool.close();
    }
  });

  it('with idleMs, a pool that stopped spawning (a child failed to start) keeps the children it has', async () => {
    // The first child to start runs the real decode child; any later one exits: spawning stops.
    const flag = join(root, `once-${process.pid}-${Date.now()}`);
    const child = new URL('../../src/image/processes/decode-child.ts', import.meta.url).href;
    const entry = join(root, 'first-only.mjs');
    writeFileSync(entry, `import { openSync } from 'node:fs';\ntry { openSync(${JSON.stringify(flag)}, 'wx'); } catch { process.exit(3); }\nawait import(${JSON.stringify(child)});\n`);
    const warned: string[] = [];
    const pool = new DecodePool({ size: 2, entry: pathToFileURL(entry), idleMs: 50, warn: (m) => warned.push(m) });
    try {
      const [name, bytes] = images.entries().next().value as [string, Buffer];
      const options = { size: [20, 14] as [number, number], source: name };
      const want = await decodeImage(bytes, options);
      const same = (t: { data: ArrayBufferView }) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).equals(Buffer.from(want.data.buffer, want.data.byteOffset, want.data.byteLength));
      // Five at once: more than one child's room, so the second child is started (and fails).
      const got = await within(HANG_MS, 'decodes', Promise.all(range(5).map(() => pool.decode(bytes, options))));
      assert.ok(got.every(same));
      await waitFor(() => warned.length === 1, { what: 'the start-up failure warning', timeoutMs: HANG_MS });
      assert.match(warned[0]!, /no more are started; 1 decodes/);
      const [kept] = pool.pids;
      // Many idle periods later the one child is still there, and still decodes.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      assert.deepEqual(pool.pids, [kept]);
      assert.ok(same(await within(HANG_MS, 'decode after idling', pool.decode(bytes, options))));
      assert.equal(pool.inProcess, false);
    } finally {
      await pool.close();
    }
  });
});

describe('ImageDecoding (the per-copy decoding every image source shares)', { timeout: SUITE_MS }, () => {
  it("'auto' resolves by cores and the largest output size; bad options are refused naming the knob", () => {
    const multi = availableParallelism() > AUTO_PROCESSES_ABOVE;
    assert.equal(resolveDecodeMode('auto', [64, 64]), multi ? 'processes' : 'threads');
    assert.equal(resolveDecodeMode('auto', [63, 64]), 'threads');
    assert.equal(resolveDecodeMode('threads', [512, 512]), 'threads');
    assert.equal(resolveDecodeMode('processes', [1, 1]), 'processes');
    // NOTE [decoding in a reader thread]: images on the direct route decode in the reader threads under 'auto' only.
    assert.equal(resolveDecodeMode('auto', [224, 224], true), 'threads');
    assert.equal(resolveDecodeMode('processes', [224, 224], true), 'processes');
    assert.deepEqual(largestSize([[8, 8], [100, 50], [60, 60]]), [100, 50]);
    assert.equal(new ImageDecoding(imageDecodeShare({}), largestSize([[8, 8], [64, 64]]), false).mode, multi ? 'processes' : 'threads');
    assert.throws(() => imageDecodeShare({ decode: 'fork' as never }), { code: 'ERR_INVALID_OPTION', message: /`decode`/ });
    assert.throws(() => imageDecodeShare({ decodeProcesses: 0 }), { code: 'ERR_INVALID_OPTION', message: /`decodeProcesses`/ });
  });

  it('both modes give the same bytes from bytes or a path, and the same ERR_FILE_ACCESS for a missing path', async () => {
    const share = imageDecodeShare({ decode: 'threads' });
    const threads = new ImageDecoding(share, [16, 16], false);
    const procs = new ImageDecoding({ ...share, decode: 'processes', decodeProcesses: 1 }, [16, 16], false);
    try {
      for (const name of ['rgb.jpg', 'alpha.png']) {
        const path = join(root, name);
        const options = { size: [16, 12] as const, layout: 'hwc' as const, source: path };
        const want = await decodeImage(images.get(name)!, options);
        for (const d of [threads, procs]) for (const input of [images.get(name)!, { path }]) assert.deepEqual((await d.decode(input, options)).data, want.data, `${d.mode} ${name}`);
      }
      const missing = join(root, 'missing.jpg');
      for (const d of [threads, procs]) await assert.rejects(d.decode({ path: missing }, { size: [4, 4], source: missing }), (e: LoaderError) => e.code === 'ERR_FILE_ACCESS' && e.message.includes(missing));
      assert.equal(threads.pids.length, 0);
      assert.equal(procs.pids.length, 1);
    } finally {
      const pids = procs.pids;
      await procs.close();
      for (const pid of pids) assert.ok(!alive(pid));
    }
  });

  it('a reader-worker copy counts itself in the shared counter until close() and gets its share of the cores', async () => {
    const share = imageDecodeShare({ decode: 'processes' });
    const cores = availableParallelism();
    const copies = Array.from({ length: cores }, () => new ImageDecoding(share, [16, 16], true));
    assert.equal(Atomics.load(share.workerCopies, 0), cores);
    const path = join(root, 'rgb.jpg');
    await Promise.all(range(4 * cores).map(() => copies[0]!.decode({ path }, { size: [16, 16], source: path })));
    assert.equal(copies[0]!.pids.length, 1, 'round(cores / copies) = 1 child for this copy');
    const pids = copies[0]!.pids;
    await copies[0]!.close();
    await copies[0]!.close();
    assert.equal(Atomics.load(share.workerCopies, 0), cores - 1, 'counted down once');
    for (const pid of pids) assert.ok(!alive(pid));
    await Promise.all(copies.map((c) => c.close()));
    assert.equal(Atomics.load(share.workerCopies, 0), 0);
  });
});

describe("sources.imageFolder with decode: 'processes' through the loader", { timeout: SUITE_MS }, () => {
  let dir: string;
  let n: number;
  before(async () => {
    dir = join(root, 'folder');
    n = 0;
    const colours: Record<string, [number, number, number]> = { cat: [220, 30, 40], dog: [20, 200, 60], emu: [30, 60, 230] };
    for (const [cls, [r, g, b]] of Object.entries(colours)) {
      mkdirSync(join(dir, cls), { recursive: true });
      for (let k = 0; k < 10; k++) {
        const img = sharp({ create: { width: 30 + k, height: 40 - k, channels: 3, background: { r, g, b } } });
        const fmt = k % 3;
        writeFileSync(join(dir, cls, `${k}.${['jpg', 'png', 'webp'][fmt]}`), await (fmt === 0 ? img.jpeg({ quality: 95 }) : fmt === 1 ? img.png() : img.webp({ lossless: true })).toBuffer());
        n++;
      }
    }
  });

  it('with workers 0, every sample arrives exactly once per epoch with its label, the same bytes as in-thread decoding; close() ends the children', async () => {
    const ds = imageFolderSource(dir, { size: 12, decode: 'processes', decodeProcesses: 2 });
    const threads = imageFolderSource(dir, { size: 12, decode: 'threads' });
    assert.equal(ds.decode, 'processes');
    const loader = await DataLoader.create(ds, { batchSize: 7, workers: 0, mode: 'streaming', dropLast: false, seed: 5 });
    assert.equal(loader.stats().workers, 0);
    for (let e = 0; e < 2; e++) {
      const batches = await within(HANG_MS, `epoch ${e}`, collect(loader.epoch(e)));
      assert.deepEqual(sorted(batches.flatMap((b) => [...b.sampleIds])), range(n));
      for (const b of batches) {
        const images = b.get('image').data as Uint8Array;
        const labels = b.get('label').data as Int32Array;
        for (let r = 0; r < b.rows; r++) {
          const id = b.sampleIds[r]!;
          assert.equal(labels[r], ds.labels[id]);
          const want = (await threads.get(id)).image.data as Uint8Array;
          assert.ok(Buffer.from(images.subarray(r * 432, (r + 1) * 432)).equals(Buffer.from(want)), `pixels of sample ${id}`);
        }
      }
    }
    const pids = ds.decodePids;
    assert.ok(pids.length >= 1 && pids.length <= 2, `children: ${pids}`);
    await loader.close();
    await ds.close();
    for (const pid of pids) assert.ok(!alive(pid), `child ${pid} is alive after close()`);
  });

  it('with 2 reader workers, each worker copy decodes in its own children, exactly once per epoch, and the loader closes them', { skip: process.platform !== 'linux' && 'counts child processes through /proc' }, async () => {
    const before = decodeChildren();
    const ds = imageFolderSource(dir, { size: 12, decode: 'processes', decodeProcesses: 1 });
    const loader = await DataLoader.create(ds, { batchSize: 5, workers: 2, mode: 'streaming', dropLast: false, seed: 9 });
    for (let e = 0; e < 2; e++) {
      const batches = await within(HANG_MS, `epoch ${e}`, collect(loader.epoch(e)));
      assert.deepEqual(sorted(batches.flatMap((b) => [...b.sampleIds])), range(n));
      for (const b of batches) assert.deepEqual(Array.from(b.get('label').data as Int32Array), Array.from(b.sampleIds, (id) => ds.labels[id]!));
    }
    // The main-thread copy decoded sample 0 (the probe) in a child that retires once idle
    // (NOTE [idle children retire]); each worker copy keeps its one child.
    await waitFor(() => ds.decodePids.length === 0, { what: "the probe's decode process retiring", timeoutMs: HANG_MS });
    const workersChildren = await waitFor((): number[] | false => {
      const now = decodeChildren().filter((pid) => !before.includes(pid));
      return now.length === 2 && now;
    }, { what: () => `one child per worker copy and none for the probe (decodeProcesses: 1), got ${decodeChildren().filter((pid) => !before.includes(pid))}`, timeoutMs: HANG_MS });
    await within(HANG_MS, 'close', loader.close());
    for (const pid of workersChildren || []) assert.ok(await gone(pid), `worker-copy child ${pid} is alive after loader.close()`);
    await ds.close();
  });

  it('leaving an epoch early drops the decodes it queued; the next epoch is whole', async () => {
    const ds = imageFolderSource(dir, { size: 12, decode: 'processes', decodeProcesses: 2 });
    const loader = await DataLoader.create(ds, { batchSize: 3, workers: 0, mode: 'streaming', seed: 4, prefetch: 6 });
    for await (const b of loader.epoch(0)) {
      assert.equal(b.rows, 3);
      break;
    }
    const batches = await within(HANG_MS, 'epoch 1', collect(loader.epoch(1)));
    assert.deepEqual(sorted(batches.flatMap((b) => [...b.sampleIds])), range(n));
    await loader.close();
    await ds.close();
  });

  it('a corrupt file fails its batch with a BatchError naming the file, in every epoch; the batches before it arrive', async () => {
    const broken = join(root, 'broken');
    for (const cls of ['a', 'b']) {
      mkdirSync(join(broken, cls), { recursive: true });
      for (let k = 0; k < 4; k++) writeFileSync(join(broken, cls, `${k}.png`), images.get('rgb.png')!);
    }
    const bad = join(broken, 'b', '1.png');
    writeFileSync(bad, images.get('rgb.png')!.subarray(0, 80));
    const ds = imageFolderSource(broken, { size: 8, decode: 'processes', decodeProcesses: 2 });
    assert.equal(ds.files[5], 'b/1.png');
    const loader = await DataLoader.create(ds, { batchSize: 4, workers: 0, mode: 'streaming', shuffle: false });
    for (let e = 0; e < 2; e++) {
      const seen: number[] = [];
      const error = await within(HANG_MS, `epoch ${e}`, (async () => {
        for await (const b of loader.epoch(e)) seen.push(...b.sampleIds);
      })()).catch((err: unknown) => err);
      assert.ok(error instanceof BatchError, String(error));
      assert.deepEqual(error.sampleIds, [4, 5, 6, 7]);
      assert.ok(error.message.includes(bad), error.message);
      assert.equal((error.cause as { code?: string }).code, 'ERR_BAD_FILE');
      assert.deepEqual(seen, [0, 1, 2, 3]);
    }
    await loader.close();
    await ds.close();
  });

  it('a decode process killed mid-epoch fails only the batches it held (BatchError, ERR_WORKER_DIED); the loader survives and the next epoch is whole', async () => {
    // Large PNGs, so that every child is busy when one is killed.
    const slow = join(root, 'slow');
    const big = await sharp(pixels(1000, 800, 3, 11), { raw: { width: 1000, height: 800, channels: 3 } }).png({ compressionLevel: 1 }).toBuffer();
    for (const cls of ['x', 'y']) {
      mkdirSync(join(slow, cls), { recursive: true });
      for (let k = 0; k < 12; k++) writeFileSync(join(slow, cls, `${k}.png`), big);
    }
    const ds = imageFolderSource(slow, { size: 16, decode: 'processes', decodeProcesses: 2 });
    const loader = await DataLoader.create(ds, { batchSize: 4, workers: 0, mode: 'streaming', errors: 'skip', seed: 1 });
    let killed: number | undefined;
    let delivered = 0;
    await within(HANG_MS, 'epoch with a crash', (async () => {
      for await (const b of loader.epoch(0)) {
        delivered += b.rows;
        if (killed === undefined) {
          killed = ds.decodePids[0]!;
          process.kill(killed, 'SIGKILL');
        }
      }
    })());
    const stats = loader.stats().epochs[0]!;
    assert.ok(stats.failedBatches >= 1, `failed batches: ${stats.failedBatches}`);
    assert.equal(delivered, 24 - 4 * stats.failedBatches);
    assert.ok(!alive(killed!));
    const next = await within(HANG_MS, 'epoch 1', collect(loader.epoch(1)));
    assert.deepEqual(sorted(next.flatMap((b) => [...b.sampleIds])), range(24));
    assert.ok(!ds.decodePids.includes(killed!));
    await loader.close();
    await ds.close();
  });

  it('a crash surfaces as a BatchError whose cause is ERR_WORKER_DIED (errors: throw)', async () => {
    const slow = join(root, 'slow');
    const ds = imageFolderSource(slow, { size: 16, decode: 'processes', decodeProcesses: 1 });
    const loader = await DataLoader.create(ds, { batchSize: 4, workers: 0, mode: 'streaming', seed: 2 });
    let killed = false;
    const error = await within(HANG_MS, 'epoch with a crash', (async () => {
      for await (const _ of loader.epoch(0)) {
        if (!killed) process.kill(ds.decodePids[0]!, 'SIGKILL');
        killed = true;
      }
    })()).then(() => undefined, (e: unknown) => e);
    assert.ok(error instanceof BatchError, String(error));
    assert.equal((error.cause as { code?: string }).code, 'ERR_WORKER_DIED');
    const next = await within(HANG_MS, 'epoch 1', collect(loader.epoch(1)));
    assert.deepEqual(sorted(next.flatMap((b) => [...b.sampleIds])), range(24));
    await loader.close();
    await ds.close();
  });
});

describe('decode child flags (STOKER_DECODE_CHILD_FLAGS)', { timeout: SUITE_MS }, () => {
  it('parses space-separated flags and rejects a word that is not a flag, naming the variable and the fix', () => {
    assert.deepEqual(childFlags(undefined), []);
    assert.deepEqual(childFlags('  --single-threaded-gc   --v8-pool-size=1 '), ['--single-threaded-gc', '--v8-pool-size=1']);
    assert.throws(() => childFlags('--single-threaded-gc gc'), (e: Error) => e instanceof TypeError && e.message.includes(CHILD_FLAGS_ENV) && e.message.includes('"gc"') && e.message.includes('start with "--"'));
  });

  it('a child started with the flags has them on its command line and gives the same bytes', async () => {
    const saved = process.env[CHILD_FLAGS_ENV];
    process.env[CHILD_FLAGS_ENV] = '--single-threaded-gc --v8-pool-size=1';
    const pool = new DecodePool({ size: 1 });
    try {
      const [name, bytes] = images.entries().next().value as [string, Buffer];
      const options = { size: [24, 24] as [number, number], source: name };
      const want = await decodeImage(bytes, options);
      const got = await within(HANG_MS, 'decode', pool.decode(bytes, options));
      assert.ok(Buffer.from(got.data.buffer, got.data.byteOffset, got.data.length).equals(Buffer.from(want.data.buffer, want.data.byteOffset, want.data.length)), 'bytes differ');
      assert.equal(pool.pids.length, 1);
      const argv = readFileSync(`/proc/${pool.pids[0]}/cmdline`, 'utf8').split('\0');
      assert.ok(argv.includes('--single-threaded-gc') && argv.includes('--v8-pool-size=1'), `child argv: ${argv.join(' ')}`);
    } finally {
      if (saved === undefined) delete process.env[CHILD_FLAGS_ENV];
      else process.env[CHILD_FLAGS_ENV] = saved;
      await pool.close();
    }
  });
});

describe('bench knobs: requests held per child (STOKER_DECODE_HELD) and the children\'s priority (STOKER_DECODE_NICE)', { timeout: SUITE_MS }, () => {
  it('parse their values and refuse a bad one, naming the variable, the value and the range', () => {
    assert.equal(heldPerChild(undefined), 2);
    assert.equal(heldPerChild(''), 2);
    assert.equal(heldPerChild('3'), 3);
    for (const bad of ['0', '9', '2.5', 'two']) assert.throws(() => heldPerChild(bad), (e: Error) => e instanceof TypeError && e.message.includes(HELD_ENV) && e.message.includes(JSON.stringify(bad)) && e.message.includes('1 to 8'));
    assert.equal(childNice(undefined), 0);
    assert.equal(childNice('10'), 10);
    for (const bad of ['-1', '20', '1.5', 'low']) assert.throws(() => childNice(bad), (e: Error) => e instanceof TypeError && e.message.includes(NICE_ENV) && e.message.includes(JSON.stringify(bad)) && e.message.includes('0 to 19'));
  });

  it('a child holding 3 requests at a lower priority gives every image\'s bytes while its slab regions are reused', async () => {
    const module = new URL('../../src/image/processes/decode-pool.ts', import.meta.url).href;
    const decodeModule = new URL('../../src/image/image-decode.ts', import.meta.url).href;
    const names = ['rgb.jpg', 'rgb.png', 'rgb.webp', 'gray.jpg', 'alpha.png', 'alpha.webp'];
    // Twelve decodes at once through one child, more than its 3 slab regions, each checked against
    // the same decode in this process; the child's nice value read back from the kernel.
    const script = `import { readFileSync } from 'node:fs';
      import { getPriority } from 'node:os';
      import { DecodePool, PER_CHILD } from ${JSON.stringify(module)};
      import { decodeImage } from ${JSON.stringify(decodeModule)};
      const names = ${JSON.stringify(names.map((n) => join(root, n)))};
      const pool = new DecodePool({ size: 1 });
      const jobs = Array.from({ length: 12 }, (_, i) => {
        const path = names[i % names.length];
        const options = { size: [20 + i, 16], source: path };
        return pool.decode({ path }, options).then(async (got) => {
          const want = await decodeImage(readFileSync(path), options);
          return Buffer.from(got.data.buffer, got.data.byteOffset, got.data.byteLength).equals(Buffer.from(want.data.buffer, want.data.byteOffset, want.data.byteLength));
        });
      });
      const same = await Promise.all(jobs);
      const nice = getPriority(pool.pids[0]) - getPriority();
      await pool.close();
      console.log(JSON.stringify({ held: PER_CHILD, nice, same }));`;
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: CHILD_MS, env: { ...process.env, [HELD_ENV]: '3', [NICE_ENV]: '7' } });
    assert.equal(run.status, 0, `the script failed: ${run.error ?? run.stderr}`);
    const { held, nice, same } = JSON.parse(run.stdout) as { held: number; nice: number; same: boolean[] };
    assert.equal(held, 3);
    // Capped at 19 when this runner is itself niced past 12.
    assert.equal(nice, Math.min(19, getPriority() + 7) - getPriority());
    assert.deepEqual(same, Array(12).fill(true), 'every decode gives the bytes of decodeImage in-process');
  });
});
