"""How often EfficientRAG's judged Accuracy agrees with exact match, answer by answer.

    .venv/bin/python benchmarks/tables/judge_agreement.py --questions wikipedia-hotpotqa \\
        --judge-lm local:qwen2.5-1.5b \\
        --ids benchmarks/results/qwen2.5-1.5b-tables-tuned/hotpotqa/metrics.json FILE.jsonl ...

The judge is asked as `mhindex score --judge-lm` asks it (`mhindex.eval.judge.verdict`, the released prompt), so
after `score` every verdict comes from the call cache. EM is against any gold answer; the judge sees the first, as
the release gives it one. `--ids` keeps the questions an evaluation reported (its metrics.json), since a file of a
tuned variant also holds the tuning questions. Prints the counts, then each answer where the two part.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import orjson

from mhindex.eval.judge import verdict
from mhindex.eval.metrics import best, exact_match
from mhindex.eval.run import read_questions_file
from mhindex.home import open_corpus
from mhindex.lm import load_lm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="prediction files (ask --json records)")
    parser.add_argument("--questions", required=True, help="a corpus name (its questions.jsonl)")
    parser.add_argument("--judge-lm", required=True)
    parser.add_argument("--ids", type=Path, help="an evaluation's metrics.json: only its reported questions")
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("MHINDEX_HOME", ".mhindex-eval")))
    args = parser.parse_args()

    gold = {q["id"]: q for q in read_questions_file(open_corpus(args.home, args.questions).questions)}
    kept = set(orjson.loads(args.ids.read_bytes())["question_ids"]) if args.ids else None
    judge = load_lm(args.judge_lm, home=args.home, threads=1, cache=True)
    counts = {"both": 0, "judge only": 0, "EM only": 0, "neither": 0}
    parted = []
    try:
        for path in args.files:
            for line in path.read_bytes().splitlines():
                if not line.strip():
                    continue
                prediction = orjson.loads(line)
                if (kept is not None and prediction["id"] not in kept) or "error" in prediction:
                    continue
                if prediction["id"] not in gold:
                    raise SystemExit(f"{path}: question {prediction['id']!r} is not in {args.questions}'s questions")
                question, answer = gold[prediction["id"]], prediction.get("answer") or ""
                if not question.get("answers"):  # no gold answer: neither EM nor the judge can score it
                    continue
                em = best(exact_match, answer, question["answers"]) == 1
                yes = verdict(judge, question["question"], answer, question["answers"][0])
                counts["both" if em and yes else "judge only" if yes else "EM only" if em else "neither"] += 1
                if em != yes:
                    parted.append(f"{'EM' if em else 'judge'} only  {path.stem}: {question['question']!r}: "
                                  f"{answer!r} (gold {question['answers'][0]!r})")  # fmt: skip
    finally:
        judge.close()
    total = sum(counts.values())
    if not total:
        raise SystemExit("no answers to judge (none of the files' questions were reported, or all failed)")
    agree = counts["both"] + counts["neither"]
    print(f"{args.questions}: {total} answers; the judge and EM agree on {agree} ({100 * agree / total:.1f}%): "
          + ", ".join(f"{name} {count}" for name, count in counts.items()))  # fmt: skip
    print("\n".join(parted))


if __name__ == "__main__":
    main()
