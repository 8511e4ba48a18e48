"""`mhindex eval --workers 1` against `--workers 2` on the same questions, side by side in one run.

    .venv/bin/python benchmarks/speed/bench_eval_workers.py [--corpus musique] [--limit 20] [--method ircot]
        [--lm local:qwen2.5-0.5b]

Each way is one `mhindex eval` process with the call cache off, so neither finds the other's
answers; with two workers the process holds one model object whose llama.cpp server has two
slots, and the two questions in flight decode in one batch. Prints wall seconds per question
(process start to exit, divided by the questions), the scores of each, and how many answers are
the same (batched decoding need not give the same greedy tokens: llama.cpp's batched kernels sum
in another order). Needs the corpus and its Lucene index under --home (benchmarks/tables/paper_table.sh
builds them).
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

SHOWN = (("em", "EM"), ("f1", "F1"), ("recall", "Recall"))


def run_eval(args, workers: int, out: Path) -> tuple[float, dict, dict[str, str]]:
    command = [
        sys.executable,
        "-m",
        "mhindex",
        "eval",
        args.corpus,
        "--method",
        args.method,
        "--limit",
        str(args.limit),
        "--no-cache",
        "--workers",
        str(workers),
        "--lm",
        args.lm,
        "--out",
        str(out),
        "--json",
        "--quiet",
        *(["--lm-threads", str(args.lm_threads)] if args.lm_threads else []),
    ]
    started = time.perf_counter()
    report = orjson.loads(
        subprocess.run(
            command, capture_output=True, check=True, env={**os.environ, "MHINDEX_HOME": str(args.home)}
        ).stdout
    )
    wall = time.perf_counter() - started
    answers = {}
    for line in (out / f"{args.method}.jsonl").read_bytes().splitlines():
        record = orjson.loads(line)
        answers[record["id"]] = record.get("answer")
    return wall, report["methods"][args.method], answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="musique")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--method", default="ircot")
    parser.add_argument("--lm", default="local:qwen2.5-0.5b")
    parser.add_argument("--lm-threads", type=int, help="passed to both ways [default: mhindex's, half the cores]")
    parser.add_argument("--home", type=Path, default=Path(".mhindex-eval"))
    args = parser.parse_args()
    runs = {}
    with tempfile.TemporaryDirectory() as scratch:
        for workers in (1, 2):
            runs[workers] = run_eval(args, workers, Path(scratch) / f"w{workers}")
    threads = args.lm_threads or "default"
    print(
        f"mhindex eval {args.corpus} -m {args.method} --limit {args.limit}, {args.lm}, --lm-threads {threads}, "
        "call cache off, one process each way"
    )
    print(f"{'workers':<8} {'wall s/question':>16} " + " ".join(f"{label:>7}" for _, label in SHOWN))
    for workers, (wall, metrics, _) in runs.items():
        print(f"{workers:<8} {wall / args.limit:>16.1f} " + " ".join(f"{100 * metrics[key]:>7.1f}" for key, _ in SHOWN))
    (one, _, first), (two, _, second) = runs[1], runs[2]
    same = sum(first[i] == second.get(i) for i in first)
    print(f"--workers 2 is {one / two:.2f}x as fast per question; the same answer for {same}/{len(first)} questions")


if __name__ == "__main__":
    main()
