"""IRCoT with and without early-stopped steps, side by side in one run, on the same questions.

    .venv/bin/python scripts/bench_ircot_early_stop.py [--corpus 2wikimultihopqa] [--limit 10] [--lm local:qwen2.5-0.5b]

Each question is answered twice in a row, whole lines first, then early-stopped steps (the
demonstrations are in llama.cpp's prompt cache for both), with the call cache off. Prints seconds,
generated tokens and LM calls per question for each, and whether every answer, step and paragraph
is the same. Needs the corpus and its Lucene index under --home (scripts/paper_table.sh builds them).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from mhindex.eval.run import sample_questions
from mhindex.home import open_corpus
from mhindex.lm import ModelOptions
from mhindex.methods import Query
from mhindex.methods.ircot import IRCoTSettings
from mhindex.methods.session import Session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="2wikimultihopqa")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--lm", default="local:qwen2.5-0.5b")
    parser.add_argument("--home", type=Path, default=Path(".mhindex-eval"))
    args = parser.parse_args()
    corpus = open_corpus(args.home, args.corpus)
    questions = sample_questions(corpus, args.limit, 13370)
    with Session(corpus, methods=["ircot"], model=ModelOptions(lm=args.lm, cache=False), home=args.home) as session:
        methods = {early: session.method("ircot", IRCoTSettings(early_stop=early)) for early in (False, True)}
        totals = {early: {"seconds": 0.0, "tokens": 0, "calls": 0} for early in methods}
        same = 0
        for record in questions:
            query = Query.from_record(record, record["id"])
            answers = {}
            for early, method in methods.items():
                started = time.perf_counter()
                answers[early] = method.answer(query)
                totals[early]["seconds"] += time.perf_counter() - started
                totals[early]["tokens"] += answers[early].completion_tokens
                totals[early]["calls"] += answers[early].lm_calls
            keep = ("answer", "steps", "retrieved", "reasoning")
            same += all(answers[True].record()[k] == answers[False].record()[k] for k in keep)
    n = len(questions)
    print(f"IRCoT on {n} {args.corpus} questions, {args.lm}, call cache off")
    print(f"{'steps':<14} {'s/question':>10} {'generated tokens/q':>19} {'LM calls/q':>11}")
    for early, label in ((False, "whole line"), (True, "early stop")):
        t = totals[early]
        print(f"{label:<14} {t['seconds'] / n:>10.1f} {t['tokens'] / n:>19.1f} {t['calls'] / n:>11.1f}")
    saved = (totals[False]["seconds"] - totals[True]["seconds"]) / n
    print(f"saved: {saved:.1f} s a question ({saved / (totals[False]['seconds'] / n):.0%}); identical answers, steps and paragraphs: {same}/{n}")


if __name__ == "__main__":
    main()
