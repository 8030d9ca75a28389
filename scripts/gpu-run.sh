#!/usr/bin/env bash
# The one entry for runs on the GPU host (an H200 machine without Node.js: ../shared/gpu/README.md).
# Each argument is a step, run in order; each step writes its log under $OUT (or /tmp) as
# <step>.txt (<step>-<arg>.txt for a step with an argument; a second log of the same name gets -2, -3)
# and prints its exit status and a short summary. Prepare on the development machine, then run from
# the project root on the GPU machine with `carry: [".gpu"]` (`[".gpu", "dist"]` for first-batch and
# folder-walk, which time the compiled package):
#
#   npm ci && bash scripts/gpu-pack.sh            # + `npm run build` for first-batch / folder-walk
#   bash scripts/gpu-run.sh gpu-tests images-gpu images-cpu torch
#
# An argument NAME=VALUE exports NAME for the steps after it (NAME= unsets it), so one call can run
# variants side by side: `bash scripts/gpu-run.sh images-cpu STOKER_DECODE_NICE=10 images-cpu`.
# Every STOKER_* switch set that way, or in the caller's environment, reaches the loader (and its
# decode processes). T=SECONDS replaces a step's time limit.
#
# Steps (ARG after a colon):
#   gpu-tests            test/cuda/*.test.ts and src/device/cuda/*.test.ts
#   decode-tests[:ragged] the GPU decode route's CUDA tests (nvjpeg, gpu-decode; +ragged-loader)
#   image-tests          the CPU image decode tests (turbo, direct, resample) and the decode CUDA tests
#   serve-tests          the CUDA IPC serve tests (test/cuda/serve.test.ts)
#   torch                bench torch in interleaved rounds (3 × 300 steps, workers 4,8, --server-timing;
#                        ROUTES=batch,gather picks the Stoker routes; default: all the bench knows)
#   torch-once           bench torch in one pass: TORCH_ARGS (default --steps 100 --workers 4,8)
#   client-profile       bench/torch_client_profile.py --device cuda --epochs 4
#   images-gpu[:V,V...]  the GPU decode route end to end (4 000 JPEGs, bf16, batch 256, EPOCHS=5,
#                        STOKER_DECODE_TIMING=1), one run per variant, ROUNDS=1 times, interleaved;
#                        variants (join with + to combine): default, threads (= default), inline
#                        (STOKER_JPEG_WORKERS=0), slots2, slots3 (STOKER_JPEG_SLOTS), readers8
#                        (STOKER_DECODE_READERS=8), legacy (STOKER_DECODE_LEGACY=1), ahead8
#                        (STOKER_DECODE_AHEAD=8), unbounded (STOKER_DECODE_AHEAD=0); default: threads,inline
#   decode-reads         the GPU route's read side alone (threads 1,2,4,8)
#   images-cpu[:SHAPE]   bench images, the CPU recipe against torchvision's ImageFolder (4 000 JPEGs,
#                        bf16); SHAPE: default (16 cores, the loader's default shape; the default),
#                        C (--cores C, a list allowed: 1,4,15) or C:R (C cores, R reader workers);
#                        IMAGES_ARGS adds flags (--epochs 3 --rounds 3, --no-torch, --prefetch 8)
#   images-pinned:C      bench images confined to the first C CPUs (sched_setaffinity), --shape default;
#                        PIN_ARGS replaces the epochs/rounds (default: run 19's for C), IMAGES_ARGS adds
#   torchvision[:W]      bench/torchvision_images.py alone, W workers (default 16), TV_ARGS (--epochs 3)
#   host-scaling         bench/host_scaling.py over the images fixture, HOST_ARGS adds flags
#   decode-scaling:P:R[:READERS]  bench decode-scaling at --procs P --rows R [--readers READERS],
#                        --per 240, bf16, DS_VARIANTS (default: default)
#   cpu-profile          the per-stage CPU profile: decode-scaling:1,4,8,15:a,b,c,d,e, the same rows d,e
#                        with DS_VARIANTS=stgc,all, and decode-scaling:8,15:e:5
#   first-batch[:THREADS] the 1.28 M-file first batch from dist/: FB_ARGS (default --runs 2 --walk
#                        sync,parallel); with THREADS: --runs 1 --walk parallel --threads THREADS
#   folder-walk          the 1.28 M-file walk alone at 2, 4, 8, 16 threads, 3 rounds, from dist/
#   text                 bench text (TEXT_DOCS=20000, TEXT_SECONDS=3)
#   pieces               bench pieces (ragged collates on the device)
#   gpu | pool           bench gpu | bench pool (GPU_ARGS / POOL_ARGS add flags)
#   gpu-jpeg             bench/gpu-jpeg.sh (the nvJPEG decoder alone)
#   ranks                bench ranks --cuda --ranks 2 (needs two GPUs)
#   fixture              the images fixture (/tmp/stoker-bench-images-4000-100), made once
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
D=/tmp/stoker-bench-images-4000-100
B="node --import tsx bench/run.ts"
I="$B images --files 4000 --classes 100 --output bfloat16"
F="--files 1280000 --classes 1000"

