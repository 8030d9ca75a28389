#!/usr/bin/env bash
# Issue 17, CPU route, run 16: the direct libvips route with the pixels computed on the calling thread
# (NOTE [pixels in the calling thread] in src/image/vips-direct.ts). On the H200 host (~7 min):
#   1. bench decode-scaling rows a, a2, c at N = 1 (one core: the direct route, the sharp path, PIL's recipe);
#   2. rows d, e (DecodePool fed directly; imageFolder through DataLoader) at N = 1, 4, 15;
#   3. bench images at 15 cores: Stoker's CPU route against torchvision's ImageFolder, same recipe.
# Run after `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`; logs under $OUT.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nproc; python3 -c 'import torch, PIL; print("torch", torch.__version__, "PIL", PIL.__version__)' 2>&1 | tail -1
B="node --import tsx bench/run.ts decode-scaling --files 4000 --classes 100 --per 240 --output bfloat16 --variants default"
timeout 150 $B --procs 1 --rows a,a2,c > $S/run16-one.txt 2>&1; echo "one core rc=$?"; grep -v '^{' $S/run16-one.txt | tail -9
timeout 90 $B --procs 1,4,15 --rows d,e > $S/run16-scaling.txt 2>&1; echo "pool/loader rc=$?"; grep -v '^{' $S/run16-scaling.txt | tail -9
timeout 240 node --import tsx bench/run.ts images --files 4000 --classes 100 --cores 15 --output bfloat16 > $S/run16-images-cpu.txt 2>&1; echo "images cpu rc=$?"; tail -8 $S/run16-images-cpu.txt
