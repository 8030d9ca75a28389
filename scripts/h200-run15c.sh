#!/usr/bin/env bash
# H200 run 15, part 3 (< 8 min): the CUDA serve tests and bench torch after the client asks for the
# next epoch's plan ahead (NOTE [Client gather]); the GPU decode route (slots on threads) twice more;
# then the CPU recipe against torchvision's ImageFolder at 15 cores. Same preparation as scripts/h200-run15.sh.
source .gpu/env.sh
S=${OUT:-/tmp}
bash scripts/h200-torch.sh
images() { env STOKER_DECODE_TIMING=1 "$@" timeout 50 node --import tsx bench/run.ts images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs 5 --no-torch 2>&1; }
for r in 1 2; do echo "== threads"; images | tee -a $S/route-threads.txt | grep -E '^\{|stoker decode timing: epoch 4' | sed -E 's/"impl":"[^"]*",//' | cut -c1-900; done
timeout 220 node --import tsx bench/run.ts images --files 4000 --classes 100 --cores 15 --output bfloat16 > $S/images-cpu.txt 2>&1; echo "images cpu rc=$?"; tail -8 $S/images-cpu.txt
