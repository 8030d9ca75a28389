#!/usr/bin/env bash
# H200 run 15, part 1 (< 9.5 min): where the client gather's CPU goes (bench/torch_client_profile.py,
# now with each thread's CPU), the GPU decode route with the best-fit file buffers (slots on threads,
# 3 rounds, and inline once; `STOKER_DECODE_TIMING=1` prints "new file buffers"), and the 1.28 M-file
# first batch with the synchronous sources.imageFolder now walking on worker threads (NOTE [blocking
# parallel walk]) against imageFolderAsync, cold and warm, from the compiled package. Run after
# `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`. Logs under $OUT.
source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nproc; nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 100 python3 bench/torch_client_profile.py --device cuda --epochs 4 > $S/client-profile.txt 2>&1; echo "client profile rc=$?"; head -24 $S/client-profile.txt
images() { env STOKER_DECODE_TIMING=1 "$@" timeout 50 node --import tsx bench/run.ts images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs 5 --no-torch 2>&1; }
run() { local name=$1; shift; echo "== $name"; images "$@" | tee -a $S/route-$name.txt | grep -E '^\{|stoker decode timing: epoch [34]' | sed -E 's/"impl":"[^"]*",//' | cut -c1-900; }
run threads; run inline STOKER_JPEG_WORKERS=0; run threads; run threads
B="node --import tsx bench/run.ts"
F="--files 1280000 --classes 1000"
timeout 170 $B first-batch $F --runs 2 --walk sync,parallel --dist > $S/first-batch3.txt 2>&1; echo "first-batch sync,parallel rc=$?"; grep -v '^{' $S/first-batch3.txt | tail -11
