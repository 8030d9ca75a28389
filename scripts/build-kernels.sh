#!/usr/bin/env bash
# Compile every CUDA C kernel under kernels/ (and the test kernels under test/fixtures/) to PTX text
# beside it (kernels/NAME.cu -> kernels/NAME.ptx).
#
#   npm run kernels            (or: bash scripts/build-kernels.sh, from anywhere)
#
# The PTX is committed: users need no CUDA toolkit, only the NVIDIA driver, which JIT-compiles the
# PTX for their GPU when the module is first loaded (about 0.2 s, once per context).
# compute_80 is the oldest architecture the kernels target (Ampere); PTX for it runs on every newer
# GPU (Hopper included) through the JIT. Rerun this script after editing a .cu file, and commit both.
# Needs nvcc on PATH (CUDA 12 or 13); NVCC=/path/to/nvcc overrides.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${NVCC:-nvcc}
command -v "$nvcc" >/dev/null || { echo "build-kernels: nvcc not found; install the CUDA toolkit or set NVCC=/path/to/nvcc" >&2; exit 2; }
shopt -s nullglob
sources=("$root"/kernels/*.cu "$root"/test/fixtures/*.cu)
[ ${#sources[@]} -gt 0 ] || { echo "build-kernels: no kernels/*.cu to compile" >&2; exit 2; }
for cu in "${sources[@]}"; do
  ptx="${cu%.cu}.ptx"
  tmp="$ptx.tmp"
  "$nvcc" -ptx -arch=compute_80 -O3 -o "$tmp" "$cu"
  mv "$tmp" "$ptx"
  echo "built ${ptx#"$root"/} ($(wc -c <"$ptx") bytes)"
done
