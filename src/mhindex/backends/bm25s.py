"""BM25 in Python with `bm25s` (numpy and scipy): for users without Java, and for corpora that fit
in memory. Lucene stays the default: it is as fast to query and far faster to index beyond a
million paragraphs (docs/benchmarks.md). Same scoring family as Lucene's BM25 (bm25s's
"lucene" variant), English stop words and Snowball stemming; k1 and b are baked into the index.

Paragraph N of the corpus is document N of the index, read back through the corpus's offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mhindex.backends.base import Backend, BackendContext, Footprint, Hit, search_within_titles
from mhindex.errors import MhindexError
from mhindex.home import CorpusDir
from mhindex.options import option
from mhindex.requirements import package
from mhindex.ui import reporter

# What building an index takes (`Bm25sBackend.footprint`), measured by benchmarks/speed/bench_footprint.py.
# 100,000 and 300,000 DPR-layout paragraphs (80 and 239 MB of corpus): peaks of 591 and 1,476 MB, indexes of 63
# and 180 MB (results/bench_footprint.txt).
BM25S_BASE = 100 * 2**20  # Python, numpy, scipy and the stemmer (82 MB on the MuSiQue sample)
BM25S_MEMORY_RATIO = 6.5
BM25S_DISK_RATIO = 0.8
BM25S_DISK_BASE = 2**20


@dataclass(frozen=True)
class Bm25sOptions:
    # bm25s stores each term's BM25 weight, so unlike Lucene its k1 and b are fixed at index time.
    k1: float = option(1.2, "BM25 k1.", min=0, stage="index")
    b: float = option(0.75, "BM25 b.", min=0, max=1, stage="index")
    threads: int = option(1, "Threads for indexing and batched search.", min=1, stage="both")


def _engine() -> tuple[Any, Any]:
    try:
        import bm25s
        import Stemmer
    except ImportError:
        raise MhindexError("the bm25s backend needs its packages: pip install 'mhindex[bm25s]'") from None
    return bm25s, Stemmer.Stemmer("english")


class Bm25sBackend(Backend):
    name = "bm25s"
    title = "BM25 (bm25s)"
    queries = "bm25s.tokenize: English stop words, Snowball English stemming"
    Settings = Bm25sOptions
    builds_index = True
    requirements = (package("bm25s backend", "bm25s", "bm25s", "pip install 'mhindex[bm25s]'"),)

    def footprint(self, paragraphs: int, corpus_bytes: int, options: Bm25sOptions) -> Footprint:
        # bm25s holds every text and every token id as Python objects while it builds its sparse matrix: about
        # BM25S_MEMORY_RATIO times the corpus's bytes, measured (benchmarks/speed/bench_footprint.py), the index on disk
        # BM25S_DISK_RATIO of them.
        return Footprint(
            int(BM25S_BASE + BM25S_MEMORY_RATIO * corpus_bytes), int(BM25S_DISK_BASE + BM25S_DISK_RATIO * corpus_bytes),
            f"measured: {BM25S_MEMORY_RATIO:.1f}x the corpus's bytes in memory while building, the index "
            f"{BM25S_DISK_RATIO:.2f}x on disk",
        )  # fmt: skip

    def build(self, corpus: CorpusDir, target: Path, options: Bm25sOptions, context: BackendContext) -> dict[str, Any]:
        bm25s, stemmer = _engine()
        paragraphs = corpus.paragraphs()
        try:
            texts = [f"{record['title']}\n{record['text']}" for record in paragraphs]
        finally:
            paragraphs.close()
        with reporter().progress(f"indexing {len(texts):,} paragraphs with bm25s", total=None):
            tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
            index = bm25s.BM25(k1=options.k1, b=options.b, method="lucene")
            index.index(tokens, show_progress=False)
            index.save(str(target / "bm25s"), show_progress=False)
        return {"paragraphs": len(texts)}

    def open(
        self,
        corpus: CorpusDir,
        index_dir: Path,
        manifest: dict[str, Any],
        options: Bm25sOptions,
        context: BackendContext,
    ) -> Bm25sRetriever:
        return Bm25sRetriever(corpus, index_dir / "bm25s", options)


class Bm25sRetriever:
    def __init__(self, corpus: CorpusDir, path: Path, options: Bm25sOptions) -> None:
        self._bm25s, self._stemmer = _engine()
        self._index = self._bm25s.BM25.load(str(path), mmap=True, show_progress=False)
        self._paragraphs = corpus.paragraphs()
        self._threads = options.threads

    def _tokens(self, queries: Sequence[str]) -> Any:
        return self._bm25s.tokenize(
            list(queries), stopwords="en", stemmer=self._stemmer, return_ids=False, show_progress=False
        )

    def _ranked(self, queries: Sequence[str], depth: int) -> list[list[Hit]]:
        depth = min(depth, len(self._paragraphs))
        tokens = self._tokens(queries)
        results: list[list[Hit]] = [[] for _ in queries]
        known = [
            i for i, t in enumerate(tokens) if any(w in self._index.vocab_dict for w in t)
        ]  # only stop words or unseen words: no hits
        if not known or depth == 0:
            return results
        documents, scores = self._index.retrieve(
            [tokens[i] for i in known], k=depth, show_progress=False, n_threads=self._threads
        )
        for row, i in enumerate(known):
            for position, score in zip(documents[row], scores[row], strict=True):
                if score > 0:
                    record = self._paragraphs[int(position)]
                    results[i].append(Hit(record["id"], record["title"], record["text"], float(score)))
        return results

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        if titles is None:
            return self._ranked([query], k)[0]
        return search_within_titles(lambda depth: self._ranked([query], depth)[0], k, titles, len(self._paragraphs))

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        return self._ranked(queries, k) if queries else []

    def close(self) -> None:
        self._paragraphs.close()
