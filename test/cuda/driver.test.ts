// The CUDA driver binding on a real GPU: memory probe, allocation accounting, pinned round trips,
// streams and events, the gather kernel against a CPU gather, out-of-memory, idempotent dispose, and
// no leaked device or pinned bytes at the end. Skipped, with the reason, where there is no GPU.

import assert from 'node:assert/strict';
import { randomFillSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { CudaContext } from '../../src/device/cuda/context.js';
import { CudaError } from '../../src/device/cuda/cuda-error.js';
import { DeviceMemory } from '../../src/device/cuda/device-memory.js';
import { cudaAvailable, cudaLiveBytes, driver, isOutOfMemory } from '../../src/device/cuda/driver.js';
import { CudaEvent } from '../../src/device/cuda/event.js';
import { GATHER_PTX, gatherPlan, gatherRows } from '../../src/device/cuda/gather.js';
import { CudaModule } from '../../src/device/cuda/module.js';
import { PAGE_BYTES, RegisteredHost } from '../../src/device/cuda/registered-host.js';
import { CudaStream } from '../../src/device/cuda/stream.js';
import { HANG_MS, SUITE_MS, within } from '../fixtures.js';

const MiB = 1024 * 1024;
const skip = cudaAvailable() ? false : 'no CUDA GPU here (libcuda.so.1 missing or no device): these tests run on a GPU machine';
/** Device memory the driver may move for its own bookkeeping between two probes. */
const MEM_MARGIN = 64 * MiB;

/** dst row r = src row ids[r]: the reference for the device gather. */
function cpuGather(src: Uint8Array, rowBytes: number, ids: Uint32Array): Uint8Array {
  const out = new Uint8Array(ids.length * rowBytes);
  ids.forEach((id, r) => out.set(src.subarray(id * rowBytes, (id + 1) * rowBytes), r * rowBytes));
  return out;
}

/** Deterministic ids in [0, n) with repeats (a small LCG: failures reproduce). */
function randomIds(count: number, n: number, seed: number): Uint32Array {
  const ids = new Uint32Array(count);
  let s = seed >>> 0;
  for (let i = 0; i < count; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    ids[i] = s % n;
  }
  if (count > 2) ids[1] = ids[0]!; // at least one repeat, whatever the seed
  return ids;
}

function firstDifference(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

describe('CUDA driver binding on a GPU', { skip, timeout: SUITE_MS }, () => {
  let ctx: CudaContext;
  let stream: CudaStream;
  let baselineUsed = 0;

  before(() => {
    ctx = CudaContext.open(0);
    stream = new CudaStream(ctx);
    ctx.module(GATHER_PTX); // load the kernels before the baseline: their code lives on the device
    ctx.synchronize();
    baselineUsed = ctx.memInfo().used;
  });

  after(() => {
    if (ctx !== undefined) ctx.dispose();
  });

  it('memInfo is sane: used ≤ total, total above 1 GiB, and the device has a name', () => {
    const m = ctx.memInfo();
    assert.ok(m.total > 1024 * MiB, `total ${m.total}`);
    assert.ok(m.used > 0 && m.used <= m.total, `used ${m.used} of ${m.total}`);
    assert.equal(m.used + m.free, m.total);
    assert.ok(ctx.name.length > 0);
    assert.ok(ctx.multiprocessors > 0);
    assert.ok(ctx.computeCapability[0] >= 7, `compute capability ${ctx.computeCapability}`);
    assert.ok(driver().version >= 12000, `driver version ${driver().version}`);
  });

  it('a device ordinal out of range is an invalid option naming the devices', () => {
    assert.throws(() => CudaContext.open(999), { code: 'ERR_INVALID_OPTION', message: /cuda:N with N from 0 to/ });
  });

  it('allocating and freeing moves cudaLiveBytes and cuMemGetInfo by the same bytes', () => {
    const before = cudaLiveBytes().device;
    const usedBefore = ctx.memInfo().used;
    const mem = new DeviceMemory(ctx, 512 * MiB);
    assert.equal(mem.ptr % 256n, 0n, 'cuMemAlloc returns 256-byte aligned memory');
    assert.equal(cudaLiveBytes().device, before + 512 * MiB);
    const grown = ctx.memInfo().used - usedBefore;
    assert.ok(Math.abs(grown - 512 * MiB) <= MEM_MARGIN, `used grew by ${grown}`);
    mem.dispose();
    assert.equal(cudaLiveBytes().device, before);
    const left = ctx.memInfo().used - usedBefore;
    assert.ok(Math.abs(left) <= MEM_MARGIN, `used is off by ${left} after free`);
  });

  it('a registered SharedArrayBuffer round-trips host → device → host', () => {
    const bytes = 8 * MiB + 123;
    const srcBuffer = new SharedArrayBuffer(bytes);
    const dstBuffer = new SharedArrayBuffer(bytes);
    const registeredBefore = cudaLiveBytes().registered;
    const pinnedSrc = new RegisteredHost(ctx, srcBuffer);
    const pinnedDst = new RegisteredHost(ctx, dstBuffer, { portable: true });
    try {
      for (const p of [pinnedSrc, pinnedDst]) {
        assert.equal(p.address % BigInt(PAGE_BYTES), 0n, 'the pinned range starts on a page');
        assert.equal(p.bytes % PAGE_BYTES, 0, 'the pinned range is whole pages');
        assert.ok(p.start < PAGE_BYTES && p.end > bytes - PAGE_BYTES, `pinned [${p.start}, ${p.end}) of ${bytes}`);
      }
      assert.equal(cudaLiveBytes().registered, registeredBefore + pinnedSrc.bytes + pinnedDst.bytes);
      const src = new Uint8Array(srcBuffer);
      randomFillSync(src);
      const dst = new Uint8Array(dstBuffer);
      const mem = new DeviceMemory(ctx, bytes);
      // The pinned part goes async, the unpinned edges too (staged by the driver).
      const inside = new Uint8Array(srcBuffer, pinnedSrc.start, pinnedSrc.bytes);
      assert.ok(pinnedSrc.covers(inside));
      mem.copyFromHostAsync(new Uint8Array(srcBuffer, 0, pinnedSrc.start), stream, 0);
      mem.copyFromHostAsync(inside, stream, pinnedSrc.start);
      mem.copyFromHostAsync(new Uint8Array(srcBuffer, pinnedSrc.end), stream, pinnedSrc.end);
      mem.copyToHostAsync(dst, stream);
      stream.synchronize();
      assert.equal(firstDifference(dst, src), -1);
      // And the synchronous helpers agree.
      const back = new Uint8Array(bytes);
      mem.copyToHost(back);
      assert.equal(firstDifference(back, src), -1);
      mem.dispose();
    } finally {
      pinnedSrc.dispose();
      pinnedDst.dispose();
    }
    assert.equal(cudaLiveBytes().registered, registeredBefore);
  });

  it('a buffer smaller than a page pins nothing and still copies', () => {
    const small = new RegisteredHost(ctx, new ArrayBuffer(100));
    assert.equal(small.bytes, 0);
    small.dispose();
  });

  it('async copies order through an event: a second stream waits without blocking the host', async () => {
    const bytes = 64 * MiB;
    const srcBuffer = new SharedArrayBuffer(bytes);
    const dstBuffer = new SharedArrayBuffer(bytes);
    const pinnedSrc = new RegisteredHost(ctx, srcBuffer);
    const pinnedDst = new RegisteredHost(ctx, dstBuffer);
    const other = new CudaStream(ctx);
    const uploaded = new CudaEvent(ctx);
    const downloaded = new CudaEvent(ctx);
    const mem = new DeviceMemory(ctx, bytes);
    try {
      assert.equal(uploaded.query(), true, 'an event never recorded counts as done');
      const src = new Uint8Array(srcBuffer);
      randomFillSync(src);
      const dst = new Uint8Array(dstBuffer);
      mem.fillAsync(0, stream);
      mem.copyFromHostAsync(src, stream);
      uploaded.record(stream);
      other.waitEvent(uploaded);
      mem.copyToHostAsync(dst, other);
      downloaded.record(other);
      // The host was not blocked: a 64 MiB round trip takes milliseconds, these calls microseconds.
      await within(HANG_MS, 'event synchronizeAsync', downloaded.synchronizeAsync());
      assert.equal(downloaded.query(), true);
      assert.equal(uploaded.query(), true);
      assert.equal(other.query(), true);
      assert.equal(firstDifference(dst, src), -1);
      // The blocking waits answer too.
      uploaded.synchronize();
      other.synchronize();
    } finally {
      mem.dispose();
      uploaded.dispose();
      downloaded.dispose();
      other.dispose();
      pinnedSrc.dispose();
      pinnedDst.dispose();
    }
  });

  it('disposing an event while a host wait is in flight is safe', async () => {
    const mem = new DeviceMemory(ctx, 256 * MiB);
    const ev = new CudaEvent(ctx);
    try {
      for (let i = 0; i < 8; i++) mem.fillAsync(i, stream);
      ev.record(stream);
      const waiting = ev.synchronizeAsync();
      ev.dispose();
      await within(HANG_MS, 'wait on a disposed event', waiting);
      assert.equal(ev.disposed, true);
    } finally {
      mem.dispose();
    }
  });

  describe('the gather kernel matches a CPU gather', () => {
    const cases: { rowBytes: number; srcRows: number; rows: number; srcOffset?: number; dstOffset?: number; idsOffset?: number }[] = [
      { rowBytes: 1, srcRows: 1000, rows: 5000 },
      { rowBytes: 3, srcRows: 1000, rows: 4099 },
      { rowBytes: 4, srcRows: 1000, rows: 4096 },
      { rowBytes: 12, srcRows: 777, rows: 1500 },
      { rowBytes: 16, srcRows: 777, rows: 1500 },
      { rowBytes: 24, srcRows: 300, rows: 700 },
      { rowBytes: 3072, srcRows: 500, rows: 513 },
      { rowBytes: 150528, srcRows: 40, rows: 70 },
      // Misaligned pointers force narrower paths on sizes that alone would allow 16 bytes.
      { rowBytes: 16, srcRows: 500, rows: 999, srcOffset: 4 },
      { rowBytes: 3072, srcRows: 200, rows: 300, dstOffset: 8 },
      { rowBytes: 150528, srcRows: 20, rows: 33, srcOffset: 1 },
      { rowBytes: 4, srcRows: 100, rows: 1000, srcOffset: 2, dstOffset: 1 },
      // A window of a permutation: ids + idsOffset.
      { rowBytes: 12, srcRows: 300, rows: 200, idsOffset: 37 },
    ];
    for (const c of cases) {
      const srcOffset = c.srcOffset ?? 0;
      const dstOffset = c.dstOffset ?? 0;
      const idsOffset = c.idsOffset ?? 0;
      const label = `${c.rowBytes}-byte rows × ${c.rows}` + (srcOffset || dstOffset ? ` (src +${srcOffset}, dst +${dstOffset})` : '') + (idsOffset ? ` from id ${idsOffset}` : '');
      it(label, () => {
        const src = new Uint8Array(c.srcRows * c.rowBytes);
        randomFillSync(src);
        const ids = randomIds(idsOffset + c.rows, c.srcRows, c.rowBytes * 7919 + c.rows);
        const want = cpuGather(src, c.rowBytes, ids.subarray(idsOffset));
        const dSrc = new DeviceMemory(ctx, srcOffset + src.length);
        const dDst = new DeviceMemory(ctx, dstOffset + want.length);
        const dIds = new DeviceMemory(ctx, ids.byteLength);
        try {
          dSrc.copyFromHost(src, srcOffset);
          dIds.copyFromHost(ids);
          dDst.fillAsync(0xab, stream);
          gatherRows(ctx, stream, { dst: dDst, src: dSrc, ids: dIds, idsOffset, rowBytes: c.rowBytes, rows: c.rows, srcOffset, dstOffset });
          stream.synchronize();
          const got = new Uint8Array(want.length);
          dDst.copyToHost(got, dstOffset);
          const at = firstDifference(got, want);
          const plan = gatherPlan(dDst.ptr + BigInt(dstOffset), dSrc.ptr + BigInt(srcOffset), c.rowBytes, c.rows, ctx.multiprocessors);
          assert.equal(at, -1, `first wrong byte ${at} (row ${Math.floor(at / c.rowBytes)}) with ${plan.kernel} ${plan.path} grid ${plan.grid}`);
        } finally {
          dSrc.dispose();
          dDst.dispose();
          dIds.dispose();
        }
      });
    }

    it('the self-dispatching stoker_gather_rows is correct for any grid and block size', () => {
      const fn = ctx.module(GATHER_PTX).getFunction('stoker_gather_rows');
      for (const [rowBytes, grid, block] of [[4, 3, 64], [12, 1, 32], [3072, 7, 128], [150528, 2, 256], [150528, 1, 96], [5, 1000, 256]] as const) {
        const srcRows = 30;
        const rows = 45;
        const src = new Uint8Array(srcRows * rowBytes);
        randomFillSync(src);
        const ids = randomIds(rows, srcRows, rowBytes + grid);
        const want = cpuGather(src, rowBytes, ids);
        const dSrc = new DeviceMemory(ctx, src.length);
        const dDst = new DeviceMemory(ctx, want.length);
        const dIds = new DeviceMemory(ctx, ids.byteLength);
        try {
          dSrc.copyFromHost(src);
          dIds.copyFromHost(ids);
          fn.launch([grid, 1, 1], [block, 1, 1], stream, [{ ptr: dDst.ptr }, { ptr: dSrc.ptr }, { ptr: dIds.ptr }, { u64: BigInt(rowBytes) }, { u32: rows }]);
          const got = new Uint8Array(want.length);
          dDst.copyToHost(got);
          assert.equal(firstDifference(got, want), -1, `rowBytes ${rowBytes} grid ${grid} block ${block}`);
        } finally {
          dSrc.dispose();
          dDst.dispose();
          dIds.dispose();
        }
      }
    });
  });

  it('allocating more than the device holds throws CUDA_ERROR_OUT_OF_MEMORY, recognized as OOM', () => {
    const before = cudaLiveBytes().device;
    const total = ctx.memInfo().total;
    let caught: unknown;
    try {
      new DeviceMemory(ctx, total + 1024 * MiB).dispose();
    } catch (error) {
      caught = error;
    }
    assert.ok(caught instanceof CudaError, `expected a CudaError, got ${caught}`);
    assert.equal(caught.driverName, 'CUDA_ERROR_OUT_OF_MEMORY');
    assert.equal(caught.result, 2);
    assert.equal(caught.code, 'ERR_DEVICE_OOM');
    assert.match(caught.message, /cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY/);
    assert.equal(isOutOfMemory(caught), true);
    assert.equal(cudaLiveBytes().device, before, 'a failed allocation counts nothing');
    // The context survives an OOM.
    new DeviceMemory(ctx, MiB).dispose();
  });

  it('a bad kernel image is a CudaError carrying the JIT log; an unknown kernel name is NOT_FOUND', () => {
    assert.throws(
      () => CudaModule.load(ctx, '.version 7.0\n.target sm_80\n.address_size 64\n.visible .entry broken( { bogus_instruction; }'),
      (e: unknown) => {
        assert.ok(e instanceof CudaError, `expected a CudaError, got ${e}`);
        assert.equal(e.code, 'ERR_CUDA');
        assert.match(e.message, /^cuModuleLoadDataEx failed: CUDA_ERROR_\w+ \(\d+\)/);
        assert.match(e.message, /JIT log: .*\S/s, `no JIT log in: ${e.message}`);
        return true;
      },
    );
    assert.throws(() => ctx.module(GATHER_PTX).getFunction('no_such_kernel'), (e: unknown) => e instanceof CudaError && e.driverName === 'CUDA_ERROR_NOT_FOUND');
  });

  it('kernel arguments out of their type\'s range are refused before anything is launched', () => {
    const fn = ctx.module(GATHER_PTX).getFunction('stoker_gather_rows');
    assert.throws(() => fn.launch([1, 1, 1], [32, 1, 1], stream, [{ u32: -1 }]), /argument 0: a u32 must be an integer/);
    assert.throws(() => fn.launch([1, 1, 1], [32, 1, 1], stream, [{ ptr: 1n << 64n }]), /argument 0: a pointer or u64/);
    assert.throws(() => fn.launch([0, 1, 1], [32, 1, 1], stream, []), /grid and block sizes/);
  });

  it('dispose() twice is a no-op for every handle', () => {
    const mem = new DeviceMemory(ctx, MiB);
    const s = new CudaStream(ctx);
    const ev = new CudaEvent(ctx);
    const pinned = new RegisteredHost(ctx, new SharedArrayBuffer(16 * PAGE_BYTES));
    const mod = CudaModule.load(ctx, readFileSync(GATHER_PTX, 'utf8')); // not the per-context cached one
    for (const h of [mem, s, ev, pinned, mod]) {
      h.dispose();
      h.dispose();
      assert.equal(h.disposed, true);
    }
    assert.throws(() => mem.copyToHost(new Uint8Array(4)), /disposed/);
  });

  it('disposing a context disposes everything made in it', () => {
    const live = cudaLiveBytes();
    const second = CudaContext.open(0);
    const mem = new DeviceMemory(second, 32 * MiB);
    const s = new CudaStream(second);
    const ev = new CudaEvent(second);
    const pinned = new RegisteredHost(second, new SharedArrayBuffer(64 * PAGE_BYTES));
    const mod = second.module(GATHER_PTX);
    mem.fillAsync(1, s);
    ev.record(s);
    second.dispose();
    second.dispose();
    for (const h of [mem, s, ev, pinned, mod]) assert.equal(h.disposed, true);
    assert.deepEqual(cudaLiveBytes(), live);
    // The first context still works: the primary context is reference-counted.
    new DeviceMemory(ctx, MiB).dispose();
  });

  it('leaves no device or pinned bytes behind', () => {
    assert.deepEqual(cudaLiveBytes(), { device: 0, registered: 0 });
    ctx.synchronize();
    const drift = ctx.memInfo().used - baselineUsed;
    assert.ok(Math.abs(drift) <= MEM_MARGIN, `device memory used moved by ${drift} bytes since the start`);
  });
});
