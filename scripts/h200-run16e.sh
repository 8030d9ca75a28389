#!/usr/bin/env bash
# Issue 17, CPU route, run 16e: the loader's new default shape for decode processes (one reader per 16
# cores, cores − readers processes: NOTE [reader threads with decode processes]) on the whole H200 host
# against torchvision's ImageFolder with 16 and with 15 workers, twice each; and 15 cores with one reader.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
I="node --import tsx bench/run.ts images --files 4000 --classes 100 --output bfloat16"
for k in 1 2; do
  timeout 150 $I --cores 16 --shape default > $S/run16e-images-default16-$k.txt 2>&1; echo "default vs torchvision 16 ($k) rc=$?"; tail -4 $S/run16e-images-default16-$k.txt
  timeout 150 $I --cores 15 --readers 1 > $S/run16e-images-15-$k.txt 2>&1; echo "15 cores, 1 reader ($k) rc=$?"; tail -4 $S/run16e-images-15-$k.txt
done
