"""`mhindex serve` under load on 127.0.0.1, next to the same queries run in process.

    .venv/bin/python scripts/bench_serve.py [--corpus musique] [--backend lucene] [--requests 2000] [--home .mhindex-eval]

Starts `mhindex serve` in a child process, then for 1, 8 and 32 concurrent clients sends
--requests POST /search requests (k=10, queries drawn from the corpus's questions) and prints
requests/s and p50/p99 latency, with the in-process search of the same queries first. Every
answer is checked against its own request (the query echoed, the ids of the in-process search):
a lost or mixed-up answer is counted, and the run fails if there is any.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import orjson

from mhindex.backends import open_retriever
from mhindex.home import open_corpus


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="musique")
    parser.add_argument("--backend", default="lucene")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--home", type=Path, default=Path(".mhindex-eval"))
    args = parser.parse_args()
    corpus = open_corpus(args.home, args.corpus)
    queries = [orjson.loads(line)["question"] for line in corpus.questions.read_bytes().splitlines() if line.strip()]
    work = [queries[i % len(queries)] for i in range(args.requests)]

    retriever = open_retriever(corpus, args.backend)
    expected = {q: [h.id for h in retriever.search(q, 10)] for q in queries}
    latencies = []
    started = time.perf_counter()
    for query in work:
        began = time.perf_counter()
        retriever.search(query, 10)
        latencies.append(time.perf_counter() - began)
    seconds = time.perf_counter() - started
    retriever.close()
    print(f"{args.backend} on {args.corpus}, {len(work)} searches of k=10 per row")
    print(f"{'':<22} {'requests/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'wrong':>6}")
    print(f"{'in process, 1 thread':<22} {len(work) / seconds:>10,.0f} {statistics.median(latencies) * 1000:>8.2f} {percentile(latencies, 0.99) * 1000:>8.2f} {'-':>6}")

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "mhindex", "--quiet", "--home", str(args.home), "serve", args.corpus, "--backend", args.backend, "--port", str(port), "--max-k", "10"])
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if httpx.get(url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        failures = 0
        for clients in (1, 8, 32):
            with httpx.Client(base_url=url, limits=httpx.Limits(max_connections=clients)) as client, ThreadPoolExecutor(clients) as pool:

                def one(query: str) -> tuple[float, bool]:
                    began = time.perf_counter()
                    reply = client.post("/search", json={"query": query, "k": 10})
                    ok = reply.status_code == 200 and reply.json()["query"] == query and [h["id"] for h in reply.json()["hits"]] == expected[query]
                    return time.perf_counter() - began, ok

                started = time.perf_counter()
                results = list(pool.map(one, work))
                seconds = time.perf_counter() - started
            latencies = [t for t, _ in results]
            wrong = sum(not ok for _, ok in results)
            failures += wrong
            label = f"served, {clients} client{'s' if clients > 1 else ''}"
            print(f"{label:<22} {len(work) / seconds:>10,.0f} {statistics.median(latencies) * 1000:>8.2f} {percentile(latencies, 0.99) * 1000:>8.2f} {wrong:>6}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    if failures:
        raise SystemExit(f"{failures} answers were lost or did not match their request")


if __name__ == "__main__":
    main()
