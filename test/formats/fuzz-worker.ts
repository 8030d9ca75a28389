// The worker side of fuzz.ts: makes each mutant from the case number, writes it, runs the target.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';

interface Data {
  valid: Uint8Array;
  ext: string;
  module: string;
  target: string;
  cases: number;
  seed: number;
  dir: string;
  allowCodes: string[];
}

const data = workerData as Data;
const port = parentPort!;

/** SplitMix32-style generator: a case is replayable from (seed, case). */
function rng(seed: number) {
  let s = seed >>> 0;
  return (n: number) => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    z = (z ^ (z >>> 16)) >>> 0;
    return n <= 0 ? 0 : z % n;
  };
}

const EXTREMES = [0x00, 0xff, 0x7f, 0x80, 0x01, 0xfe];

/**
 * One mutant. Most mutations land in the first 4 KiB, where headers live; the rest anywhere.
 * Returns the bytes and a description for replay.
 */
export function mutate(valid: Uint8Array, seed: number, k: number): { bytes: Uint8Array; mutation: string } {
  const r = rng(seed * 0x10001 + k);
  const n = valid.length;
  const pos = () => (r(4) === 0 || n <= 4096 ? r(n) : r(4096));
  const steps = 1 + r(3);
  let bytes: Uint8Array = Uint8Array.from(valid);
  const done: string[] = [];
  for (let s = 0; s < steps; s++) {
    const kind = r(8);
    const p = pos();
    if (kind === 0) {
      bytes[p] = bytes[p]! ^ (1 << r(8));
      done.push(`flip@${p}`);
    } else if (kind === 1) {
      const w = 1 + r(8);
      const v = EXTREMES[r(EXTREMES.length)]!;
      bytes.fill(v, p, Math.min(bytes.length, p + w));
      done.push(`fill${w}x${v}@${p}`);
    } else if (kind === 2) {
      const at = r(bytes.length + 1);
      bytes = bytes.slice(0, at);
      done.push(`truncate@${at}`);
    } else if (kind === 3) {
      const w = 1 + r(16);
      const ins = new Uint8Array(w).map(() => r(256));
      bytes = concat(bytes.subarray(0, p), ins, bytes.subarray(p));
      done.push(`insert${w}@${p}`);
    } else if (kind === 4) {
      const w = 1 + r(16);
      bytes = concat(bytes.subarray(0, p), bytes.subarray(Math.min(bytes.length, p + w)));
      done.push(`delete${w}@${p}`);
    } else if (kind === 5) {
      const from = r(bytes.length);
      const w = Math.min(1 + r(64), bytes.length - from, bytes.length - p);
      if (w > 0) bytes.copyWithin(p, from, from + w);
      done.push(`copy${w}:${from}->${p}`);
    } else if (kind === 6) {
      // A digit in a text header (NPY dict, safetensors JSON) becomes another digit or a large number.
      const digits: number[] = [];
      for (let i = 0; i < Math.min(bytes.length, 4096); i++) if (bytes[i]! >= 0x30 && bytes[i]! <= 0x39) digits.push(i);
      if (digits.length > 0) {
        const at = digits[r(digits.length)]!;
        const repl = r(2) === 0 ? String(r(10)) : '99999999999999999999'.slice(0, 1 + r(20));
        bytes = concat(bytes.subarray(0, at), new TextEncoder().encode(repl), bytes.subarray(at + 1));
        done.push(`digit@${at}=${repl}`);
      }
    } else {
      // A little-endian length field: set 4 aligned bytes to a random, big or negative value.
      const at = p & ~3;
      const v = [0xffffffff, 0x7fffffff, 0x80000000, r(0x10000), bytes.length + r(1024)][r(5)]!;
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      if (at + 4 <= bytes.length) view.setUint32(at, v >>> 0, true);
      done.push(`u32@${at}=${v}`);
    }
  }
  return { bytes, mutation: done.join(',') };
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

const mod = (await import(data.module)) as Record<string, (path: string) => unknown>;
const target = mod[data.target];
if (typeof target !== 'function') throw new Error(`fuzz: ${data.module} has no export ${data.target}`);

let ok = 0;
const refused: Record<string, number> = {};
const failures: { case: number; mutation: string; error: string }[] = [];
for (let k = 0; k < data.cases; k++) {
  const { bytes, mutation } = mutate(data.valid, data.seed, k);
  port.postMessage({ t: 'case', case: k, mutation });
  const path = join(data.dir, `case-${k}${data.ext}`);
  writeFileSync(path, bytes);
  try {
    await target(path);
    ok++;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const message = error instanceof Error ? error.message : String(error);
    if (typeof code === 'string' && data.allowCodes.includes(code) && (error as Error).name === 'LoaderError' && message.includes(path)) {
      refused[code] = (refused[code] ?? 0) + 1;
    } else {
      failures.push({ case: k, mutation, error: `${(error as Error)?.name ?? typeof error}${typeof code === 'string' ? ` [${code}]` : ''}: ${message.slice(0, 300)}` });
    }
  }
}
port.postMessage({ t: 'done', report: { cases: data.cases, ok, refused, failures } });
