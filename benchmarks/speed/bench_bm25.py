"""BM25 engines side by side on one corpus: Lucene (Anserini, mhindex's default) and bm25s.

Builds a corpus of N paragraphs (default 140,000, the MuSiQue corpus size) from the words of
the bundled samples, then measures for each engine: indexing paragraphs/s, single-query
latency p50/p99, batched throughput, the time from process start to the first answer, and
the overlap of the two engines' top-10 lists.

    .venv/bin/python benchmarks/speed/bench_bm25.py [--paragraphs 140000] [--queries 1000]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from mhindex.backends import BackendSpec, build_index, open_retriever  # noqa: E402
from mhindex.corpora import DATASETS  # noqa: E402
from mhindex.corpora.build import build_corpus  # noqa: E402


def vocabulary() -> list[str]:
    words = []
    for line in (
        (REPO / "src" / "mhindex" / "corpora" / "samples" / "musique" / "musique_ans_v1.0_dev.sample.jsonl")
        .read_bytes()
        .splitlines()
    ):
        for paragraph in orjson.loads(line)["paragraphs"]:
            words += paragraph["paragraph_text"].split()
    return words


def synthetic_musique(path: Path, paragraphs: int, seed: int = 0) -> None:
    """MuSiQue-format records whose paragraphs draw words with the samples' real frequencies."""
    rng = random.Random(seed)
    words = vocabulary()
    with open(path, "wb") as out:
        for q in range(paragraphs // 20):
            record = {
                "id": f"2hop__{q}",
                "question": "q?",
                "answer": "a",
                "paragraphs": [
                    {
                        "idx": i,
                        "title": " ".join(rng.choices(words, k=3)),
                        "paragraph_text": " ".join(rng.choices(words, k=rng.randint(40, 140))),
                        "is_supporting": False,
                    }
                    for i in range(20)
                ],
            }
            out.write(orjson.dumps(record) + b"\n")


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2] * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


def first_answer_seconds(command: list[str], env: dict, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


BM25S_FIRST_ANSWER = """
import sys, time, bm25s, Stemmer
retriever = bm25s.BM25.load(sys.argv[1])
stemmer = Stemmer.Stemmer("english")
tokens = bm25s.tokenize([sys.argv[2]], stopwords="en", stemmer=stemmer, show_progress=False)
docs, scores = retriever.retrieve(tokens, k=10, show_progress=False)
print(docs[0][:3])
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paragraphs", type=int, default=140_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        source = root / "synthetic.jsonl"
        synthetic_musique(source, args.paragraphs)
        corpus = build_corpus(DATASETS["musique"], [source], root / "home", name="bench").corpus
        rows = [orjson.loads(line) for line in corpus.corpus.read_bytes().splitlines()]
        rng = random.Random(1)
        queries = [" ".join(rng.choice(rows)["text"].split()[:8]) for _ in range(args.queries)]
        print(f"corpus: {len(rows):,} paragraphs; {len(queries)} queries of 8 words; {os.cpu_count()} cores")

        # Lucene
        started = time.perf_counter()
        build_index(corpus, BackendSpec.parse("lucene", {"threads": args.threads}))
        lucene_index_s = time.perf_counter() - started
        lucene = open_retriever(corpus, BackendSpec.parse("lucene", {"threads": args.threads}))
        lucene.search(queries[0], 10)
        single = []
        lucene_top = []
        for query in queries:
            started = time.perf_counter()
            lucene_top.append([h.id for h in lucene.search(query, 10)])
            single.append(time.perf_counter() - started)
        started = time.perf_counter()
        lucene.search_many(queries, 10)
        lucene_batch_qps = len(queries) / (time.perf_counter() - started)
        env = {**os.environ, "MHINDEX_HOME": str(root / "home")}
        lucene_first = first_answer_seconds(
            [sys.executable, "-m", "mhindex", "search", "bench", queries[0], "--json"], env
        )
        l50, l99 = percentiles(single)

        # bm25s
        import bm25s
        import Stemmer

        stemmer = Stemmer.Stemmer("english")
        ids = [r["id"] for r in rows]
        started = time.perf_counter()
        tokens = bm25s.tokenize(
            [f"{r['title']} {r['text']}" for r in rows], stopwords="en", stemmer=stemmer, show_progress=False
        )
        model = bm25s.BM25(k1=1.2, b=0.75)
        model.index(tokens, show_progress=False)
        bm25s_index_s = time.perf_counter() - started
        model.save(str(root / "bm25s"))
        single = []
        bm25s_top = []
        for query in queries:
            started = time.perf_counter()
            q = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False)
            docs, _ = model.retrieve(q, k=10, show_progress=False)
            bm25s_top.append([ids[d] for d in docs[0]])
            single.append(time.perf_counter() - started)
        started = time.perf_counter()
        q = bm25s.tokenize(queries, stopwords="en", stemmer=stemmer, show_progress=False)
        model.retrieve(q, k=10, show_progress=False, n_threads=args.threads)
        bm25s_batch_qps = len(queries) / (time.perf_counter() - started)
        bm25s_first = first_answer_seconds(
            [sys.executable, "-c", BM25S_FIRST_ANSWER, str(root / "bm25s"), queries[0]], env
        )
        b50, b99 = percentiles(single)

        overlap = statistics.mean(len(set(a) & set(b)) / 10 for a, b in zip(lucene_top, bm25s_top, strict=False))
        print(f"{'':24}{'lucene':>12}{'bm25s':>12}")
        print(f"{'indexing paragraphs/s':24}{len(rows) / lucene_index_s:>12,.0f}{len(rows) / bm25s_index_s:>12,.0f}")
        print(f"{'indexing seconds':24}{lucene_index_s:>12.1f}{bm25s_index_s:>12.1f}")
        print(f"{'query p50 ms':24}{l50:>12.2f}{b50:>12.2f}")
        print(f"{'query p99 ms':24}{l99:>12.2f}{b99:>12.2f}")
        print(f"{'batch queries/s':24}{lucene_batch_qps:>12,.0f}{bm25s_batch_qps:>12,.0f}")
        print(f"{'start to 1st answer s':24}{lucene_first:>12.2f}{bm25s_first:>12.2f}")
        print(f"top-10 overlap lucene vs bm25s: {overlap:.3f}")


if __name__ == "__main__":
    main()
