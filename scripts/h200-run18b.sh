#!/usr/bin/env bash
# Issue 17, run 18b: (A) Stoker's window — bench images with the default shape at prefetch 2 (the CPU
# device's default), 4, 8, 16, and 2 readers × 8 at prefetch 8; (B) torchvision's best num_workers on
# the whole machine (12–32, 3 epochs, persistent workers) and 1 epoch against 3 at 16 workers.
# Run after `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
I="node --import tsx bench/run.ts images --files 4000 --classes 100 --output bfloat16 --epochs 3 --rounds 2 --no-torch"
for p in 2 4 8 16; do timeout 100 $I --cores 16 --shape default --prefetch $p > $S/run18b-stoker-p$p.txt 2>&1; echo "== default prefetch $p rc=$?"; grep -E '^stoker|cpu over' $S/run18b-stoker-p$p.txt | cut -c1-400; done
timeout 100 $I --cores 16 --readers 2 --prefetch 8 > $S/run18b-stoker-r2-p8.txt 2>&1; echo "== 2x8 prefetch 8 rc=$?"; grep -E '^stoker|cpu over' $S/run18b-stoker-r2-p8.txt | cut -c1-400
D=/tmp/stoker-bench-images-4000-100
T="timeout 120 python3 bench/torchvision_images.py $D --batch 64"
{ for w in 12 16 20 24 32; do $T --workers $w --epochs 3; done; for k in 1 2; do $T --workers 16 --epochs 1; $T --workers 16 --epochs 3; done; } > $S/run18b-torch.txt 2>&1; echo "== torch rc=$?"; cat $S/run18b-torch.txt | grep '^{' | cut -c1-300
