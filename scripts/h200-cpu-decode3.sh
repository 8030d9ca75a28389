#!/usr/bin/env bash
# Issue 17, CPU route (branch cpudecode3): the direct libvips route of a JPEG view (NOTE [direct libvips]
# in src/image/vips-direct.ts) against the sharp path, on the H200 host (< 4 min; ~1 min
# with the fixture in /tmp). Same files as scripts/h200-cpu-profile.sh (bench images' 4 000-JPEG fixture,
# generated first unless /tmp has it), RandomResizedCrop 224 + flip + normalize, bf16, 240 images per process:
#   1. rows a, a2, c at N = 1: decodeImage's loop (direct route on), a2 = sharp path vs direct route
#      in alternating rounds in one process (bytes in memory) plus the direct route's stages, and
#      PIL's recipe (bench/pil_recipe_loop.py) — the per-image CPU ms of old path, new path and PIL;
#   2. rows d, e (DecodePool fed directly; imageFolder through DataLoader) at N = 1, 4, 15, the
#      direct route on (the default) and then off (STOKER_VIPS_DIRECT=off reaches the decode children).
# Run after `npm ci && bash scripts/gpu-pack.sh` with `carry: [".gpu"]`; logs under $OUT.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nproc; python3 -c 'import torch, PIL; print("torch", torch.__version__, "PIL", PIL.__version__)' 2>&1 | tail -1
B="node --import tsx bench/run.ts decode-scaling --files 4000 --classes 100 --per 240 --output bfloat16 --variants default"
timeout 90 $B --procs 1 --rows a,a2,c > $S/decode3-one.txt 2>&1; echo "one core rc=$?"; grep -v '^{' $S/decode3-one.txt | tail -9
timeout 60 $B --procs 1,4,15 --rows d,e > $S/decode3-direct.txt 2>&1; echo "pool/loader, direct rc=$?"; grep -v '^{' $S/decode3-direct.txt | tail -9
STOKER_VIPS_DIRECT=off timeout 60 $B --procs 1,4,15 --rows d,e > $S/decode3-sharp.txt 2>&1; echo "pool/loader, sharp only rc=$?"; grep -v '^{' $S/decode3-sharp.txt | tail -9
