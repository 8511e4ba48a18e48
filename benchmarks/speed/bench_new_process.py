"""A question in a new process, after the quick start: `mhindex ask QUESTION --method ircot` run fresh for each
question, beside what llama.cpp's rates predict for exactly the tokens it read and generated plus the model's
load time (issue: a local question at the machine's speed, item 3).

    .venv/bin/python benchmarks/speed/bench_new_process.py [--lm local:qwen2.5-0.5b] [--corpus 2wikimultihopqa] \
        [--limit 5]
        [--models .mhindex-eval/models]

In a fresh data root (the packaged models linked from --models, the corpus built from its bundled sample), one
`ask` of a question outside the sample leaves what the quick start leaves: the demonstrations' prompt states
kept, and the call cache. Then, each in its own process: the load alone (Python and mhindex imported, the corpus
and its index opened, the model loaded and its tokenizer answering: what every `ask` pays before its question),
with llama.cpp's rates measured there (bench_warm_ircot.py's `llama_rates`); and each question of eval's
sample (seed 13370) as a user runs it, timed from the command's start to its exit. None of their calls is in
the call cache (checked): the kept states are what a new process finds.
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


def load_alone(args) -> None:
    """In this process: how long the load takes, then llama.cpp's rates; one JSON line."""
    started = time.perf_counter()
    from mhindex.home import open_corpus
    from mhindex.lm import ModelOptions
    from mhindex.methods.session import Session

    corpus = open_corpus(args.home, args.corpus)
    with Session(corpus, methods=["ircot"], model=ModelOptions(lm=args.lm, cache=False), home=args.home) as session:
        session.lm.count_tokens("the tokenizer is loaded")
        loaded = time.perf_counter() - started
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_warm_ircot import llama_rates

        print(orjson.dumps({"load": loaded, "rates": llama_rates(session.lm)}).decode(), flush=True)


def ask(args, question: str) -> dict:
    """`mhindex ask` in a new process, as a user types it: its record, and the seconds from start to exit."""
    command = [sys.executable, "-m", "mhindex", "--home", str(args.home), "--quiet", "ask", question]
    command += ["--corpus", args.corpus, "--method", "ircot", "--lm", args.lm, "--json"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": ""})
    return {**orjson.loads(done.stdout), "wall": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lm", default="local:qwen2.5-0.5b")
    parser.add_argument("--corpus", default="2wikimultihopqa")
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--models", type=Path, default=ROOT / ".mhindex-eval" / "models")
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--load", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        return load_alone(args)
    with tempfile.TemporaryDirectory(prefix="bench-new-process-") as home:
        args.home = Path(home)
        (args.home / "models").symlink_to(args.models.resolve(), target_is_directory=True)
        built = [sys.executable, "-m", "mhindex", "--home", home, "--quiet", "build", args.corpus]
        subprocess.run(built, check=True, capture_output=True)
        measure(args)


def measure(args) -> None:
    from mhindex.eval.run import sample_questions
    from mhindex.home import open_corpus

    load_average = os.getloadavg()
    questions = sample_questions(open_corpus(args.home, args.corpus), args.limit + 1, 13370)
    ask(args, questions[-1]["question"])  # what the quick start leaves: the demonstrations' states kept
    command = [sys.executable, __file__, "--load", "--lm", args.lm, "--corpus", args.corpus, "--home", str(args.home)]
    measured = orjson.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
    load, rates = measured["load"], measured["rates"]
    print(
        f"`mhindex ask --method ircot` in a new process a question, {args.limit} {args.corpus} questions, {args.lm}, "
        f"in a fresh data root after one ask, no call from the call cache; load average before: "
        f"{', '.join(f'{x:.2f}' for x in load_average)}"
    )
    print(
        f"load alone (imports, corpus and index, model): {load:.1f} s; llama.cpp reads {rates['prompt']:.0f} tokens/s "
        f"and writes {rates['generation']:.1f}/s from scratch, {rates['deep_prompt']:.0f} and "
        f"{rates['deep_generation']:.1f} {rates['depth']:,} tokens deep"
    )
    header = ("question", "wall s", "answer s", "read", "generated", "predicted s", "+ load", "ratio")
    print(" ".join(f"{h:>12}" for h in header))
    ratios = []
    for record in questions[: args.limit]:
        result = ask(args, record["question"])
        calls = result["lm"]["calls"]
        assert not any(c.get("cached") for c in calls), "a call came from the call cache"
        read, generated = sum(c["read"] or 0 for c in calls), sum(c["generated"] for c in calls)
        # The prompts of IRCoT's steps hold 4,000-7,000 tokens: the rates that deep into the context.
        predicted = read / rates["deep_prompt"] + generated / rates["deep_generation"]
        ratios.append(result["wall"] / (predicted + load))
        figures = (result["wall"], result["seconds"], read, generated, predicted, predicted + load, ratios[-1])
        print(
            f"{record['id'][:12]:>12} "
            + " ".join(f"{x:12.1f}" if i < 6 else f"{x:11.2f}x" for i, x in enumerate(figures))
        )
    print(f"mean ratio: {sum(ratios) / len(ratios):.2f}x of (prediction + load)")


if __name__ == "__main__":
    main()
