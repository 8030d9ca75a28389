// Internal: not exported from the package entry.
// memcpy through the C library for large rows in shared memory. V8 copies SharedArrayBuffer-backed
// arrays word by word with relaxed atomics (the memory model allows racing readers), at a few GB/s
// per thread; libc's memcpy moves the same bytes at memory speed. The rule: only for copies whose
// size pays for the FFI call (tens of KiB), and only where the C library loads — otherwise
// `nativeCopy` returns false and the caller copies in JS.

import { createRequire } from 'node:module';
import { readSwitch } from '../base/env.js';

type Memcpy = (dst: Uint8Array, src: Uint8Array, n: number) => unknown;

let memcpy: Memcpy | null | undefined;

function load(): Memcpy | null {
  if (memcpy !== undefined) return memcpy;
  memcpy = null;
  if (process.platform !== 'linux' || !readSwitch('nativeCopy')) return memcpy;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as {
      load(name: string): { func(signature: string): Memcpy };
    };
    memcpy = koffi.load('libc.so.6').func('void *memcpy(void *dst, const void *src, size_t n)');
  } catch {
    memcpy = null;
  }
  return memcpy;
}

/** Copy `n` bytes between views; false when the native path is unavailable (copy in JS then). */
export function nativeCopy(dst: Uint8Array, src: Uint8Array, n: number): boolean {
  const fn = load();
  if (fn === null) return false;
  // SAFETY: both views stay alive and cover n bytes for the duration of this synchronous call.
  fn(dst, src, n);
  return true;
}
