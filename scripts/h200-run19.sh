#!/usr/bin/env bash
# Issue 17, run 19: the scaling goal measured with the cores really limited. (A) bench images once
# (makes the fixture; the cpu line splits each decode process's CPU into its main thread and the
# rest); (B) bench/host_scaling.py: how far independent work of four kinds scales on this host, each
# CPU's own speed, which CPUs share a core, steal time, perf counters where allowed; (C) Stoker's
# defaults and torchvision's ImageFolder with C workers, both confined to the first C CPUs
# (sched_setaffinity, inherited by threads and children; Node's availableParallelism reads it), for
# C = 1, 2, 4, 8, 16: Stoker's scaling against its own one-core throughput, and the ratio at equal cores.
# Run after `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
D=/tmp/stoker-bench-images-4000-100
I="node --import tsx bench/run.ts images --files 4000 --classes 100 --output bfloat16"
# pin C SECONDS CMD...: run CMD on the first C CPUs this process may use, under a time limit.
pin() { local c=$1 t=$2; shift 2; timeout "$t" python3 -c 'import os,sys; c=int(sys.argv[1]); os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:c]); os.execvp(sys.argv[2], sys.argv[2:])' "$c" "$@"; }
nproc; lscpu | grep -E 'Model name|Thread|Core|Socket|NUMA|MHz|L2|L3' ; grep -c processor /proc/cpuinfo
timeout 120 $I --no-torch --epochs 3 --cores 16 --shape default > $S/run19-a.txt 2>&1; echo "== A rc=$?"; grep -E '^stoker|cpu over' $S/run19-a.txt | cut -c1-400
timeout 300 python3 bench/host_scaling.py --dir $D > $S/run19-host.txt 2>&1; echo "== host rc=$?"; cut -c1-330 $S/run19-host.txt
for c in 1 2 4 8 16; do
  case $c in 1) a="--epochs 2 --rounds 1";; 2) a="--epochs 2 --rounds 2";; *) a="--epochs 3 --rounds 2";; esac
  pin $c 200 $I --cores $c --shape default $a > $S/run19-pinned-$c.txt 2>&1; echo "== pinned $c rc=$?"; grep -E '^stoker|^torchvision|stoker / torchvision|cores:' $S/run19-pinned-$c.txt | cut -c1-220
done
