#!/usr/bin/env bash
# H200 run 15, part 2 (< 9.5 min): the CUDA serve tests (both client routes, dtypes) and bench torch
# after the client's pinned-id memmove and int64 labels (scripts/h200-torch.sh), then the GPU decode
# route after the host pool's oldest-first eviction (slots on threads twice, inline once; "new file
# buffers" should fall to 0 after the first epoch). Same preparation as scripts/h200-run15.sh.
source .gpu/env.sh
S=${OUT:-/tmp}
bash scripts/h200-torch.sh
images() { env STOKER_DECODE_TIMING=1 "$@" timeout 50 node --import tsx bench/run.ts images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs 5 --no-torch 2>&1; }
run() { local name=$1; shift; echo "== $name"; images "$@" | tee -a $S/route-$name.txt | grep -E '^\{|stoker decode timing: epoch [34]' | sed -E 's/"impl":"[^"]*",//' | cut -c1-900; }
run threads; run inline STOKER_JPEG_WORKERS=0; run threads
