"""Which fusion of Lucene and dense rankings, if any, reaches the better part's recall on every sample?
(issue: hybrid retrieval; its goal is fused recall@15 >= the better part's on every dataset.)

Each sample's questions are searched to depth 100 in Lucene and in dense (MiniLM int8, FAISS flat) once,
on each dataset's own sample and on one corpus of every Wikipedia sample (`--add`); the rankings are then
fused offline by mhindex's own `fuse` (rrf, weighted min-max) and by normalisations mhindex does not ship
(z-score, distribution-based score fusion, max), at equal and unequal weights, and recall@5 and @15 of the
gold paragraphs printed for each, side by side.

    .venv/bin/python benchmarks/studies/fusion_study.py      (about 5 minutes: six dense indexes are built)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from mhindex.backends import BackendSpec, Hit, build_index, open_retriever  # noqa: E402
from mhindex.backends.hybrid import HybridOptions, fuse  # noqa: E402
from mhindex.corpora import DATASETS, samples_dir  # noqa: E402
from mhindex.corpora.build import Source, build_corpus  # noqa: E402

NAMES = ("musique", "hotpotqa", "2wikimultihopqa")
Ranking = list[tuple[str, float]]


def rankings(combined: bool, name: str, tmp: Path) -> list[tuple[list[str], Ranking, Ranking]]:
    spec = DATASETS[name]
    extra = [
        Source(DATASETS[o], [samples_dir() / o / f for f in DATASETS[o].samples], questions=False)
        for o in NAMES
        if combined and o != name
    ]
    root = tmp / f"{name}-{'all' if combined else 'own'}"
    root.mkdir()
    corpus = build_corpus(spec, [samples_dir() / name / f for f in spec.samples], root, extra_sources=extra).corpus
    build_index(corpus, BackendSpec.parse("lucene", {}))
    build_index(corpus, BackendSpec.parse("dense", {}))
    lucene, dense = (
        open_retriever(corpus, BackendSpec.parse("lucene")),
        open_retriever(corpus, BackendSpec.parse("dense")),
    )
    rows = []
    for line in corpus.questions.read_bytes().splitlines():
        question = orjson.loads(line)
        if question["gold_ids"]:
            ranked = [[(h.id, h.score) for h in part.search(question["question"], 100)] for part in (lucene, dense)]
            rows.append((question["gold_ids"], ranked[0], ranked[1]))
    lucene.close()
    dense.close()
    return rows


def summed(parts: list[dict[str, float]], weights: tuple[float, float] = (0.5, 0.5)) -> list[str]:
    scores: dict[str, float] = {}
    for part, weight in zip(parts, weights):
        for pid, value in part.items():
            scores[pid] = scores.get(pid, 0.0) + weight * value
    return sorted(scores, key=lambda i: -scores[i])


def zscore(ranking: Ranking) -> dict[str, float]:
    values = [v for _, v in ranking]
    mean, sd = statistics.mean(values), statistics.pstdev(values) or 1.0
    return {p: (v - mean) / sd - (min(values) - mean) / sd for p, v in ranking}  # absent = the lowest seen


def dbsf(ranking: Ranking) -> dict[str, float]:
    """Distribution-based score fusion (Qdrant's): scores scaled on mean +- 3 standard deviations."""
    values = [v for _, v in ranking]
    mean, sd = statistics.mean(values), statistics.pstdev(values) or 1.0
    return {p: (v - (mean - 3 * sd)) / (6 * sd) for p, v in ranking}


def by_max(ranking: Ranking) -> dict[str, float]:
    top = max(v for _, v in ranking)
    return {p: v / top for p, v in ranking}


def shipped(**options) -> Callable[[Ranking, Ranking], list[str]]:
    """mhindex's own fusion with these options (`--fusion`, `--rrf-k`, `--weights`)."""
    weights = options.pop("weights", (0.5, 0.5))
    fusion = HybridOptions(**options)

    def ranked(lucene: Ranking, dense: Ranking) -> list[str]:
        parts = [[(p, s, Hit(p, "", "", s)) for p, s in part] for part in (lucene, dense)]
        return [hit.id for hit in fuse(parts, fusion, weights, 100)]

    return ranked


VARIANTS: dict[str, Callable[[Ranking, Ranking], list[str]]] = {
    "lucene": lambda lucene, dense: [p for p, _ in lucene],
    "dense": lambda lucene, dense: [p for p, _ in dense],
    "rrf (shipped, default)": shipped(fusion="rrf"),
    "rrf k=10": shipped(fusion="rrf", rrf_k=10),
    "weighted min-max (shipped)": shipped(fusion="weighted"),
    "weighted min-max 0.4/0.6": shipped(fusion="weighted", weights=(0.4, 0.6)),
    "weighted min-max 0.6/0.4": shipped(fusion="weighted", weights=(0.6, 0.4)),
    "z-score": lambda lucene, dense: summed([zscore(lucene), zscore(dense)]),
    "dbsf": lambda lucene, dense: summed([dbsf(lucene), dbsf(dense)]),
    "max-scaled": lambda lucene, dense: summed([by_max(lucene), by_max(dense)]),
}


def recall(rows, ranker, k: int) -> float:
    return 100 * statistics.mean(
        len(set(ranker(lucene, dense)[:k]) & set(gold)) / len(gold) for gold, lucene, dense in rows
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = {(name, combined): rankings(combined, name, Path(tmp)) for combined in (False, True) for name in NAMES}
    header = "".join(f"{name[:8] + (' (all)' if combined else ''):>15}" for name, combined in data)
    for k in (15, 5):
        print(f"recall@{k}{'':19}{header}")
        best = {key: max(recall(rows, VARIANTS[p], k) for p in ("lucene", "dense")) for key, rows in data.items()}
        for label, ranker in VARIANTS.items():
            cells = [recall(rows, ranker, k) for rows in data.values()]
            marks = ["*" if c >= best[key] - 1e-9 else " " for c, key in zip(cells, data)]
            at_least = sum(m == "*" for m in marks)
            print(f"{label:28}" + "".join(f"{c:14.1f}{m}" for c, m in zip(cells, marks)) + f"   {at_least}/6")
        print()
    print("* at least the better part's recall on that corpus; the last column counts them")


if __name__ == "__main__":
    main()
