"""Own corpora at scale: synthetic inputs in the real layouts, converted, indexed with Lucene and
searched, printing time, peak memory (the command's process tree) and disk of each step, and raw
Anserini IndexCollection on the same documents beside mhindex's Lucene build.

    .venv/bin/python benchmarks/speed/bench_scale.py --paragraphs 1000000 --layout hotpotqa [--workdir DIR] [--keep]

(psutil, for the memory of the process tree, comes with `pip install -e ".[bench]"`.)

Layouts: `hotpotqa`, the HotpotQA abstracts release's own (a tar.bz2 of folders of bz2 JSON-lines
files, one page a line, its text a list of sentences, every title once), and `dpr`, DPR's
psgs_w100.tsv (id, quoted text, title, with its header; about three passages a title, as
Wikipedia's articles are cut into 100-word passages). Text: 100 words a passage, drawn from a
200,000-word vocabulary with Zipf-like frequencies (exponent 1.07, close to English's).
"""

from __future__ import annotations

import argparse
import bz2
import functools
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import orjson
import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

MHINDEX = [sys.executable, "-m", "mhindex"]
VOCABULARY = 200_000
WORDS_PER_PASSAGE = 100
PAGES_PER_FILE = 10_000


@functools.cache
def vocabulary(seed: int) -> list[str]:
    """The same words for every task of a seed, made once a process (7 s each: remaking them for every task of
    10,000 passages was 95% of writing the input)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(3, 11, VOCABULARY)
    return ["".join(rng.choice(letters, n)) for n in lengths]


def passages(first: int, count: int, seed: int) -> list[tuple[str, str]]:
    """`count` (title, text) pairs, deterministic from `first` and `seed`."""
    rng = np.random.default_rng((seed, first))
    words = vocabulary(seed)
    weights = 1.0 / np.arange(1, VOCABULARY + 1) ** 1.07
    cumulative = np.cumsum(weights / weights.sum())
    drawn = np.searchsorted(cumulative, rng.random((count, WORDS_PER_PASSAGE)))
    drawn = np.minimum(drawn, VOCABULARY - 1)
    titles = np.minimum(np.searchsorted(cumulative, rng.random((count, 2))), VOCABULARY - 1)
    return [
        (f"{words[a].title()} {words[b].title()} {first + i}", " ".join(words[w] for w in row))
        for i, ((a, b), row) in enumerate(zip(titles, drawn, strict=True))
    ]


def _hotpot_file(task: tuple[int, int, int]) -> bytes:
    first, count, seed = task
    lines = []
    for number, (title, text) in enumerate(passages(first, count, seed), start=first):
        words = text.split(" ")
        sentences = [" ".join(words[i : i + 20]) + "." for i in range(0, len(words), 20)]
        page = {"id": str(number), "url": f"https://en.wikipedia.org/wiki?curid={number}", "title": title}
        lines.append(orjson.dumps({**page, "text": sentences}) + b"\n")
    return bz2.compress(b"".join(lines), compresslevel=1)


def _dpr_rows(task: tuple[int, int, int]) -> bytes:
    first, count, seed = task
    rows = []
    for number, (title, text) in enumerate(passages(first, count, seed), start=first):
        article = title.rsplit(" ", 1)[0] + f" {number // 3}"  # three passages an article
        rows.append(f'{number + 1}\t"{text}"\t{article}\n'.encode())
    return b"".join(rows)


def write_input(layout: str, paragraphs: int, folder: Path, seed: int = 0) -> Path:
    tasks = [(first, min(PAGES_PER_FILE, paragraphs - first), seed) for first in range(0, paragraphs, PAGES_PER_FILE)]
    with Pool(os.cpu_count() or 1) as pool:
        if layout == "hotpotqa":
            path = folder / "enwiki-20171001-pages-meta-current-withlinks-abstracts.tar.bz2"
            # The release's outer bz2 holds bz2 files: level 1 outside, as compressing twice gains nothing.
            with tarfile.open(path, "w:bz2", compresslevel=1) as tar:
                for number, data in enumerate(pool.imap(_hotpot_file, tasks)):
                    info = tarfile.TarInfo(f"enwiki-abstracts/{number // 100:02X}/wiki_{number % 100:02d}.bz2")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
            return path
        path = folder / "psgs_w100.tsv"
        with open(path, "wb") as out:
            out.write(b"id\ttext\ttitle\n")
            for data in pool.imap(_dpr_rows, tasks):
                out.write(data)
        return path


def used_bytes(folder: Path) -> int:
    """Bytes allocated under a folder (st_blocks: what the disk gives up)."""
    total = 0
    for place, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(place, name)).st_blocks * 512
            except OSError:  # removed while walked
                pass
    return total


class TreePeak:
    """The peak resident memory of a process and its children, summed, and the peak disk used under a folder
    above what it held when the step began (its temporary files counted), polled every 0.2 s. `anonymous` is the
    tree's peak without file-backed pages (resident less psutil's `shared`): an engine that writes its index through
    memory-mapped files (PISA) is resident in page cache the kernel can drop, which the machine need not have free."""

    def __init__(self, pid: int, folder: Path) -> None:
        self.process, self.folder, self.base = psutil.Process(pid), folder, used_bytes(folder)
        self.parent = self.children = self.tree = self.anonymous = self.disk = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                infos = [self.process.memory_info()]
                infos += [c.memory_info() for c in self.process.children(recursive=True)]
            except psutil.Error:
                break
            parent, children = infos[0].rss, sum(info.rss for info in infos[1:])
            self.parent, self.children = max(self.parent, parent), max(self.children, children)
            self.tree = max(self.tree, parent + children)
            self.anonymous = max(self.anonymous, sum(info.rss - info.shared for info in infos))
            self.disk = max(self.disk, used_bytes(self.folder) - self.base)
            self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def measured(command: list[str], env: dict[str, str], workdir: Path) -> tuple[float, TreePeak, int, bytes]:
    """Run a command to its end: its seconds, its process tree's peaks, its exit status and what it wrote to stderr."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = TreePeak(process.pid, workdir)
    _, err = process.communicate()
    peak.stop()
    return time.perf_counter() - started, peak, process.returncode, err


