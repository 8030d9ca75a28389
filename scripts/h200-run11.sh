#!/usr/bin/env bash
# H200 run 11 (one device call, ~7 min): the baselines the next fixes are judged against —
# the CPU image recipe against torchvision at 1, 4 and 15 cores (scaling), the same at 15 cores with
# V8's helper pool cut to 2 threads in every process (NODE_OPTIONS, inherited by the decode
# children), the GPU decode route inline / 2 slots / 3 slots, the 1.28 M-file first batch from the
# compiled package, and bench torch once. Run after `npm ci && npm run build && bash scripts/gpu-pack.sh`
# with `carry: [".gpu", "dist"]`. Logs under $OUT.
source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nproc; lscpu | grep -E "Model name|MHz" | head -3
B="node --import tsx bench/run.ts"
timeout 150 $B images --files 4000 --classes 100 --cores 1,4,15 --output bfloat16 > $S/images-cpu.txt 2>&1; echo "images cpu rc=$?"; tail -12 $S/images-cpu.txt
NODE_OPTIONS="--v8-pool-size=2" timeout 40 $B images --files 4000 --classes 100 --cores 15 --output bfloat16 --no-torch > $S/images-cpu-pool2.txt 2>&1; echo "images cpu v8-pool-size=2 rc=$?"; grep '^{' $S/images-cpu-pool2.txt | tail -1
gpu() { timeout ${T:-60} $B images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs 5 --no-torch 2>&1 | grep -E '^\{' | tail -1; }
echo "gpu inline:"; STOKER_JPEG_WORKERS=0 gpu
echo "gpu slots 2:"; gpu
echo "gpu slots 3:"; STOKER_JPEG_SLOTS=3 gpu
echo "gpu inline again:"; STOKER_JPEG_WORKERS=0 gpu
timeout 110 python3 bench/torch_bench.py --steps 150 --workers 4,8 --json $S/torch.json > $S/torch.txt 2> $S/torch.err; echo "torch rc=$?"; tail -12 $S/torch.txt
timeout 200 $B first-batch --files 1280000 --classes 1000 --runs 1 --dist > $S/first-batch.txt 2>&1; echo "first-batch rc=$?"; tail -5 $S/first-batch.txt
