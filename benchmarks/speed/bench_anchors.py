"""mhindex next to the plain tools it wraps, side by side in one run, as ratios.

    .venv/bin/python benchmarks/speed/bench_anchors.py [--unique 140000] [--repeats 2] [--rounds 2] [--threads 2]
        [--only corpus|lucene|dense]

Each ratio is the anchor's time over mhindex's (above 1: mhindex is faster), for:
- corpus conversion: `mhindex corpus musique` (and with `--workers 1`) on MuSiQue-format records
  holding every one of --unique paragraphs --repeats times, against a plain orjson parse, hash dedup,
  seeded shuffle and write of the same file; with each one's peak memory, and whether the two
  mhindex corpora are the same bytes;
- Lucene indexing: `mhindex index` (its document preparation included) against Anserini's
  `IndexCollection` run by hand on the prepared documents, same threads;
- Lucene search: mhindex's retriever against Anserini's `SimpleSearcher` in the same JVM (ids and
  stored text of the top 10), one query at a time (p50 latency) and batched; and whether the top
  10 ids are the same;
- dense encoding: `mhindex index --backend dense` (int8 ONNX, the default) against plain
  sentence-transformers (torch fp32, batch 32) with the same packaged MiniLM on the bundled
  MuSiQue sample's paragraphs; with recall@15 of the int8 and the fp32 (torch) index.
Every timed arm but search is a fresh process, timed from start to exit; rounds alternate the arms.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_bm25 import percentiles, vocabulary  # noqa: E402
from bench_corpus import ANCHOR as CORPUS_ANCHOR  # noqa: E402
from bench_encode import ANCHOR as ENCODE_ANCHOR  # noqa: E402
from bench_encode import recall  # noqa: E402

# `mhindex` in a child process that prints its own peak RSS and its largest worker's (kB).
MHINDEX = """
import resource, sys
from mhindex.cli import main
code = main(sys.argv[1:])
usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(*usage, file=sys.stderr)
raise SystemExit(code)
"""
# Runs a command and prints its seconds and peak RSS (kB). Linux gives a child the resident size its
# parent had when it forked as a floor of its peak; this small launcher keeps that floor at its own
# few MB instead of the benchmark's hundreds.
LAUNCH = """
import resource, subprocess, sys, time
started = time.perf_counter()
code = subprocess.run(sys.argv[1:]).returncode
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
raise SystemExit(code)
"""


def each_repeated(path: Path, unique: int, repeats: int, seed: int = 0) -> int:
    """MuSiQue-format records of 20 paragraphs, words drawn with the samples' frequencies, every
    one of `unique` paragraphs appearing `repeats` times in a shuffled order; returns the paragraphs written."""
    rng = random.Random(seed)
    words = vocabulary()
    pool = [
        (" ".join(rng.choices(words, k=3)), " ".join(rng.choices(words, k=rng.randint(40, 140)))) for _ in range(unique)
    ]
    order = list(range(unique)) * repeats
    rng.shuffle(order)
    with open(path, "wb") as out:
        for q, first in enumerate(range(0, len(order), 20)):
            paragraphs = [
                {"idx": i, "title": pool[p][0], "paragraph_text": pool[p][1], "is_supporting": i < 2}
                for i, p in enumerate(order[first : first + 20])
            ]
            record = {
                "id": f"2hop__{q}",
                "paragraphs": paragraphs,
                "question": f"q{q}?",
                "question_decomposition": [],
                "answer": "a",
                "answer_aliases": [],
                "answerable": True,
            }
            out.write(orjson.dumps(record) + b"\n")
    return len(order)


def timed(command: list[str]) -> tuple[float, float, list[str]]:
    """Seconds from the command's start to its exit, its peak RSS in MB (the largest of it and its
    children), and what else it printed on stderr, split in words."""
    result = subprocess.run([sys.executable, "-c", LAUNCH, *command], capture_output=True, text=True, check=True)
    words = result.stderr.split()
    return float(words[-2]), int(words[-1]) / 1024, words[:-2]


def mhindex(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-c", MHINDEX, "--quiet", "--home", str(home), *args]


def corpus_section(root: Path, args) -> Path:
    source = root / "musique_synthetic.jsonl"
    paragraphs = each_repeated(source, args.unique, args.repeats)
    print(
        f"## corpus conversion: {paragraphs:,} MuSiQue-format paragraphs ({args.unique:,} unique, each "
        f"{args.repeats} times), {source.stat().st_size / 1e6:.0f} MB"
    )
    print(
        f"{'round':<6} {'arm':<38} {'seconds':>8} {'paragraphs/s':>13} {'x anchor':>9} {'peak MB':>8} {'worker MB':>10}"
    )
    for round_ in range(1, args.rounds + 1):
        anchor, peak, _ = timed([sys.executable, "-c", CORPUS_ANCHOR, str(source), str(root / "anchor.jsonl")])
        rows = [("plain orjson (anchor)", anchor, peak, 0.0)]
        for label, extra, name in (
            ("mhindex corpus (all cores)", [], "musique"),
            ("mhindex corpus --workers 1", ["--workers", "1"], "one"),
        ):
            seconds, _, own = timed(
                mhindex(root / "home", "corpus", "musique", "--input", str(source), "--name", name, "--force", *extra)
            )
            rows.append((label, seconds, int(own[-2]) / 1024, int(own[-1]) / 1024))
        for label, seconds, peak, worker in rows:
            print(
                f"{round_:<6} {label:<38} {seconds:>8.2f} {paragraphs / seconds:>13,.0f} "
                f"{anchor / seconds:>9.2f} {peak:>8.0f} {worker:>10.0f}"
            )
    same = all(
        (root / "home" / "musique" / f).read_bytes() == (root / "home" / "one" / f).read_bytes()
        for f in ("corpus.jsonl", "corpus.offsets", "questions.jsonl")
    )
    print(f"all cores and one process wrote the same corpus bytes: {'yes' if same else 'NO'}")
    return root / "home"


def lucene_section(home: Path, args) -> None:
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.backends.lucene import _jvm, anserini_document, index_collection_command
    from mhindex.home import corpus_dir

    corpus = corpus_dir(home, "musique")
    count = sum(1 for _ in corpus.corpus.open("rb"))
    docs = home.parent / "anserini-docs"
    docs.mkdir()
    with open(corpus.corpus, "rb") as source, open(docs / "docs.jsonl", "wb") as sink:  # what mhindex hands to Anserini
        sink.writelines(map(anserini_document, source))
    raw_index = home.parent / "anserini-index"
    raw = index_collection_command(docs, raw_index, args.threads)
    print(f"\n## Lucene indexing: {count:,} paragraphs, {args.threads} threads")
    print(f"{'round':<6} {'arm':<38} {'seconds':>8} {'paragraphs/s':>13} {'x anchor':>9}")
    for round_ in range(1, args.rounds + 1):
        shutil.rmtree(raw_index, ignore_errors=True)
        anchor, _, _ = timed(raw)
        ours, _, _ = timed(
            mhindex(home, "index", "musique", "--backend", "lucene", "--threads", str(args.threads), "--force")
        )
        for label, seconds in (("Anserini IndexCollection (anchor)", anchor), ("mhindex index", ours)):
            print(f"{round_:<6} {label:<38} {seconds:>8.1f} {count / seconds:>13,.0f} {anchor / seconds:>9.2f}")

    rows = [orjson.loads(line) for line in corpus.corpus.read_bytes().splitlines()]
    rng = random.Random(1)
    queries = [" ".join(rng.choice(rows)["text"].split()[:8]) for _ in range(args.queries)]
    retriever = open_retriever(corpus, BackendSpec.parse("lucene", {"threads": args.threads}))
    classes = _jvm()
    searcher = classes["SimpleSearcher"](str(corpus.indexes / "lucene" / "lucene"))
    searcher.set_bm25(1.2, 0.75)

    def plain(query: str) -> list[tuple[str, str]]:
        return [(h.docid, h.lucene_document.get("raw")) for h in searcher.search(query, 10)]

    plain(queries[0]), retriever.search(queries[0], 10)  # warm both
    ours_s, plain_s, same = [], [], 0
    for query in queries:  # alternate, so that drift hits both alike
        started = time.perf_counter()
        theirs = plain(query)
        plain_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        hits = retriever.search(query, 10)
        ours_s.append(time.perf_counter() - started)
        same += [h.id for h in hits] == [docid for docid, _ in theirs]
    texts, ids = classes["ArrayList"](), classes["ArrayList"]()
    for i, query in enumerate(queries):
        texts.add(query)
        ids.add(str(i))
    batch = {"plain": [], "ours": []}
    for _ in range(args.rounds):
        started = time.perf_counter()
        results = searcher.batch_search(texts, ids, 10, args.threads)
        [[(h.docid, h.lucene_document.get("raw")) for h in results.get(str(i))] for i in range(len(queries))]
        batch["plain"].append(time.perf_counter() - started)
        started = time.perf_counter()
        retriever.search_many(queries, 10)
        batch["ours"].append(time.perf_counter() - started)
    retriever.close()
    searcher.close()
    (p50, _), (a50, _) = percentiles(ours_s), percentiles(plain_s)
    print(f"\n## Lucene search: {len(queries)} queries of 8 words, same JVM")
    print(f"{'arm':<38} {'p50 ms':>8} {'batch q/s':>10}")
    plain_qps, ours_qps = (
        len(queries) / statistics.median(batch["plain"]),
        len(queries) / statistics.median(batch["ours"]),
    )
    print(f"{'Anserini SimpleSearcher (anchor)':<38} {a50:>8.2f} {plain_qps:>10,.0f}")
    print(f"{'mhindex retriever':<38} {p50:>8.2f} {ours_qps:>10,.0f}")
    print(
        f"x anchor: single query {a50 / p50:.2f}, batched {ours_qps / plain_qps:.2f}; same top-10 ids for "
        f"{same}/{len(queries)} queries"
    )


def dense_section(root: Path, args) -> None:
    from mhindex.corpora import DATASETS
    from mhindex.corpora.build import build_corpus
    from mhindex.encoders import packaged_encoder

    spec = DATASETS["musique"]
    homes = {runtime: root / f"dense-{runtime}" for runtime in ("torch", "onnx-int8")}
    for home in homes.values():
        build_corpus(
            spec, [REPO / "src" / "mhindex" / "corpora" / "samples" / "musique" / f for f in spec.samples], home
        )
    corpus_file = homes["torch"] / "musique" / "corpus.jsonl"
    count = sum(1 for _ in corpus_file.open("rb"))

    def index(runtime: str) -> list[str]:
        return mhindex(
            homes[runtime],
            "index",
            "musique",
            "--backend",
            "dense",
            "--threads",
            str(args.threads),
            "--encoder-runtime",
            runtime,
            "--force",
        )

    export, _, _ = timed(index("onnx-int8"))
    torch_seconds, _, _ = timed(index("torch"))
    print(
        f"\n## dense encoding: {count:,} paragraphs of the bundled MuSiQue sample, packaged MiniLM, "
        f"{args.threads} threads"
    )
    print(
        f"first int8 run, including the one-time ONNX export: {export:.1f} s; fp32 torch index: {torch_seconds:.1f} s"
    )
    print(f"{'round':<6} {'arm':<38} {'seconds':>8} {'paragraphs/s':>13} {'x anchor':>9}")
    for round_ in range(1, args.rounds + 1):
        anchor, _, _ = timed(
            [sys.executable, "-c", ENCODE_ANCHOR, str(corpus_file), str(packaged_encoder()), str(args.threads)]
        )
        ours, _, _ = timed(index("onnx-int8"))
        for label, seconds in (
            ("plain sentence-transformers (anchor)", anchor),
            ("mhindex index --backend dense", ours),
        ):
            print(f"{round_:<6} {label:<38} {seconds:>8.1f} {count / seconds:>13,.1f} {anchor / seconds:>9.2f}")
    int8, fp32 = recall(homes["onnx-int8"], "musique", "onnx-int8"), recall(homes["torch"], "musique", "torch")
    print(f"recall@15 of gold paragraphs: int8 {int8:.3f}, fp32 {fp32:.3f} (difference {int8 - fp32:+.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unique", type=int, default=140_000)
    parser.add_argument(
        "--repeats",
        type=int,
        default=2,
        help="times each paragraph appears in the corpus input (the issue's: 2; MuSiQue's release: about 7)",
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--only", choices=("corpus", "lucene", "dense"), help="run one section (lucene needs corpus)")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; ratios are the anchor's time over mhindex's (above 1: mhindex is faster)\n")
    with tempfile.TemporaryDirectory(prefix="bench-anchors-") as scratch:
        root = Path(scratch)
        if args.only in (None, "corpus", "lucene"):
            home = corpus_section(root, args)
        if args.only in (None, "lucene"):
            lucene_section(home, args)
        if args.only in (None, "dense"):
            dense_section(root, args)


if __name__ == "__main__":
    main()
