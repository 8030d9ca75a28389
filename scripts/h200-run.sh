#!/usr/bin/env bash
# One combined H200 run (one device call; the images step generates 4 000 JPEGs first, ~80 s): GPU tests, bench torch (model
# and model-free), the GPU decode route end to end and its reads, bench text (pad / batchTokens /
# pack against the PyTorch + transformers reference), bench pieces. Logs under $OUT. Run from the
# project root after `npm ci && bash scripts/gpu-pack.sh`, with `carry: [".gpu"]`:
# `bash scripts/h200-run.sh`. scripts/h200-run-cpu.sh runs the CPU-side image benches.
source .gpu/env.sh
S=$OUT
export PYTHONUNBUFFERED=1
nproc
timeout 200 node --import tsx --test --test-concurrency=1 test/cuda/*.test.ts src/device/cuda/*.test.ts > $S/gpu-tests.txt 2>&1; echo "gpu tests rc=$?"
grep -E "^# (tests|pass|fail|skipped)" $S/gpu-tests.txt; grep -E "^not ok|^    not ok" $S/gpu-tests.txt | head -8
timeout 110 python3 bench/torch_bench.py --steps 100 --workers 4,8 --json $S/torch.json > $S/torch.txt 2> $S/torch.err; echo "torch rc=$?"; tail -16 $S/torch.txt; tail -2 $S/torch.err
timeout 170 node --import tsx bench/run.ts images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs 3 --no-torch > $S/images-gpu.txt 2>&1; echo "images gpu rc=$?"; tail -6 $S/images-gpu.txt
timeout 40 node --import tsx bench/run.ts decode-reads --files 4000 --batch 256 --threads 1,2,4,8 > $S/decode-reads.txt 2>&1; echo "decode-reads rc=$?"; tail -8 $S/decode-reads.txt
TEXT_DIR=/tmp/stoker-text TEXT_DOCS=20000 TEXT_SECONDS=3 timeout 300 bash bench/text.sh > $S/text.txt 2>&1; echo "text rc=$?"; tail -20 $S/text.txt
timeout 40 node --import tsx bench/run.ts pieces > $S/pieces.txt 2>&1; echo "pieces rc=$?"; tail -12 $S/pieces.txt
