"""RL rollout traffic against a retrieval server: `mhindex serve` beside Search-R1's own `retrieval_server.py`,
on the same Lucene index, with the same traffic, sent by verl's own search client.

The traffic is what verl's search tool sends during Search-R1-style training (volcengine/verl, its
examples/sglang_multiturn/config/tool_config/search_tool_config.yaml: 120 workers, a 30 s timeout): 120 clients,
each posting Search-R1 `/retrieve` batches (topk 3, return_scores) of 1 to 16 queries (a batch of n with weight
1/n: 4.7 queries on average), the queries drawn from the samples' questions and MuSiQue's sub-questions. Each
client calls verl's `perform_single_search_batch` (verl/tools/utils/search_r1_like_utils.py, loaded unchanged from
a git mirror: it retries a 5xx answer, a timeout or a refused connection up to 10 times, waiting 1, 2, ... s).

Three phases a server:
1. closed loop: the 120 clients send as fast as they are answered, `--seconds` long after a warm-up: what it
   sustains (requests/s, queries/s, p50/p95/p99 as verl sees them, failed requests, verl's retries);
2. open loop at `--overload` times the requests/s phase 1 measured (each request its own client, sent on
   schedule whatever came back), raw HTTP without verl's retries: how many are answered, refused (429/503) or
   failed, how fast each, and how long after the phase the server answers a single query as fast as before it
   (no request left running past its client);
3. open loop at each of `--rates` (raw HTTP, no retries): the latency each offered rate gets, and the highest at
   which every request is answered with p99 <= 1 s (phase 1's p99 is not that: see `at_rates`).
Memory: the server's process tree, resident, sampled every 0.2 s (peak and at the end of each phase).

The corpus: `--paragraphs` passages in wiki-18's layout (Search-R1's and FlashRAG's corpus: `{"id", "contents"}`,
a quoted title on the first line), each a title and about 100 words of real sentences drawn at random from the
three samples' paragraphs (HotpotQA, 2WikiMultihopQA, MuSiQue): real English terms and postings, though no
Wikipedia dump can be downloaded here. Made once in `--workdir`, built with `mhindex corpus jsonl` and indexed with
`mhindex index --backend lucene`, and kept: a rerun goes straight to the load.

Search-R1's server (PeterGriffinJin/Search-R1 `search_r1/search/retrieval_server.py`, taken unchanged from a git
mirror at `--search-r1-commit`) runs in a virtualenv of its own with its imports (torch, transformers, datasets,
faiss-cpu, fastapi, uvicorn, pyserini), `--retriever_name bm25` over mhindex's Lucene index folder (pyserini's
LuceneSearcher reads it; its BM25 is pyserini's default, k1 0.9 and b 0.4), on port 8000 as its code fixes.
pyserini needs Java 21 with the jdk.incubator.vector module: `--search-r1-python` is the command that starts that
virtualenv's python with such a Java (benchmarks/README.md says how it was made here).

    .venv/bin/python benchmarks/speed/bench_rl_load.py --paragraphs 1000000 --workdir /tmp/mhindex-rl \\
        --search-r1-python "env JAVA_HOME=... /tmp/sr1-venv/bin/python" [--servers mhindex,search-r1] \\
        [--backends lucene,dense,lucene+dense] [--serve-args "--gather-ms 2 --threads 2" --serve-args ...]

Each `--serve-args` is one more mhindex server (for each backend), measured one after another in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import logging
import random
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import httpx
import orjson
import psutil

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO.parent / "shared" / "data"
SEARCH_R1_SERVER = "search_r1/search/retrieval_server.py"
VERL_CLIENT = "verl/tools/utils/search_r1_like_utils.py"
_SENTENCES = re.compile(r"(?<=[.!?])\s+")
#: a single query, as verl asks (Search-R1's server answers 500 to a request without return_scores: its endpoint
#: unpacks (results, scores) from batch_search, which returns the results alone then)
PROBE = {"queries": ["warm"], "topk": 3, "return_scores": True}


# -- the corpus and the queries ------------------------------------------------------------------------------------


def sample_paragraphs(home: Path) -> list[tuple[str, str]]:
    """(title, text) of the three samples' corpora, built with mhindex under `home`."""
    found = []
    for name in ("hotpotqa", "2wikimultihopqa", "musique"):
        subprocess.run([sys.executable, "-m", "mhindex", "--quiet", "--home", str(home), "corpus", name], check=True)
        for line in (home / name / "corpus.jsonl").read_bytes().splitlines():
            record = orjson.loads(line)
            found.append((record["title"], record["text"]))
    return found


