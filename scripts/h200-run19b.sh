#!/usr/bin/env bash
# Issue 17, run 19b: where the decode processes' idle time goes at 16 cores (the cpu line's new
# "waiting for a CPU", from schedstat), and whether a child holding 3 requests (STOKER_DECODE_HELD=3)
# instead of 2 feeds them better: Stoker alone on the first 16 CPUs, the two alternately, 3 times;
# then the one-core throughput (Stoker's defaults on one CPU) twice more.
# Run after `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
I="node --import tsx bench/run.ts images --files 4000 --classes 100 --output bfloat16 --no-torch --shape default"
pin() { local c=$1 t=$2; shift 2; timeout "$t" python3 -c 'import os,sys; c=int(sys.argv[1]); os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:c]); os.execvp(sys.argv[2], sys.argv[2:])' "$c" "$@"; }
for k in 1 2 3; do
  for h in 2 3; do
    STOKER_DECODE_HELD=$h pin 16 90 $I --cores 16 --epochs 3 > $S/run19b-16-held$h-$k.txt 2>&1; echo "== 16 cores, held $h ($k) rc=$?"; grep -E '^stoker|cpu over' $S/run19b-16-held$h-$k.txt | cut -c1-700
  done
done
for k in 1 2; do pin 1 90 $I --cores 1 --epochs 2; done > $S/run19b-1.txt 2>&1; echo "== 1 core rc=$?"; grep -E '^stoker|cpu over' $S/run19b-1.txt | cut -c1-500
