"""Two or more indexes of one corpus searched together, their rankings fused.

`--backend lucene+dense` (any built backends of the corpus joined by "+"; `hybrid` alone is
`lucene+dense`) searches each part's own index, as it was built, and fuses the rankings. Each
part is asked for `--fusion-depth` candidates (at least k) and the parts are searched at once,
in threads. Options go to the parts that declare them
(`--k1` to Lucene, `--encoder` to dense); the fusion's own are these:

- `rrf` (the default): reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009, as
  Pyserini's and Elasticsearch's fusion do it): a paragraph scores the sum of 1 / (k + rank) over
  the rankings it is in, rank counted from 1, `--rrf-k` 60.
- `weighted`: each ranking's scores min-max normalised to [0, 1] (BM25 scores are unbounded,
  cosine similarities are not: raw scores do not add up), then summed with `--weights`, one a
  part in order (equal by default); a paragraph a ranking lacks adds 0 from it.

Ties keep the order of the first ranking that holds them. Title-scoped search goes to every part.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from mhindex.backends.base import Backend, Candidate, CandidateSearch, Hit, Retriever
from mhindex.errors import UsageError
from mhindex.options import option

DEFAULT_PARTS = ("lucene", "dense")
FUSIONS = ("rrf", "weighted")
# The parts' searches run here; a small shared pool, since a search mostly waits on an engine.
_PARTS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="hybrid")


@dataclass(frozen=True)
class HybridOptions:
    fusion: str = option(
        "rrf",
        "hybrid: how the parts' rankings are fused: rrf (reciprocal rank) or weighted (normalised scores).",
        choices=FUSIONS,
        stage="search",
    )
    rrf_k: int = option(60, "hybrid: RRF's k: a paragraph scores 1/(k + rank) in each ranking.", min=1, stage="search")
    weights: str | None = option(
        None,
        "hybrid: --fusion weighted: one weight a part, in order, e.g. 0.7,0.3 \\[default: equal].",
        metavar="W,W",
        stage="search",
    )
    fusion_depth: int = option(100, "hybrid: candidates asked of each part (at least k).", min=1, stage="search")


def part_weights(options: HybridOptions, parts: int) -> list[float]:
    if options.weights is not None and options.fusion != "weighted":
        raise UsageError("--weights weighs the parts' normalised scores: give it with --fusion weighted")
    if options.weights is None:
        return [1.0 / parts] * parts
    try:
        weights = [float(w) for w in options.weights.split(",")]
    except ValueError:
        raise UsageError(f"--weights takes numbers separated by commas, one a part, not {options.weights!r}") from None
    if len(weights) != parts or any(not math.isfinite(w) or w < 0 for w in weights) or not any(weights):
        raise UsageError(
            f"--weights needs {parts} finite numbers of 0 or more (one a part, in order), not {options.weights!r}"
        )
    # Relative weights, made to sum to 1 (largest first, so that 1e308,1e308 sums to no inf): the ranking is the
    # same for any multiple of them, and a fused score stays within 0 and 1.
    largest = max(weights)
    scaled = [w / largest for w in weights]
    return [w / sum(scaled) for w in scaled]


def fuse(
    rankings: Sequence[Sequence[Candidate]], options: HybridOptions, weights: Sequence[float], k: int
) -> list[Hit]:
    """The top `k` of the rankings fused (see the module's docstring), each with its fused score."""
    scores: dict[str, float] = {}
    found: dict[str, Hit] = {}
    for ranking, weight in zip(rankings, weights):
        if options.fusion == "rrf":
            gains = [1.0 / (options.rrf_k + rank) for rank in range(1, len(ranking) + 1)]
        else:
            values = [score for _, score, _ in ranking]
            low, high = (min(values), max(values)) if values else (0.0, 0.0)
            gains = [weight * ((v - low) / (high - low) if high > low else 1.0) for v in values]
        for (pid, _, hit), gain in zip(ranking, gains):
            scores[pid] = scores.get(pid, 0.0) + gain
            if hit is not None:
                found.setdefault(pid, hit)
    order = sorted(scores, key=lambda i: -scores[i])[:k]  # sorted() is stable: ties keep first-seen order
    # Every part reads the text of its own top k at least: a paragraph that all the parts holding it
    # rank below k scores less than the k each of them ranks above it, so it is never kept.
    return [Hit(found[i].id, found[i].title, found[i].text, scores[i]) for i in order]


def _as_candidates(hits: Sequence[Hit]) -> list[Candidate]:
    return [(hit.id, hit.score, hit) for hit in hits]


def _candidates(retriever: Retriever, queries: Sequence[str], depth: int, keep: int) -> list[list[Candidate]]:
    """Each query's ranking by a part: from `candidates` where the engine has it (Lucene: the text of
    its top `keep` only), else its hits."""
    if isinstance(retriever, CandidateSearch):
        return retriever.candidates(queries, depth, keep)
    if len(queries) == 1:
        return [_as_candidates(retriever.search(queries[0], depth))]
    return [_as_candidates(hits) for hits in retriever.search_many(queries, depth)]


class Fused:
    """The retriever over the parts: each asked at once, the rankings fused."""

    def __init__(self, parts: Sequence[tuple[str, Retriever]], options: HybridOptions) -> None:
        self.parts = list(parts)
        self.options = options
        self.weights = part_weights(options, len(self.parts))

    def _each(self, call: Callable[[Retriever], Any]) -> list[Any]:
        """`call` on every part at once: all but one in the pool, the last on this thread. Lucene goes to
        the pool first: pyjnius keeps the GIL through a Java call, so a dense part started after it would
        wait for it; started before, its encoder and FAISS (which let the GIL go) run beside it (fused p50
        6.7 ms with both parts in the pool, 4.0 this way, on 2WikiMultihopQA's sample; parts 2.6 and 3.4).
        Lucene in a helper process of its own (its own JVM and GIL) was measured too, and was slower on two
        cores: 6.2 against 5.4 ms, the processes competing for the cores (benchmarks/README.md)."""
        order = sorted(range(len(self.parts)), key=lambda i: not hasattr(self.parts[i][1], "candidates"))
        futures = {i: _PARTS.submit(call, self.parts[i][1]) for i in order[:-1]}
        results = {order[-1]: call(self.parts[order[-1]][1])}
        results.update({i: future.result() for i, future in futures.items()})
        return [results[i] for i in range(len(self.parts))]

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        depth = max(k, self.options.fusion_depth)
        if titles is None:
            rankings = [ranking[0] for ranking in self._each(lambda r: _candidates(r, [query], depth, k))]
        else:
            rankings = [_as_candidates(hits) for hits in self._each(lambda r: r.search(query, depth, titles))]
        return fuse(rankings, self.options, self.weights, k)

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        if not queries:
            return []
        depth = max(k, self.options.fusion_depth)
        per_part = self._each(lambda r: _candidates(r, queries, depth, k))
        return [fuse(rankings, self.options, self.weights, k) for rankings in zip(*per_part)]

    def close(self) -> None:
        for _, retriever in self.parts:
            retriever.close()


class HybridBackend(Backend):
    """Registered for its options and its name; `backends.open_index` opens the parts and fuses
    them (a hybrid has no index of its own: each part is built as itself)."""

    name = "hybrid"
    queries = "each part's own"
    title = "fusion"
    Settings = HybridOptions
    builds_index = False
    #: `--backend A+B` is this backend over parts A and B; `--backend hybrid` over `default_parts`
    fuses = True
    default_parts = DEFAULT_PARTS

    def fuse(self, parts: Sequence[tuple[str, Retriever]], options: Any) -> Retriever:
        return Fused(list(parts), options)
