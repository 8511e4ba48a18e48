"""The retriever interface every backend implements, and what a search returns.

A backend builds an index of a corpus into an index folder and opens a `Retriever` over it.
Methods only ever see `Retriever`, so each of them runs on every backend. A backend's options
are a dataclass (`Options`) whose fields say when they take effect (see mhindex/options.py):
the CLI offers them, refuses what a backend does not know, and records the index-time ones in
the index's manifest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from mhindex.home import CorpusDir
from mhindex.requirements import Requirement


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    title: str
    text: str
    score: float

    def record(self) -> dict[str, Any]:
        """The hit as `search --json`, a TREC run and `serve` give it: the score at full precision, so that a run
        scored elsewhere ranks ties as the engine did (rounded, two close scores tie and are broken by id)."""
        return {"id": self.id, "title": self.title, "text": self.text, "score": float(self.score)}


#: A fusion's view of one part's ranking: id, score, and the hit where the part read its text (its top k:
#: a paragraph that one part alone ranks below k is never in a fused top k, so only those are read).
Candidate = tuple[str, float, Hit | None]


@runtime_checkable
class TitleSearch(Protocol):
    """A retriever that ranks pages by their title itself (Lucene's title field), for IRCoT's title
    retrieval; others get their best paragraph per page (`search_titles`)."""

    def search_titles(self, query: str, k: int) -> list[Hit]: ...


@runtime_checkable
class CandidateSearch(Protocol):
    """A retriever that ranks ids and scores cheaply and reads text for its top `keep` only (Lucene), for a
    fusion's parts."""

    def candidates(self, queries: Sequence[str], depth: int, keep: int) -> list[list[Candidate]]: ...


class Retriever(Protocol):
    """Ranked paragraphs for free-text queries. Any query text is accepted: punctuation, quotes,
    `AND`, `:` and the like are words, never syntax, and never raise."""

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        """Top `k` paragraphs. With `titles`, the paragraphs of those pages (titles compared as
        `same_title` compares them), every one of them a candidate, ranked by how well it matches
        the query: IRCoT's Elasticsearch query makes the title a filter and the text optional."""
        ...

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        """One ranked list per query, in order; backends batch where they can."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class BackendContext:
    """Where a backend keeps what outlives one index: models built once, compiled extensions."""

    home: Path

    @property
    def models(self) -> Path:
        return self.home / "models"

    @property
    def cache(self) -> Path:
        return self.home / "cache"


@dataclass(frozen=True)
class Footprint:
    """What building an index is expected to take at its peak, estimated from the corpus's size before any work:
    `mhindex index` refuses a build that cannot fit, where FlashRAG's users learnt it when the kernel killed a
    21M-passage build at 126 GB (RUC-NLPIR/FlashRAG issue #233)."""

    memory: int  # bytes: the resident memory of the build's processes together
    disk: int  # bytes written under the data root at the peak, temporary files included
    basis: str  # where the figures come from (a measured rate, a count of bytes), said beside them


class Backend:
    """An engine: it builds an index of a corpus and opens a `Retriever` over it. A backend subclasses this
    and declares what the layers above ask of it, so that none of them names it: its `name` and `title`,
    its `Options`, what it needs installed (`requirements`, which `mhindex doctor` checks) and its
    capabilities."""

    name: ClassVar[str]
    #: as tables and the report name it ("BM25 (Lucene)")
    title: ClassVar[str]
    #: its settings, a frozen dataclass of `option(...)` fields (as a method's and a dataset's), each saying
    #: when it takes effect
    Settings: ClassVar[type]
    #: how a query is read before ranking (its analyzer or tokenizer), in the retrieval environment's fingerprint
    queries: ClassVar[str] = "as given"
    #: False for an index that lives elsewhere (a served one): nothing is built or recorded here,
    #: and `open` gets no index folder and no manifest.
    builds_index: ClassVar[bool] = True
    #: what it needs installed, checked by `mhindex doctor`
    requirements: ClassVar[tuple[Requirement, ...]] = ()
    #: `--backend SCHEME...` names this backend at that address (a served index), given as `address_option`
    addresses: ClassVar[tuple[str, ...]] = ()
    address_option: ClassVar[str] = ""
    #: it fuses the rankings of other backends (`--backend A+B`; `--backend NAME` fuses `default_parts`)
    fuses: ClassVar[bool] = False
    #: its `search_many` answers a batch in one pass (an encoder's forward pass, one vector search): `serve`
    #: gathers concurrent requests' queries into batches for it (server/batching.py)
    batches: ClassVar[bool] = False
    default_parts: ClassVar[tuple[str, ...]] = ()

    def footprint(self, paragraphs: int, corpus_bytes: int, options: Any) -> Footprint | None:
        """The build's expected peak memory and disk for a corpus of `paragraphs` paragraphs whose corpus.jsonl
        is `corpus_bytes` long, with these index options; None where it cannot say (then nothing is checked)."""
        return None

    def build(self, corpus: CorpusDir, target: Path, options: Any, context: BackendContext) -> dict[str, Any]:
        """Index `corpus` into the (empty, temporary) folder `target`; returns facts for the manifest."""
        raise NotImplementedError(f"the {self.name} backend builds no index")

    def open(
        self, corpus: CorpusDir, index_dir: Path, manifest: dict[str, Any], options: Any, context: BackendContext
    ) -> Retriever:
        """The retriever over the index this backend built in `index_dir`."""
        raise NotImplementedError(f"the {self.name} backend builds no index to open")

    def connect(self, corpus: CorpusDir | None, options: Any, context: BackendContext) -> Retriever:
        """A backend that does not build (`builds_index` False): the retriever over the index it reaches,
        with the corpus it serves if one is built here (None otherwise)."""
        raise NotImplementedError(f"the {self.name} backend opens indexes it built")

    def fuse(self, parts: Sequence[tuple[str, Retriever]], options: Any) -> Retriever:
        """A backend that `fuses`: one retriever over the parts' retrievers."""
        raise NotImplementedError(f"the {self.name} backend fuses nothing")


def title_key(title: str) -> str:
    """Titles compare as IRCoT compares them: lower-cased, surrounding space stripped."""
    return title.lower().strip()


def search_within_titles(ranked: Callable[[int], list[Hit]], k: int, titles: Sequence[str], total: int) -> list[Hit]:
    """For engines that cannot filter by title inside the search (FAISS, PLAID): widen the ranked
    list until `k` paragraphs of the allowed pages are found or the whole corpus was ranked."""
    allowed = {title_key(t) for t in titles}
    if not allowed:
        return []
    depth = k * 20
    while True:
        hits = [h for h in ranked(min(depth, total)) if title_key(h.title) in allowed]
        if len(hits) >= k or depth >= total:
            return hits[:k]
        depth *= 4


def distinct_titles(ranked: Callable[[int], list[Hit]], k: int, total: int) -> list[Hit]:
    """The best paragraph of each of the `k` best pages, for engines without a title field:
    pages ranked by their best paragraph (looked for among the first `k` x 256 paragraphs)."""
    depth, deepest = k * 4, min(total, k * 256)
    while True:
        hits = ranked(min(depth, deepest))
        best: dict[str, Hit] = {}
        for hit in hits:
            best.setdefault(title_key(hit.title), hit)
        if len(best) >= k or len(hits) < min(depth, deepest) or depth >= deepest:
            return list(best.values())[:k]
        depth *= 4


def search_titles(retriever: Retriever, query: str, k: int) -> list[Hit]:
    """One paragraph for each of the `k` pages whose title best matches `query` (IRCoT's title
    retrieval): the engine's own title search where it has one, else its best paragraph per page."""
    if isinstance(retriever, TitleSearch):
        return retriever.search_titles(query, k)
    return distinct_titles(lambda depth: retriever.search(query, depth), k, 1 << 62)
