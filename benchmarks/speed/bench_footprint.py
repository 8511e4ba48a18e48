"""The preflight's estimates beside measured peaks: the conversion and each backend's index build, on the
bundled MuSiQue sample and on synthetic DPR-layout corpora (benchmarks/speed/bench_scale.py's passages), with the peak
resident memory of the command's process tree and the peak disk under the data root (both polled every 0.2 s),
and what the preflight said before it began (`conversion_footprint`, `Backend.footprint`).

    .venv/bin/python benchmarks/speed/bench_footprint.py [--sizes 100000,300000] [--backends lucene,bm25s,dense]
        [--dense-sizes 20000] [--threads 2]

A ratio above 1 is an estimate above what the build took (it refuses early, never late); the constants in the
backends' modules come from these runs. `anon` is the peak without file-backed pages (TreePeak.anonymous): PISA
writes its index through memory-mapped files, resident as page cache the kernel can drop, so its estimate is held
against that column.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import TreePeak, write_input  # noqa: E402  (the same passages and polling as the scale runs)

MHINDEX = [sys.executable, "-m", "mhindex"]


def mhindex(home: Path, *args: str) -> None:
    env = {**os.environ, "MHINDEX_HOME": str(home), "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([*MHINDEX, *args, "-q"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"mhindex {' '.join(args)} failed: {done.stderr[-2000:]}")


def measure(home: Path, *args: str) -> tuple[float, int, int, int]:
    """Seconds, peak memory (resident, anonymous) and peak disk of one mhindex command (the preflight off: it is what
    is measured)."""
    env = {**os.environ, "MHINDEX_HOME": str(home), "PYTHONPATH": str(REPO / "src")}
    command = [*MHINDEX, *args, "--force", "--no-preflight", "-q"]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peaks = TreePeak(process.pid, home)
    _, err = process.communicate()
    peaks.stop()
    if process.returncode != 0:
        raise SystemExit(f"mhindex {' '.join(args)} failed: {err.decode()[-2000:]}")
    return time.perf_counter() - started, peaks.tree, peaks.anonymous, peaks.disk


def row(step: str, name: str, paragraphs: int, corpus_bytes: int, need: tuple[int, int], took: tuple) -> None:
    seconds, memory, anonymous, disk = took
    print(
        f"{step:8}{name:>10}{paragraphs:>12,}{corpus_bytes / 2**20:>8.1f}  "
        f"{need[0] / 2**20:>9.0f} / {memory / 2**20:>6.0f} MB ({need[0] / memory:.2f}x)"
        f" anon {anonymous / 2**20:>6.0f} ({need[0] / anonymous:.2f}x)"
        f"  {need[1] / 2**20:>8.1f} / {disk / 2**20:>6.1f} MB ({need[1] / max(disk, 1):.2f}x)"
        f"  {seconds:>6.1f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,300000", help="synthetic corpora's paragraphs (0: none)")
    parser.add_argument("--dense-sizes", default="20000", help="the dense backend's (encoding is slow on CPU)")
    parser.add_argument("--backends", default="lucene,bm25s,dense")
    parser.add_argument("--threads", type=int, help="the index builds' --threads (each backend's default if not given)")
    args = parser.parse_args()
    os.environ.setdefault("MHINDEX_HOME", tempfile.mkdtemp(prefix="mhindex-footprint-"))
    home = Path(os.environ["MHINDEX_HOME"])
    from mhindex.backends import BackendSpec
    from mhindex.backends.indexes import footprint_of
    from mhindex.corpora import DATASETS, samples_dir
    from mhindex.corpora.build import conversion_footprint, expected_corpus_bytes
    from mhindex.home import open_corpus

    backends = args.backends.split(",")
    print(f"{'step':8}{'corpus':>10}{'paragraphs':>12}{'MB':>8}  {'memory: estimate / peak':>26}{'':>20}"
          f"  {'disk: estimate / peak':>24}  seconds", flush=True)  # fmt: skip
    corpora = []
    inputs = {"musique": [samples_dir() / "musique" / f for f in DATASETS["musique"].samples]}
    for size in sorted({0, *map(int, args.sizes.split(",")), *map(int, args.dense_sizes.split(","))}):
        name, dataset = ("musique", "musique") if size == 0 else (f"dpr{size}", "dpr")
        if size:
            inputs[name] = [write_input("dpr", size, Path(tempfile.mkdtemp(prefix="input-", dir=home)))]
        took = measure(home, "corpus", dataset, *(a for f in inputs[name] for a in ("-i", str(f))), "--name", name)
        corpus = open_corpus(home, name)
        size_of = corpus.corpus.stat().st_size
        need = conversion_footprint(expected_corpus_bytes(inputs[name]))
        row("corpus", name, corpus.manifest()["counts"]["paragraphs"], size_of, need, took)
        corpora.append((name, size))
    dense_sizes = {0, *map(int, args.dense_sizes.split(","))}
    threads = ("--threads", str(args.threads)) if args.threads else ()
    for backend in backends:
        for name, size in corpora:
            if size not in (dense_sizes if backend == "dense" else {0} | set(map(int, args.sizes.split(",")))):
                continue
            corpus = open_corpus(home, name)
            spec = BackendSpec.parse(backend, {"threads": args.threads})  # None: the backend's default
            need = footprint_of(corpus, spec.backend(), spec.index_options())
            assert need is not None
            took = measure(home, "index", name, "--backend", backend, *threads)
            paragraphs, size_of = corpus.manifest()["counts"]["paragraphs"], corpus.corpus.stat().st_size
            row(backend, name, paragraphs, size_of, (need.memory, need.disk), took)


if __name__ == "__main__":
    main()
