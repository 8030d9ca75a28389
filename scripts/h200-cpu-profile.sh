#!/usr/bin/env bash
# Issue 17: the per-stage CPU profile of the image route (bench decode-scaling) on the H200 host.
# Same files (bench images' 4 000-JPEG fixture, generated first, ~85 s), RandomResizedCrop 224 +
# flip + normalize, bf16, N = 1, 4, 8, 15: (a) decodeImage loop in one thread, (b) N independent
# node loops, (c) N independent python PIL/torchvision recipe loops, (d) DecodePool of N fed
# directly, (e) imageFolder decodeProcesses N through DataLoader; then (d)/(e) with the decode
# children's V8/libuv flags (--single-threaded-gc; all: + --v8-pool-size=1 + UV_THREADPOOL_SIZE=1).
# Each row: images/s, CPU ms/image (children included), cores busy, ÷ N×one. ~3.5 min with the
# fixture. Run after `npm ci && bash scripts/gpu-pack.sh` with `carry: [".gpu"]` (python with
# torch from .gpu/env.sh; without it, python3 on PATH); logs under $OUT.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nproc; python3 -c 'import torch, PIL; print("torch", torch.__version__, "PIL", PIL.__version__)' 2>&1 | tail -1
B="node --import tsx bench/run.ts decode-scaling --files 4000 --classes 100 --per 160 --procs 1,4,8,15 --output bfloat16"
timeout 170 $B --rows a,b,c,d,e --variants default > $S/scaling.txt 2>&1; echo "scaling rc=$?"; grep -v '^{' $S/scaling.txt | tail -16
timeout 60 $B --rows d,e --variants stgc,all > $S/scaling-flags.txt 2>&1; echo "flags rc=$?"; grep -v '^{' $S/scaling-flags.txt | tail -12
