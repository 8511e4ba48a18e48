#!/usr/bin/env bash
# The tables that the faithful-methods changes move, re-run on eval's nested 20-question sample
# (seed 13370) of each bundled sample, Qwen2.5-0.5B, Lucene, one thread each:
#   - OneR and IRCoT with IRCoT's query cleaning (the default now): results/<model>-clean-queries/
#   - SearChain with Tracing and unsolved queries always completed: results/<model>-searchain-tracing/
#   - EfficientRAG answering with its released QA prompt, on MuSiQue: results/<model>-efficientrag-prompt/
#     (its models trained as benchmarks/tables/efficientrag_table.sh trains them, on MuSiQue questions eval does not ask)
# Every run resumes from the predictions already there. LIMIT and LM override the defaults.
#   benchmarks/tables/faithful_tables.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
lm=${LM:-local:qwen2.5-0.5b}
limit=${LIMIT:-20}
export MHINDEX_HOME=${MHINDEX_HOME:-$PWD/.mhindex-eval}
name=${lm#*:}; name=${name##*/}
EVAL_ARGS="--lm-threads 1 --json" METHODS=oner,ircot SUFFIX=-clean-queries benchmarks/tables/paper_table.sh "$lm" "$limit" > /dev/null
EVAL_ARGS="--lm-threads 1 --json" METHODS=searchain SUFFIX=-searchain-tracing benchmarks/tables/paper_table.sh "$lm" "$limit" > /dev/null
if [ ! -f "$MHINDEX_HOME/models/efficientrag/musique-train/trained.json" ]; then
    python - ../shared/data/musique/musique_ans_v1.0_dev.sample.jsonl "$MHINDEX_HOME" "$limit" <<'PY'
import json, sys
from pathlib import Path
from mhindex.eval.run import sample_questions
from mhindex.home import corpus_dir
asked = {q["id"] for q in sample_questions(corpus_dir(Path(sys.argv[2]), "musique"), 50, 13370)}
kept = [line for line in open(sys.argv[1]) if line.strip() and json.loads(line)["id"] not in asked]
Path(sys.argv[2], "musique-train.input.jsonl").write_text("".join(kept))
print(f"training on {len(kept)} MuSiQue questions ({len(asked)} left out for evaluation)", file=sys.stderr)
PY
    mhindex --quiet corpus musique --input "$MHINDEX_HOME/musique-train.input.jsonl" --name musique-train
    mhindex --quiet index musique-train
    mhindex --quiet train efficientrag --from musique-train --threads 1 --json > /dev/null
fi
mhindex --quiet eval musique --method efficientrag --limit "$limit" --lm "$lm" --lm-threads 1 \
    --out "benchmarks/results/$name-efficientrag-prompt/musique" --json > /dev/null
echo "done: benchmarks/results/$name-clean-queries, $name-searchain-tracing, $name-efficientrag-prompt"
