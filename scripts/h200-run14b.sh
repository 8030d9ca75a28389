#!/usr/bin/env bash
# H200 run 14, part 2 (< 9 min): where the client gather's time goes (bench/torch_client_profile.py),
# the CPU decode with the direct libvips route (scripts/h200-cpu-decode3.sh), the 1.28 M first batch
# with the parallel walk (scripts/h200-first-batch2.sh). Same preparation as scripts/h200-run14.sh.
source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
timeout 90 python3 bench/torch_client_profile.py --device cuda --epochs 4 > $S/client-profile.txt 2>&1; echo "client profile rc=$?"; head -40 $S/client-profile.txt
timeout 200 bash scripts/h200-cpu-decode3.sh
timeout 220 bash scripts/h200-first-batch2.sh
