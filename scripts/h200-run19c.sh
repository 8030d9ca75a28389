#!/usr/bin/env bash
# Issue 17, run 19c: run 19b found the reader thread waiting for a CPU a third of the time at 16
# cores (0.32-0.37 runnable but not running, beside 0.6 busy) while the 15 decode processes it feeds
# idled 0.12 for want of work. Does giving the reader the CPU first (the decode processes at a lower
# priority: STOKER_DECODE_NICE) feed them better, and a third request held (STOKER_DECODE_HELD=3)?
# Stoker alone on the first 16 CPUs: A (held 2, nice 0), B (held 2, nice 10), C (held 3, nice 10)
# in the order A B C C B A; the one-core throughput before and after, for the scaling.
# Run after `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
I="node --import tsx bench/run.ts images --files 4000 --classes 100 --output bfloat16 --no-torch --shape default"
pin() { local c=$1 t=$2; shift 2; timeout "$t" python3 -c 'import os,sys; c=int(sys.argv[1]); os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:c]); os.execvp(sys.argv[2], sys.argv[2:])' "$c" "$@"; }
one() { pin 1 90 $I --cores 1 --epochs 2 >> $S/run19c-1.txt 2>&1; echo "== 1 core rc=$?"; grep -E '^stoker' $S/run19c-1.txt | tail -1 | cut -c1-200; }
one
k=0
for cfg in A B C C B A; do
  k=$((k+1))
  case $cfg in A) h=2 n=0;; B) h=2 n=10;; C) h=3 n=10;; esac
  STOKER_DECODE_HELD=$h STOKER_DECODE_NICE=$n pin 16 90 $I --cores 16 --epochs 3 >> $S/run19c-16-$cfg.txt 2>&1; echo "== 16 cores $cfg held $h nice $n ($k) rc=$?"; grep -E 'cpu over' $S/run19c-16-$cfg.txt | tail -1 | cut -c1-900; grep -E '^stoker' $S/run19c-16-$cfg.txt | tail -1 | cut -c1-200
done
one
