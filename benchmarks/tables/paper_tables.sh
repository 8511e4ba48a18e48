#!/usr/bin/env bash
# The papers' tables, row for row (eval --table): EfficientRAG's, SearChain's and FlashRAG's on the evidence corpus (one
# Wikipedia corpus of the three samples' paragraphs), each dataset's 30 reported questions of the first tables'
# run (benchmarks/results/<model>-tables/<dataset>, --questions-of), the same LM for every row.
#   benchmarks/tables/paper_tables.sh [LM]      e.g. benchmarks/tables/paper_tables.sh local:qwen2.5-1.5b
# Resumable: predictions accumulate in benchmarks/results/<model>-paper-tables/<table>/<dataset>/, so an
# interrupted run (or a later session) goes on where it stopped. Rows whose method and settings did not change
# are not asked again: EfficientRAG's CoT and Iter-RetGen come from the first tables' run, its EfficientRAG row
# from the evidence run (its trained models are that run's). SearChain's own row is asked again: its chains are
# now read as the release's server reads them (methods/searchain.py, `Chain.parse`).
# DATASETS picks the datasets, TABLES the tables (efficientrag searchain flashrag; searchain-press: SearChain's
# Self-Ask row alone, read as Press et al.'s loop reads it; searchain-seeds: React->CoT-SC at 21 chains on three
# seeds, its spread beside the paired intervals); EVAL_ARGS adds options to every eval
# (e.g. "--lm-threads 1" for two runs side by side); SC_SAMPLES the chains React->CoT-SC samples (the paper's 21;
# the committed run took 5, for time: benchmarks/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
lm=${1:-local:qwen2.5-1.5b}
export MHINDEX_HOME=${MHINDEX_HOME:-$PWD/.mhindex-eval}
name=${lm#*:}; name=${name##*/}
first=benchmarks/results/$name-tables
evidence=benchmarks/results/$name-wikipedia
out=benchmarks/results/$name-paper-tables
# Answers made before with the same settings, copied in with what made them (their run.json entries).
reuse() {  # reuse FROM_FOLDER TO_FOLDER ROW...
    local from=$1 to=$2; shift 2
    mkdir -p "$to"
    python - "$from" "$to" "$@" <<'PY'
import shutil, sys
from pathlib import Path
import orjson
source, target, rows = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
ran = orjson.loads((source / "run.json").read_bytes())
path = target / "run.json"
now = orjson.loads(path.read_bytes()) if path.exists() else {**ran, "settings": {}}
for row in rows:
    if not (target / f"{row}.jsonl").exists():
        shutil.copyfile(source / f"{row}.jsonl", target / f"{row}.jsonl")
    now["settings"].setdefault(row, ran["settings"][row])
path.write_bytes(orjson.dumps(now, option=orjson.OPT_INDENT_2) + b"\n")
PY
}
for dataset in ${DATASETS:-hotpotqa 2wikimultihopqa musique}; do
    others=$(for other in musique hotpotqa 2wikimultihopqa; do [ "$other" = "$dataset" ] || echo "--add $other"; done)
    # shellcheck disable=SC2086  # the --add options are words
    [ -f "$MHINDEX_HOME/wikipedia-$dataset/manifest.json" ] ||
        mhindex --quiet build "$dataset" $others --name "wikipedia-$dataset"
    asked=(--questions-of "$first/$dataset" --lm "$lm")
    if [[ " ${TABLES:-efficientrag searchain flashrag} " == *" efficientrag "* ]]; then
        # EfficientRAG's rows but its own (whose trained models are the evidence run's): eval, then its table by
        # `score --table`, the EfficientRAG row the evidence run's answers, with the paper's judged Accuracy.
        folder=$out/efficientrag/$dataset
        reuse "$first/$dataset" "$folder" cot iterretgen
        # shellcheck disable=SC2086
        mhindex eval "wikipedia-$dataset" --method direct,cot,decompose,direct-r,iterretgen,selfask "${asked[@]}" \
            --out "$folder" ${EVAL_ARGS:-} > "$folder.eval.txt"
        rows=(); for row in direct cot decompose direct-r iterretgen selfask; do rows+=("$folder/$row.jsonl"); done
        mhindex score "${rows[@]}" "$evidence/$dataset/efficientrag.jsonl" --questions "wikipedia-$dataset" \
            --table EfficientRAG --judge-lm "$lm" | tee "$out/efficientrag-$dataset.txt"
    fi
    if [[ " ${TABLES:-efficientrag searchain flashrag} " == *" searchain "* ]]; then
        folder=$out/searchain/$dataset
        mkdir -p "$folder"
        # shellcheck disable=SC2086
        mhindex eval "wikipedia-$dataset" --table SearChain "${asked[@]}" --sc-samples "${SC_SAMPLES:-21}" \
            --out "$folder" ${EVAL_ARGS:-} | tee "$out/searchain-$dataset.txt"
    fi
    if [[ " ${TABLES:-efficientrag searchain flashrag} " == *" searchain-press "* ]]; then
        # SearChain's Self-Ask row again, by Press et al.'s loop and reading (methods/selfask.py, `--demos press`):
        # the first run (searchain/) read its final answer by EfficientRAG's rule and fell back to the last
        # intermediate answer for 85 of 90 questions. benchmarks/tables/readme_tables.py takes the row from here.
        folder=$out/searchain-press/$dataset
        mkdir -p "$folder"
        # shellcheck disable=SC2086
        mhindex eval "wikipedia-$dataset" --method selfask --demos press --step-tokens 256 "${asked[@]}" \
            --out "$folder" ${EVAL_ARGS:-} | tee "$out/searchain-press-$dataset.txt"
        if [ -f "$folder/metrics.json" ]; then  # all 30 answered: SearChain's table with this row, every pair's interval
            rows=$(mktemp -d)
            cp "$folder/selfask.jsonl" "$rows/selfask@demos=press,step_tokens=256.jsonl"  # the row's name in the table
            first_rows=()
            for row in "$out/searchain/$dataset"/*.jsonl; do
                [[ $(basename "$row") == "selfask@demos=press.jsonl" ]] || first_rows+=("$row")
            done
            mhindex score "${first_rows[@]}" "$rows/selfask@demos=press,step_tokens=256.jsonl" \
                --questions "wikipedia-$dataset" --table SearChain > "$out/searchain-table-$dataset.txt"
            rm -r "$rows"
        fi
    fi
    if [[ " ${TABLES:-efficientrag searchain flashrag} " == *" searchain-seeds "* ]]; then
        # React->CoT-SC at the paper's 21 chains, on three seeds no two draws share (eval --seeds 3: sc_seed 0, 21,
        # 42), beside SearChain's one-call rows (Direct Prompting, CoT, Direct Retrieval with its settings: each
        # draw's paired difference with them and its interval, eval/spread.py). The other rows' costly loops (Self-Ask,
        # SearChain) are not asked again: the spread is React->CoT-SC's.
        folder=$out/searchain-seeds/$dataset
        mkdir -p "$folder"
        demos=$([ "$dataset" = hotpotqa ] && echo 6 || echo 4)  # its shots in SearChain's table (ReAct.tables)
        # shellcheck disable=SC2086
        mhindex eval "wikipedia-$dataset" --method direct,cot,direct-r,react --prompt zero-shot --style plain -k 5 \
            --sweep cot.max_demos=4 --sweep "react.max_demos=$demos" --fallback cot-sc --sc-samples 21 --seeds 3 \
            "${asked[@]}" --out "$folder" ${EVAL_ARGS:-} | tee "$out/searchain-seeds-$dataset.txt"
    fi
    if [[ " ${TABLES:-efficientrag searchain flashrag} " == *" flashrag "* ]]; then
        # FlashRAG's rows mhindex runs: Naive Generation, Standard RAG and FLARE as FlashRAG runs them; Search-R1
        # and R1-Searcher as their releases run them (FlashRAG's rows are their trained checkpoints).
        folder=$out/flashrag/$dataset
        mkdir -p "$folder"
        # shellcheck disable=SC2086
        mhindex eval "wikipedia-$dataset" --table FlashRAG "${asked[@]}" --out "$folder" ${EVAL_ARGS:-} \
            | tee "$out/flashrag-$dataset.txt"
    fi
done