# logfile NAME: a fresh log path under $S.
logfile() { local f="$S/$1.txt" k=2; while [ -e "$f" ]; do f="$S/$1-$k.txt"; k=$((k+1)); done; echo "$f"; }
# pin C SECONDS CMD...: run CMD on the first C CPUs this process may use, under a time limit.
pin() { local c=$1 t=$2; shift 2; timeout "$t" python3 -c 'import os,sys; c=int(sys.argv[1]); os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:c]); os.execvp(sys.argv[2], sys.argv[2:])' "$c" "$@"; }
# tests NAME SECONDS FILES...: node's test runner, one file at a time.
tests() {
  local name=$1 t=$2; shift 2; local f; f=$(logfile "$name")
  timeout "${T:-$t}" node --import tsx --test --test-concurrency=1 "$@" > "$f" 2>&1; echo "$name rc=$?"
  grep -E "^# (tests|pass|fail|skipped)" "$f"; grep -E "^not ok|^    not ok|^      error" "$f" | head -12
}
fixture() { [ -d "$D" ] || { timeout 200 $I --cores 16 --shape default --epochs 1 --no-torch > "$(logfile fixture)" 2>&1; echo "fixture rc=$?"; }; }
# gpu_route VARIANT: one run of the GPU decode route, appended to images-gpu-VARIANT.txt.
gpu_route() {
  local v=$1 e=() p
  for p in ${v//+/ }; do
    case $p in
      default|threads) ;;
      inline) e+=(STOKER_JPEG_WORKERS=0) ;;
      slots2) e+=(STOKER_JPEG_SLOTS=2) ;;
      slots3) e+=(STOKER_JPEG_SLOTS=3) ;;
      readers8) e+=(STOKER_DECODE_READERS=8) ;;
      legacy) e+=(STOKER_DECODE_LEGACY=1) ;;
      ahead8) e+=(STOKER_DECODE_AHEAD=8) ;;
      unbounded) e+=(STOKER_DECODE_AHEAD=0) ;;
      *) echo "images-gpu: unknown variant $p" >&2; return 2 ;;
    esac
  done
  echo "== images-gpu $v ${e[*]}"
  env STOKER_DECODE_TIMING=${STOKER_DECODE_TIMING-1} "${e[@]}" timeout "${T:-170}" $B images --files 4000 --classes 100 --decode gpu --device cuda --output bfloat16 --batch 256 --epochs "${EPOCHS:-5}" --no-torch 2>&1 \
    | tee -a "$S/images-gpu-${v//+/-}.txt" | grep -E '^\{|generated|rror|stoker decode timing: epoch [34]' | sed -E 's/"impl":"[^"]*",//' | cut -c1-900
}

