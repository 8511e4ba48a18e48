#!/usr/bin/env bash
# The papers' whole tables (issue: Self-Ask, Iter-RetGen, ReAct, CoT and Decompose as methods): EfficientRAG's
# rows (Direct = NoR, CoT, Decompose, Direct-R = OneR at K=10, Iter-RetGen, SelfAsk) and SearChain's rows that
# apply (Direct, CoT, Self-Ask, ReAct, IRCoT, SearChain), each dataset's questions on the evidence run's corpus
# (one Wikipedia corpus of the three samples' paragraphs), the same LM and the same reported questions: the
# evidence run's seed, its TUNE tuning questions and LIMIT reported ones.
#   benchmarks/tables/first_tables.sh [LM] [TUNE] [LIMIT]      e.g. benchmarks/tables/first_tables.sh local:qwen2.5-1.5b 10 30
# Resumable: predictions accumulate in benchmarks/results/<model>-tables/<dataset>/, so an interrupted run (or a
# later session) goes on where it stopped. What the evidence run (benchmarks/tables/evidence_table.sh) already answered
# with the same settings is reused, not asked again: IRCoT's tuning and reported answers (K tuned on the same
# questions) and SearChain's; EfficientRAG's row is the evidence run's (its trained models are that run's).
# Then the new rows' K is tuned as the evidence run tuned IRCoT's: Decompose's, Iter-RetGen's and Self-Ask's K in
# {10, 5} on the same 10 tuning questions, by recall, the release's 10 first so that it stands on a tie; the
# 30 reported answers at K = 10 are the first stage's (the same settings), so only another K's winning costs more.
# DATASETS picks the datasets (default 2wikimultihopqa hotpotqa musique); EVAL_ARGS adds options to every eval.
# Two datasets side by side on two cores, one thread each (as the session that began the tables ran them):
#   DATASETS=2wikimultihopqa EVAL_ARGS="--lm-threads 1" benchmarks/tables/first_tables.sh &
#   DATASETS=hotpotqa EVAL_ARGS="--lm-threads 1" benchmarks/tables/first_tables.sh &
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
lm=${1:-local:qwen2.5-1.5b}
tune=${2:-10}
limit=${3:-30}
export MHINDEX_HOME=${MHINDEX_HOME:-$PWD/.mhindex-eval}
name=${lm#*:}; name=${name##*/}
datasets=${DATASETS:-2wikimultihopqa hotpotqa musique}
# Cheapest first, so that an interrupted run has the most rows; ircot and searchain come from the evidence run.
methods=nor,cot,oner,decompose,iterretgen,selfask,react,ircot,searchain
for dataset in $datasets; do
    others=$(for other in musique hotpotqa 2wikimultihopqa; do [ "$other" = "$dataset" ] || echo "--add $other"; done)
    # shellcheck disable=SC2086  # the --add options are words
    [ -f "$MHINDEX_HOME/wikipedia-$dataset/manifest.json" ] ||
        mhindex --quiet build "$dataset" $others --name "wikipedia-$dataset"
    out=benchmarks/results/$name-tables/$dataset
    evidence=benchmarks/results/$name-wikipedia/$dataset
    if [ ! -f "$out/run.json" ] && [ -f "$evidence/run.json" ]; then
        # The evidence run's answers of the methods this table shares with it, and what made them.
        mkdir -p "$out"
        cp "$evidence"/ircot@k=*.jsonl "$evidence/searchain.jsonl" "$out/"
        python - "$evidence/run.json" "$out/run.json" <<'PY'
import sys
import orjson
run = orjson.loads(open(sys.argv[1], "rb").read())
run["settings"] = {name: s for name, s in run["settings"].items() if name.startswith(("ircot@", "searchain"))}
open(sys.argv[2], "wb").write(orjson.dumps(run, option=orjson.OPT_INDENT_2) + b"\n")
PY
    fi
    # Answers read as the evidence run read IRCoT's (the whole line, --no-short-answer); OneR at the K of
    # EfficientRAG's Direct-R; IRCoT's K tuned on the same questions as the evidence run tuned it.
    # shellcheck disable=SC2086
    mhindex eval "wikipedia-$dataset" --method "$methods" --sweep oner.k=10 --sweep ircot.k=2,4,6 \
        --tune-on "$tune" --limit "$limit" --lm "$lm" --out "$out" --no-short-answer ${EVAL_ARGS:-} \
        | tee "benchmarks/results/$name-tables-$dataset.table.txt"
    # The new rows' K, tuned, in a folder of its own (its table, metrics.json and report beside the first stage's):
    # each method's reported answers at K = 10 are the first stage's, under the name its sweep gives them.
    tuned=(decompose iterretgen selfask)
    tuned_out=benchmarks/results/$name-tables-tuned/$dataset
    mkdir -p "$tuned_out"
    sweeps=()
    for method in "${tuned[@]}"; do
        [ -f "$tuned_out/$method@k=10.jsonl" ] || cp "$out/$method.jsonl" "$tuned_out/$method@k=10.jsonl"
        sweeps+=(--sweep "$method.k=10,5")
    done
    # (Their answers are a JSON reply's "answer", with no reader line to shorten: no --no-short-answer.)
    # shellcheck disable=SC2086
    mhindex eval "wikipedia-$dataset" --method "$(IFS=,; echo "${tuned[*]}")" "${sweeps[@]}" \
        --tune-on "$tune" --limit "$limit" --lm "$lm" --out "$tuned_out" ${EVAL_ARGS:-} \
        | tee "benchmarks/results/$name-tables-tuned-$dataset.table.txt"
    # The chosen variants' reported answers alone (their files hold the tuning questions' too), for `score`.
    reported=$(mktemp -d)
    trap 'rm -rf "$reported"' EXIT
    python - "$tuned_out/metrics.json" "$tuned_out" "$reported" <<'PY'
import sys
from pathlib import Path
import orjson
metrics, out, reported = orjson.loads(open(sys.argv[1], "rb").read()), Path(sys.argv[2]), Path(sys.argv[3])
ids = set(metrics["question_ids"])
for tuned in metrics["tuned"].values():
    lines = (out / f"{tuned['chosen']}.jsonl").read_bytes().splitlines()
    kept = [line for line in lines if line.strip() and orjson.loads(line)["id"] in ids]
    (reported / f"{tuned['chosen']}.jsonl").write_bytes(b"".join(line + b"\n" for line in kept))
PY
    # EfficientRAG's table by itself, its EfficientRAG row the evidence run's answers to the same questions; `score`
    # pairs them all, since each of these files holds exactly the reported questions. Its Accuracy is the paper's:
    # the LM judges each answer with the released prompt (here the same LM that answered).
    rows=()
    for row in nor cot oner@k=10; do rows+=("$out/$row.jsonl"); done
    rows+=("$reported"/*.jsonl)
    mhindex score "${rows[@]}" "$evidence/efficientrag.jsonl" --questions "wikipedia-$dataset" --judge-lm "$lm" \
        | tee "benchmarks/results/$name-tables-$dataset.efficientrag.txt"
    # How far that judge agrees with EM, answer by answer (its verdicts now in the call cache).
    python benchmarks/tables/judge_agreement.py "${rows[@]}" "$evidence/efficientrag.jsonl" --questions "wikipedia-$dataset" \
        --judge-lm "$lm" --ids "$tuned_out/metrics.json" \
        > "benchmarks/results/$name-tables-$dataset.judge-agreement.txt"
    rm -r "$reported"
done
