#!/usr/bin/env bash
# One GPU-host run for the GPU JPEG decoder (docs/gpu-decode.md): the GPU tests, then Stoker's and
# torchvision's nvJPEG throughput on 24 000 generated 500×375 JPEGs, then the pixel comparison.
# Run from the project root with node on PATH; logs and JSON lines go to ${OUT:-/tmp}.
out=${OUT:-/tmp}
dir=${JPEG_DIR:-/tmp/stoker-jpegs}
n=${JPEG_COUNT:-24000}
nvidia-smi -L; ls /usr/local/cuda/lib64 2>/dev/null | grep -i nvjpeg
( time python3 bench/gpu_jpeg.py gen "$dir" "$n" ) 2>&1 | tee "$out/gen.log"
timeout 110 node --import tsx --test --test-concurrency=1 test/cuda/nvjpeg.test.ts src/device/jpeg/sim-jpeg.test.ts >"$out/test.log" 2>&1
echo "test rc=$?"; grep -E '^# |^not ok|^ *not ok|Error|error' "$out/test.log" | head -40
timeout 60 node --import tsx bench/gpu-jpeg.ts "$dir" --batch 256 --dump /tmp/stoker-dump.bin 2>&1 | tee "$out/stoker.json"
timeout 60 python3 bench/gpu_jpeg.py torch "$dir" 256 2>&1 | tail -5 | tee "$out/torch.json"
timeout 30 python3 bench/gpu_jpeg.py compare "$dir" /tmp/stoker-dump.bin 2>&1 | tail -5 | tee "$out/compare.json"
