#!/usr/bin/env bash
# The closing table of the eval issue: nor, oner and ircot on a sample of HotpotQA, 2WikiMultihopQA
# and MuSiQue, grown in rounds (20, 30, ... questions) so that an interrupted run still leaves a
# complete table for the largest finished round. Predictions resume from benchmarks/results/.
#   benchmarks/tables/paper_table.sh [LM] [ROUNDS...]     e.g. benchmarks/tables/paper_table.sh local:qwen2.5-0.5b 20 50
# EVAL_ARGS adds options to every eval, e.g. EVAL_ARGS="--lm-threads 2" on an otherwise idle machine.
# METHODS picks the methods (default nor,oner,ircot) and SUFFIX names their results folder, e.g.
#   METHODS=oner,ircot,searchain SUFFIX=-searchain benchmarks/tables/paper_table.sh local:qwen2.5-0.5b 20
# DATASETS picks the datasets (default musique hotpotqa 2wikimultihopqa), e.g. KD-CoT's table:
#   DATASETS="webqsp cwq" METHODS=nor,oner,kdcot SUFFIX=-kdcot benchmarks/tables/paper_table.sh local:qwen2.5-0.5b 20
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"  # the mhindex that scripts/setup.sh installed
lm=${1:-local:qwen2.5-0.5b}; shift || true
rounds=${*:-20 30 40 50}
export MHINDEX_HOME=${MHINDEX_HOME:-$PWD/.mhindex-eval}
name=${lm#*:}; name=${name##*/}
datasets=${DATASETS:-musique hotpotqa 2wikimultihopqa}
for dataset in $datasets; do
    [ -f "$MHINDEX_HOME/$dataset/manifest.json" ] || mhindex --quiet build "$dataset"
done
for limit in $rounds; do
    for dataset in $datasets; do
        out=benchmarks/results/$name${SUFFIX:-}/$dataset
        mhindex eval "$dataset" --method "${METHODS:-nor,oner,ircot}" --limit "$limit" --lm "$lm" --out "$out" ${EVAL_ARGS:-} \
            | tee "benchmarks/results/$name${SUFFIX:-}-$dataset.table.txt"
    done
done
