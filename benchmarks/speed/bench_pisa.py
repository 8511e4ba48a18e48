"""PISA, Lucene and bm25s side by side in one run, on the same synthetic DPR-layout corpus (bench_scale.py's passages)
and the same queries (4-11 words drawn from one of the corpus's passages each): build seconds, then queries a second
at top 3 and top 100, one query at a time and in one batch, on one thread and two; and how often their top 10s agree
with Lucene's.

    .venv/bin/python benchmarks/speed/bench_pisa.py [--paragraphs 300000] [--queries 500]
    # -> benchmarks/results/bench_pisa.txt (appended, with the date and the load)

Timings follow the machine's load: the engines run one after another in the same run, so they meet the same load.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import passages, write_input  # noqa: E402  (the scale runs' passages)

OUT = REPO / "benchmarks" / "results" / "bench_pisa.txt"
ENGINES = ("lucene", "pisa", "bm25s")


def build(home: Path, name: str, backend: str, threads: int) -> float:
    began = time.perf_counter()
    env = {**os.environ, "MHINDEX_HOME": str(home)}
    subprocess.run([sys.executable, "-m", "mhindex", "--quiet", "index", name, "--backend", backend, "--threads",
                    str(threads)], env=env, check=True)  # fmt: skip
    return time.perf_counter() - began


def rate(retriever, queries: list[str], k: int, batched: bool) -> float:
    """Queries a second: one at a time, or all in one `search_many`."""
    retriever.search(queries[0], k)  # warm (the JVM's code, PISA's lists)
    began = time.perf_counter()
    if batched:
        retriever.search_many(queries, k)
    else:
        for query in queries:
            retriever.search(query, k)
    return len(queries) / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paragraphs", type=int, default=300_000)
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-pisa-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ["MHINDEX_HOME"] = str(home)
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.cli import main as mhindex
    from mhindex.home import open_corpus

    source = write_input("dpr", args.paragraphs, home)
    assert mhindex(["--quiet", "corpus", "dpr", "-i", str(source), "--name", "wiki"]) == 0
    rng = np.random.default_rng(0)
    texts = [p[1].split(" ") for p in passages(0, args.queries, 0)]  # the corpus's own first passages (its seed, 0)
    queries = [" ".join(rng.choice(words, int(rng.integers(4, 12)))) for words in texts]
    lines = [f"{time.strftime('%Y-%m-%d %H:%M')}: {args.paragraphs:,} DPR-layout paragraphs, {len(queries)} queries, "
             f"load average {os.getloadavg()[0]:.2f} at the start"]  # fmt: skip
    top10: dict[str, list[list[str]]] = {}
    for engine in ENGINES:
        seconds = build(home, "wiki", engine, 2)
        said = [f"  {engine:<7} built in {seconds:6.1f} s (2 threads)"]
        for threads in (1, 2):
            retriever = open_retriever(open_corpus(home, "wiki"), BackendSpec.parse(engine, {"threads": threads}))
            try:
                for k in (3, 100):
                    alone, batch = rate(retriever, queries, k, False), rate(retriever, queries, k, True)
                    said.append(f"    {threads} thread(s), top {k:>3}: {alone:7.1f} q/s one at a time, "
                                f"{batch:7.1f} q/s in one batch")  # fmt: skip
                if threads == 1:
                    top10[engine] = [[h.id for h in hits] for hits in retriever.search_many(queries, 10)]
            finally:
                retriever.close()
        lines += said
    for engine in ENGINES[1:]:
        shared = [len(set(a) & set(b)) / 10 for a, b in zip(top10["lucene"], top10[engine], strict=True)]
        lines.append(f"  top 10 shared with Lucene's: {engine} {sum(shared) / len(shared):.3f} on average")
    text = "\n".join(lines) + "\n"
    with OUT.open("a") as out:
        out.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
