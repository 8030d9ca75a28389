#!/usr/bin/env bash
# bench torch with the loader's time split (--server-timing), then the CPU image recipe against
# torchvision at 15 cores (generates 4 000 JPEGs first, ~80 s); ~6 min with the start. Run after
# `npm ci && bash scripts/gpu-pack.sh` with `carry: [".gpu"]`; logs under $OUT.
source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nproc
timeout 110 python3 bench/torch_bench.py --steps 100 --workers 4 --server-timing --json $S/torch.json > $S/torch.txt 2> $S/torch.err; echo "torch rc=$?"; tail -14 $S/torch.txt; grep "stoker serve" $S/torch.err | tail -4
timeout 200 node --import tsx bench/run.ts images --files 4000 --classes 100 --cores 15 --output bfloat16 > $S/images-cpu.txt 2>&1; echo "images cpu rc=$?"; tail -8 $S/images-cpu.txt
