#!/usr/bin/env bash
# EfficientRAG's table (#19): train the Labeler & Tagger and Filter on every MuSiQue question
# available here that the evaluation does not ask, then evaluate efficientrag next to oner and
# ircot on questions the models never saw.
#   benchmarks/tables/efficientrag_table.sh [MUSIQUE_JSONL] [LM] [LIMIT]
# MUSIQUE_JSONL: official musique_ans_*.jsonl records to train on (default: the 180-question dev
# sample under ../shared/data, of which the bundled sample is the first 100); the questions that
# the 50-question evaluation asks (benchmarks/results/qwen2.5-0.5b/musique) are left out of it.
# The oner and ircot rows are that run's predictions (copied once, same settings); only
# efficientrag runs here. EVAL_ARGS adds options to the eval.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
source=${1:-../shared/data/musique/musique_ans_v1.0_dev.sample.jsonl}
lm=${2:-local:qwen2.5-0.5b}
limit=${3:-20}
export MHINDEX_HOME=${MHINDEX_HOME:-$PWD/.mhindex-eval}
name=${lm#*:}; name=${name##*/}
earlier=benchmarks/results/$name/musique
out=benchmarks/results/$name-efficientrag
mkdir -p "$out/musique" "$MHINDEX_HOME"
[ -f "$MHINDEX_HOME/musique/manifest.json" ] || mhindex --quiet build musique
python - "$source" "$earlier/oner.jsonl" "$MHINDEX_HOME/musique-train.input.jsonl" <<'PY'
import json, sys
asked = {json.loads(line)["id"] for line in open(sys.argv[2])}
kept = [line for line in open(sys.argv[1]) if line.strip() and json.loads(line)["id"] not in asked]
open(sys.argv[3], "w").writelines(kept)
print(f"training on {len(kept)} MuSiQue questions ({len(asked)} left out for evaluation)", file=sys.stderr)
PY
mhindex --quiet corpus musique --input "$MHINDEX_HOME/musique-train.input.jsonl" --name musique-train
mhindex --quiet index musique-train
mhindex --quiet train efficientrag --from musique-train --json > "$out/trained.json"
for method in oner ircot; do
    [ -f "$out/musique/$method.jsonl" ] || cp "$earlier/$method.jsonl" "$out/musique/"
done
mhindex eval musique --method oner,ircot,efficientrag --limit "$limit" --lm "$lm" --out "$out/musique" ${EVAL_ARGS:-} \
    | tee "$out-musique.table.txt"
