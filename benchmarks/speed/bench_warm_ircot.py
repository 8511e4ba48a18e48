"""Warm IRCoT questions, side by side in one run: mhindex before and after a change, and other models.

    .venv/bin/python benchmarks/speed/bench_warm_ircot.py [--arms before@local:qwen2.5-0.5b,now@local:qwen2.5-0.5b]
        [--before 4613227] [--corpus 2wikimultihopqa] [--limit 10] [--home .mhindex-eval] [--method ircot]

`--method` times another method the same way, with its defaults (SearChain and KD-CoT make many short calls:
`--method kdcot --corpus webqsp`).

An arm is CODE@LM: `now` is this working tree, `before` the commit --before names (checked out in a
temporary git worktree, run with its own src/ first on the path). Each arm runs in its own process
over the same questions as benchmarks/speed/bench_ircot_early_stop.py (eval's sample, seed 13370), IRCoT
with its defaults, the call cache off; the first question's time includes reading the
demonstrations, the same for every arm. Prints per arm: seconds a question (all, and without the
first), where the LM's time went (prompt evaluation, generation), prompt tokens evaluated and
generated a question, F1 against the gold answers, and how many answers equal the first arm's.

Then, for arms whose code accounts for every call (the answer's `lm.seconds`), every second of a question
after the first: restoring and saving prompt states, reading prompts, generating, outside the model, beside
what llama.cpp's own rates predict for exactly the tokens read and generated. The rates are measured in the
arm's process, with its threads, before its questions: a 1,024-token prompt read and 64
tokens generated, from scratch and 4,096 tokens into the context.
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

ROOT = Path(__file__).resolve().parents[2]


def run_arm(args) -> None:
    """One arm, in this process (whichever mhindex is first on the path): one JSON line a question."""
    from mhindex.eval.run import sample_questions
    from mhindex.home import open_corpus
    from mhindex.lm import ModelOptions
    from mhindex.lm.llamacpp import LlamaCppModel
    from mhindex.methods import Query, method_class
    from mhindex.methods.base import answered
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
    with Session(corpus, methods=[args.method], model=ModelOptions(lm=args.lm, cache=False), home=args.home) as session:
        method = session.method(args.method, method_class(args.method).Settings())
        session.lm.count_tokens("the tokenizer is loaded")  # before the first clock starts
        print(orjson.dumps({"rates": llama_rates(session.lm)}).decode(), flush=True)
        for record in questions:
            before = dict(spent)
            started = time.perf_counter()
            answer = answered(method, Query.from_record(record, record["id"]))
            used = {key: spent[key] - before[key] for key in spent}
            line = {**answer.record(), "wall": time.perf_counter() - started, **used, "gold": record["answers"]}
            print(orjson.dumps(line).decode(), flush=True)


def llama_rates(lm, depth: int = 4096) -> dict[str, float]:
    """llama.cpp's own rates in this process, tokens a second: reading a prompt from scratch (1,024 tokens of
    numbers no question's prompt shares) and generating (up to 64 tokens of a count), each also `depth` tokens
    into the context, as IRCoT's calls read and write (a step's prompt holds 4,000-7,000 tokens: attention over
    them costs more a token than over a short prompt)."""

    def numbers(tokens: int, start: int) -> str:
        text = " ".join(str(n) for n in range(start, start + tokens * 2))
        while lm.count_tokens(text) > tokens:
            text = text[: int(len(text) * 0.95)]
        return text

    count = " Now count from 1 to 100, in words: one, two, three,"
    read = lm.complete(numbers(1024, 7001), max_tokens=1, stop=())
    wrote = lm.complete(count, max_tokens=64, stop=())
    prefix = numbers(depth, 30001)
    lm.complete(prefix, max_tokens=1, stop=())  # the prefix, then read again from the slot: only what follows
    deep_read = lm.complete(prefix + " " + numbers(256, 90001), max_tokens=1, stop=())
    deep_wrote = lm.complete(prefix + count, max_tokens=64, stop=())

    def reading(c) -> float:
        return (c.prompt_tokens_evaluated or c.prompt_tokens) / (c.prompt_seconds or c.seconds)

    def writing(c) -> float:
        return c.completion_tokens / (getattr(c, "generation_seconds", None) or c.seconds)

    return {"prompt": reading(read), "generation": writing(wrote), "depth": depth,
            "deep_prompt": reading(deep_read), "deep_generation": writing(deep_wrote)}  # fmt: skip


def accounted(rows: list[dict], rates: dict[str, float]) -> str:
    """Every second of the questions after the first, by part, beside what llama.cpp's rates predict for the
    tokens read and generated (calls only: the rest of a question, retrieval and Python, is `outside` too)."""
    timed = [r for r in rows[1:] if isinstance(r.get("lm"), dict) and "seconds" in r["lm"]]
    if not timed:
        return "  (this code does not split its calls' seconds)"
    n = len(timed)
    parts = {part: sum(r["lm"]["seconds"][part] for r in timed) / n for part in timed[0]["lm"]["seconds"]}
    calls = [c for r in timed for c in r["lm"]["calls"] if not c.get("cached")]
    read, generated = sum(c["read"] or 0 for c in calls) / n, sum(c["generated"] for c in calls) / n
    wall = sum(r["wall"] for r in timed) / n
    split = ", ".join(f"{part} {seconds:.1f}" for part, seconds in parts.items())
    said = [f"  after the 1st: {wall:.1f} s/q = {split}, retrieval and the rest {wall - sum(parts.values()):.1f}"]
    for label, prompt, generation in (
        ("from scratch", "prompt", "generation"),
        (f"{rates.get('depth', 0):,} tokens deep", "deep_prompt", "deep_generation"),
    ):
        if prompt in rates:
            predicted = read / rates[prompt] + generated / rates[generation]
            said.append(
                f"  llama.cpp {label}: {read:,.0f} tokens read at {rates[prompt]:.0f}/s and {generated:.0f} "
                f"generated at {rates[generation]:.1f}/s predict {predicted:.1f} s/q: {wall / predicted:.2f}x"
            )  # fmt: skip
    return "\n".join(said)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", default="before@local:qwen2.5-0.5b,now@local:qwen2.5-0.5b")
    parser.add_argument("--before", default="4613227", help="the commit the `before` arms run")
    parser.add_argument("--corpus", default="2wikimultihopqa")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--method", default="ircot")
    parser.add_argument("--home", type=Path, default=ROOT / ".mhindex-eval")
    parser.add_argument("--lm", help=argparse.SUPPRESS)
    parser.add_argument("--arm", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        return run_arm(args)
    from mhindex.eval.metrics import best, f1

    load = os.getloadavg()
    runs: dict[str, list[dict]] = {}
    rates: dict[str, dict[str, float] | None] = {}
    with tempfile.TemporaryDirectory(prefix="bench-warm-") as folder:
        worktree = Path(folder) / "before"
        if any(arm.startswith("before@") for arm in args.arms.split(",")):
            subprocess.run(["git", "worktree", "add", "--detach", str(worktree), args.before], cwd=ROOT, check=True)
        try:
            for arm in args.arms.split(","):
                code, lm = arm.split("@", 1)
                source = worktree / "src" if code == "before" else ROOT / "src"
                command = [sys.executable, __file__, "--arm", "--lm", lm, "--corpus", args.corpus]
                command += ["--limit", str(args.limit), "--home", str(args.home), "--method", args.method]
                env = {**os.environ, "PYTHONPATH": str(source)}
                output = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
                lines = [orjson.loads(line) for line in output.splitlines() if line.startswith("{")]
                rates[arm] = next((line["rates"] for line in lines if "rates" in line), None)
                runs[arm] = [line for line in lines if "rates" not in line]
        finally:
            if worktree.exists():
                subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=True)
    first = next(iter(runs.values()))
    n = len(first)
    print(
        f"{args.method} on {n} {args.corpus} questions, call cache off, one process an arm; `before` is {args.before}; "
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
    for arm, rows in runs.items():
        print(
            f"{arm}:\n" + (accounted(rows, rates[arm]) if rates[arm] else "  (no rates: this code does not say them)")
        )


if __name__ == "__main__":
    main()
