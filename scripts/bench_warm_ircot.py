"""Warm IRCoT questions, side by side in one run: mhindex before and after a change, and other models.

    .venv/bin/python scripts/bench_warm_ircot.py [--arms before@local:qwen2.5-0.5b,now@local:qwen2.5-0.5b]
        [--before 4613227] [--corpus 2wikimultihopqa] [--limit 10] [--home .mhindex-eval]

An arm is CODE@LM: `now` is this working tree, `before` the commit --before names (checked out in a
temporary git worktree, run with its own src/ first on the path). Each arm runs in its own process
over the same questions as scripts/bench_ircot_early_stop.py (eval's sample, seed 13370), IRCoT
with its defaults, the call cache off; the first question's time includes reading the
demonstrations, the same for every arm. Prints per arm: seconds a question (all, and without the
first), where the LM's time went (prompt evaluation, generation), prompt tokens evaluated and
generated a question, F1 against the gold answers, and how many answers equal the first arm's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent


def run_arm(args) -> None:
    """One arm, in this process (whichever mhindex is first on the path): one JSON line a question."""
    from mhindex.eval.run import sample_questions
    from mhindex.home import open_corpus
    from mhindex.lm import ModelOptions
    from mhindex.lm.llamacpp import LlamaCppModel
    from mhindex.methods import Query
    from mhindex.methods.ircot import IRCoTSettings
    from mhindex.methods.session import Session

    spent = {"prompt_s": 0.0, "lm_s": 0.0, "evaluated": 0}
    completion = LlamaCppModel._completion

    def measured(self, *call, **options):
        result = completion(self, *call, **options)
        spent["lm_s"] += result.seconds
        spent["prompt_s"] += result.prompt_seconds or 0.0
        spent["evaluated"] += result.prompt_tokens_evaluated or 0
        return result

    LlamaCppModel._completion = measured  # type: ignore[method-assign]
    corpus = open_corpus(args.home, args.corpus)
    questions = sample_questions(corpus, args.limit, 13370)
    with Session(corpus, methods=["ircot"], model=ModelOptions(lm=args.lm, cache=False), home=args.home) as session:
        method = session.method("ircot", IRCoTSettings())
        session.lm.count_tokens("the tokenizer is loaded")  # before the first clock starts
        for record in questions:
            before = dict(spent)
            started = time.perf_counter()
            answer = method.answer(Query.from_record(record, record["id"]))
            used = {key: spent[key] - before[key] for key in spent}
            line = {**answer.record(), "wall": time.perf_counter() - started, **used, "gold": record["answers"]}
            print(orjson.dumps(line).decode(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", default="before@local:qwen2.5-0.5b,now@local:qwen2.5-0.5b")
    parser.add_argument("--before", default="4613227", help="the commit the `before` arms run")
    parser.add_argument("--corpus", default="2wikimultihopqa")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--home", type=Path, default=ROOT / ".mhindex-eval")
    parser.add_argument("--lm", help=argparse.SUPPRESS)
    parser.add_argument("--arm", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        return run_arm(args)
    from mhindex.eval.metrics import best, f1

    load = os.getloadavg()
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-warm-") as folder:
        worktree = Path(folder) / "before"
        if any(arm.startswith("before@") for arm in args.arms.split(",")):
            subprocess.run(["git", "worktree", "add", "--detach", str(worktree), args.before], cwd=ROOT, check=True)
        try:
            for arm in args.arms.split(","):
                code, lm = arm.split("@", 1)
                source = worktree / "src" if code == "before" else ROOT / "src"
                command = [sys.executable, __file__, "--arm", "--lm", lm, "--corpus", args.corpus]
                command += ["--limit", str(args.limit), "--home", str(args.home)]
                env = {**os.environ, "PYTHONPATH": str(source)}
                output = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
                runs[arm] = [orjson.loads(line) for line in output.splitlines() if line.startswith("{")]
        finally:
            if worktree.exists():
                subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=True)
    first = next(iter(runs.values()))
    n = len(first)
    print(
        f"IRCoT on {n} {args.corpus} questions, call cache off, one process an arm; `before` is {args.before}; "
        f"load average before: {', '.join(f'{x:.2f}' for x in load)}"
    )
    header = ("arm", "s/q", "s/q after 1st", "LM prompt s/q", "LM other s/q", "evaluated tok/q", "generated tok/q")
    print(f"{header[0]:34} " + " ".join(f"{h:>15}" for h in header[1:]) + f" {'F1':>6} {'same answer':>12}")
    for arm, rows in runs.items():
        wall = sum(r["wall"] for r in rows)
        figures = (
            wall / n,
            (wall - rows[0]["wall"]) / max(1, n - 1),
            sum(r["prompt_s"] for r in rows) / n,
            sum(r["lm_s"] - r["prompt_s"] for r in rows) / n,
            sum(r["evaluated"] for r in rows) / n,
            sum(r["completion_tokens"] for r in rows) / n,
        )
        score = 100 * sum(best(f1, r["answer"], r["gold"], args.corpus) for r in rows) / n
        same = sum(a["answer"] == b["answer"] for a, b in zip(first, rows))
        print(f"{arm:34} " + " ".join(f"{x:15.1f}" for x in figures) + f" {score:6.1f} {same:>9}/{n}")


if __name__ == "__main__":
    main()
