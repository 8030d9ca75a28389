#!/usr/bin/env bash
# H200 run 13, part 1 (one device call, < 10 min): the CUDA serve tests on both client routes and
# bench torch with the client gather (scripts/h200-torch.sh), the decode CUDA suites, then the GPU
# decode route with its timing log (scripts/h200-gpu-route5.sh, one round). Run after
# `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`. Logs under $OUT.
source .gpu/env.sh
S=${OUT:-/tmp}
bash scripts/h200-torch.sh
timeout 150 node --import tsx --test --test-concurrency=1 test/cuda/nvjpeg.test.ts test/cuda/gpu-decode.test.ts > $S/decode-tests.txt 2>&1; echo "decode tests rc=$?"
grep -E "^# (tests|pass|fail|skipped)" $S/decode-tests.txt; grep -E "^not ok|^    not ok" $S/decode-tests.txt | head -8
ROUNDS=1 timeout 200 bash scripts/h200-gpu-route5.sh
