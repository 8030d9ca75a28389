#!/usr/bin/env bash
# Issue 17, first batch fast (the listing2 branch): the 1.28 M-file first batch with the folder
# walked on the main thread (`sources.imageFolder`, 'sync') against the walk on worker threads
# while the main thread awaits (`sources.imageFolderAsync`, 'parallel'; NOTE [parallel walk] in
# src/dataset/formats/images/folder-listing.ts), interleaved, cold (fresh listing cache) and warm, from the
# compiled package; then the walk alone at 1, 2, 4, 8, 16 threads (bench folder-walk, one process,
# interleaved, each walk checked byte for byte against the one-thread walk); then the parallel first
# batch at 4 and 16 walk threads. ~2.5 min (the 1.28 M hard links are made first unless /tmp has
# them: ~20–40 s). Run after `npm ci && npm run build && bash scripts/gpu-pack.sh` with
# `carry: [".gpu", "dist"]`. Logs under $OUT.
source .gpu/env.sh
S=${OUT:-/tmp}
nproc; lscpu | grep -E "Model name" | head -1
B="node --import tsx bench/run.ts"
F="--files 1280000 --classes 1000"
timeout 150 $B first-batch $F --runs 2 --walk sync,parallel --dist > $S/first-batch2.txt 2>&1; echo "first-batch sync,parallel rc=$?"; grep -v '^{' $S/first-batch2.txt | tail -11
timeout 60 $B folder-walk $F --threads 2,4,8,16 --rounds 3 --dist > $S/folder-walk.txt 2>&1; echo "folder-walk rc=$?"; grep -v '^{' $S/folder-walk.txt | tail -8
for t in 4 16; do
  timeout 30 $B first-batch $F --runs 1 --walk parallel --threads $t --dist > $S/first-batch2-t$t.txt 2>&1; echo "first-batch parallel threads=$t rc=$?"; grep -v '^{' $S/first-batch2-t$t.txt | tail -2
done
