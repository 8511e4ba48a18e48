"""BM25 with PISA (block-max WAND over compressed posting lists, C++) through the `pyterrier-pisa` wheel: no Java,
and a small index (its compressed lists and their bounds: 0.28 GiB at 2M passages against Lucene's 1.28). Its speed
depends on the corpus's size (benchmarks/speed/bench_pisa.py, one thread, top 3, one query at a time): 4x Lucene's
queries/s at 300,000 passages, level at 2M, 0.6x at 21M (docs/search.md). Pick it for serving many small queries (RL
rollouts) over up to a couple of million passages; Lucene stays the default (a title field, Anserini's analyzer, its
top 10 the reference).

The index is built from the corpus as every index is (streamed, into a staging folder that replaces the old index
only when complete, keeping only what a search reads); paragraph N of the corpus is PISA's document N (its docno the
line), its text read back through the corpus's offsets. Text is title and paragraph, read by PISA's tokenizer with
Porter2 (Snowball English) stemming and Lucene's English stop words (the list Lucene's StopFilter and Anserini's
default analyzer drop), said in the manifest and the fingerprint (`queries`). k1 and b are fixed at index time: PISA
keeps each posting block's BM25 upper bound for them, written when it is built.

A title scope (IRCoT's `allowed_titles`) widens the ranking until k paragraphs of the pages are found, as the dense
backends do; with no query text there is no ranking to widen, and it is refused in one line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from mhindex.backends.base import Backend, BackendContext, Footprint, Hit, search_within_titles
from mhindex.errors import MhindexError, UsageError
from mhindex.home import CorpusDir
from mhindex.options import option
from mhindex.requirements import package
from mhindex.ui import engine_output_to, reporter

STEMMER = "porter2"
# What building takes (`PisaBackend.footprint`), measured by benchmarks/speed/bench_footprint.py and bench_pisa.py
# (results/bench_footprint_pisa.txt, bench_pisa.txt). Memory is the build's anonymous memory: PISA writes its forward
# index and lists through memory-mapped files, resident as page cache the kernel can drop (14.0 GiB resident at 21M
# passages, 1.44 GiB of it anonymous). PISA parses and inverts in batches of 100,000 documents, one a worker (threads
# + 1 of them): at 1M passages, 592 MB on one thread and 722 on two (130 MB a batch, 1.6x its 80 MB of text); at
# 21M (16.4 GiB of corpus) on two, 1.44 GiB, the rest of the growth its vocabulary (7.2M terms). Disk peaked at
# 2.0x the corpus up to 2M synthetic passages and 2.68x at 21M, and at 2.98x on 5M passages of the samples' sentences
# (more postings a byte: its index was 1.85x the corpus before the build's lists were dropped, against 1.42x).
PISA_BASE = 300 * 2**20  # Python, numpy and pandas, pyterrier's imports, PISA's buffers
PISA_BATCH = 100_000  # documents: pyterrier-pisa's batch_size, PISA's batches when parsing and inverting
PISA_BATCH_RATIO = 2.0  # a batch in flight, to its documents' bytes
PISA_VOCABULARY_RATIO = 0.06  # the terms and their counts, to the corpus's bytes
PISA_DISK_RATIO = 3.2  # the forward index, its batches, the inverted lists and the compressed ones at their peak
# Searching reads the compressed lists, their block-max bounds and the two lexicons (pyterrier-pisa 0.4.9's
# _pisathon.cpp, `py_prepare_index`); the forward index and the uncompressed inverted lists only build them, and are
# 87% of the folder (2.08 of 2.38 GB at 2M passages): dropped once the bounds and compressed lists are written.
BUILD_ONLY = ("fwd", "fwd.documents", "fwd.terms", "fwd.urls", "inv.docs", "inv.freqs", "inv.sizes")
LEXICONS = ("fwd.termlex", "fwd.doclex")  # a query's terms to their ids, a document's id to its docno


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


def _pisa_version() -> str:
    """The release that wrote an index's files, recorded in its manifest: another may name them otherwise."""
    return metadata.version("pyterrier-pisa")


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
        in_flight = min(options.threads + 1, -(-paragraphs // PISA_BATCH))
        batch_bytes = corpus_bytes * min(1.0, PISA_BATCH / max(paragraphs, 1))
        return Footprint(
            int(PISA_BASE + in_flight * PISA_BATCH_RATIO * batch_bytes + PISA_VOCABULARY_RATIO * corpus_bytes),
            int(2**20 + PISA_DISK_RATIO * corpus_bytes),
            f"measured: {in_flight} batch(es) of {PISA_BATCH:,} paragraphs in flight, {PISA_BATCH_RATIO:.1f}x their "
            f"bytes, and {PISA_VOCABULARY_RATIO:.2f}x the corpus's for its vocabulary; the index at its peak "
            f"{PISA_DISK_RATIO:.1f}x the corpus on disk",
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
                        batch_size=PISA_BATCH,
                    )
                    index.index(documents())
                    built = set(os.listdir(target / "pisa"))
                    # its block-max bounds for this k1 and b, written now into the staging folder, never at a search
                    index.bm25(k1=options.k1, b=options.b, num_results=1)
        finally:
            paragraphs.close()
        searched = sorted(set(os.listdir(target / "pisa")) - built)
        for name in BUILD_ONLY:
            (target / "pisa" / name).unlink(missing_ok=True)
        return {
            "paragraphs": count,
            "stemmer": STEMMER,
            "stop_words": _stops().value,
            "search_files": searched,
            "pyterrier_pisa": _pisa_version(),
        }

    def open(
        self,
        corpus: CorpusDir,
        index_dir: Path,
        manifest: dict[str, Any],
        options: PisaOptions,
        context: BackendContext,
    ) -> PisaRetriever:
        _check_searchable(corpus, index_dir / "pisa", manifest)
        return PisaRetriever(corpus, index_dir, options, context)


def _check_searchable(corpus: CorpusDir, folder: Path, manifest: dict[str, Any]) -> None:
    """Without the lists it was built from, an index is searched only with the bounds and compressed lists it kept:
    pyterrier-pisa would rebuild a missing one from lists that are gone, and its C++ would end the process."""
    if (folder / "inv.docs").exists():
        return  # built before the build's lists were dropped: PISA can write what it misses
    kept = manifest.get("search_files") or []
    missing = [name for name in (*kept, *LEXICONS) if not (folder / name).exists()]
    built_with, installed = manifest.get("pyterrier_pisa"), _pisa_version()
    if kept and not missing and built_with == installed:
        return
    if not kept:
        why = "it lacks the lists it was built from and does not say what it kept"
    elif missing:
        why = f"it lacks {', '.join(missing)}"
    else:
        why = f"it was built by pyterrier-pisa {built_with}, not {installed}"
    raise MhindexError(f"the pisa index of {corpus.name!r} cannot be searched: {why}; rebuild it: "
                       f"mhindex index {corpus.name} --backend pisa --force")  # fmt: skip


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
