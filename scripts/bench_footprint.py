"""The preflight's estimates beside measured peaks: each backend's index build, on the bundled MuSiQue sample and on
synthetic DPR-layout corpora (scripts/bench_scale.py's passages), with the peak resident memory of the build's
process tree and the peak disk under the data root (both polled every 0.1 s), and what `Backend.footprint` said
before it began.

    .venv/bin/python scripts/bench_footprint.py [--sizes 100000,300000] [--backends lucene,bm25s,dense]
        [--dense-sizes 20000]

A ratio above 1 is an estimate above what the build took (it refuses early, never late); the constants in the
backends' modules come from these runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "scripts"))

from bench_scale import write_input  # noqa: E402  (the same synthetic passages as the scale runs)

MHINDEX = [sys.executable, "-m", "mhindex"]


def used_bytes(folder: Path) -> int:
    """Bytes allocated under a folder (st_blocks: what the disk gives up, sparse files counted as written)."""
    total = 0
    for place, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(place, name)).st_blocks * 512
            except OSError:  # removed while walked
                pass
    return total


class Peaks:
    """The peak resident memory of a process tree and the peak disk used under a folder, polled every 0.1 s."""

    def __init__(self, pid: int, folder: Path) -> None:
        self.process, self.folder, self.base = psutil.Process(pid), folder, used_bytes(folder)
        self.memory = self.disk = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                tree = [self.process, *self.process.children(recursive=True)]
                self.memory = max(self.memory, sum(p.memory_info().rss for p in tree))
            except psutil.Error:
                pass
            self.disk = max(self.disk, used_bytes(self.folder) - self.base)
            self._stop.wait(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def mhindex(home: Path, *args: str) -> None:
    env = {**os.environ, "MHINDEX_HOME": str(home), "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([*MHINDEX, *args, "-q"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"mhindex {' '.join(args)} failed: {done.stderr[-2000:]}")


def measure(home: Path, name: str, backend: str) -> tuple[float, int, int]:
    """Seconds, peak memory and peak disk of one forced build (the preflight off: it is what is measured)."""
    env = {**os.environ, "MHINDEX_HOME": str(home), "PYTHONPATH": str(REPO / "src")}
    command = [*MHINDEX, "index", name, "--backend", backend, "--force", "--no-preflight", "-q"]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peaks = Peaks(process.pid, home)
    _, err = process.communicate()
    peaks.stop()
    if process.returncode != 0:
        raise SystemExit(f"indexing {name} with {backend} failed: {err.decode()[-2000:]}")
    return time.perf_counter() - started, peaks.memory, peaks.disk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,300000", help="synthetic corpora's paragraphs (0: none)")
    parser.add_argument("--dense-sizes", default="20000", help="the dense backend's (encoding is slow on CPU)")
    parser.add_argument("--backends", default="lucene,bm25s,dense")
    args = parser.parse_args()
    os.environ.setdefault("MHINDEX_HOME", tempfile.mkdtemp(prefix="mhindex-footprint-"))
    home = Path(os.environ["MHINDEX_HOME"])
    from mhindex.backends import BackendSpec
    from mhindex.backends.indexes import footprint_of
    from mhindex.home import open_corpus

    backends = args.backends.split(",")
    corpora = [("musique", 0)]
    mhindex(home, "corpus", "musique")
    for size in {*map(int, args.sizes.split(",")), *map(int, args.dense_sizes.split(","))} - {0}:
        folder = Path(tempfile.mkdtemp(prefix="input-", dir=home))
        mhindex(home, "corpus", "dpr", "-i", str(write_input("dpr", size, folder)), "--name", f"dpr{size}")
        corpora.append((f"dpr{size}", size))
    dense_sizes = {0, *map(int, args.dense_sizes.split(","))}
    print(f"{'backend':8}{'corpus':>10}{'paragraphs':>12}{'MB':>8}  {'memory: estimate / peak':>26}"
          f"  {'disk: estimate / peak':>24}  seconds", flush=True)  # fmt: skip
    for backend in backends:
        for name, size in sorted(corpora, key=lambda c: c[1]):
            if (
                backend == "dense"
                and size not in dense_sizes
                or backend != "dense"
                and size not in {0} | set(map(int, args.sizes.split(",")))
            ):
                continue
            corpus = open_corpus(home, name)
            spec = BackendSpec.parse(backend, {})
            need = footprint_of(corpus, spec.backend(), spec.index_options())
            assert need is not None
            seconds, memory, disk = measure(home, name, backend)
            paragraphs = corpus.manifest()["counts"]["paragraphs"]
            print(
                f"{backend:8}{name:>10}{paragraphs:>12,}{corpus.corpus.stat().st_size / 2**20:>8.1f}  "
                f"{need.memory / 2**20:>9.0f} / {memory / 2**20:>6.0f} MB ({need.memory / memory:.2f}x)"
                f"  {need.disk / 2**20:>8.1f} / {disk / 2**20:>6.1f} MB ({need.disk / max(disk, 1):.2f}x)"
                f"  {seconds:>6.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
