#!/usr/bin/env bash
# Issue 16 on the H200, one bounded call (~3.5 min with the start): the CUDA IPC serve tests, then
# `bench torch` in interleaved rounds (3 × ceiling → resident → Stoker per route, 300 steps each;
# medians, spread, ratios to the resident loop of the same round; PyTorch's DataLoader at
# num_workers 4 and 8 once), with the loader's time split. Run after
# `npm ci && bash scripts/gpu-pack.sh` with `carry: [".gpu"]`; logs under $OUT.
# ROUTES=batch,gather picks the Stoker routes (default: every route this checkout's bench knows).
source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nproc; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 150 node --import tsx --test --test-concurrency=1 test/cuda/serve.test.ts > $S/serve-cuda-tests.txt 2>&1; echo "cuda serve tests rc=$?"; grep -E "^# (tests|pass|fail)" $S/serve-cuda-tests.txt
ROUTES=${ROUTES:-$(python3 -c 'import sys; sys.path.insert(0, "bench"); import torch_bench as t; print(",".join(t.ROUTES))')}
timeout 170 python3 bench/torch_bench.py --rounds 3 --steps 300 --workers 4,8 --routes "$ROUTES" --server-timing --json $S/torch.json > $S/torch.txt 2> $S/torch.err; echo "torch rc=$?"; cat $S/torch.txt; grep "stoker serve" $S/torch.err | tail -4
