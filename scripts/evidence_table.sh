#!/usr/bin/env bash
# The papers' evidence on the harder corpus (issue: the papers' own evidence from `mhindex eval`): OneR and
# IRCoT on one Wikipedia corpus of every sample's paragraphs (3,483), with each dataset's questions, K tuned
# on TUNE questions and reported on LIMIT others (disjoint by id), then the recall-budget curve and the
# paired differences. Resumable: predictions accumulate in benchmarks/results/<model>-wikipedia/<dataset>/,
# so an interrupted run (or a later session) goes on where it stopped.
#   scripts/evidence_table.sh [LM] [TUNE] [LIMIT]      e.g. scripts/evidence_table.sh local:qwen2.5-1.5b 10 30
# EVAL_ARGS adds options to every eval, e.g. EVAL_ARGS="--lm-threads 1" for each of two runs side by side
# (DATASETS=musique in one, DATASETS=hotpotqa in the other): a model's default threads are the cores free
# when it loads.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
lm=${1:-local:qwen2.5-1.5b}
tune=${2:-10}
limit=${3:-30}
export MHINDEX_HOME=${MHINDEX_HOME:-$PWD/.mhindex-eval}
name=${lm#*:}; name=${name##*/}
datasets=${DATASETS:-musique hotpotqa 2wikimultihopqa}
for dataset in $datasets; do
    others=$(for other in musique hotpotqa 2wikimultihopqa; do [ "$other" = "$dataset" ] || echo "--add $other"; done)
    # shellcheck disable=SC2086  # the --add options are words
    [ -f "$MHINDEX_HOME/wikipedia-$dataset/manifest.json" ] ||
        mhindex --quiet build "$dataset" $others --name "wikipedia-$dataset"
done
for dataset in $datasets; do
    out=benchmarks/results/$name-wikipedia/$dataset
    # Answers read as IRCoT's release reads them (the whole line, --no-short-answer), as this run began.
    # shellcheck disable=SC2086
    mhindex eval "wikipedia-$dataset" --method oner,ircot --sweep oner.k=5,10,15 --sweep ircot.k=2,4,6 \
        --tune-on "$tune" --limit "$limit" --lm "$lm" --out "$out" --no-short-answer ${EVAL_ARGS:-} \
        | tee "benchmarks/results/$name-wikipedia-$dataset.table.txt"
done
# The curve of every dataset answered so far (a run of DATASETS=musique draws the others' finished panels too).
drawn=()
for dataset in musique hotpotqa 2wikimultihopqa; do
    out=benchmarks/results/$name-wikipedia/$dataset
    if [ -f "$out/metrics.json" ]; then drawn+=("$out"); fi
done
mhindex curve "${drawn[@]}" -o "benchmarks/results/$name-wikipedia-curve.png" \
    | tee "benchmarks/results/$name-wikipedia-curve.txt"
