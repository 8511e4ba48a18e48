"""A single search's wait while the largest batches run: eight Search-R1 requests of --max-batch (4,096) queries
at once, and one client sending single /search requests beside them, the server at its defaults but for
--batch-chunk: 4,096 (a batch holds its worker until it is done, as before chunking) against 64 (the default).
Reports the single searches' p50/p99 and the batches' queries/s, side by side in one run.

    .venv/bin/python benchmarks/speed/bench_serve_fairness.py [--home .mhindex-eval] [--corpus musique]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from servers import Uvicorn


def served(corpus, chunk: int):
    from mhindex.backends import BackendSpec, open_index
    from mhindex.server.app import Limits, index_info, make_app

    opened = open_index(corpus, BackendSpec.parse("lucene"))
    info = index_info(corpus, "lucene", opened.settings, opened.fingerprint)
    return opened, make_app(opened.retriever, info, Limits(batch_chunk=chunk), access_log=False)


def run(corpus, chunk: int, questions: list[str]) -> str:
    opened, app = served(corpus, chunk)
    batch = [f"{questions[i % len(questions)]} {i}" for i in range(4096)]
    waits: list[float] = []
    try:
        with Uvicorn(app) as server:
            done = threading.Event()

            def big() -> None:
                httpx.post(f"{server.url}/retrieve", json={"queries": batch, "topk": 3}, timeout=600)

            started = time.perf_counter()
            batches = [threading.Thread(target=big) for _ in range(8)]
            for thread in batches:
                thread.start()

            def watch() -> None:
                for thread in batches:
                    thread.join()
                done.set()

            threading.Thread(target=watch).start()
            while not done.is_set():
                sent = time.perf_counter()
                httpx.post(f"{server.url}/search", json={"query": questions[len(waits) % 50], "k": 3}, timeout=600)
                waits.append(time.perf_counter() - sent)
            seconds = time.perf_counter() - started
    finally:
        opened.close()
    waits.sort()
    p50, p99 = waits[len(waits) // 2], waits[min(len(waits) - 1, int(len(waits) * 0.99))]
    return (
        f"--batch-chunk {chunk:>5}  single /search: {len(waits):>5} answered, p50 {p50 * 1000:8.1f} ms, "
        f"p99 {p99 * 1000:9.1f} ms, worst {waits[-1] * 1000:9.1f} ms; batches {8 * 4096 / seconds:7,.0f} queries/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=Path(".mhindex-eval"))
    parser.add_argument("--corpus", default="musique")
    args = parser.parse_args()
    from mhindex.cli import main as mhindex
    from mhindex.home import corpus_dir

    if mhindex(["--quiet", "--home", str(args.home), "index", args.corpus, "--backend", "lucene"]) != 0:
        raise SystemExit(f"cannot index {args.corpus} under {args.home}")
    corpus = corpus_dir(args.home, args.corpus)
    import orjson

    questions = [orjson.loads(line)["question"] for line in corpus.questions.read_text().splitlines()[:50]]
    print(f"lucene on {args.corpus}: 8 Search-R1 batches of 4,096 queries at once, single searches beside them")
    for chunk in (4096, 64):
        print(run(corpus, chunk, questions), flush=True)


if __name__ == "__main__":
    main()
