#!/usr/bin/env bash
# Issue 17, CPU route, run 16d (the figures recorded in BENCHMARKS.md): the direct libvips route with
# pixels computed on the calling thread, Pillow's resample and the cast in WebAssembly (fused, transient
# in decode processes), pixels read straight into their staging row, released CPU batches reused.
# On the H200 host (~6 min):
#   1. bench decode-scaling rows a2, c at N = 1 (one core: sharp path, JS resample, as it runs; PIL's recipe);
#   2. rows b, c, d, e at N = 15 (e with 1 and 2 reader workers);
#   3. bench images (Stoker against torchvision's ImageFolder, the same recipe, bf16) at 15 cores with
#      1 and 2 reader workers, and at 16 (the whole machine) with 1, 2 and 8 (the loader's default shape).
# Run after `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`; logs under $OUT.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nproc; python3 -c 'import torch, PIL; print("torch", torch.__version__, "PIL", PIL.__version__)' 2>&1 | tail -1
B="node --import tsx bench/run.ts decode-scaling --files 4000 --classes 100 --per 240 --output bfloat16 --variants default"
timeout 120 $B --procs 1 --rows a2,c > $S/run16d-one.txt 2>&1; echo "one core rc=$?"; grep -v '^{' $S/run16d-one.txt | tail -7
timeout 150 $B --procs 15 --rows a,b,c,d,e --readers 1,2 > $S/run16d-scaling.txt 2>&1; echo "15 rc=$?"; grep -v '^{' $S/run16d-scaling.txt | tail -9
I="node --import tsx bench/run.ts images --files 4000 --classes 100 --output bfloat16"
for c in 15 16; do for r in 1 2; do timeout 150 $I --cores $c --readers $r > $S/run16d-images-$c-r$r.txt 2>&1; echo "images $c cores, $r readers rc=$?"; tail -4 $S/run16d-images-$c-r$r.txt; done; done
timeout 150 $I --cores 16 --readers 8 > $S/run16d-images-16-r8.txt 2>&1; echo "images 16 cores, 8 readers rc=$?"; tail -4 $S/run16d-images-16-r8.txt
