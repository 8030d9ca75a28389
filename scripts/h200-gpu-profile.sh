#!/usr/bin/env bash
# The GPU decode route end to end on the H200 (docs/gpu-decode.md), inline (STOKER_JPEG_WORKERS=0)
# vs 2 slots vs 3 slots, twice each, interleaved (~3 min + the 4 000-file fixture, ~85 s, unless
# /tmp/stoker-bench-images-4000-100 exists). Run after `npm ci && bash scripts/gpu-pack.sh`, with
# `carry: [".gpu"]`: `bash scripts/h200-gpu-profile.sh`. Logs under $OUT.
# NOTE: the per-batch timing switch (STOKER_DECODE_TIMING) is not built yet; this answers only
# whether inline beats slots reliably and how much the runs vary.
source .gpu/env.sh
S=${OUT:-/tmp}
nproc
images() { timeout ${T:-60} node --import tsx bench/run.ts images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs 5 --no-torch 2>&1 | tee -a $S/profile-$1.txt | grep -E '^\{|generated' | tail -2; }
for round in 1 2; do
  echo "round $round inline:"; T=150 STOKER_JPEG_WORKERS=0 images inline
  echo "round $round slots 2:"; STOKER_JPEG_SLOTS=2 images slots2
  echo "round $round slots 3:"; STOKER_JPEG_SLOTS=3 images slots3
done
