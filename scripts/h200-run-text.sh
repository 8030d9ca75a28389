#!/usr/bin/env bash
# The text and CPU-side call (~9 min with the start): bench text (pad / batchTokens / pack against
# the PyTorch + transformers reference, with the length pass), bench torch with the loader's time
# split (--server-timing), and the CPU image recipe against torchvision at 15 cores (generates
# 4 000 JPEGs first, ~80 s). Run after `npm ci && bash scripts/gpu-pack.sh` with `carry: [".gpu"]`.
source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nproc
TEXT_DIR=/tmp/stoker-text TEXT_DOCS=20000 TEXT_SECONDS=3 timeout 270 bash bench/text.sh > $S/text.txt 2>&1; echo "text rc=$?"; tail -24 $S/text.txt
timeout 110 python3 bench/torch_bench.py --steps 100 --workers 4 --server-timing --json $S/torch.json > $S/torch.txt 2> $S/torch.err; echo "torch rc=$?"; tail -14 $S/torch.txt; grep "stoker serve" $S/torch.err | tail -3
timeout 150 node --import tsx bench/run.ts images --files 4000 --classes 100 --cores 15 --output bfloat16 > $S/images-cpu.txt 2>&1; echo "images cpu rc=$?"; tail -8 $S/images-cpu.txt
