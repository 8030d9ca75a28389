#!/usr/bin/env bash
# H200 run 14, part 1 (< 9 min): the CUDA serve tests (both client routes) and bench torch with the
# client gather's pinned epoch ids (scripts/h200-torch.sh), then the GPU decode route's new default
# (slots on threads) against inline, interleaved, twice, with the timing log. Run after
# `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`. Logs under $OUT.
source .gpu/env.sh
S=${OUT:-/tmp}
bash scripts/h200-torch.sh
images() { env STOKER_DECODE_TIMING=1 "$@" timeout 45 node --import tsx bench/run.ts images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs 5 --no-torch 2>&1; }
run() { local name=$1; shift; echo "== $name"; images "$@" | tee -a $S/route-$name.txt | grep -E '^\{|generated|stoker decode timing: epoch 4' | sed -E 's/"impl":"[^"]*",//'; }
for round in 1 2; do run threads; run inline STOKER_JPEG_WORKERS=0; done
