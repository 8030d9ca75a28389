#!/usr/bin/env bash
# Issue 17, CPU route, run 18: where the loader's time goes on the H200 host (16 cores). bench images
# with --rounds (Stoker and torchvision alternately, median ratio) and --epochs 3 (persistent
# workers on the torchvision side), and per-thread CPU of the Stoker side (main thread, reader
# workers, the decode children's busy fraction), for the default shape and for 2–3 reader workers.
# Run after `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`;
# logs under $OUT.
#   bash scripts/h200-run18.sh [shapes]   — shapes: a space-separated list of "cores:readers" or "default"
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nproc; python3 -c 'import torch, PIL; print("torch", torch.__version__, "PIL", PIL.__version__)' 2>&1 | tail -1
I="node --import tsx bench/run.ts images --files 4000 --classes 100 --output bfloat16 --epochs ${EPOCHS:-3} --rounds ${ROUNDS:-2}"
for shape in ${1:-default 15:1 16:2 14:2 15:3}; do
  name=${shape/:/-r}
  if [ "$shape" = default ]; then args="--cores 16 --shape default"; else args="--cores ${shape%%:*} --readers ${shape##*:}"; fi
  timeout 200 $I $args > $S/run18-images-$name.txt 2>&1; echo "== $shape rc=$?"; grep -E 'µs/image|stoker / torchvision|^stoker|^torchvision' $S/run18-images-$name.txt | tail -12
done
