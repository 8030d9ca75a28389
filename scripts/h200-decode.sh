#!/usr/bin/env bash
# The GPU decode route on the H200 (docs/gpu-decode.md), one device call (~4 min + start; the
# images bench generates 4 000 JPEGs first, ~80 s, unless /tmp/stoker-bench-images-4000-100 exists):
# the decoder's and the route's CUDA tests, the read side alone, then the loader end to end with the
# decode slots on worker threads (2, 3) against them inline on the main thread (STOKER_JPEG_WORKERS=0:
# nvJPEG's calls on the main thread as before, the reads still on the reader threads). Run from the project root after `npm ci && bash scripts/gpu-pack.sh`,
# with `carry: [".gpu"]`: `bash scripts/h200-decode.sh`. Logs under $OUT.
source .gpu/env.sh
S=${OUT:-/tmp}
nproc
timeout 120 node --import tsx --test --test-concurrency=1 test/cuda/nvjpeg.test.ts test/cuda/gpu-decode.test.ts > $S/decode-tests.txt 2>&1; echo "decode tests rc=$?"
grep -E "^# (tests|pass|fail|skipped)" $S/decode-tests.txt; grep -E "^not ok|^    not ok|^      error" $S/decode-tests.txt | head -12
timeout 60 node --import tsx bench/run.ts decode-reads --files 4000 --threads 1,2,4,8 > $S/decode-reads.txt 2>&1; echo "decode-reads rc=$?"; tail -5 $S/decode-reads.txt
images() { timeout ${T:-60} node --import tsx bench/run.ts images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs 5 --no-torch 2>&1 | grep -E '^\{|generated' | tail -2; }
echo "inline (STOKER_JPEG_WORKERS=0):"; T=150 STOKER_JPEG_WORKERS=0 images
echo "slots 2 (default):"; images
echo "slots 3:"; STOKER_JPEG_SLOTS=3 images
echo "slots 3, 8 readers:"; STOKER_JPEG_SLOTS=3 STOKER_DECODE_READERS=8 images
