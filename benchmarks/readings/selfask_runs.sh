#!/usr/bin/env bash
# The Self-Ask runs whose outputs tests/readings/selfask_loop.json and selfask_press.json replay through the releases'
# own loops (make_readings.py): the default 0.5B model on each sample, resumable (an interrupted run goes on).
#   whole/: EfficientRAG's row with $MHINDEX_WHOLE_COMPLETIONS=1, each completion as long as the release's call
#           would have it (no early stop of mhindex's), invalid final completions among them;
#   press/: SearChain's row (`--demos press`), Press et al.'s demonstrations, loop and reading.
#   benchmarks/readings/selfask_runs.sh            # about 40 minutes on two cores
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
export MHINDEX_HOME=${MHINDEX_HOME:-$PWD/.mhindex-eval}
out=benchmarks/results/qwen2.5-0.5b
for dataset in ${DATASETS:-hotpotqa 2wikimultihopqa musique}; do
    [ -f "$MHINDEX_HOME/$dataset/manifest.json" ] || mhindex --quiet build "$dataset"
    MHINDEX_WHOLE_COMPLETIONS=1 mhindex --quiet eval "$dataset" --method selfask --limit "${WHOLE:-10}" \
        --lm local:qwen2.5-0.5b --out "$out-readings-whole/$dataset" > /dev/null
    mhindex --quiet eval "$dataset" --method selfask --demos press --step-tokens 256 --limit "${PRESS:-20}" \
        --lm local:qwen2.5-0.5b --out "$out-readings/selfask-press-$dataset" > /dev/null
done
