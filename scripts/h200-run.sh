#!/usr/bin/env bash
# One combined H200 run (one device call, ~5 min + start; the first images step generates 4 000 JPEGs, ~80 s): GPU tests, bench torch, bench images (CPU and the
# GPU decode route), bench text (0) with the pyarrow check, bench pieces. Logs under $OUT. Run from the project root
# after `npm ci && bash scripts/gpu-pack.sh`, with `carry: [".gpu"]`: `bash scripts/h200-run.sh`.
source .gpu/env.sh
S=$OUT
export PYTHONUNBUFFERED=1
nproc
timeout 80 node --import tsx --test --test-concurrency=1 test/cuda/*.test.ts src/device/cuda/*.test.ts > $S/gpu-tests.txt 2>&1; echo "gpu tests rc=$?"
grep -E "^# (tests|pass|fail|skipped)" $S/gpu-tests.txt; grep -E "^not ok|^    not ok" $S/gpu-tests.txt | head -8
timeout 95 python3 bench/torch_bench.py --steps 100 --workers 4,8 --json $S/torch.json > $S/torch.txt 2> $S/torch.err; echo "torch rc=$?"; cat $S/torch.txt; tail -2 $S/torch.err
timeout 200 node --import tsx bench/run.ts images --files 4000 --classes 100 --cores 4,15 --output bfloat16 > $S/images-cpu.txt 2>&1; echo "images cpu rc=$?"; tail -9 $S/images-cpu.txt
timeout 60 node --import tsx bench/run.ts images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs 3 --no-torch > $S/images-gpu.txt 2>&1; echo "images gpu rc=$?"; tail -6 $S/images-gpu.txt
TEXT_DIR=/tmp/stoker-text TEXT_DOCS=20000 TEXT_SECONDS=3 timeout 75 bash bench/text.sh > $S/text.txt 2>&1; echo "text rc=$?"; tail -14 $S/text.txt
timeout 60 node --import tsx bench/run.ts pieces > $S/pieces.txt 2>&1; echo "pieces rc=$?"; tail -16 $S/pieces.txt
