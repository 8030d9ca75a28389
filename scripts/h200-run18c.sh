#!/usr/bin/env bash
# Issue 17, run 18c (experiment): what keeps the decode children at ~0.85 busy with prefetch 8 —
# requests held per child (STOKER_EXP_PER_CHILD 2 or 3), the children's niceness (STOKER_EXP_NICE:
# the reader and main threads first), 14 children instead of 15. Stoker side only, rounds of 3 epochs.
# The two STOKER_EXP_* variables were read by a temporary patch of decode-pool.ts, never on main: the
# results (docs/results/run18c-*) moved by ±20 % between identical runs, so neither change was kept.
[ -f .gpu/env.sh ] && source .gpu/env.sh
S=${OUT:-/tmp}
I="node --import tsx bench/run.ts images --files 4000 --classes 100 --output bfloat16 --epochs 3 --rounds 2 --no-torch --prefetch 8"
run() { name=$1; shift; env "$@" timeout 100 $I ${ARGS:---cores 16 --shape default} > $S/run18c-$name.txt 2>&1; echo "== $name rc=$?"; grep -E '^stoker' $S/run18c-$name.txt | cut -c1-250; }
run base
run pc3 STOKER_EXP_PER_CHILD=3
run nice5 STOKER_EXP_NICE=5
run pc3-nice5 STOKER_EXP_PER_CHILD=3 STOKER_EXP_NICE=5
ARGS="--cores 14 --readers 1" run c14
run base-again
