"""Corpus conversion speed and peak memory on a large synthetic MuSiQue-format file, next to a
plain pipeline (the anchor), in one run.

Writes N questions of 20 paragraphs each (default 50,000 x 20 = 1M paragraphs) drawn from a
pool of unique paragraphs (default 140,000, the MuSiQue corpus size). Then, each in its own
child process, twice in alternation: the anchor (orjson parse of each line, dedup on a hash of
title and text, seeded shuffle, orjson write: what any converter must do, and nothing else) and
`mhindex corpus musique` (which also checks every field, keeps questions, gold ids and offsets,
and hashes the corpus). Prints paragraphs/s, the ratio to the anchor, and each one's peak RSS.

    .venv/bin/python benchmarks/speed/bench_corpus.py [--questions 50000] [--pool 140000]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

WORDS = "the of and in to a was is for on as by with his at from that he it an were which are this be also".split() + [
    f"w{i}" for i in range(5000)
]


def synthetic(path: Path, questions: int, pool: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    titles = [f"Title {i}" for i in range(pool)]
    texts = [" ".join(rng.choices(WORDS, k=90)) for _ in range(pool)]
    written = 0
    with open(path, "wb") as out:
        for q in range(questions):
            picks = rng.sample(range(pool), 20)
            paragraphs = [
                {"idx": i, "title": titles[p], "paragraph_text": texts[p], "is_supporting": i < 2}
                for i, p in enumerate(picks)
            ]
            record = {
                "id": f"2hop__{q}_{q}",
                "paragraphs": paragraphs,
                "question": f"Question {q}?",
                "question_decomposition": [],
                "answer": "x",
                "answer_aliases": [],
                "answerable": True,
            }
            out.write(orjson.dumps(record) + b"\n")
            written += 20
    return written


ANCHOR = """
import random, resource, sys, orjson
source, target = sys.argv[1], sys.argv[2]
seen, kept = set(), []
with open(source, "rb") as lines:
    for line in lines:
        for p in orjson.loads(line)["paragraphs"]:
            key = hash((p["title"], p["paragraph_text"]))
            if key not in seen:
                seen.add(key)
                record = {"id": f"{key & 0xFFFFFFFFFFFFFFFF:016x}", "title": p["title"], "text": p["paragraph_text"]}
                kept.append(orjson.dumps(record) + b"\\n")
random.Random(13370).shuffle(kept)
with open(target, "wb") as out:
    out.writelines(kept)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""
MHINDEX = """
import resource, sys
from mhindex.cli import main
code = main(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
raise SystemExit(code)
"""


def timed(code: str, *args: str) -> tuple[float, float]:
    """Seconds (process start included) and peak RSS in MB of one child process."""
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return time.perf_counter() - started, int(result.stderr.strip().splitlines()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=50_000)
    parser.add_argument("--pool", type=int, default=140_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "musique_synthetic.jsonl"
        started = time.perf_counter()
        paragraphs = synthetic(data, args.questions, args.pool)
        print(
            f"synthetic input: {paragraphs:,} paragraphs, {data.stat().st_size / 1e6:.0f} MB, written in "
            f"{time.perf_counter() - started:.1f}s"
        )
        home = Path(tmp) / "home"
        rows: dict[str, list[tuple[float, float]]] = {"anchor": [], "mhindex": []}
        for _ in range(2):
            rows["anchor"].append(timed(ANCHOR, str(data), str(Path(tmp) / "anchor.jsonl")))
            rows["mhindex"].append(
                timed(
                    MHINDEX,
                    "--quiet",
                    "--home",
                    str(home),
                    "corpus",
                    "musique",
                    "--input",
                    str(data),
                    "--force",
                    "--json",
                )
            )
        counts = orjson.loads((home / "musique" / "manifest.json").read_bytes())["counts"]
        print(f"converted: {counts['paragraphs']:,} unique paragraphs, {counts['questions']:,} questions")
        print(f"{'run':<6} {'anchor p/s':>11} {'mhindex p/s':>12} {'ratio':>6} {'anchor MB':>10} {'mhindex MB':>11}")
        for attempt in range(2):
            (a_s, a_mb), (m_s, m_mb) = rows["anchor"][attempt], rows["mhindex"][attempt]
            print(
                f"{attempt + 1:<6} {paragraphs / a_s:>11,.0f} {paragraphs / m_s:>12,.0f} {a_s / m_s:>6.2f} "
                f"{a_mb:>10,.0f} {m_mb:>11,.0f}"
            )


if __name__ == "__main__":
    main()
