#!/usr/bin/env bash
# The GPU decode route end to end on the H200 with STOKER_DECODE_TIMING=1 (where a batch's time
# goes, one line per epoch on stderr): run 12's route (STOKER_DECODE_LEGACY=1: the launch-turn chain,
# no read-ahead bound, the sticky 192 KiB file guess) against the new one (tickets in launch order,
# STOKER_DECODE_AHEAD=4), and the new one with ahead 8 and unbounded, interleaved, twice (< 4 min once
# the 4 000-file fixture exists; its generation takes ~15 s). Run after `npm ci && bash scripts/gpu-pack.sh`
# with `carry: [".gpu"]`: `bash scripts/h200-gpu-route5.sh`. Logs under $OUT (route5-<variant>.txt).
source .gpu/env.sh
S=${OUT:-/tmp}
nproc
images() { env STOKER_DECODE_TIMING=1 "$@" timeout 45 node --import tsx bench/run.ts images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs 5 --no-torch 2>&1; }
run() { local name=$1; shift; echo "== $name"; images "$@" | tee -a $S/route5-$name.txt | grep -E '^\{|generated|stoker decode timing: epoch [34]' | sed -E 's/"impl":"[^"]*",//'; }
for round in $(seq 1 ${ROUNDS:-2}); do
  echo "### round $round"
  run legacy STOKER_DECODE_LEGACY=1
  run new
  run ahead8 STOKER_DECODE_AHEAD=8
  run unbounded STOKER_DECODE_AHEAD=0
done
# Slots on threads with the new order (run 11: 9.4–10.4 k with the turn chain).
run threads STOKER_JPEG_WORKERS=1
