#!/usr/bin/env bash
# The papers' evidence on the harder corpus (issue: the papers' own evidence from `mhindex eval`): OneR and
# IRCoT on one Wikipedia corpus of every sample's paragraphs (3,483), with each dataset's questions, K tuned
# on TUNE questions and reported on LIMIT others (disjoint by id), then the recall-budget curve and the
# paired differences. Resumable: predictions accumulate in benchmarks/results/<model>-wikipedia/<dataset>/,
# so an interrupted run (or a later session) goes on where it stopped.
#   benchmarks/tables/evidence_table.sh [LM] [TUNE] [LIMIT]      e.g. benchmarks/tables/evidence_table.sh local:qwen2.5-1.5b 10 30
# EVAL_ARGS adds options to every eval, e.g. EVAL_ARGS="--lm-threads 1" for each of two runs side by side
# (DATASETS=musique in one, DATASETS=hotpotqa in the other): a model's default threads are the cores free
# when it loads.
# BESIDE adds methods with their defaults, reported on the same questions (nothing to tune, so they skip the
# tuning ones), e.g. BESIDE=searchain,efficientrag. EfficientRAG's models are trained first, once, on the
# MuSiQue questions of TRAIN_FROM (default: the 180-question dev sample under ../shared/data) that this
# evaluation does not ask (TRAIN_ARGS adds options to the training); they transfer to HotpotQA and 2WikiMQA.
set -euo pipefail
cd "$(dirname "$0")/../.."
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
beside=${BESIDE:-}
models=()
if [[ ",$beside," == *,efficientrag,* ]]; then
    trained=$MHINDEX_HOME/models/efficientrag/musique-evidence-train
    if [ ! -f "$trained/trained.json" ]; then
        [ -f "$MHINDEX_HOME/wikipedia-musique/manifest.json" ] ||
            mhindex --quiet build musique --add hotpotqa --add 2wikimultihopqa --name wikipedia-musique
        # Every question the MuSiQue evaluation asks (its tuning and reported samples) is left out.
        python - "${TRAIN_FROM:-../shared/data/musique/musique_ans_v1.0_dev.sample.jsonl}" \
            "$MHINDEX_HOME/musique-evidence-train.input.jsonl" "$((tune + limit))" <<'PY'
import os, sys
from pathlib import Path
import orjson
from mhindex.eval.run import sample_of_split
from mhindex.home import open_corpus
corpus = open_corpus(Path(os.environ["MHINDEX_HOME"]), "wikipedia-musique")
asked = {q["id"] for q in sample_of_split(corpus, int(sys.argv[3]), 13370, "auto")[0]}
lines = [line for line in open(sys.argv[1], "rb") if line.strip() and orjson.loads(line)["id"] not in asked]
open(sys.argv[2], "wb").writelines(lines)
print(f"training EfficientRAG on {len(lines)} MuSiQue questions ({len(asked)} asked by the evaluation)", file=sys.stderr)
PY
        mhindex --quiet build musique --input "$MHINDEX_HOME/musique-evidence-train.input.jsonl" \
            --name musique-evidence-train
        # shellcheck disable=SC2086  # TRAIN_ARGS adds options, e.g. TRAIN_ARGS="--threads 1"
        mhindex --quiet train efficientrag --from musique-evidence-train --split all --json ${TRAIN_ARGS:-} \
            > "benchmarks/results/$name-wikipedia-efficientrag-trained.json"
    fi
    models=(--labeler "$trained/labeler" --filter "$trained/filter")
fi
for dataset in $datasets; do
    out=benchmarks/results/$name-wikipedia/$dataset
    # Answers read as IRCoT's release reads them (the whole line, --no-short-answer), as this run began.
    # shellcheck disable=SC2086
    mhindex eval "wikipedia-$dataset" --method "oner,ircot${beside:+,$beside}" --sweep oner.k=5,10,15 \
        --sweep ircot.k=2,4,6 --tune-on "$tune" --limit "$limit" --lm "$lm" --out "$out" --no-short-answer \
        "${models[@]}" ${EVAL_ARGS:-} | tee "benchmarks/results/$name-wikipedia-$dataset.table.txt"
done
# The curve of every dataset answered so far (a run of DATASETS=musique draws the others' finished panels too).
drawn=()
for dataset in musique hotpotqa 2wikimultihopqa; do
    out=benchmarks/results/$name-wikipedia/$dataset
    if [ -f "$out/metrics.json" ]; then drawn+=("$out"); fi
done
mhindex curve "${drawn[@]}" -o "benchmarks/results/$name-wikipedia-curve.png" \
    | tee "benchmarks/results/$name-wikipedia-curve.txt"