step() {
  local name=${1%%:*} arg= f a
  [[ $1 == *:* ]] && arg=${1#*:}
  local tag=$name${arg:+-${arg//[:,]/-}}
  case $name in
    gpu-tests) tests gpu-tests 200 test/cuda/*.test.ts src/device/cuda/*.test.ts ;;
    decode-tests) tests decode-tests 150 test/cuda/nvjpeg.test.ts test/cuda/gpu-decode.test.ts ${arg:+test/cuda/ragged-loader.test.ts} ;;
    image-tests) tests image-tests 150 test/formats/image-turbo.test.ts test/formats/image-direct.test.ts test/formats/image-resample.test.ts test/cuda/nvjpeg.test.ts test/cuda/gpu-decode.test.ts ;;
    serve-tests) tests serve-tests 150 test/cuda/serve.test.ts ;;
    torch)
      local routes=${ROUTES:-$(python3 -c 'import sys; sys.path.insert(0, "bench"); import torch_bench as t; print(",".join(t.ROUTES))')}
      f=$(logfile torch)
      timeout "${T:-170}" python3 bench/torch_bench.py --rounds 3 --steps 300 --workers 4,8 --routes "$routes" --server-timing --json "${f%.txt}.json" > "$f" 2> "${f%.txt}.err"; echo "torch rc=$?"
      cat "$f"; grep "stoker serve" "${f%.txt}.err" | tail -4 ;;
    torch-once)
      f=$(logfile torch-once)
      timeout "${T:-110}" python3 bench/torch_bench.py ${TORCH_ARGS:---steps 100 --workers 4,8} --json "${f%.txt}.json" > "$f" 2> "${f%.txt}.err"; echo "torch-once rc=$?"
      tail -16 "$f"; grep "stoker serve" "${f%.txt}.err" | tail -4 ;;
    client-profile)
      f=$(logfile client-profile)
      timeout "${T:-100}" python3 bench/torch_client_profile.py --device cuda --epochs 4 > "$f" 2>&1; echo "client-profile rc=$?"; head -40 "$f" ;;
    images-gpu)
      local round v
      for round in $(seq 1 "${ROUNDS:-1}"); do
        for v in $(echo "${arg:-threads,inline}" | tr , ' '); do gpu_route "$v"; done
      done ;;
    decode-reads)
      f=$(logfile decode-reads)
      timeout "${T:-60}" $B decode-reads --files 4000 --batch 256 --threads 1,2,4,8 > "$f" 2>&1; echo "decode-reads rc=$?"; tail -8 "$f" ;;
    images-cpu)
      local shape=${arg:-default}
      case $shape in
        default) a="--cores 16 --shape default" ;;
        *:*) a="--cores ${shape%%:*} --readers ${shape##*:}" ;;
        *) a="--cores $shape" ;;
      esac
      local sn=${shape/:/-r}; f=$(logfile "images-cpu-${sn//,/-}")
      timeout "${T:-240}" $I $a ${IMAGES_ARGS:-} > "$f" 2>&1; echo "images-cpu $shape ${IMAGES_ARGS:-} rc=$?"
      grep -v '^{' "$f" | tail -12 | cut -c1-400 ;;
    images-pinned)
      local c=$arg; [ -n "$c" ] || { echo "images-pinned needs a CPU count, e.g. images-pinned:16" >&2; return 2; }
      case $c in 1) a="--epochs 2 --rounds 1" ;; 2) a="--epochs 2 --rounds 2" ;; *) a="--epochs 3 --rounds 2" ;; esac
      f=$(logfile "images-pinned-$c")
      pin "$c" "${T:-200}" $I --cores "$c" --shape default ${PIN_ARGS:-$a} ${IMAGES_ARGS:-} > "$f" 2>&1; echo "images-pinned $c rc=$?"
      grep -E '^stoker|^torchvision|stoker / torchvision|cores:|cpu over' "$f" | cut -c1-900 ;;
    torchvision)
      fixture; f=$(logfile "$tag")
      timeout "${T:-120}" python3 bench/torchvision_images.py "$D" --batch 64 --workers "${arg:-16}" ${TV_ARGS:---epochs 3} > "$f" 2>&1; echo "torchvision ${arg:-16} rc=$?"
      grep '^{' "$f" | cut -c1-300 ;;
    host-scaling)
      fixture; f=$(logfile host-scaling)
      timeout "${T:-300}" python3 bench/host_scaling.py --dir "$D" ${HOST_ARGS:-} > "$f" 2>&1; echo "host-scaling rc=$?"; cut -c1-330 "$f" ;;
    decode-scaling)
      local procs=${arg%%:*} rest=${arg#*:} rows readers
      rows=${rest%%:*}; [[ $rest == *:* ]] && readers=${rest#*:}
      [ -n "$procs" ] && [ -n "$rows" ] && [ "$rows" != "$arg" ] || { echo "decode-scaling needs PROCS:ROWS, e.g. decode-scaling:1:a2,c" >&2; return 2; }
      f=$(logfile "$tag")
      timeout "${T:-200}" $B decode-scaling --files 4000 --classes 100 --per 240 --output bfloat16 --procs "$procs" --rows "$rows" ${readers:+--readers $readers} --variants "${DS_VARIANTS:-default}" > "$f" 2>&1
      echo "decode-scaling $arg ${DS_VARIANTS:-default} rc=$?"; grep -v '^{' "$f" | tail -16 ;;
    cpu-profile)
      step decode-scaling:1,4,8,15:a,b,c,d,e
      DS_VARIANTS=stgc,all step decode-scaling:1,4,8,15:d,e
      step decode-scaling:8,15:e:5 ;;
    first-batch)
      f=$(logfile "$tag")
      if [ -n "$arg" ]; then a="--runs 1 --walk parallel --threads $arg"; else a=${FB_ARGS:---runs 2 --walk sync,parallel}; fi
      timeout "${T:-200}" $B first-batch $F $a --dist > "$f" 2>&1; echo "first-batch $a rc=$?"; grep -v '^{' "$f" | tail -11 ;;
    folder-walk)
      f=$(logfile folder-walk)
      timeout "${T:-60}" $B folder-walk $F --threads 2,4,8,16 --rounds 3 --dist > "$f" 2>&1; echo "folder-walk rc=$?"; grep -v '^{' "$f" | tail -8 ;;
    text)
      f=$(logfile text)
      TEXT_DIR=/tmp/stoker-text TEXT_DOCS=20000 TEXT_SECONDS=3 timeout "${T:-300}" bash bench/text.sh > "$f" 2>&1; echo "text rc=$?"; tail -24 "$f" ;;
    pieces)
      f=$(logfile pieces)
      timeout "${T:-40}" $B pieces > "$f" 2>&1; echo "pieces rc=$?"; tail -12 "$f" ;;
    gpu|pool)
      local extra; [ "$name" = gpu ] && extra=${GPU_ARGS:-} || extra=${POOL_ARGS:-}
      f=$(logfile "$name")
      timeout "${T:-550}" $B "$name" $extra > "$f" 2>&1; echo "$name rc=$?"; tail -30 "$f" ;;
    gpu-jpeg)
      f=$(logfile gpu-jpeg)
      timeout "${T:-550}" bash bench/gpu-jpeg.sh > "$f" 2>&1; echo "gpu-jpeg rc=$?"; tail -20 "$f" ;;
    ranks)
      f=$(logfile ranks)
      timeout "${T:-300}" $B ranks --cuda --ranks 2 > "$f" 2>&1; echo "ranks rc=$?"; tail -12 "$f" ;;
    fixture) fixture ;;
    *) echo "gpu-run: unknown step '$1' (the steps are listed at the top of scripts/gpu-run.sh)" >&2; return 2 ;;
  esac
}

[ $# -gt 0 ] || { sed -n '2,/^\[ -f .gpu/p' "$0" | sed '$d'; exit 2; }
nproc; lscpu 2>/dev/null | grep -E "Model name" | head -1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null
python3 -c 'import torch, PIL; print("torch", torch.__version__, "PIL", PIL.__version__)' 2>&1 | tail -1
for s in "$@"; do
  if [[ $s =~ ^[A-Za-z_][A-Za-z0-9_]*=(.*)$ ]]; then
    if [ -n "${BASH_REMATCH[1]}" ]; then export "$s"; else unset "${s%%=*}"; fi
  else
    step "$s"
  fi
done
