"""What a one-off dense search waits for: a new process's imports, the encoder's start (its tokenizer, read with
`tokenizers` alone, and ONNX Runtime sessions of the int8 export), the FAISS index's load, then the query itself; and a
second searcher of the same index in the same process, which shares the loaded encoder (encoders.make_encoder). Side
by side in one run: the whole `mhindex search --backend dense` and `--backend lucene` command, wall and CPU seconds,
each in a process of its own.

    .venv/bin/python benchmarks/speed/bench_dense_oneoff.py     # -> benchmarks/results/bench_dense_oneoff.txt

A user once saw 54 s for one dense search on a loaded machine (5.7 s of CPU): the CPU seconds are the machine's
work; the wall seconds follow the load.
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "benchmarks" / "results" / "bench_dense_oneoff.txt"
SAMPLE = REPO / "src" / "mhindex" / "corpora" / "samples" / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
QUERY = "Who founded the company that made the Van Hook Township courthouse?"

PHASES = r"""
import json, os, sys, time, resource
from pathlib import Path
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
marks, began = [], (time.perf_counter(), cpu())
def mark(name):
    marks.append((name, time.perf_counter() - began[0], cpu() - began[1]))
from mhindex.backends import BackendSpec, open_retriever
from mhindex.home import open_corpus
mark("import mhindex's backends")
import faiss, onnxruntime, tokenizers  # what the dense backend imports when it opens (not transformers)
mark("import faiss, onnxruntime, tokenizers")
corpus = open_corpus(Path(sys.argv[1]), "musique")
first = open_retriever(corpus, BackendSpec.parse("dense"))
mark("open the index (encoder start, FAISS load)")
first.search(sys.argv[2], 10)
mark("the first query")
first.search(sys.argv[2] + " again", 10)
mark("a second query")
second = open_retriever(corpus, BackendSpec.parse("dense"))
mark("a second searcher of the same index (the encoder shared)")
second.search(sys.argv[2], 10)
mark("its first query")
heavy = [m for m in ("transformers", "torch") if m in sys.modules]
mark("of transformers and torch, imported: " + (", ".join(heavy) or "none"))
print(json.dumps(marks))
"""


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], env: dict) -> tuple[float, float, str]:
    """Wall and CPU seconds of a command run in a process of its own, and its stdout."""
    before, began = _child_cpu(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return time.perf_counter() - began, _child_cpu() - before, done.stdout


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="bench-dense-oneoff-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    env = {**os.environ, "MHINDEX_HOME": str(home)}
    mhindex = [sys.executable, "-m", "mhindex"]
    subprocess.run([*mhindex, "--quiet", "build", "musique", "--input", str(SAMPLE)], env=env, check=True)
    subprocess.run([*mhindex, "--quiet", "index", "musique", "--backend", "dense"], env=env, check=True)
    lines = [f"One-off searches of the MuSiQue sample (1,674 paragraphs), {time.strftime('%Y-%m-%d')}, "
             f"load average {os.getloadavg()[0]:.2f} at the start", ""]  # fmt: skip
    for backend in ("dense", "lucene", "dense", "lucene"):  # twice each, interleaved: the second pair warm on disk
        wall, cpu, _ = timed([*mhindex, "search", "musique", QUERY, "--backend", backend, "--json"], env)
        lines.append(f"mhindex search --backend {backend:<6}  wall {wall:5.1f} s  CPU {cpu:5.1f} s")
    wall, cpu, out = timed([sys.executable, "-c", PHASES, str(home), QUERY], env)
    lines += ["", f"in one process (wall {wall:.1f} s, CPU {cpu:.1f} s), cumulative:"]
    previous = (0.0, 0.0)
    for name, at, used in json.loads(out):
        lines.append(f"  {name:<58} +{at - previous[0]:5.2f} s wall  +{used - previous[1]:5.2f} s CPU")
        previous = (at, used)
    text = "\n".join(lines) + "\n"
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
