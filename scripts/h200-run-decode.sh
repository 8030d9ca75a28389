#!/usr/bin/env bash
# The GPU decode route's call (~6 min with the start; the first images step generates 4 000 JPEGs,
# ~80 s): its CUDA tests, then the loader end to end from files with the decode slots inline on the
# main thread (STOKER_JPEG_WORKERS=0) against 2 (default) and 3 slots on worker threads. The full
# variant set is scripts/h200-decode.sh. Run after `npm ci && bash scripts/gpu-pack.sh` with
# `carry: [".gpu"]`; logs under $OUT.
source .gpu/env.sh
S=${OUT:-/tmp}
nproc
timeout 90 node --import tsx --test --test-concurrency=1 test/cuda/nvjpeg.test.ts test/cuda/gpu-decode.test.ts test/cuda/ragged-loader.test.ts > $S/decode-tests.txt 2>&1; echo "decode tests rc=$?"
grep -E "^# (tests|pass|fail|skipped)" $S/decode-tests.txt; grep -E "^not ok|^    not ok|^      error" $S/decode-tests.txt | head -12
images() { timeout ${T:-70} node --import tsx bench/run.ts images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs 5 --no-torch 2>&1 | tee -a $S/images-gpu.txt | grep -E '^\{|generated|rror' | tail -3; }
echo "inline (STOKER_JPEG_WORKERS=0):"; T=170 STOKER_JPEG_WORKERS=0 images
echo "slots 2 (default):"; images
echo "slots 3, 8 readers:"; STOKER_JPEG_SLOTS=3 STOKER_DECODE_READERS=8 images
