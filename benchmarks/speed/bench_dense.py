"""Dense (FAISS), and with --colbert ColBERT, against Lucene BM25 on the bundled samples, side by side in one run:
paragraphs encoded per second, index build time, query latency, and recall of the gold
paragraphs of each sample's questions at 5 and 15; with --hybrid, also Lucene and dense fused
(`--backend lucene+dense`: reciprocal rank fusion, and weighted normalised scores 0.5/0.5).

    .venv/bin/python benchmarks/speed/bench_dense.py [--datasets musique,hotpotqa,2wikimultihopqa] [--faiss-index flat]
        [--hybrid] [--combined] [--fusion-depths 100,30]

--combined puts every listed dataset's sample paragraphs into each corpus (`mhindex corpus D --add ...`),
so that each dataset's questions are searched among all the Wikipedia samples together.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from mhindex.backends import BackendSpec, build_index, open_retriever  # noqa: E402
from mhindex.corpora import DATASETS, samples_dir  # noqa: E402
from mhindex.corpora.build import Source, build_corpus  # noqa: E402


def recall(retriever, questions, k):
    shares = [
        len({h.id for h in retriever.search(q["question"], k)} & set(q["gold_ids"])) / len(q["gold_ids"])
        for q in questions
        if q["gold_ids"]
    ]
    return statistics.mean(shares)


def latency_ms(retriever, questions):
    # Warm-up, a whole pass: the JVM compiles Lucene's code paths for deep rankings on first use, and 20
    # queries were not enough (the first fusion measured read up to 2x slower than the same one later).
    for q in questions:
        retriever.search(q["question"], 10)
    times = []
    for q in questions:
        started = time.perf_counter()
        retriever.search(q["question"], 10)
        times.append(time.perf_counter() - started)
    times.sort()
    return times[len(times) // 2] * 1000, times[min(len(times) - 1, int(len(times) * 0.99))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="musique,hotpotqa,2wikimultihopqa")
    parser.add_argument("--faiss-index", default="flat")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--colbert", action="store_true", help="also ColBERT (slow on CPU: minutes per thousand paragraphs)"
    )
    parser.add_argument("--hybrid", action="store_true", help="also lucene+dense fused (rrf and weighted)")
    parser.add_argument("--combined", action="store_true", help="each corpus holds every listed sample")
    parser.add_argument("--fusion-depths", default="100", help="candidates asked of each part, comma-separated")
    args = parser.parse_args()
    # ColBERT compiles its C++ extensions once per cache folder; keep them between runs so that the
    # build time of the first dataset is indexing, not compiling.
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache" / "mhindex" / "torch_extensions"))
    print(
        f"{'dataset':16}{'backend':9}{'paras':>7}{'build s':>9}{'paras/s':>9}"
        f"{'p50 ms':>8}{'p99 ms':>8}{'R@5':>7}{'R@15':>7}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            spec = DATASETS[name]
            others = [other for other in args.datasets.split(",") if other != name] if args.combined else []
            extra = [
                Source(DATASETS[o], [samples_dir() / o / f for f in DATASETS[o].samples], questions=False)
                for o in others
            ]
            corpus = build_corpus(
                spec, [samples_dir() / name / f for f in spec.samples], Path(tmp), extra_sources=extra
            ).corpus
            questions = [orjson.loads(line) for line in corpus.questions.read_bytes().splitlines()]
            backends = [("lucene", {}), ("dense", {"faiss_index": args.faiss_index, "threads": args.threads})]
            if args.colbert:
                backends.append(("colbert", {"threads": args.threads}))
            for backend, options in backends:
                started = time.perf_counter()
                result = build_index(corpus, BackendSpec.parse(backend, options))
                seconds = time.perf_counter() - started
                retriever = open_retriever(corpus, BackendSpec.parse(backend, {"threads": args.threads}))
                p50, p99 = latency_ms(retriever, questions)
                paragraphs = result.manifest["paragraphs"]
                print(
                    f"{name:16}{backend:9}{paragraphs:>7}{seconds:>9.1f}{paragraphs / seconds:>9.0f}"
                    f"{p50:>8.1f}{p99:>8.1f}"
                    f"{recall(retriever, questions, 5):>7.3f}{recall(retriever, questions, 15):>7.3f}"
                )
                retriever.close()
            depths = [int(d) for d in args.fusion_depths.split(",")]
            fusions = [
                (f"{kind}{'' if depth == 100 else f'@{depth}'}", {"fusion": kind, "fusion_depth": depth})
                for depth in depths
                for kind in ("rrf", "weighted")
            ]
            fusions = fusions if args.hybrid else []
            for label, options in fusions:
                retriever = open_retriever(
                    corpus, BackendSpec.parse("lucene+dense", {**options, "threads": args.threads})
                )
                p50, p99 = latency_ms(retriever, questions)
                print(
                    f"{name:16}{label:9}{paragraphs:>7}{'-':>9}{'-':>9}{p50:>8.1f}{p99:>8.1f}"
                    f"{recall(retriever, questions, 5):>7.3f}{recall(retriever, questions, 15):>7.3f}"
                )
                retriever.close()


if __name__ == "__main__":
    main()