def run(label: str, command: list[str], env: dict[str, str], workdir: Path) -> float:
    seconds, peak, returncode, err = measured(command, env, workdir)
    if returncode != 0:
        raise SystemExit(f"{label} failed: {err.decode()[-2000:]}")
    print(
        f"{label:32}{seconds:>9.1f} s  peak {peak.tree / 2**30:>5.2f} GiB "
        f"(parent {peak.parent / 2**30:.2f}, children {peak.children / 2**30:.2f}), "
        f"disk peak +{peak.disk / 2**30:.2f} GiB",
        flush=True,
    )
    return seconds


def disk(path: Path) -> str:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size
    return f"{total / 2**30:.2f} GiB"


def print_preflight(home: Path, threads: int) -> None:
    """What `mhindex index` checks before it begins, to print beside what the build then took."""
    os.environ["MHINDEX_HOME"] = str(home)
    from mhindex.backends import BackendSpec
    from mhindex.backends.indexes import footprint_of
    from mhindex.home import open_corpus

    spec = BackendSpec.parse("lucene", {"threads": threads})
    need = footprint_of(open_corpus(home, "scale"), spec.backend(), spec.index_options())
    if need is not None:
        print(f"{'  preflight estimate (lucene)':32}memory {need.memory / 2**30:.2f} GiB, "
              f"disk {need.disk / 2**30:.2f} GiB", flush=True)  # fmt: skip


def time_searches(home: Path, count: int) -> None:
    """p50 and p99 of `count` BM25 searches (k = 10) of words drawn from the passages, after one to warm the JVM."""
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import corpus_dir

    retriever = open_retriever(corpus_dir(home, "scale"), BackendSpec.parse("lucene", {}))
    rng = np.random.default_rng(1)
    texts = [p[1].split(" ") for p in passages(0, count, 7)]
    queries = [" ".join(rng.choice(words, int(rng.integers(4, 12)))) for words in texts]
    retriever.search(queries[0], 10)  # the first search warms the JVM's code
    times = []
    for query in queries:
        begun = time.perf_counter()
        retriever.search(query, 10)
        times.append((time.perf_counter() - begun) * 1000)
    times.sort()
    print(
        f"{'BM25 search, k = 10':32}p50 {statistics.median(times):.1f} ms, "
        f"p99 {times[int(len(times) * 0.99) - 1]:.1f} ms ({len(times)} queries)",
        flush=True,
    )
    retriever.close()


def raw_anserini(corpus: Path, workdir: Path, env: dict[str, str], threads: int, ours: float) -> None:
    """Raw Anserini on the very documents mhindex hands it (prepared here, untimed), and mhindex's speed beside it."""
    from mhindex.backends.lucene import anserini_document, index_collection_command

    docs, raw_index = workdir / "anserini-docs", workdir / "anserini-index"
    docs.mkdir(exist_ok=True)
    with open(corpus / "corpus.jsonl", "rb") as lines, open(docs / "docs.jsonl", "wb") as out:
        for line in lines:
            out.write(anserini_document(line))
    raw = run("raw Anserini IndexCollection", index_collection_command(docs, raw_index, threads), env, workdir)
    print(f"{'  mhindex / raw speed':32}{raw / ours:>9.2f} x", flush=True)
    shutil.rmtree(docs)
    shutil.rmtree(raw_index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paragraphs", type=int, default=1_000_000)
    parser.add_argument("--layout", choices=("hotpotqa", "dpr"), default="hotpotqa")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="Lucene indexing threads")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder, removed after")
    parser.add_argument("--keep", action="store_true", help="keep the workdir")
    parser.add_argument(
        "--lean",
        action="store_true",
        help="for a disk that holds two copies at most (21M passages: 16 GB each): remove the input once converted, "
        "and mhindex's index once searched, before raw Anserini's documents and index are written",
    )
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mhindex-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    home = workdir / "home"
    env = {**os.environ, "MHINDEX_HOME": str(home), "PYTHONPATH": str(REPO / "src")}
    dataset = "hotpotqa" if args.layout == "hotpotqa" else "dpr"
    print(f"{args.paragraphs:,} paragraphs, {args.layout} layout, {os.cpu_count()} cores, under {workdir}", flush=True)
    try:
        started = time.perf_counter()
        source = write_input(args.layout, args.paragraphs, workdir)
        print(f"{'synthetic input':32}{time.perf_counter() - started:>9.1f} s  {disk(source)} on disk", flush=True)

        run("mhindex corpus", [*MHINDEX, "corpus", dataset, "-i", str(source), "--name", "scale", "-q"], env, workdir)
        corpus = home / "scale"
        print(f"{'  corpus on disk':32}{disk(corpus / 'corpus.jsonl'):>11}", flush=True)
        if args.lean:
            source.unlink() if source.is_file() else shutil.rmtree(source)
        print_preflight(home, args.threads)
        ours = run(
            "mhindex index --backend lucene",
            [*MHINDEX, "index", "scale", "--backend", "lucene", "--threads", str(args.threads), "-q"],
            env,
            workdir,
        )
        print(f"{'  index on disk':32}{disk(corpus / 'indexes' / 'lucene'):>11}", flush=True)

        time_searches(home, args.queries)
        if args.lean:
            shutil.rmtree(corpus / "indexes" / "lucene")
        raw_anserini(corpus, workdir, env, args.threads, ours)

    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
