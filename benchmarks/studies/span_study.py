"""Would a shorter answer score better? Every stored prediction, re-scored with its answer cut two ways.

    .venv/bin/python benchmarks/studies/span_study.py [--results benchmarks/results] [--home .mhindex-eval]

Small models answer with a sentence ("Picturegoer was founded first.") or a list that loops ("Austin, Austin,
Austin, ..."). For every predictions file under --results whose run.json names a corpus found in --home,
scores each answer as stored and cut: `first sentence` keeps its first sentence, `list` keeps a
comma-separated list up to its first repeated item, `both` does both (what the reader's --short-answer does,
methods/prompts.py). Prints, per method and overall: answers, how many each cut changes, EM and F1 as stored
and cut, and the paired difference of F1 with its 95% bootstrap interval (eval's own scorer and bootstrap).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import orjson

from mhindex.eval.metrics import best, exact_match, f1, paired_bootstrap
from mhindex.methods.prompts import first_sentence_answer, short_span, without_repeated_items

ROOT = Path(__file__).resolve().parents[2]
CUTS = {
    "first sentence": first_sentence_answer,
    "list": without_repeated_items,
    "both": short_span,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--home", type=Path, default=ROOT / ".mhindex-eval")
    args = parser.parse_args()
    questions: dict[str, dict[str, dict]] = {}
    rows: dict[str, list[tuple[str, list[str], str]]] = defaultdict(list)  # method -> (answer, gold, dataset)
    for run in sorted(args.results.rglob("run.json")):
        corpus = orjson.loads(run.read_bytes()).get("corpus")
        path = args.home / str(corpus) / "questions.jsonl"
        if not path.exists():
            continue
        if corpus not in questions:
            questions[corpus] = {q["id"]: q for q in map(orjson.loads, path.read_bytes().splitlines())}
        for predictions in sorted(run.parent.glob("*.jsonl")):
            method = predictions.stem.split("@")[0]
            for line in predictions.read_bytes().splitlines():
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # a torn last line of an interrupted run
                question = questions[corpus].get(record.get("id"))
                if question and isinstance(record.get("answer"), str):
                    rows[method].append((record["answer"], question["answers"], question["dataset"]))
    rows["all"] = [row for method in list(rows) for row in rows[method]]
    columns = f"{'n':>5} {'changed':>7} {'EM':>6} {'EM cut':>6} {'F1':>6} {'F1 cut':>6}"
    print(f"{'method':12} {'cut':15} {columns}  F1 cut - F1 [95% paired bootstrap]")
    for method, answers in rows.items():
        for name, cut in CUTS.items():
            stored_em = [best(exact_match, a, gold, d) for a, gold, d in answers]
            stored_f1 = [best(f1, a, gold, d) for a, gold, d in answers]
            cut_answers = [cut(a) for a, _, _ in answers]
            cut_em = [best(exact_match, c, gold, d) for c, (_, gold, d) in zip(cut_answers, answers)]
            cut_f1 = [best(f1, c, gold, d) for c, (_, gold, d) in zip(cut_answers, answers)]
            changed = sum(c != a for c, (a, _, _) in zip(cut_answers, answers))
            mean, (low, high) = paired_bootstrap([100 * (c - s) for c, s in zip(cut_f1, stored_f1)])
            n = len(answers)
            scores = [100 * sum(values) / n for values in (stored_em, cut_em, stored_f1, cut_f1)]
            print(
                f"{method:12} {name:15} {n:>5} {changed:>7} "
                + " ".join(f"{x:6.1f}" for x in scores)
                + f"  {mean:+.2f} [{low:+.2f}, {high:+.2f}]"
            )


if __name__ == "__main__":
    main()
