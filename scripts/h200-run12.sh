#!/usr/bin/env bash
# H200 run 12 (one device call, < 10 min): the decode CUDA suites with the slots inline by default,
# the GPU route end to end with the new default, bench torch in interleaved rounds with the CUDA
# serve tests (scripts/h200-torch.sh), then the CPU per-stage profile (scripts/h200-cpu-profile.sh).
# Run after `npm ci && bash scripts/gpu-pack.sh` with `carry: [".gpu"]`. Logs under $OUT.
source .gpu/env.sh
S=${OUT:-/tmp}
timeout 120 node --import tsx --test --test-concurrency=1 test/cuda/nvjpeg.test.ts test/cuda/gpu-decode.test.ts > $S/decode-tests.txt 2>&1; echo "decode tests rc=$?"
grep -E "^# (tests|pass|fail|skipped)" $S/decode-tests.txt; grep -E "^not ok|^    not ok" $S/decode-tests.txt | head -8
echo "gpu route, default (inline):"; timeout 60 node --import tsx bench/run.ts images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs 5 --no-torch 2>&1 | grep -E '^\{|generated' | tail -2
bash scripts/h200-torch.sh
bash scripts/h200-cpu-profile.sh
