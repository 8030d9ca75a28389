#!/usr/bin/env bash
# Issue 17, CPU route, run 17: the crop decode of JPEG views through libjpeg-turbo (NOTE [crop decode],
# turbo-jpeg.ts). On the H200 host, in two calls (each under the device's 10-minute limit):
#   bash scripts/h200-run17.sh one     — the decode tests on this host; bench decode-scaling rows a2, c
#                                        at N = 1 (sharp path, libvips + JS, libvips + WebAssembly, as it
#                                        runs; PIL's recipe) and rows b, c, e at N = 15 (e: 1 and 2 readers);
#   bash scripts/h200-run17.sh images  — bench images (Stoker against torchvision's ImageFolder, the same
#                                        recipe, bf16): 15 cores with 1 and 2 reader workers, the whole
#                                        machine with the defaults (twice) and with 2 readers.
# Run after `npm ci && npm run build && bash scripts/gpu-pack.sh` with `carry: [".gpu", "dist"]`; logs under $OUT.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
nproc; python3 -c 'import torch, PIL; print("torch", torch.__version__, "PIL", PIL.__version__)' 2>&1 | tail -1
case "${1:-one}" in
one)
  timeout 150 node --import tsx --test --test-concurrency=1 test/formats/image-turbo.test.ts test/formats/image-direct.test.ts test/formats/image-resample.test.ts test/cuda/nvjpeg.test.ts test/cuda/gpu-decode.test.ts > $S/run17-tests.txt 2>&1; echo "tests rc=$?"; grep -E '^# (pass|fail|skipped)' $S/run17-tests.txt
  B="node --import tsx bench/run.ts decode-scaling --files 4000 --classes 100 --per 240 --output bfloat16 --variants default"
  timeout 150 $B --procs 1 --rows a2,c > $S/run17-one.txt 2>&1; echo "one core rc=$?"; grep -v '^{' $S/run17-one.txt | tail -9
  timeout 200 $B --procs 15 --rows b,c,e --readers 1,2 > $S/run17-scaling.txt 2>&1; echo "15 rc=$?"; grep -v '^{' $S/run17-scaling.txt | tail -7
  ;;
images)
  I="node --import tsx bench/run.ts images --files 4000 --classes 100 --output bfloat16"
  for r in 1 2; do timeout 110 $I --cores 15 --readers $r > $S/run17-images-15-r$r.txt 2>&1; echo "images 15 cores, $r readers rc=$?"; tail -4 $S/run17-images-15-r$r.txt; done
  for k in 1 2; do timeout 110 $I --cores 16 --shape default > $S/run17-images-default16-$k.txt 2>&1; echo "images whole machine, defaults ($k) rc=$?"; tail -4 $S/run17-images-default16-$k.txt; done
  timeout 110 $I --cores 16 --readers 2 > $S/run17-images-16-r2.txt 2>&1; echo "images 16 cores, 2 readers rc=$?"; tail -4 $S/run17-images-16-r2.txt
  ;;
esac