def write_corpus(path: Path, paragraphs: int, home: Path, seed: int = 0) -> None:
    """`paragraphs` passages in wiki-18's layout, their sentences the samples' (see the module's docstring)."""
    source = sample_paragraphs(home)
    titles = [title for title, _ in source]
    sentences = [s for _, text in source for s in _SENTENCES.split(text) if len(s.split()) >= 4]
    rng = random.Random(seed)
    partial = path.with_suffix(".partial")
    with partial.open("wb") as out:
        for number in range(paragraphs):
            words, chosen = 0, []
            while words < 100:
                sentence = rng.choice(sentences)
                chosen.append(sentence)
                words += len(sentence.split())
            contents = f'"{rng.choice(titles)} ({number})"\n' + " ".join(chosen)
            out.write(orjson.dumps({"id": str(number), "contents": contents}) + b"\n")
    partial.rename(path)


def queries() -> list[str]:
    """The samples' questions and MuSiQue's sub-questions (their "#1" references dropped), as agents' queries."""
    found = []
    for record in json.loads((SAMPLES / "hotpotqa" / "hotpot_dev_distractor_v1.sample.json").read_text()):
        found.append(record["question"])
    for record in json.loads((SAMPLES / "2wikimultihopqa" / "dev.sample.json").read_text()):
        found.append(record["question"])
    for line in (SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl").read_text().splitlines():
        record = json.loads(line)
        found.append(record["question"])
        found += [re.sub(r"#\d+", "", step["question"]).strip() for step in record["question_decomposition"]]
    return [q for q in dict.fromkeys(found) if q]


class Traffic:
    """Seeded batches: n queries (1..16) with weight 1/n."""

    def __init__(self, pool: list[str], seed: int) -> None:
        self.pool, self.rng, self.lock = pool, random.Random(seed), threading.Lock()
        self.sizes, self.weights = list(range(1, 17)), [1 / n for n in range(1, 17)]

    def batch(self) -> list[str]:
        with self.lock:
            size = self.rng.choices(self.sizes, self.weights)[0]
            return [self.rng.choice(self.pool) for _ in range(size)]


def paragraph_vectors(home: Path, name: str, workdir: Path) -> Path:
    """Each paragraph's vector, in the corpus's order: the normalised mean of its sentences' vectors, each distinct
    sentence encoded once by the packaged MiniLM as mhindex encodes queries (int8 ONNX). Encoding a million
    paragraphs whole takes 5.5 hours on these two cores (benchmarks/results/bench_encode.txt), their sentences a
    few minutes; the index is then built from them with `mhindex index --vectors`, as from a GPU's."""
    import numpy as np

    from mhindex.encoders import make_encoder

    target = workdir / f"vectors-{name}.npy"
    if target.exists():
        return target
    lines = (home / name / "corpus.jsonl").read_bytes().splitlines()
    parts = [_SENTENCES.split(orjson.loads(line)["text"]) for line in lines]
    distinct = {text: number for number, text in enumerate(dict.fromkeys(s for p in parts for s in p))}
    encoder = make_encoder(None, "onnx-int8", 256, 2, home / "models")
    texts = list(distinct)
    with ThreadPoolExecutor(encoder.parallel) as pool:  # one one-core session a thread, as the dense backend encodes
        chunks = [texts[i : i + 256] for i in range(0, len(texts), 256)]
        vectors = np.concatenate(list(pool.map(encoder.encode, chunks)))
    partial = workdir / f"vectors-{name}.partial.npy"
    out = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float32, shape=(len(parts), vectors.shape[1]))
    for number, sentences in enumerate(parts):
        out[number] = vectors[[distinct[s] for s in sentences]].mean(axis=0)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    out.flush()
    del out
    partial.rename(target)
    print(f"{len(texts):,} distinct sentences encoded for {len(parts):,} paragraphs", flush=True)
    return target


