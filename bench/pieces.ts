// Ragged collates on the device (`npm run -s bench -- pieces [--sim] [--quick] [--json]`): one batch
// of B = 256 fixed-capacity rows (capacity 2048, int32 and uint16 tokens, log-normal lengths, median
// 300) collated by pad (to the longest, with a mask), pack (with cu_seqlens) and best-fit sequence
// packing windows (with segment and position ids), three ways:
//   device: the rows already in device memory; upload the piece table, run Backend.pieces (one launch);
//   host:   applyPieces on the host rows into pinned memory, then upload the collated outputs;
//   ceiling: the device gather kernel moving the batch's rows (B × capacity) once, device to device.
// GB/s counts the collated output bytes (data and tags) per second. Each way's output is checked
// against applyPieces before timing. The last lines are the ratios device / host and device / ceiling.

import type { Backend, DeviceBuffer } from '../src/device/backend.js';
import { cudaAvailable } from '../src/device/cuda/driver.js';
import { SimBackend } from '../src/device/sim/sim-backend.js';
import { type PieceOutputs, type PieceRows, type PieceTable, applyPieces, fillBits, packPieces, padPieces, tableBytes, windowPieces } from '../src/collate/pieces.js';
import { batchPositions } from '../src/pipeline/batch-planner.js';
import { packPlan, parsePack } from '../src/sampler/pack-plan.js';
import { Rng, epochPermutation } from '../src/sampler/rng.js';
import { fmtFixed, hardwareLine, median, now, parseFlags, table } from './util.js';

const B = 256;
const CAP = 2048;

interface Case {
  readonly name: string;
  readonly src: Uint8Array;
  readonly rows: PieceRows;
  readonly t: PieceTable;
  readonly fill: bigint;
  readonly segment?: 1 | 4;
  readonly position?: boolean;
}

function lengthsOf(n: number, seed: number): Int32Array {
  const rng = Rng.seed(seed);
  return Int32Array.from({ length: n }, () => Math.max(1, Math.min(CAP, Math.round(300 * Math.exp(0.9 * rng.normal())))));
}

function cases(): Case[] {
  const out: Case[] = [];
  for (const [tname, ctor] of [['int32', Int32Array], ['uint16', Uint16Array]] as const) {
    const elementBytes = ctor.BYTES_PER_ELEMENT as 2 | 4;
    const fixed = (lens: ArrayLike<number>, rowsN: number) => {
      const all = new ctor(rowsN * CAP);
      for (let i = 0; i < rowsN; i++) for (let k = 0; k < lens[i]!; k++) all[i * CAP + k] = (i * 31 + k) & 0xffff;
      return { src: new Uint8Array(all.buffer), rows: { rows: rowsN, rowBytes: CAP * elementBytes, elementBytes, per: 1 } };
    };
    const lens = lengthsOf(B, 1);
    const longest = Math.max(...lens);
    out.push({ name: `pad + mask ${tname}`, ...fixed(lens, B), t: padPieces(lens, longest), fill: 0n, segment: 1 });
    out.push({ name: `pack ${tname}`, ...fixed(lens, B), t: packPieces(lens), fill: 0n });
    const docs = lengthsOf(B * 8, 2);
    const order = epochPermutation(3, 0, docs.length);
    const plan = packPlan(order, (s) => docs[s]!, parsePack({ contextLength: CAP, mode: 'best-fit', window: 1024 })!);
    const count = Math.min(B, plan.windows.length - 1);
    const picks = batchPositions(plan, 0, count);
    const rowOf = new Map(picks.map((p, r) => [p, r]));
    const winLens = Int32Array.from(picks, (pick) => docs[order[pick]!]!);
    out.push({ name: `windows ${tname} (${count}×${CAP})`, ...fixed(winLens, picks.length), t: windowPieces(plan, 0, count, CAP, (p) => rowOf.get(p)!), fill: 0n, segment: 4, position: true });
  }
  return out;
}

function outputBytes(c: Case): number {
  return c.t.total * (c.rows.per * c.rows.elementBytes + (c.segment ?? 0) + (c.position ? 4 : 0));
}

