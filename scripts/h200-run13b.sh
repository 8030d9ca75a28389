#!/usr/bin/env bash
# H200 run 13, part 2 (< 8 min): the CPU decode with the direct libvips route (scripts/h200-cpu-decode3.sh),
# then the 1.28 M first batch with the parallel walk (scripts/h200-first-batch2.sh). Same preparation as part 1.
source .gpu/env.sh
timeout 200 bash scripts/h200-cpu-decode3.sh
timeout 230 bash scripts/h200-first-batch2.sh
