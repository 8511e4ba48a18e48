"""`mhindex serve` under load on 127.0.0.1, in each protocol, next to the same searches in process.

    .venv/bin/python benchmarks/speed/bench_serve.py [--corpus musique] [--backend lucene] [--requests 2000]
        [--home .mhindex-eval]

Starts `mhindex serve` with its default limits in a child process, then:
- single queries in mhindex's own API (POST /search, k=10), IRCoT's (POST /retrieve/, the
  request of its bm25 participant, max_hits_count 6 as its MuSiQue config has it) and ColBERT's
  (GET /api/search, k=10), from 1, 8 and 32 concurrent clients: requests/s, p50 and p99 latency;
- Search-R1 batches of 512 and 2,560 queries (PPO's and GRPO's search step, topk 3): queries/s
  served and in process (`search_many`), and their ratio.
Queries are the corpus's questions. Every answer is checked against the in-process search of the
same query (the same ids in the same order): a lost or mixed-up answer is counted as wrong, and
the run fails if there is any. The clients are plain `http.client` connections kept alive, one
per client thread, so that the load generator costs as little as it can on the same cores.
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode

import orjson

from mhindex.backends import BackendSpec, open_retriever
from mhindex.home import open_corpus


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class Connections:
    """One kept-alive connection per client thread."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.local = threading.local()

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        connection = getattr(self.local, "connection", None)
        if connection is None:
            connection = self.local.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        payload = orjson.dumps(body) if body is not None else None
        connection.request(method, path, body=payload, headers={"Content-Type": "application/json"} if payload else {})
        response = connection.getresponse()
        return response.status, response.read()


def protocols(
    k: int,
) -> dict[str, tuple[Callable[[str], tuple[str, str, dict | None]], Callable[[bytes], list[str]], int]]:
    """Per protocol: the request for a query, the ids in its answer, and the k it asks for."""
    return {
        "mhindex": (
            lambda q: ("POST", "/search", {"query": q, "k": k}),
            lambda data: [h["id"] for h in orjson.loads(data)["hits"]],
            k,
        ),
        "ircot": (
            lambda q: (
                "POST",
                "/retrieve/",
                {
                    "retrieval_method": "retrieve_from_elasticsearch",
                    "query_text": q,
                    "max_hits_count": 6,
                    "corpus_name": "musique",
                    "document_type": "title_paragraph_text",
                },
            ),
            lambda data: [h["id"] for h in orjson.loads(data)["retrieval"]],
            6,
        ),
        "colbert": (
            lambda q: ("GET", "/api/search?" + urlencode({"query": q, "k": k}), None),
            lambda data: [h["id"] for h in orjson.loads(data)["topk"]],
            k,
        ),
    }


def in_process(retriever, queries: list[str], work: list[str]) -> tuple[list[float], float, dict]:
    """Each request's seconds searched in process, one thread; the total; and Search-R1's batches' best queries/s."""
    latencies = []
    started = time.perf_counter()
    for query in work:
        began = time.perf_counter()
        retriever.search(query, 10)
        latencies.append(time.perf_counter() - began)
    seconds = time.perf_counter() - started
    batches = {}
    for size in (512, 2560):
        batch = [queries[i % len(queries)] for i in range(size)]
        best = float("inf")
        for _ in range(3):  # warm, as the server is after its own warm-up
            began = time.perf_counter()
            retriever.search_many(batch, 3)
            best = min(best, time.perf_counter() - began)
        batches[size] = (batch, size / best)
    return latencies, seconds, batches


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, int]:
    """`mhindex serve` at its default limits on a free port, once it answers /health (given two minutes)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "mhindex", "--quiet", "--home", str(args.home), "serve", args.corpus,
               "--backend", args.backend, "--port", str(port)]  # fmt: skip
    server = subprocess.Popen(command)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if Connections(port).request("GET", "/health")[0] == 200:
                return server, port
        except OSError:
            pass
        time.sleep(0.2)
    server.terminate()
    raise SystemExit(f"mhindex serve did not answer /health on port {port} within 120 s")


def served_rows(port: int, work: list[str], expected: dict) -> int:
    """Each protocol from 1, 8 and 32 clients: a row each; how many answers were lost or wrong."""
    failures = 0
    for name, (make, read, k) in protocols(10).items():
        for clients in (1, 8, 32):
            connections = Connections(port)

            def one(query: str, make=make, read=read, k=k, connections=connections) -> tuple[float, bool]:
                began = time.perf_counter()
                status, data = connections.request(*make(query))
                return time.perf_counter() - began, status == 200 and read(data) == expected[k][query]

            with ThreadPoolExecutor(clients) as pool:
                list(pool.map(one, work[: clients * 4]))  # connections opened, caches warm
                started = time.perf_counter()
                results = list(pool.map(one, work))
                seconds = time.perf_counter() - started
            latencies = [t for t, _ in results]
            wrong = sum(not ok for _, ok in results)
            failures += wrong
            label = f"served, {clients} client{'s' if clients > 1 else ''}"
            print(
                f"{name:<10} {label:<22} {len(work) / seconds:>10,.0f} {statistics.median(latencies) * 1000:>8.2f} "
                f"{percentile(latencies, 0.99) * 1000:>8.2f} {wrong:>6}"
            )
    return failures


def served_batches(port: int, batches: dict, expected: dict) -> int:
    """Search-R1's batches served, beside in process: a row each; how many answers were lost or wrong."""
    print(f"\n{'Search-R1 batch':<16} {'in process q/s':>14} {'served q/s':>11} {'x in process':>12} {'wrong':>6}")
    connections, failures = Connections(port), 0
    for size, (batch, in_process) in batches.items():
        connections.request("POST", "/retrieve", {"queries": batch[:64], "topk": 3})  # warm
        began = time.perf_counter()
        status, data = connections.request("POST", "/retrieve", {"queries": batch, "topk": 3, "return_scores": True})
        served = size / (time.perf_counter() - began)
        result = orjson.loads(data)["result"] if status == 200 else []
        right = sum(
            [h["document"]["id"] for h in hits] == expected[3][q] for q, hits in zip(batch, result, strict=False)
        )
        failures += size - right
        print(f"{f'{size:,} queries':<16} {in_process:>14,.0f} {served:>11,.0f} {served / in_process:>12.2f} "
              f"{size - right:>6}")  # fmt: skip
    return failures


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

    retriever = open_retriever(corpus, BackendSpec.parse(args.backend))
    expected = {k: {q: [h.id for h in retriever.search(q, k)] for q in queries} for k in (3, 6, 10)}
    latencies, seconds, batches = in_process(retriever, queries, work)
    retriever.close()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{args.backend} on {args.corpus} ({len(queries)} distinct questions as queries), {len(work)} requests "
        f"per row, server at its default limits; load average before: {load}"
    )
    print(f"{'protocol':<10} {'where':<22} {'requests/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'wrong':>6}")
    print(
        f"{'-':<10} {'in process, 1 thread':<22} {len(work) / seconds:>10,.0f} "
        f"{statistics.median(latencies) * 1000:>8.2f} {percentile(latencies, 0.99) * 1000:>8.2f} {'-':>6}"
    )
    server, port = start_server(args)
    try:
        failures = served_rows(port, work, expected) + served_batches(port, batches, expected)
    finally:
        server.terminate()
        server.wait(timeout=30)
    if failures:
        raise SystemExit(f"{failures} answers were lost or did not match their request")


if __name__ == "__main__":
    main()
