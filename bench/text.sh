#!/usr/bin/env bash
# One GPU-host run for `bench text` (docs/text.md): the corpus and tokenizer (bench/text_data.py),
# the Parquet-by-pyarrow test, then Stoker's configurations and the PyTorch + transformers reference
# in one run (bench/text.ts prints the ratios). Run from the project root with node and python3 on
# PATH; logs and JSON lines go to ${OUT:-/tmp}. TEXT_DOCS (default 50000), TEXT_SECONDS (default 6).
out=${OUT:-/tmp}
docs=${TEXT_DOCS:-50000}
dir=${TEXT_DIR:-/tmp/stoker-text-$docs}
nproc; python3 -c "import torch, transformers, tokenizers, pyarrow; print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__, 'pyarrow', pyarrow.__version__)"
( time python3 bench/text_data.py "$dir" --docs "$docs" ) 2>&1 | tee "$out/text-data.log"
timeout 120 node --import tsx --test test/formats/parquet-pyarrow.test.ts test/formats/jsonl.test.ts >"$out/text-test.log" 2>&1
echo "test rc=$?"; grep -E '^# (tests|pass|fail|skipped)|^not ok|^ *not ok' "$out/text-test.log" | head -20
timeout 420 node --import tsx bench/run.ts text --dir "$dir" --docs "$docs" --seconds "${TEXT_SECONDS:-6}" --workers 2,4,8,16 2>&1 | tee "$out/text-bench.log"
