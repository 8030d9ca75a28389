#!/usr/bin/env bash
# Issue 17, run 19d: the scaling curve on one host instance, with the cores really limited, beside
# the same host's scaling of independent work. Stoker's defaults on the first C CPUs (C = 1, 2, 4, 8,
# 16), bench/host_scaling.py's PIL decode loops pinned to 1, 2, 4, 8, 16 CPUs, then Stoker on 1 and
# 16 CPUs again (the one-core figure moves with the host: runs 19-19c gave 369-626 images/s).
# Run after `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
I="node --import tsx bench/run.ts images --files 4000 --classes 100 --output bfloat16 --no-torch --shape default"
pin() { local c=$1 t=$2; shift 2; timeout "$t" python3 -c 'import os,sys; c=int(sys.argv[1]); os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:c]); os.execvp(sys.argv[2], sys.argv[2:])' "$c" "$@"; }
timeout 120 $I --cores 16 --epochs 1 > $S/run19d-fixture.txt 2>&1; echo "== fixture rc=$?"
loader() { local c=$1 e=$2; pin $c 90 $I --cores $c --epochs $e >> $S/run19d-loader.txt 2>&1; echo "== loader on $c CPUs rc=$?"; grep -E '^stoker' $S/run19d-loader.txt | tail -1 | cut -c1-200; }
loader 1 1; loader 2 1; loader 4 2; loader 8 3; loader 16 3
timeout 200 python3 bench/host_scaling.py --dir /tmp/stoker-bench-images-4000-100 --ns 1,2,4,8,16 --works jpeg --rows pinned > $S/run19d-host.txt 2>&1; echo "== host rc=$?"; cut -c1-300 $S/run19d-host.txt
loader 1 1; loader 16 3; loader 1 1; loader 16 3
