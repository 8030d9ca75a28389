// kernels/ragged.cu without a GPU: the kernel source compiled for the host by a C++ compiler
// (test/fixtures/ragged-host.cpp runs every block and thread of the grid in turn) and launched with
// exactly the grid and arguments CudaBackend.pieces passes (piecesLaunch), on every case of the shared
// device suite, each output equal to applyPieces byte for byte. What this cannot see — the driver, the
// PTX JIT, real concurrency — test/cuda/ragged.test.ts checks on a GPU. Skipped without g++.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type DeviceBuffer, type PiecesOp, checkPiecesOp } from '../src/device/backend.js';
import { piecesLaunch } from '../src/device/cuda/pieces-grid.js';
import { assertSame, hostPieces, piecesCases } from './fixtures/pieces-device.js';

function compiler(): string | undefined {
  for (const cc of ['g++', 'c++', 'clang++']) {
    try {
      execFileSync(cc, ['--version'], { stdio: 'ignore', timeout: 10_000 });
      return cc;
    } catch {}
  }
  return undefined;
}

const cc = compiler();
const skip = cc === undefined ? 'no C++ compiler (g++, c++, clang++) here to build kernels/ragged.cu for the host' : false;

/** A fake device buffer: buffer k at address k << 32 (the host program maps it back). */
const fake = (k: number, bytes: number): DeviceBuffer => ({ ptr: BigInt(k) << 32n, bytes });

describe('kernels/ragged.cu compiled for the host, launched as CudaBackend.pieces launches it', { skip, timeout: 300_000 }, () => {
  let dir = '';
  let program = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'stoker-ragged-kernel-'));
    program = join(dir, 'ragged-host');
    const source = new URL('./fixtures/ragged-host.cpp', import.meta.url).pathname;
    execFileSync(cc!, ['-std=c++17', '-O1', '-fno-strict-aliasing', '-o', program, source], { timeout: 120_000 });
  });
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const c of piecesCases()) {
    it(`${c.name}: equal to applyPieces byte for byte`, () => {
      const x = c.make();
      const posBytes = x.rows.per * x.rows.elementBytes;
      const srcOffset = x.srcOffset ?? 0;
      const dstOffset = x.dstOffset ?? 0;
      // The table sits 20 bytes into its buffer, so the table offset is exercised too.
      const op: PiecesOp = {
        src: fake(1, srcOffset + x.src.byteLength), srcOffset, rows: x.rows.rows, rowBytes: x.rows.rowBytes, elementBytes: x.rows.elementBytes, per: x.rows.per,
        dst: fake(2, dstOffset + x.table.total * posBytes), dstOffset, fill: x.fill,
        ...(x.segment ? { segment: { buffer: fake(3, x.table.total * x.segment), offset: 0, width: x.segment } } : {}),
        ...(x.position ? { position: { buffer: fake(4, x.table.total * 4), offset: 0 } } : {}),
        table: fake(5, 20 + x.table.count * 20), tableOffset: 20, count: x.table.count, total: x.table.total, maxSpan: x.table.maxSpan,
      };
      checkPiecesOp(op);
      const launch = piecesLaunch(op);
      const src = new Uint8Array(srcOffset + x.src.byteLength);
      src.set(x.src, srcOffset);
      writeFileSync(join(dir, 'src.bin'), src);
      const table = new Uint8Array(20 + x.table.count * 20);
      table.set(new Uint8Array(x.table.table.buffer, x.table.table.byteOffset, x.table.count * 20), 20);
      writeFileSync(join(dir, 'table.bin'), table);
      const args = launch.args.map((a) => String('ptr' in a ? a.ptr : 'u64' in a ? a.u64 : 'u32' in a ? a.u32 : Number.NaN));
      execFileSync(program, [dir, String(launch.grid[0]), String(launch.grid[1]), ...args], { timeout: 120_000 });
      const read = (name: string) => new Uint8Array(readFileSync(join(dir, name)));
      const got = { data: read('data.out'), ...(x.segment ? { segment: read('seg.out') } : {}), ...(x.position ? { position: read('pos.out') } : {}) };
      assertSame(got, hostPieces(x), c.name);
    });
  }
});
