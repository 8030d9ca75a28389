#!/usr/bin/env bash
# Issue 17, CPU route, run 16b: which loader shape feeds 15 decode processes best now that a decode
# costs less CPU than PIL's (run 16). On the H200 host (~5 min):
#   1. bench decode-scaling row e at N = 15 with 1, 2, 3, 5 reader workers (ceil(15 / r) processes each);
#   2. bench images at 15 cores with 1, 2, 3, 5 reader workers, then torchvision's ImageFolder twice
#      (its figure moves between runs), and the whole machine (16) with 2 readers and torchvision.
# Run after `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`; logs under $OUT.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
B="node --import tsx bench/run.ts decode-scaling --files 4000 --classes 100 --per 240 --output bfloat16 --variants default"
timeout 120 $B --procs 15 --rows e --readers 1,2,3,5 > $S/run16b-readers.txt 2>&1; echo "readers rc=$?"; grep -v '^{' $S/run16b-readers.txt | tail -7
I="node --import tsx bench/run.ts images --files 4000 --classes 100 --output bfloat16"
for r in 1 2 3 5; do timeout 90 $I --cores 15 --readers $r --no-torch > $S/run16b-images-r$r.txt 2>&1; echo "images readers $r rc=$?"; grep '"side":"stoker"' $S/run16b-images-r$r.txt | cut -c1-300; done
timeout 200 $I --cores 15 --readers 3 > $S/run16b-images-torch15.txt 2>&1; echo "images 15 + torch rc=$?"; tail -5 $S/run16b-images-torch15.txt
timeout 200 $I --cores 16 --readers 3 > $S/run16b-images-torch16.txt 2>&1; echo "images 16 + torch rc=$?"; tail -5 $S/run16b-images-torch16.txt