function same(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

interface Result {
  readonly name: string;
  readonly outMB: number;
  readonly deviceUs: number;
  readonly hostUs: number;
  readonly applyUs: number;
  readonly ceilingUs: number;
}

function bench(backend: Backend, c: Case, iterations: number): Result {
  const posBytes = c.rows.per * c.rows.elementBytes;
  const buffers: DeviceBuffer[] = [];
  const unpins: (() => void)[] = [];
  const alloc = (bytes: number) => {
    const b = backend.alloc(bytes);
    buffers.push(b);
    return b;
  };
  try {
    const src = alloc(c.src.byteLength);
    backend.copyToDevice(src, 0, c.src, 'copy');
    const tableData = tableBytes(c.t);
    const table = alloc(Math.max(tableData.byteLength, 1));
    const dst = alloc(c.t.total * posBytes);
    const seg = c.segment ? alloc(c.t.total * c.segment) : undefined;
    const pos = c.position ? alloc(c.t.total * 4) : undefined;
    // Host outputs in page-locked memory (whole pages), as the host route's staging would be.
    const pinned = (bytes: number): Uint8Array => {
      const pages = Math.ceil(bytes / 4096) * 4096;
      const memory = new ArrayBuffer(pages + 4096);
      const offset = backend.pageOffset(memory);
      unpins.push(backend.pin(memory, offset, pages));
      return new Uint8Array(memory, offset, bytes);
    };
    const hostData = pinned(c.t.total * posBytes);
    const hostSeg = c.segment ? pinned(c.t.total * c.segment) : undefined;
    const hostPos = c.position ? pinned(c.t.total * 4) : undefined;
    const outputs: PieceOutputs = {
      data: hostData,
      fill: c.fill,
      ...(hostSeg ? { segment: c.segment === 4 ? new Int32Array(hostSeg.buffer, hostSeg.byteOffset, c.t.total) : hostSeg } : {}),
      ...(hostPos ? { position: new Int32Array(hostPos.buffer, hostPos.byteOffset, c.t.total) } : {}),
    };
    const device = () => {
      backend.copyToDevice(table, 0, tableData, 'copy');
      backend.pieces({
        src, srcOffset: 0, rows: c.rows.rows, rowBytes: c.rows.rowBytes, elementBytes: c.rows.elementBytes, per: c.rows.per,
        dst, dstOffset: 0, fill: c.fill,
        ...(seg ? { segment: { buffer: seg, offset: 0, width: c.segment! } } : {}),
        ...(pos ? { position: { buffer: pos, offset: 0 } } : {}),
        table, tableOffset: 0, count: c.t.count, total: c.t.total, maxSpan: c.t.maxSpan,
      }, 'copy');
    };
    const host = () => {
      applyPieces(c.src, c.rows, c.t, outputs);
      backend.copyToDevice(dst, 0, hostData, 'copy');
      if (seg) backend.copyToDevice(seg, 0, hostSeg!, 'copy');
      if (pos) backend.copyToDevice(pos, 0, hostPos!, 'copy');
    };
    const sync = () => {
      const e = backend.record('copy');
      backend.synchronize(e);
      backend.recycle(e);
    };
    // Check: the device output equals the host's.
    applyPieces(c.src, c.rows, c.t, outputs);
    const want = [hostData.slice(), hostSeg?.slice(), hostPos?.slice()];
    device();
    const got = [new Uint8Array(hostData.length), hostSeg && new Uint8Array(hostSeg.length), hostPos && new Uint8Array(hostPos.length)];
    backend.copyToHost(got[0]!, dst, 0, 'copy');
    if (seg) backend.copyToHost(got[1]!, seg, 0, 'copy');
    if (pos) backend.copyToHost(got[2]!, pos, 0, 'copy');
    sync();
    for (let k = 0; k < 3; k++) if (want[k] && !same(got[k]!, want[k]!)) throw new Error(`bench pieces: ${c.name}: the device output differs from applyPieces (output ${k})`);
    // The ceiling: the batch's rows moved once by the gather kernel (identity ids), device to device.
    const rowsMoved = Math.min(c.rows.rows, Math.floor((c.t.total * posBytes) / c.rows.rowBytes) || 1);
    const ids = alloc(rowsMoved * 4);
    backend.copyToDevice(ids, 0, new Uint8Array(Uint32Array.from({ length: rowsMoved }, (_, i) => i).buffer), 'copy');
    const ceiling = () => backend.gather(dst, src, c.rows.rowBytes, ids, 0, rowsMoved, 'copy');
    const time = (run: () => void, bytesFactor = 1): number => {
      for (let i = 0; i < 3; i++) run();
      sync();
      const samples: number[] = [];
      for (let r = 0; r < 5; r++) {
        const t0 = now();
        for (let i = 0; i < iterations; i++) run();
        sync();
        samples.push(((now() - t0) * 1000) / iterations / bytesFactor);
      }
      return median(samples);
    };
    const deviceUs = time(device);
    const hostUs = time(host);
    const applyUs = time(() => applyPieces(c.src, c.rows, c.t, outputs));
    // Scaled to the output's bytes: the gather moves rowsMoved × rowBytes.
    const ceilingUs = time(ceiling, (rowsMoved * c.rows.rowBytes) / outputBytes(c));
    return { name: c.name, outMB: outputBytes(c) / 2 ** 20, deviceUs, hostUs, applyUs, ceilingUs };
  } finally {
    for (const u of unpins) u();
    for (const b of buffers) backend.free(b);
  }
}

export async function main(args: readonly string[]): Promise<void> {
  const flags = parseFlags(args, ['json', 'quick', 'sim'], 'npm run bench -- pieces [--sim] [--quick] [--json]');
  if (!flags.sim && !cudaAvailable()) {
    console.log('bench pieces: no CUDA driver or device here; run it on a GPU machine, or pass --sim for a smoke run');
    return;
  }
  let backend: Backend;
  let deviceName = 'sim';
  if (flags.sim) backend = new SimBackend();
  else {
    const { CudaBackend } = await import('../src/device/cuda/cuda-backend.js');
    const cuda = CudaBackend.open(0);
    deviceName = `${cuda.context.name} (${cuda.context.multiprocessors} SMs)`;
    backend = cuda;
  }
  const iterations = flags.quick || flags.sim ? 5 : 50;
  const results: Result[] = [];
  try {
    for (const c of cases()) results.push(bench(backend, c, iterations));
  } finally {
    backend.close();
  }
  if (flags.json) {
    console.log(JSON.stringify({ hardware: hardwareLine(), device: deviceName, batch: B, capacity: CAP, results }, null, 2));
    return;
  }
  const gbs = (r: Result, us: number) => (r.outMB * 2 ** 20) / (us * 1000);
  console.log(`bench pieces — ${hardwareLine()}; device ${deviceName}; B=${B} rows of capacity ${CAP}, ${iterations} batches × 5 samples (median)`);
  console.log(
    table(results, [
      { title: 'collate', cell: (r) => r.name },
      { title: 'output MB', align: 'right', cell: (r) => fmtFixed(r.outMB, 2) },
      { title: 'device µs', align: 'right', cell: (r) => fmtFixed(r.deviceUs, 1) },
      { title: 'device GB/s', align: 'right', cell: (r) => fmtFixed(gbs(r, r.deviceUs), 1) },
      { title: 'host+upload µs', align: 'right', cell: (r) => fmtFixed(r.hostUs, 1) },
      { title: 'host+upload GB/s', align: 'right', cell: (r) => fmtFixed(gbs(r, r.hostUs), 1) },
      { title: 'applyPieces µs', align: 'right', cell: (r) => fmtFixed(r.applyUs, 1) },
      { title: 'gather ceiling GB/s', align: 'right', cell: (r) => fmtFixed(gbs(r, r.ceilingUs), 1) },
    ]),
  );
  for (const r of results) console.log(`${r.name}: device / host+upload ×${fmtFixed(r.hostUs / r.deviceUs, 1)}, device / gather ceiling ${fmtFixed(r.ceilingUs / r.deviceUs, 2)}`);
}
