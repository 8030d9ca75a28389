#!/usr/bin/env bash
# Issue 17, run 18d: the CPU recipe against torchvision with the source's window (NOTE [a window for
# decode processes]: decode processes ask for prefetch 8 on the CPU). (A) Stoker alone, the default
# shape, prefetch 2 (the old window, forced) and the new default alternately, 3 times each; (B) bench
# images side by side, 3 rounds of 3 epochs: the whole machine (defaults; torchvision 16 workers),
# 15 cores (1 reader × 15; torchvision 15 workers); (C) torchvision's best num_workers from run 18b
# (32) twice, for the whole-machine ratio against torchvision at its best.
# Run after `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
I="node --import tsx bench/run.ts images --files 4000 --classes 100 --output bfloat16 --epochs 3"
for k in 1 2 3; do
  for p in 2 default; do
    extra=""; [ $p = 2 ] && extra="--prefetch 2"
    timeout 60 $I --rounds 1 --no-torch --cores 16 --shape default $extra > $S/run18d-ab-$p-$k.txt 2>&1; echo "== A/B prefetch $p ($k) rc=$?"; grep -E '^stoker' $S/run18d-ab-$p-$k.txt | cut -c1-200
  done
done
timeout 150 $I --rounds 3 --cores 16 --shape default > $S/run18d-images-default.txt 2>&1; echo "== whole machine rc=$?"; grep -E '^stoker|^torchvision|stoker / torchvision' $S/run18d-images-default.txt | cut -c1-200
timeout 150 $I --rounds 3 --cores 15 --readers 1 > $S/run18d-images-15.txt 2>&1; echo "== 15 cores rc=$?"; grep -E '^stoker|^torchvision|stoker / torchvision' $S/run18d-images-15.txt | cut -c1-200
D=/tmp/stoker-bench-images-4000-100
for k in 1 2; do timeout 60 python3 bench/torchvision_images.py $D --batch 64 --workers 32 --epochs 3; done > $S/run18d-torch32.txt 2>&1; echo "== torch 32 rc=$?"; grep '^{' $S/run18d-torch32.txt | cut -c1-200
