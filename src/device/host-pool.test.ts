import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allocStorage } from '../tensor/dtype.js';
import { HostPool } from './host-pool.js';

/** A pool that counts the buffers it makes and drops. */
function counted(keepBytes?: number) {
  const made: number[] = [];
  const dropped: number[] = [];
  const pool = new HostPool(
    (dtype, length) => {
      made.push(length);
      return allocStorage(dtype, length);
    },
    (data) => dropped.push(data.length),
    keepBytes,
  );
  return { pool, made, dropped };
}

describe('the host pool', () => {
  it('gives a released buffer back for the same dtype and length, and no other by default', () => {
    const { pool, made } = counted();
    const a = pool.acquire('uint8', 100);
    pool.recycle('uint8', a);
    assert.equal(pool.acquire('uint8', 100), a);
    pool.recycle('uint8', a);
    assert.notEqual(pool.acquire('uint8', 90), a, 'an exact-length ask takes no longer buffer');
    assert.notEqual(pool.acquire('float32', 100), a, 'nor one of another dtype');
    assert.deepEqual(made, [100, 90, 100]);
  });

  it('with atMost, serves an ask from the shortest kept buffer that fits, never a shorter one', () => {
    const { pool, made } = counted();
    const big = pool.acquire('uint8', 160);
    const mid = pool.acquire('uint8', 120);
    const small = pool.acquire('uint8', 80);
    for (const b of [big, mid, small]) pool.recycle('uint8', b);
    assert.equal(pool.acquire('uint8', 100, 150), mid);
    assert.equal(pool.acquire('uint8', 100, 200), big, 'the shortest left that fits');
    const fresh = pool.acquire('uint8', 100, 150);
    assert.equal(fresh.length, 100, 'none fits: a new buffer of the asked length');
    assert.deepEqual(made, [160, 120, 80, 100]);
    assert.equal(pool.acquire('uint8', 80, 90), small);
  });

  it('a batch of files of varying size reuses a few buffers for a whole run', () => {
    // The GPU decode route's asks: a batch's total bytes vary by ±10 % around 36 MiB, rounded to 4 MiB.
    const { pool, made } = counted(256 * 2 ** 20);
    const cls = 4 * 2 ** 20;
    let seed = 7;
    const next = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const inFlight: Uint8Array[] = [];
    let warm = 0;
    for (let batch = 0; batch < 400; batch++) {
      const want = Math.ceil((36 * 2 ** 20 * (0.9 + 0.2 * next())) / cls) * cls;
      inFlight.push(pool.acquire('uint8', want, Math.ceil((want * 1.5) / cls) * cls) as Uint8Array);
      if (inFlight.length > 4) pool.recycle('uint8', inFlight.shift()!);
      if (batch === 99) warm = made.length;
    }
    assert.ok(warm <= 8, `page-locked ${warm} buffers in the first 100 batches`);
    assert.equal(made.length, warm, 'and none after them');
  });

  it('past its byte budget lets go of the buffers released longest ago, telling its owner', () => {
    const { pool, dropped } = counted(250);
    const a = pool.acquire('uint8', 200);
    const b = pool.acquire('uint8', 100);
    const huge = pool.acquire('uint8', 300);
    pool.recycle('uint8', a);
    pool.recycle('uint8', b);
    assert.deepEqual(dropped, [200], 'the older one goes');
    pool.recycle('uint8', huge);
    assert.deepEqual(dropped, [200, 300], 'one past the whole budget is let go at once');
    assert.equal(pool.acquire('uint8', 100), b);
    pool.recycle('uint8', b);
    pool.clear();
    assert.deepEqual(dropped, [200, 300, 100]);
  });

  it('a first guess that was too large does not hold the budget: the sizes in use now are kept', () => {
    // The GPU decode route's first batches read into a generous guess (60 MiB), later ones into
    // what was measured (28 MiB): the big buffers, never asked for again, must make room.
    const MiB = 2 ** 20;
    const { pool, made } = counted(256 * MiB);
    const first = Array.from({ length: 4 }, () => pool.acquire('uint8', 60 * MiB));
    for (const b of first) pool.recycle('uint8', b);
    const inFlight: Uint8Array[] = [];
    for (let batch = 0; batch < 100; batch++) {
      inFlight.push(pool.acquire('uint8', 28 * MiB, 44 * MiB) as Uint8Array);
      if (inFlight.length > 4) pool.recycle('uint8', inFlight.shift()!);
    }
    assert.ok(made.length <= 4 + 5, `made ${made.length} buffers`);
  });
});

describe('CpuDevice batch memory (NOTE [released batches reused])', () => {
  it('reuses a released batch of 40 MB for the next one (the pool keeps up to 3 of the largest batch), and never a batch still held', async () => {
    const { CpuDevice } = await import('./cpu-device.js');
    const { Tensor } = await import('../tensor/tensor.js');
    const device = new CpuDevice();
    const rows = 10 * 2 ** 20; // 10 Mi float32: 40 MiB, more than the pool's 32 MiB floor
    const staging = new Tensor(new Float32Array(rows), [rows], 'float32');
    const upload = () => device.upload({ tensors: [staging], owned: false });
    const memory = (b: { tensors: readonly unknown[] }) => (b.tensors[0] as { data: Float32Array }).data.buffer;
    const first = upload();
    const held = upload();
    assert.notEqual(memory(held), memory(first), 'two live batches never share memory');
    first.free();
    const next = upload();
    assert.equal(memory(next), memory(first), 'the released batch\'s memory was reused');
    held.free();
    next.free();
    device.close();
  });
});
