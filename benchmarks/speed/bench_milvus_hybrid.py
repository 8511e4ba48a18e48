"""Milvus holding both halves of a hybrid (`--milvus-mode vectors+bm25`, Milvus Lite, fused by Milvus's RRF) beside
mhindex's own `lucene+dense` fusion and each half alone: recall@15 of the gold paragraphs on each sample's
questions, and milliseconds a query, in one run.

    .venv/bin/python benchmarks/speed/bench_milvus_hybrid.py [--home /tmp/milvus-hybrid]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from conftest import SAMPLES, read_jsonl

RELEASES = {
    "musique": SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl",
    "hotpotqa": SAMPLES / "hotpotqa" / "hotpot_dev_distractor_v1.sample.json",
    "2wikimultihopqa": SAMPLES / "2wikimultihopqa" / "dev.sample.json",
}
BUILDS = (["lucene"], ["dense"], ["milvus", "--milvus-mode", "vectors+bm25"])


def recall(retriever, asked: list[dict]) -> tuple[float, float]:
    """Recall@15 of the gold paragraphs, and milliseconds a query."""
    started = time.perf_counter()
    found = [{hit.id for hit in retriever.search(q["question"], 15)} for q in asked]
    seconds = (time.perf_counter() - started) / len(asked)
    share = sum(len(f & set(q["gold_ids"])) / len(q["gold_ids"]) for f, q in zip(found, asked, strict=True))
    return share / len(asked), seconds * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=Path("/tmp/milvus-hybrid"))
    args = parser.parse_args()
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.cli import main as mhindex
    from mhindex.home import corpus_dir

    for dataset, release in RELEASES.items():
        assert mhindex(["--quiet", "--home", str(args.home), "build", dataset, "--input", str(release)]) == 0
        for build in BUILDS:
            assert mhindex(["--quiet", "--home", str(args.home), "index", dataset, "--backend", *build]) == 0
        asked = read_jsonl(args.home / dataset / "questions.jsonl")
        for backend in ("lucene", "dense", "lucene+dense", "milvus"):
            retriever = open_retriever(corpus_dir(args.home, dataset), BackendSpec.parse(backend))
            try:
                recall(retriever, asked[:3])  # warm
                share, ms = recall(retriever, asked)
            finally:
                retriever.close()
            name = "milvus vectors+bm25" if backend == "milvus" else backend
            print(
                f"{dataset:16} {name:20} {len(asked)} questions  recall@15 {share:.3f}  {ms:5.1f} ms/query", flush=True
            )


if __name__ == "__main__":
    main()
