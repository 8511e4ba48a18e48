"""Corpus conversion speed and peak memory on a large synthetic MuSiQue-format file.

Writes N questions of 20 paragraphs each (default 50,000 x 20 = 1M paragraphs) drawn from a
pool of unique paragraphs (default 140,000, the MuSiQue corpus size), then times
`mhindex corpus musique` on it in a child process and prints paragraphs/s and peak RSS.

    .venv/bin/python scripts/bench_corpus.py [--questions 50000] [--pool 140000]
"""

from __future__ import annotations

import argparse
import random
import resource
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
                {"idx": i, "title": titles[p], "paragraph_text": texts[p], "is_supporting": i < 2} for i, p in enumerate(picks)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=50_000)
    parser.add_argument("--pool", type=int, default=140_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "musique_synthetic.jsonl"
        started = time.perf_counter()
        paragraphs = synthetic(data, args.questions, args.pool)
        print(f"synthetic input: {paragraphs:,} paragraphs, {data.stat().st_size / 1e6:.0f} MB, written in {time.perf_counter() - started:.1f}s")
        command = [sys.executable, "-m", "mhindex", "--quiet", "corpus", "musique", "--input", str(data), "--home", str(Path(tmp) / "home"), "--json"]
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, check=True)
        seconds = time.perf_counter() - started
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        counts = orjson.loads(result.stdout)["counts"]
        print(f"converted: {counts['paragraphs']:,} unique paragraphs, {counts['questions']:,} questions")
        print(f"wall time: {seconds:.1f}s (process start included)")
        print(f"throughput: {paragraphs / seconds:,.0f} input paragraphs/s")
        print(f"peak memory (RSS): {peak_mb:,.0f} MB")


if __name__ == "__main__":
    main()
