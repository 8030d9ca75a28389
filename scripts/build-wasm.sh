#!/usr/bin/env bash
# Compile kernels/resample.c (Pillow's bilinear resample and the cast to floats, 128-bit SIMD) to
# kernels/resample.wasm, which is committed: users need no compiler, only Node (WebAssembly SIMD is
# in every Node ≥ 16.4). Rerun after editing the .c file, and commit both.
#
#   bash scripts/build-wasm.sh       (needs clang and wasm-ld: Debian's `apt-get install clang lld`;
#                                     CLANG=/path/to/clang overrides)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clang=${CLANG:-clang}
command -v "$clang" >/dev/null || { echo "build-wasm: clang not found; install clang and lld (wasm-ld) or set CLANG=/path/to/clang" >&2; exit 2; }
src="$root/kernels/resample.c"
out="$root/kernels/resample.wasm"
# No libc, no entry point; the stack first (64 KiB) so that a stack overflow traps instead of
# overwriting data; memory exported and growable (the caller lays out its buffers above __heap_base).
"$clang" --target=wasm32 -O3 -msimd128 -nostdlib -fno-builtin \
  -Wl,--no-entry -Wl,--stack-first -Wl,-z,stack-size=65536 -Wl,--export=__heap_base -Wl,--strip-all \
  -o "$out.tmp" "$src"
mv "$out.tmp" "$out"
echo "built ${out#"$root"/} ($(wc -c <"$out") bytes)"
