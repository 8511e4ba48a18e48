"""IRCoT with and without early-stopped steps, side by side in one run, on the same questions.

    .venv/bin/python benchmarks/speed/bench_ircot_early_stop.py [--corpus 2wikimultihopqa] [--limit 10] \
        [--lm local:qwen2.5-0.5b]

Each way runs in its own process over the same questions, with the call cache off, so that
neither finds the other's prompts in llama.cpp's prompt cache (answering each question twice in
one process made the second run look four times faster). In each, the first question's time
includes reading the demonstrations into the prompt cache, the same for both. Prints seconds, generated
tokens and LM calls per question for each,
and how many answers, steps and paragraphs are the same. Needs the corpus and its Lucene index
under --home (benchmarks/tables/paper_table.sh builds them).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import orjson

from mhindex.eval.run import sample_questions
from mhindex.home import open_corpus
from mhindex.lm import ModelOptions
from mhindex.methods import Query
from mhindex.methods.ircot import IRCoTSettings
from mhindex.methods.session import Session


def run_arm(args, early: bool) -> None:
    """One way, in this process: one JSON line per question on stdout."""
    corpus = open_corpus(args.home, args.corpus)
    questions = sample_questions(corpus, args.limit, 13370)
    with Session(corpus, methods=["ircot"], model=ModelOptions(lm=args.lm, cache=False), home=args.home) as session:
        method = session.method("ircot", IRCoTSettings(early_stop=early))
        session.lm.count_tokens("the tokenizer is loaded")  # before the first clock starts
        for record in questions:
            started = time.perf_counter()
            answer = method.answer(Query.from_record(record, record["id"]))
            print(orjson.dumps({**answer.record(), "wall": time.perf_counter() - started}).decode(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="2wikimultihopqa")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--lm", default="local:qwen2.5-0.5b")
    parser.add_argument("--home", type=Path, default=Path(".mhindex-eval"))
    parser.add_argument("--arm", choices=("whole", "early"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        return run_arm(args, args.arm == "early")
    runs = {}
    for arm in ("whole", "early"):
        command = [
            sys.executable,
            __file__,
            "--arm",
            arm,
            "--corpus",
            args.corpus,
            "--limit",
            str(args.limit),
            "--lm",
            args.lm,
            "--home",
            str(args.home),
        ]
        output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        runs[arm] = [orjson.loads(line) for line in output.splitlines() if line.startswith("{")]
    n = len(runs["whole"])
    print(f"IRCoT on {n} {args.corpus} questions, {args.lm}, call cache off, one process each way")
    print(f"{'steps':<12} {'s/question':>10} {'generated tokens/q':>19} {'LM calls/q':>11}")
    for arm, label in (("whole", "whole line"), ("early", "early stop")):
        rows = runs[arm]
        print(
            f"{label:<12} {sum(r['wall'] for r in rows) / n:>10.1f} "
            f"{sum(r['completion_tokens'] for r in rows) / n:>19.1f} {sum(r['lm_calls'] for r in rows) / n:>11.1f}"
        )
    keep = ("answer", "steps", "retrieved", "reasoning")
    same = sum(all(a[k] == b[k] for k in keep) for a, b in zip(runs["whole"], runs["early"]))
    saved = (sum(r["wall"] for r in runs["whole"]) - sum(r["wall"] for r in runs["early"])) / n
    print(f"saved: {saved:.1f} s a question; identical answers, steps and paragraphs: {same}/{n}")


if __name__ == "__main__":
    main()
