#!/usr/bin/env bash
# Issue 17: the per-stage CPU profile of the image route (bench decode-scaling) on the H200 host.
# Same files (bench images' 4 000-JPEG fixture, generated first unless /tmp has it), RandomResizedCrop 224 +
# flip + normalize, bf16, 240 images per process, N = 1, 4, 8, 15: (a) decodeImage loop in one thread, (b) N independent
# node loops, (c) N independent python PIL/torchvision recipe loops, (d) DecodePool of N fed
# directly, (e) imageFolder decodeProcesses N through DataLoader; then (d)/(e) with the decode
# children's V8/libuv flags (--single-threaded-gc; all: + --v8-pool-size=1 + UV_THREADPOOL_SIZE=1);
# then (e) with 5 reader workers (8 → 5 × 2, 15 → 5 × 3 processes): does the one reader serialize?
# Each row: images/s, CPU ms/image (children included), cores busy, ÷ N×one. ~2.5 min with the
# fixture (14 s on the H200 in run 11). Run after `npm ci && bash scripts/gpu-pack.sh` with `carry: [".gpu"]` (python with
# torch from .gpu/env.sh; without it, python3 on PATH); logs under $OUT.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nproc; python3 -c 'import torch, PIL; print("torch", torch.__version__, "PIL", PIL.__version__)' 2>&1 | tail -1
B="node --import tsx bench/run.ts decode-scaling --files 4000 --classes 100 --per 240 --procs 1,4,8,15 --output bfloat16"
timeout 150 $B --rows a,b,c,d,e --variants default > $S/scaling.txt 2>&1; echo "scaling rc=$?"; grep -v '^{' $S/scaling.txt | tail -16
timeout 70 $B --rows d,e --variants stgc,all > $S/scaling-flags.txt 2>&1; echo "flags rc=$?"; grep -v '^{' $S/scaling-flags.txt | tail -12
timeout 40 $B --rows e --procs 8,15 --readers 5 --variants default > $S/scaling-readers.txt 2>&1; echo "readers rc=$?"; grep -v '^{' $S/scaling-readers.txt | tail -5
