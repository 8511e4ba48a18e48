"""Where a BM25 search's time goes in process, on the RL load test's Lucene index: the ceiling a server on these
cores can reach, whatever its HTTP side does.

    .venv/bin/python benchmarks/speed/bench_lucene_paths.py [--index /tmp/mhindex-rl/home/rl1000000/indexes/lucene]

Side by side in one run, on one thread but for Anserini's batch and the last line: mhindex's whole single search
at top 3 (query, Lucene, ids, text); Lucene's own search alone (a built query, in Anserini's order and in Lucene's
plain one) at top 3 and at 100 (a fusion's depth); a fusion's candidates at depth 100; then the load test's request
mix (1 to 16 queries, weight 1/n): mhindex's search of a request's queries one by one, its gathered batch
(Anserini's batch on `--threads` Java threads, hits read back), and Anserini's batch alone; last, the single
searches again from `--threads` Python threads at once (as `mhindex serve`'s workers make them: only stored-field
reads take turns).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_rl_load import Traffic, queries


def timed(label: str, items: Sequence[Any], work: Callable[[Any], object], queries_each: int | None = None) -> None:
    """queries_each: queries an item (None: an item is a list of queries; 0: a list of such lists)."""
    began = time.perf_counter()
    for item in items:
        work(item)
    seconds = time.perf_counter() - began
    if queries_each == 0:
        count = sum(len(q) for item in items for q in item)
    else:
        count = len(items) * queries_each if queries_each else sum(len(i) for i in items)
    print(f"  {label:<46} {seconds / len(items) * 1000:7.2f} ms an item {count / seconds:8.0f} queries/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, default=Path("/tmp/mhindex-rl/home/rl1000000/indexes/lucene"))
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from mhindex.backends.lucene import LuceneRetriever

    retriever = LuceneRetriever(args.index / "lucene", 0.9, 0.4, threads=args.threads)
    pool = queries()
    random.Random(0).shuffle(pool)
    single = pool[: args.queries]
    traffic = Traffic(queries(), 5)
    batches = [traffic.batch() for _ in range(args.queries // 2)]
    for query in single:  # the JIT warmed, the postings read once
        retriever.search(query, 3)

    def each(part: list[str]) -> None:
        for query in part:
            retriever.search(query, 3)

    built = {q: retriever._query("contents", q) for q in single}
    lucene, order = retriever._lucene, retriever._order
    print(f"{args.index}: {retriever._total:,} passages; {len(single)} queries; {len(batches)} requests")
    timed("mhindex search, top 3", single, lambda q: retriever.search(q, 3), 1)
    timed("Lucene alone, top 3, Anserini's order", single, lambda q: lucene.search(built[q], 3, order, True), 1)
    timed("Lucene alone, top 3, plain", single, lambda q: lucene.search(built[q], 3), 1)
    timed("Lucene alone, top 100, Anserini's order", single, lambda q: lucene.search(built[q], 100, order, True), 1)
    timed("fusion candidates, depth 100 (text of 3)", single, lambda q: retriever.candidates([q], 100, 3), 1)
    timed("a request's queries one by one", batches, lambda b: [retriever.search(q, 3) for q in b])
    timed(f"a request as one batch ({args.threads} Java threads)", batches, lambda b: retriever.search_many(b, 3))
    c = retriever._c

    def anserini_batch(batch: list[str]) -> object:
        texts, ids = c["ArrayList"](), c["ArrayList"]()
        for i, query in enumerate(batch):
            texts.add(query)
            ids.add(str(i))
        return retriever._searcher.batch_search(texts, ids, 3, args.threads)

    timed("  of which Anserini's batch alone", batches, anserini_batch)
    with ThreadPoolExecutor(args.threads) as pool:
        parts = [single[i :: args.threads] for i in range(args.threads)]
        timed(f"mhindex search, top 3, {args.threads} threads at once", [parts], lambda p: list(pool.map(each, p)), 0)


if __name__ == "__main__":
    main()
