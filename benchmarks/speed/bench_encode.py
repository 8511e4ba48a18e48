"""Dense indexing end to end against plain sentence-transformers, side by side in one run.

    .venv/bin/python benchmarks/speed/bench_encode.py [--corpus musique] [--home .mhindex-eval] [--threads 2] \
        [--rounds 2]

Each arm is a fresh process, timed from its start to its exit, on the same paragraphs and threads:
- plain sentence-transformers (torch, fp32, batch 32) encoding "title text" of every paragraph;
- `mhindex index CORPUS --backend dense --encoder-runtime torch` (encoding and the FAISS index);
- `mhindex index CORPUS --backend dense` (the default int8 ONNX runtime; its one-time export is
  done before the rounds and reported on its own).
Prints paragraphs/s and the ratio to the anchor for each round, and recall@15 of the gold
paragraphs of the corpus's questions for both mhindex indexes. Needs `pip install -e .[bench]`.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ANCHOR = """
import sys, orjson, torch
torch.set_num_threads(int(sys.argv[3]))
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(sys.argv[2], device="cpu")
texts = [r["title"] + " " + r["text"] for r in map(orjson.loads, open(sys.argv[1], "rb"))]
model.encode(texts, batch_size=32)
"""


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def recall(home: Path, corpus: str, runtime: str) -> float:
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import corpus_dir

    questions = [
        orjson.loads(line) for line in (home / corpus / "questions.jsonl").read_bytes().splitlines() if line.strip()
    ]
    retriever = open_retriever(corpus_dir(home, corpus), BackendSpec.parse("dense", {"encoder_runtime": runtime}))
    shares = [
        len({h.id for h in retriever.search(q["question"], 15)} & set(q["gold_ids"])) / len(q["gold_ids"])
        for q in questions
        if q["gold_ids"]
    ]
    retriever.close()
    return sum(shares) / len(shares)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="musique")
    parser.add_argument("--home", type=Path, default=Path(".mhindex-eval"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    from mhindex.encoders import packaged_encoder

    work = Path(tempfile.mkdtemp(prefix="bench-encode-"))
    try:
        for runtime in ("torch", "onnx-int8"):  # one home per arm: each keeps its index for the recall
            shutil.copytree(
                args.home / args.corpus, work / runtime / args.corpus, ignore=shutil.ignore_patterns("indexes")
            )
        corpus_file = work / "torch" / args.corpus / "corpus.jsonl"
        count = sum(1 for _ in corpus_file.open("rb"))

        def index(runtime: str) -> list[str]:
            return [
                sys.executable,
                "-m",
                "mhindex",
                "--quiet",
                "--home",
                str(work / runtime),
                "index",
                args.corpus,
                "--backend",
                "dense",
                "--threads",
                str(args.threads),
                "--encoder-runtime",
                runtime,
                "--force",
            ]

        export = timed(index("onnx-int8"))  # the first run exports the encoder to ONNX, once
        print(
            f"{count:,} paragraphs of {args.corpus}, {args.threads} threads, each arm a fresh process (start to exit)"
        )
        print(f"first int8 run, including the one-time ONNX export: {export:.1f} s")
        print(f"{'round':<6} {'arm':<44} {'seconds':>8} {'paragraphs/s':>13} {'x anchor':>9}")
        for round_ in range(1, args.rounds + 1):
            anchor = timed([sys.executable, "-c", ANCHOR, str(corpus_file), str(packaged_encoder()), str(args.threads)])
            arms = [
                ("plain sentence-transformers (anchor)", anchor),
                ("mhindex index, --encoder-runtime torch", timed(index("torch"))),
                ("mhindex index, int8 ONNX (default)", timed(index("onnx-int8"))),
            ]
            for label, seconds in arms:
                print(f"{round_:<6} {label:<44} {seconds:>8.1f} {count / seconds:>13.1f} {anchor / seconds:>9.2f}")
        print(
            f"recall@15 of gold paragraphs: torch {recall(work / 'torch', args.corpus, 'torch'):.3f}, int8 "
            f"ONNX {recall(work / 'onnx-int8', args.corpus, 'onnx-int8'):.3f}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
