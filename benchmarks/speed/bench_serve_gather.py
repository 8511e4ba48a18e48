"""Dense serving under many clients: 32 clients sending single /search requests (the questions as queries) to a
dense index served with --gather-ms 0 (the default: each request encoded and searched alone) and 2 (requests
arriving together encoded and searched as one batch), side by side in one run: requests/s and p50/p99.

    .venv/bin/python benchmarks/speed/bench_serve_gather.py [--home .mhindex-eval] [--corpus musique]
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from servers import Uvicorn

CLIENTS, REQUESTS = 32, 2000


def run(corpus, gather_ms: float, questions: list[str]) -> str:
    from mhindex.backends import BackendSpec, open_index
    from mhindex.server.app import Limits, index_info, make_app

    opened = open_index(corpus, BackendSpec.parse("dense"))
    info = index_info(corpus, "dense", opened.settings, opened.fingerprint)
    app = make_app(opened.retriever, info, Limits(gather_ms=gather_ms), access_log=False, batches=True)
    waits: list[float] = []
    try:
        with Uvicorn(app) as server, httpx.Client(limits=httpx.Limits(max_connections=CLIENTS)) as client:

            def ask(number: int) -> None:
                sent = time.perf_counter()
                reply = client.post(f"{server.url}/search", json={"query": questions[number % len(questions)], "k": 3})
                assert reply.status_code == 200
                waits.append(time.perf_counter() - sent)

            started = time.perf_counter()
            with ThreadPoolExecutor(CLIENTS) as pool:
                list(pool.map(ask, range(REQUESTS)))
            seconds = time.perf_counter() - started
    finally:
        opened.close()
    waits.sort()
    p50, p99 = waits[len(waits) // 2] * 1000, waits[int(len(waits) * 0.99)] * 1000
    return f"--gather-ms {gather_ms:>3}  {REQUESTS / seconds:7,.0f} requests/s  p50 {p50:7.1f} ms  p99 {p99:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=Path(".mhindex-eval"))
    parser.add_argument("--corpus", default="musique")
    args = parser.parse_args()
    import orjson

    from mhindex.cli import main as mhindex
    from mhindex.home import corpus_dir

    if mhindex(["--quiet", "--home", str(args.home), "index", args.corpus, "--backend", "dense"]) != 0:
        raise SystemExit(f"cannot index {args.corpus} under {args.home}")
    corpus = corpus_dir(args.home, args.corpus)
    questions = [orjson.loads(line)["question"] for line in corpus.questions.read_text().splitlines()]
    print(f"dense (all-MiniLM-L6-v2, int8 ONNX, FAISS flat) on {args.corpus}: {CLIENTS} clients, {REQUESTS} requests")
    for gather_ms in (0.0, 2.0):
        print(run(corpus, gather_ms, questions), flush=True)


if __name__ == "__main__":
    main()
