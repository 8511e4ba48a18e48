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


def timed(label: str, items: Sequence[Any], work: Callable[[Any], object], queries: int) -> None:
    """`work` on each item in turn; `queries` is how many queries the items hold in all."""
    began = time.perf_counter()
    for item in items:
        work(item)
    seconds = time.perf_counter() - began
    print(f"  {label:<46} {seconds / len(items) * 1000:7.2f} ms an item {queries / seconds:8.0f} queries/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, default=Path("/tmp/mhindex-rl/home/rl1000000/indexes/lucene"))
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from mhindex.backends.lucene import LuceneRetriever

    retriever = LuceneRetriever(args.index / "lucene", 0.9, 0.4, threads=args.threads)
    drawn = queries()
    random.Random(0).shuffle(drawn)
    single = drawn[: args.queries]
    traffic = Traffic(queries(), 5)
    batches = [traffic.batch() for _ in range(args.queries // 2)]
    n, in_batches = len(single), sum(len(b) for b in batches)
    for query in single:  # the JIT warmed, the postings read once
        retriever.search(query, 3)

    def each(part: list[str]) -> None:
        for query in part:
            retriever.search(query, 3)

    built = {q: retriever._query("contents", q) for q in single}
    lucene, order = retriever._lucene, retriever._order
    print(f"{args.index}: {retriever._total:,} passages; {len(single)} queries; {len(batches)} requests")
    timed("mhindex search, top 3", single, lambda q: retriever.search(q, 3), n)
    timed("Lucene alone, top 3, Anserini's order", single, lambda q: lucene.search(built[q], 3, order, True), n)
    timed("Lucene alone, top 3, plain", single, lambda q: lucene.search(built[q], 3), n)
    timed("Lucene alone, top 100, Anserini's order", single, lambda q: lucene.search(built[q], 100, order, True), n)
    timed("fusion candidates, depth 100 (text of 3)", single, lambda q: retriever.candidates([q], 100, 3), n)
    timed("a request's queries one by one", batches, lambda b: [retriever.search(q, 3) for q in b], in_batches)
    batched = f"a request as one batch ({args.threads} Java threads)"
    timed(batched, batches, lambda b: retriever.search_many(b, 3), in_batches)
    c = retriever._c

    def anserini_batch(batch: list[str]) -> object:
        texts, ids = c["ArrayList"](), c["ArrayList"]()
        for i, query in enumerate(batch):
            texts.add(query)
            ids.add(str(i))
        return retriever._searcher.batch_search(texts, ids, 3, args.threads)

    timed("  of which Anserini's batch alone", batches, anserini_batch, in_batches)
    with ThreadPoolExecutor(args.threads) as threads:
        parts = [single[i :: args.threads] for i in range(args.threads)]
        at_once = f"mhindex search, top 3, {args.threads} threads at once"
        timed(at_once, [parts], lambda p: list(threads.map(each, p)), n)


if __name__ == "__main__":
    main()
