#!/usr/bin/env bash
# Issue 17, CPU route, run 16c: after the pixels go straight into their staging row (NOTE [pixels
# into their row]) and released CPU batches are reused (NOTE [released batches reused]). H200 host (~6 min):
#   1. bench decode-scaling rows d, e at N = 15 (e with 1, 3, 5 reader workers);
#   2. bench images at 15 cores with 1, 3, 5 reader workers (Stoker only), then 3 readers against
#      torchvision's ImageFolder, and the whole machine (16 cores: the loader's default shape, 8 readers × 2).
# Run after `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`; logs under $OUT.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
B="node --import tsx bench/run.ts decode-scaling --files 4000 --classes 100 --per 240 --output bfloat16 --variants default"
timeout 150 $B --procs 15 --rows d,e --readers 1,3,5 > $S/run16c-readers.txt 2>&1; echo "readers rc=$?"; grep -v '^{' $S/run16c-readers.txt | tail -7
I="node --import tsx bench/run.ts images --files 4000 --classes 100 --output bfloat16"
for r in 1 3 5; do timeout 90 $I --cores 15 --readers $r --no-torch > $S/run16c-images-r$r.txt 2>&1; echo "images readers $r rc=$?"; grep '"side":"stoker"' $S/run16c-images-r$r.txt | cut -c1-300; done
timeout 200 $I --cores 15 --readers 3 > $S/run16c-images-torch15.txt 2>&1; echo "images 15 + torch rc=$?"; tail -5 $S/run16c-images-torch15.txt
timeout 200 $I --cores 16 --readers 8 > $S/run16c-images-torch16.txt 2>&1; echo "images 16 + torch rc=$?"; tail -5 $S/run16c-images-torch16.txt
