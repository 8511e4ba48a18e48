"""A new `mhindex ask` process after the quick start, with and without the kept prompt states.

    .venv/bin/python benchmarks/speed/bench_local_answers.py [--lm local:qwen2.5-0.5b] [--method ircot] [--repeat 1]

In a fresh data root (the packaged model linked in, so that joining its parts is not timed), builds
the bundled 2WikiMultihopQA sample, then times whole `mhindex ask` processes, from start to printed
answer, side by side in one run:
1. the quick start's question in the first process (nothing kept yet: it reads the demonstrations
   and keeps their evaluation under <home>/cache/llama-state/);
2. another question of the same corpus in a new process (the call cache cannot answer it; the
   kept states can spare it the demonstrations);
3. the same question in a new process with --no-cache (the demonstrations read again, as every new
   process did before the states were kept).
Prints the seconds, each as a multiple of the first process's, and whether 2 and 3 gave the same
answer, trace and paragraphs (they must: a restored state answers as from scratch).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mhindex.lm.packaged import packaged_model_path

ROOT = Path(__file__).resolve().parents[2]
FIRST = "Who is younger, Mart Van Duren or Madeleine Simms?"  # scripts/quickstart.sh's
SECOND = "Which film came out first, Kalavar King or Ogro?"  # the README's other example


def ask(home: Path, question: str, lm: str, method: str, *extra: str) -> tuple[float, dict]:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "mhindex", "--home", str(home), "--quiet", "ask", question, "--corpus",
         "2wikimultihopqa", "--method", method, "--lm", lm, "--json", *extra],
        capture_output=True, text=True, env={**os.environ, "MHINDEX_LM": ""},
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"ask failed: {result.stderr.strip()}")
    return seconds, json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lm", default="local:qwen2.5-0.5b")
    parser.add_argument("--method", default="ircot")
    parser.add_argument("--models", type=Path, default=ROOT / ".mhindex-eval" / "models")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-local-answers-") as folder:
        home = Path(folder)
        if args.lm.startswith("local:"):
            model = packaged_model_path(args.lm.removeprefix("local:"), args.models)
            (home / "models").mkdir()
            (home / "models" / model.name).symlink_to(model)
        subprocess.run(
            [sys.executable, "-m", "mhindex", "--home", str(home), "--quiet", "build", "2wikimultihopqa"], check=True
        )
        load = os.getloadavg()
        first = ask(home, FIRST, args.lm, args.method)
        second = ask(home, SECOND, args.lm, args.method)
        uncached = ask(home, SECOND, args.lm, args.method, "--no-cache")
        kept = sum(p.stat().st_size for p in (home / "cache" / "llama-state").glob("*.bin"))
    print(
        f"{args.method} with {args.lm}, one `mhindex ask` process a row, process start to printed answer; "
        f"load average before: {', '.join(f'{x:.2f}' for x in load)}; states kept: {kept / 2**20:.0f} MB"
    )
    print(f"{'process':44} {'seconds':>8} {'x first':>8}  answer")
    for label, (seconds, record) in (
        ("1. first, quick start's question", first),
        ("2. new process, another question", second),
        ("3. new process, same question, --no-cache", uncached),
    ):
        print(f"{label:44} {seconds:8.1f} {seconds / first[0]:8.2f}  {record['answer']}")
    same = all(second[1][field] == uncached[1][field] for field in ("answer", "reasoning", "steps", "retrieved"))
    print(f"2 and 3 the same answer, reasoning, steps and paragraphs: {same}")


if __name__ == "__main__":
    main()
