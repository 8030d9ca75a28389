#!/usr/bin/env bash
# One bounded call (< 9 min) when only one is left: bench text (pad / batchTokens / pack against
# the reference, with the length pass), then the decode route's CUDA tests and the loader end to end
# from files with the decode slots inline vs on worker threads (the first images step generates
# 4 000 JPEGs, ~80 s). Run after `npm ci && bash scripts/gpu-pack.sh` with `carry: [".gpu"]`.
source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nproc
TEXT_DIR=/tmp/stoker-text TEXT_DOCS=20000 TEXT_SECONDS=3 timeout 230 bash bench/text.sh > $S/text.txt 2>&1; echo "text rc=$?"; tail -24 $S/text.txt
timeout 60 node --import tsx --test --test-concurrency=1 test/cuda/nvjpeg.test.ts test/cuda/gpu-decode.test.ts test/cuda/ragged-loader.test.ts > $S/decode-tests.txt 2>&1; echo "decode tests rc=$?"
grep -E "^# (tests|pass|fail|skipped)" $S/decode-tests.txt; grep -E "^not ok|^    not ok|^      error" $S/decode-tests.txt | head -12
images() { timeout ${T:-60} node --import tsx bench/run.ts images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs 5 --no-torch 2>&1 | tee -a $S/images-gpu.txt | grep -E '^\{|generated|rror' | tail -3; }
echo "inline (STOKER_JPEG_WORKERS=0):"; T=160 STOKER_JPEG_WORKERS=0 images
echo "slots 2 (default):"; images
