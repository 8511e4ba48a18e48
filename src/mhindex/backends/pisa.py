"""BM25 with PISA (block-max WAND over compressed posting lists, C++) through the `pyterrier-pisa` wheel: no Java,
and the fastest BM25 from Python measured here (benchmarks/speed/bench_pisa.py, 300,000 passages, one thread, top 3:
1,036 queries/s one at a time against Lucene's 258 and bm25s's 230). Pick it for serving many small queries (RL
rollouts); Lucene stays the default (a title field, Anserini's analyzer, its top 10 the reference).

The index is built from the corpus as every index is (streamed, into a staging folder that replaces the old index
only when complete); paragraph N of the corpus is PISA's document N (its docno the line), its text read back through
the corpus's offsets. Text is title and paragraph, read by PISA's tokenizer with Porter2 (Snowball English) stemming
and Lucene's English stop words (the list Lucene's StopFilter and Anserini's default analyzer drop), said in the
manifest and the fingerprint (`queries`). k1 and b are fixed at index time: PISA keeps each posting block's BM25
upper bound for them, and a search at another k1 would write new bounds into the index.

A title scope (IRCoT's `allowed_titles`) widens the ranking until k paragraphs of the pages are found, as the dense
backends do; with no query text there is no ranking to widen, and it is refused in one line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mhindex.backends.base import Backend, BackendContext, Footprint, Hit, search_within_titles
from mhindex.errors import MhindexError, UsageError
from mhindex.home import CorpusDir
from mhindex.options import option
from mhindex.requirements import package
from mhindex.ui import engine_output_to, reporter

STEMMER = "porter2"
# What building takes (`PisaBackend.footprint`), measured by benchmarks/speed/bench_footprint.py (results/
# bench_footprint_pisa.txt): the MuSiQue sample, 100,000 and 300,000 DPR-layout paragraphs (0.9, 80 and 239 MB of
# corpus) peaked at 160, 457 and 700 MB of memory and 2.2, 136 and 435 MB of disk.
PISA_BASE = 200 * 2**20  # Python, numpy and pandas, pyterrier's imports, PISA's buffers
PISA_MEMORY_RATIO = 3.5
PISA_DISK_RATIO = 2.0  # the forward index, the inverted lists and the block-max bounds, at their peak together


@dataclass(frozen=True)
class PisaOptions:
    k1: float = option(1.2, "BM25 k1.", min=0, stage="index")
    b: float = option(0.75, "BM25 b.", min=0, max=1, stage="index")
    threads: int = option(1, "Threads for indexing and for a batch of queries.", min=1, stage="both")


def _engine(context: BackendContext) -> Any:
    # pyterrier-pisa imports PyTerrier, which imports ir_datasets, which makes its datasets' folders under
    # ~/.ir_datasets on import: in the data root's cache instead (a user's own IR_DATASETS_HOME is kept).
    os.environ.setdefault("IR_DATASETS_HOME", str(context.cache / "ir_datasets"))
    try:
        from pyterrier_pisa import PisaIndex
    except ImportError:
        raise MhindexError("the pisa backend needs its package: pip install 'mhindex[pisa]'") from None
    return PisaIndex


def _stops() -> Any:
    """pyterrier-pisa's name for Lucene's English stop list (its StopFilter's 33 words)."""
    from pyterrier_pisa import PisaStopwords

    return PisaStopwords.lucene


class PisaBackend(Backend):
    name = "pisa"
    title = "BM25 (PISA)"
    queries = f"PISA's tokenizer, {STEMMER} (Snowball English) stemming, Lucene's English stop words"
    Settings = PisaOptions
    builds_index = True
    batches = True
    requirements = (package("pisa backend", "pyterrier_pisa", "pyterrier-pisa", "pip install 'mhindex[pisa]'"),)

    def footprint(self, paragraphs: int, corpus_bytes: int, options: PisaOptions) -> Footprint:
        return Footprint(
            int(PISA_BASE + PISA_MEMORY_RATIO * corpus_bytes),
            int(2**20 + PISA_DISK_RATIO * corpus_bytes),
            f"measured: {PISA_MEMORY_RATIO:.1f}x the corpus's bytes in memory while building, the index at its peak "
            f"{PISA_DISK_RATIO:.1f}x on disk",
        )

    def build(self, corpus: CorpusDir, target: Path, options: PisaOptions, context: BackendContext) -> dict[str, Any]:
        index_class = _engine(context)
        paragraphs = corpus.paragraphs()
        count = len(paragraphs)
        try:
            with reporter().progress(f"indexing {count:,} paragraphs with PISA", total=count) as bar:

                def documents() -> Any:
                    for position, record in enumerate(paragraphs):
                        yield {"docno": str(position), "text": f"{record['title']}\n{record['text']}"}
                        bar.advance()

                with engine_output_to(target / "build.log"):  # PISA's C++ logs and progress bars
                    index = index_class(
                        str(target / "pisa"),
                        text_field="text",
                        stemmer=STEMMER,
                        stops=_stops(),
                        threads=options.threads,
                    )
                    index.index(documents())
                    # its block-max bounds for this k1 and b, written now into the staging folder, never at a search
                    index.bm25(k1=options.k1, b=options.b, num_results=1)
        finally:
            paragraphs.close()
        return {"paragraphs": count, "stemmer": STEMMER, "stop_words": _stops().value}

    def open(
        self,
        corpus: CorpusDir,
        index_dir: Path,
        manifest: dict[str, Any],
        options: PisaOptions,
        context: BackendContext,
    ) -> PisaRetriever:
        return PisaRetriever(corpus, index_dir, options, context)


class PisaRetriever:
    def __init__(self, corpus: CorpusDir, index_dir: Path, options: PisaOptions, context: BackendContext) -> None:
        import numpy as np

        index_class = _engine(context)
        from pyterrier_pisa import _pisathon

        with engine_output_to(Path(os.devnull)):  # PISA logs the index it opens
            index = index_class(str(index_dir / "pisa"), stops=_stops())
            retrieve = index.bm25(k1=options.k1, b=options.b, num_results=1, threads=options.threads)
        self._np, self._pisathon = np, _pisathon
        # Hand-written around pyterrier's `PisaRetrieve.transform` (it calls the same `_pisathon.retrieve`): a pandas
        # frame a query costs more than PISA's search of it at top 3.
        self._context, self._algorithm = retrieve._ctxt, retrieve.query_algorithm.value
        # pyterrier-pisa's `retrieve` holds the GIL through a whole search on one thread, and lets it go on two or
        # more (its _pisathon.cpp, `py_retrieve`): on one, a served index's HTTP handling waited for every search,
        # and `mhindex serve --backend pisa` answered fewer requests than Lucene, though it searches faster. PISA
        # shares its index between the threads of one call, and between calls alike.
        self._threads = max(2, options.threads)
        self._paragraphs = corpus.paragraphs()

    def _ranked(self, queries: Sequence[str], depth: int) -> list[list[Hit]]:
        np, count = self._np, len(queries)
        depth = min(depth, len(self._paragraphs))
        results: list[list[Hit]] = [[] for _ in queries]
        if not count or depth <= 0:
            return results
        shape = (count * depth,)
        qidxs, ranks = np.empty(shape, dtype=np.int32), np.empty(shape, dtype=np.int32)
        docnos, scores = np.empty(shape, dtype=object), np.empty(shape, dtype=np.float32)
        # Its C++ reads each query with PyArg_ParseTuple("is") and goes on when that fails: a NUL inside a query or
        # a lone surrogate crashed the process (SIGSEGV). Both become what they are to a tokenizer: no word.
        texts = [query.replace("\x00", " ").encode("utf-8", "replace").decode("utf-8") for query in queries]
        size = self._pisathon.retrieve(
            self._context, self._algorithm, list(enumerate(texts)), k=depth, threads=self._threads,
            query_weighted=0, pretokenised=False, result_qidxs=qidxs, result_docnos=docnos, result_ranks=ranks,
            result_scores=scores,
        )  # fmt: skip
        order = sorted(range(size), key=lambda i: (int(qidxs[i]), int(ranks[i])))
        for i in order:
            record = self._paragraphs[int(docnos[i])]
            results[int(qidxs[i])].append(Hit(record["id"], record["title"], record["text"], float(scores[i])))
        return results

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        if titles is None:
            return self._ranked([query], k)[0]
        if not query.strip():
            raise UsageError("the pisa backend ranks a page's paragraphs by the query: give one, or search the "
                             "titles with the lucene backend")  # fmt: skip
        return search_within_titles(lambda depth: self._ranked([query], depth)[0], k, titles, len(self._paragraphs))

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        return self._ranked(queries, k)

    def close(self) -> None:
        self._paragraphs.close()