# -- the servers -----------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_taken(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def git_file(mirror: Path, commit: str, path: str, into: Path) -> Path:
    """A file of a release at `commit`, out of its git mirror, unchanged."""
    target = into / Path(path).name
    target.write_bytes(subprocess.run(["git", "--git-dir", str(mirror), "show", f"{commit}:{path}"],
                                      capture_output=True, check=True).stdout)  # fmt: skip
    return target


@dataclass
class Server:
    name: str
    command: list[str]
    url: str  # its /retrieve
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    def start(self, workdir: Path, timeout: float = 600) -> None:
        self.log = workdir / (re.sub(r"[^A-Za-z0-9.+-]+", "-", self.name).strip("-") + ".log")
        self.process = subprocess.Popen(self.command, stdout=self.log.open("wb"), stderr=subprocess.STDOUT,
                                        start_new_session=True)  # fmt: skip
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            if self.process.poll() is not None:
                raise SystemExit(f"{self.name} exited while starting: see {self.log}")
            try:
                if httpx.post(self.url, json=PROBE, timeout=30).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise SystemExit(f"{self.name} did not answer in {timeout:.0f} s: see {self.log}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            for child in psutil.Process(self.process.pid).children(recursive=True):
                child.kill()
            self.process.kill()
            self.process.wait(timeout=30)


class Memory:
    """The server's process tree, resident, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        self.root, self.peak, self.now, self._stop = psutil.Process(pid), 0, 0, threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            try:
                tree = [self.root, *self.root.children(recursive=True)]
                self.now = sum(p.memory_info().rss for p in tree)
                self.peak = max(self.peak, self.now)
            except psutil.Error:
                pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


# -- the phases -----------------------------------------------------------------------------------------------------


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    queries: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    refused_latencies: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, seconds: float, queries: int, status: str) -> None:
        with self.lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status in ("success", "200"):
                self.latencies.append(seconds)
                self.queries += queries
            elif status in ("429", "503"):
                self.refused_latencies.append(seconds)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else float("nan")


def load_verl(mirror: Path, commit: str, into: Path) -> tuple[Callable[..., tuple[str, dict]], list[int]]:
    """verl's `perform_single_search_batch`, loaded unchanged; and a counter of the retries it logs."""
    path = git_file(mirror, commit, VERL_CLIENT, into)
    spec = importlib.util.spec_from_file_location("verl_search_r1_like_utils", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    retries = [0]

    class CountRetries(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("[Search Request ID") and "Retrying after" in record.getMessage():
                retries[0] += 1

    module.logger.addHandler(CountRetries())
    module.logger.setLevel(logging.INFO)
    module.logger.propagate = False
    return module.perform_single_search_batch, retries


def closed_loop(url: str, search: Callable[..., tuple[str, dict]], traffic: Traffic, clients: int,
                seconds: float) -> tuple[Tally, float]:  # fmt: skip
    """`clients` verl clients sending back to back for `seconds`; returns the tally and the seconds measured."""
    tally, stop = Tally(), threading.Event()

    def client() -> None:
        while not stop.is_set():
            batch = traffic.batch()
            sent = time.perf_counter()
            _, metadata = search(url, batch, topk=3, timeout=30)
            if not stop.is_set():
                tally.add(time.perf_counter() - sent, len(batch), metadata["status"])

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    measured = time.perf_counter() - began
    for thread in threads:
        thread.join(timeout=60)
    return tally, measured


def open_loop(url: str, traffic: Traffic, rate: float, seconds: float) -> tuple[Tally, float]:
    """Requests sent on schedule at `rate` a second for `seconds`, whatever came back (raw HTTP, 30 s
    timeout, one asyncio loop: a thread a request would starve two cores itself). Returns the
    tally and the seconds from the first request sent to the last one answered."""
    tally = Tally()

    async def run() -> float:
        # aiohttp, not httpx: httpx's pool slows with thousands of open connections, and the client became the
        # bottleneck (measured: 169 requests/s answered at 721 sent, the same server answering 360 closed-loop)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as client:

            async def one(batch: list[str]) -> None:
                sent = time.perf_counter()
                try:
                    body = {"queries": batch, "topk": 3, "return_scores": True}
                    async with client.post(url, json=body) as answer:
                        await answer.read()
                        status = str(answer.status)
                except TimeoutError:
                    status = "timeout"
                except aiohttp.ClientError as error:
                    status = type(error).__name__
                tally.add(time.perf_counter() - sent, len(batch), status)

            tasks, began, sent = [], time.perf_counter(), 0
            while (now := time.perf_counter() - began) < seconds:
                due = int(now * rate) + 1
                tasks += [asyncio.create_task(one(traffic.batch())) for _ in range(due - sent)]
                sent = due
                await asyncio.sleep(0.002)
            await asyncio.gather(*tasks)
            return time.perf_counter() - began

    return tally, asyncio.run(run())


def drained(probe: httpx.Client, url: str, idle_ms: float, limit: float = 120) -> float:
    """Seconds until a single query is answered within twice its idle latency (or 20 ms) again."""
    began = time.perf_counter()
    while time.perf_counter() - began < limit:
        sent = time.perf_counter()
        try:
            probe.post(url, json=PROBE)
        except httpx.HTTPError:
            pass
        if (time.perf_counter() - sent) * 1000 <= max(2 * idle_ms, 20):
            return time.perf_counter() - began
        time.sleep(0.1)
    return float("inf")


def idle_latency_ms(probe: httpx.Client, url: str) -> float:
    times = []
    for _ in range(20):
        sent = time.perf_counter()
        probe.post(url, json=PROBE)
        times.append((time.perf_counter() - sent) * 1000)
    return percentile(times, 0.5)


# -- the run ---------------------------------------------------------------------------------------------------------


def row(phase: str, tally: Tally, seconds: float, memory: Memory) -> str:
    answered = len(tally.latencies)
    failed = sum(n for status, n in tally.statuses.items() if status not in ("success", "200", "429", "503"))
    refused = len(tally.refused_latencies)
    return (f"  {phase:<22} {answered / seconds:8.1f} {tally.queries / seconds:9.1f} "
            f"{percentile(tally.latencies, 0.5) * 1000:8.0f} {percentile(tally.latencies, 0.95) * 1000:8.0f} "
            f"{percentile(tally.latencies, 0.99) * 1000:8.0f} {refused:8d} "
            f"{percentile(tally.refused_latencies, 0.99) * 1000:9.0f} {failed:7d} "
            f"{memory.peak / 2**30:7.2f} {memory.now / 2**30:7.2f}")  # fmt: skip


HEADER = (f"  {'phase':<22} {'req/s':>8} {'queries/s':>9} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
          f"{'refused':>8} {'ref. p99':>9} {'failed':>7} {'peak GB':>7} {'now GB':>7}")  # fmt: skip


def measure(server: Server, args: argparse.Namespace, pool: list[str], verl: tuple) -> list[str]:
    search, retries = verl
    server.start(args.workdir)
    assert server.process is not None
    memory, probe = Memory(server.process.pid), httpx.Client(timeout=30)
    lines = [f"{server.name}:"]
    try:
        closed_loop(server.url, search, Traffic(pool, 1), args.clients, args.warmup)  # warm-up, not counted
        idle = idle_latency_ms(probe, server.url)
        retries[0] = 0
        tally, seconds = closed_loop(server.url, search, Traffic(pool, 2), args.clients, args.seconds)
        lines.append(row(f"{args.clients} verl clients", tally, seconds, memory))
        lines.append(f"    verl's retries: {retries[0]}; statuses {tally.statuses}; idle single query "
                     f"{idle:.1f} ms")  # fmt: skip
        rate = args.overload * len(tally.latencies) / seconds
        before = memory.now
        over, span = open_loop(server.url, Traffic(pool, 3), rate, args.seconds)
        lines.append(row(f"open loop {rate:.0f} req/s", over, span, memory))
        lines.append(
            f"    {sum(over.statuses.values())} sent in {args.seconds:.0f} s, the last answered "
            f"{span:.1f} s after the first was sent; statuses {over.statuses}; drained "
            f"{drained(probe, server.url, idle):.1f} s after; resident {before / 2**30:.2f} GB before it"
        )
        lines += at_rates(server.url, args, pool, memory, probe, idle)
        lines += burst(server.url, pool, memory, probe, idle)
        drained(probe, server.url, idle)
        tally, seconds = single_query_clients(server.url, Traffic(pool, 4), args.single_clients, args.seconds)
        lines.append(row(f"{args.single_clients} single-query clients", tally, seconds, memory))
        lines.append(f"    statuses {tally.statuses}")
    finally:
        probe.close()
        memory.close()
        server.stop()
    return lines


def burst(url: str, pool: list[str], memory: Memory, probe: httpx.Client, idle: float, size: int = 2560) -> list[str]:
    """Search-R1's GRPO turn: one request carrying every active rollout's query (512 prompts x 5 = 2,560), three
    times, each after the server is idle again; the target is an answer within 2 s."""
    rng, took, status = random.Random(5), [], set()
    for _ in range(3):
        drained(probe, url, idle)
        body = {"queries": [rng.choice(pool) for _ in range(size)], "topk": 3, "return_scores": True}
        sent = time.perf_counter()
        answer = httpx.post(url, json=body, timeout=120)
        took.append(time.perf_counter() - sent)
        status.add(answer.status_code)
    return [f"  burst of {size:,} queries: {', '.join(f'{t:.2f}' for t in took)} s (statuses {sorted(status)}), "
            f"{size / min(took):,.0f} queries/s at best; peak {memory.peak / 2**30:.2f} GB"]  # fmt: skip


def single_query_clients(url: str, traffic: Traffic, clients: int, seconds: float) -> tuple[Tally, float]:
    """`clients` clients of one query a request each (SkyRL's and rllm's shape: up to 256 workers), sending back to
    back for `seconds` in one asyncio loop (a thread a client would starve two cores); a 503 is retried after 1 s
    as SkyRL's client retries it (counted late, not failed). The body is Search-R1's with one query, which every
    server measured here reads."""
    tally, stop = Tally(), asyncio.Event()

    async def client(session: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            query, sent = traffic.batch()[0], time.perf_counter()
            status = "timeout"
            for _ in range(10):
                try:
                    async with session.post(url, json={"queries": [query], "topk": 3, "return_scores": True}) as answer:
                        await answer.read()
                        status = str(answer.status)
                except (TimeoutError, aiohttp.ClientError) as error:
                    status = type(error).__name__
                if status not in ("500", "502", "503", "504"):
                    break
                await asyncio.sleep(1)
            if not stop.is_set():
                tally.add(time.perf_counter() - sent, 1, status)

    async def run() -> float:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session:
            tasks = [asyncio.create_task(client(session)) for _ in range(clients)]
            began = time.perf_counter()
            await asyncio.sleep(seconds)
            stop.set()
            measured = time.perf_counter() - began
            await asyncio.gather(*tasks)
            return measured

    return tally, asyncio.run(run())


def at_rates(url: str, args: argparse.Namespace, pool: list[str], memory: Memory, probe: httpx.Client,
             idle: float) -> list[str]:  # fmt: skip
    """Open loop at each of `--rates` (requests/s offered, whatever comes back, no retries): the latency a rate
    gets. A closed loop of 120 clients cannot show it: there every request waits behind the other 119 (Little's
    law: mean latency = 120 / requests/s, 0.93 s at 129 req/s), so its p99 passes 1 s at any rate under ~150."""
    lines, kept = [], []
    for seed, rate in enumerate(float(r) for r in args.rates.split(",") if r.strip()):
        drained(probe, url, idle)
        tally, span = open_loop(url, Traffic(pool, 10 + seed), rate, args.seconds)
        lines.append(row(f"offered {rate:.0f} req/s", tally, span, memory))
        good = sum(tally.statuses.values()) == len(tally.latencies) and percentile(tally.latencies, 0.99) <= 1
        kept += [rate] if good else []
    if lines:
        best = f"{max(kept):.0f} req/s" if kept else "none of the rates"
        lines.append(f"    highest rate offered with every request answered and p99 <= 1 s: {best}")
    return lines


def prepare(args: argparse.Namespace) -> tuple[Path, str]:
    """The corpus (wiki-18 layout) and mhindex's corpus and indexes of it (Lucene; dense HNSW from paragraph_vectors
    where a backend needs it), made once in the workdir."""
    home, name = args.workdir / "home", f"rl{args.paragraphs}"
    source = args.workdir / f"wiki-{args.paragraphs}.jsonl"
    if not source.exists():
        write_corpus(source, args.paragraphs, home)
    mh = [sys.executable, "-m", "mhindex", "--quiet", "--home", str(home)]
    if not (home / name / "corpus.jsonl").exists():
        subprocess.run([*mh, "corpus", "jsonl", "--input", str(source), "--name", name], check=True)
    wanted = {part for backend in args.backends.split(",") for part in backend.split("+")}
    if "search-r1" in args.servers:
        wanted.add("lucene")
    if "lucene" in wanted and not (home / name / "indexes" / "lucene" / "manifest.json").exists():
        subprocess.run([*mh, "index", name, "--backend", "lucene"], check=True)
    if "pisa" in wanted and not (home / name / "indexes" / "pisa" / "manifest.json").exists():
        subprocess.run([*mh, "index", name, "--backend", "pisa", "--threads", "2"], check=True)
    if "dense" in wanted and not (home / name / "indexes" / "dense" / "manifest.json").exists():
        vectors = paragraph_vectors(home, name, args.workdir)
        subprocess.run([*mh, "index", name, "--backend", "dense", "--vectors", str(vectors), "--faiss-index", "hnsw"],
                       check=True)  # fmt: skip
    return home, name


def servers(args: argparse.Namespace, home: Path, name: str) -> list[Server]:
    found = []
    if "mhindex" in args.servers.split(","):
        for backend in args.backends.split(","):
            for extra in args.serve_args or [""]:
                port = free_port()
                command = [sys.executable, "-m", "mhindex", "--quiet", "--home", str(home), "serve", name, "--backend",
                           backend, "--port", str(port), *shlex.split(extra)]  # fmt: skip
                label = f"mhindex {backend} {extra}".strip()
                found.append(Server(label, command, f"http://127.0.0.1:{port}/retrieve"))
    if "search-r1" in args.servers.split(","):
        if port_taken(8000):
            raise SystemExit("port 8000 is taken; Search-R1's server listens there (its code fixes it)")
        script = git_file(args.mirrors / "PeterGriffinJin+Search-R1" / "repo", args.search_r1_commit,
                          SEARCH_R1_SERVER, args.workdir)  # fmt: skip
        command = [*shlex.split(args.search_r1_python), str(script), "--index_path",
                   str(home / name / "indexes" / "lucene" / "lucene"), "--corpus_path",
                   str(home / name / "corpus.jsonl"), "--topk", "3", "--retriever_name", "bm25"]  # fmt: skip
        found.append(Server("search-r1 bm25", command, "http://127.0.0.1:8000/retrieve"))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paragraphs", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "mhindex-rl")
    parser.add_argument("--servers", default="mhindex,search-r1")
    parser.add_argument(
        "--backends", default="lucene", help="mhindex's, comma-separated: lucene, pisa, dense, lucene+dense"
    )
    parser.add_argument("--serve-args", action="append", help="more options of mhindex serve; repeated: a server each")
    parser.add_argument("--clients", type=int, default=120)
    parser.add_argument("--single-clients", type=int, default=256, help="clients of one query a request")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--overload", type=float, default=2.0)
    parser.add_argument("--rates", default="60,90,120,150", help="open-loop rates (requests/s) to measure latency at")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--search-r1-commit", default="a14dc3a")
    parser.add_argument("--verl-commit", default="b178a3cd5")
    parser.add_argument("--search-r1-python", default="")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    home, name = prepare(args)
    pool = queries()
    verl = load_verl(args.mirrors / "volcengine+verl" / "repo", args.verl_commit, args.workdir)
    chosen = servers(args, home, name)
    print(f"{args.paragraphs:,} passages (wiki-18 layout, the samples' sentences), topk 3; "
          f"{len(pool):,} distinct queries; {psutil.cpu_count()} cores")  # fmt: skip
    print(f"verl's client: volcengine/verl@{args.verl_commit} {VERL_CLIENT} perform_single_search_batch; "
          f"Search-R1: PeterGriffinJin/Search-R1@{args.search_r1_commit} {SEARCH_R1_SERVER}")  # fmt: skip
    print(HEADER, flush=True)
    for server in chosen:
        for line in measure(server, args, pool, verl):
            print(line, flush=True)


if __name__ == "__main__":
    main()
