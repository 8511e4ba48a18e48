"""Corpora from Python: build one (a dataset's release or your own files), open it, read its paragraphs and
questions by id, index it, and search it with any backend or fusion (Pyserini's `searcher.search(q)`)."""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from mhindex._api.terms import python_terms, python_terms_class
from mhindex.backends.base import Hit, Retriever
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.errors import UsageError, expect
from mhindex.home import CorpusDir, resolve_home

if TYPE_CHECKING:
    from mhindex.backends import BackendSpec, IndexResult
    from mhindex.corpora.build import BuildResult, CorpusOptions


@dataclass(frozen=True)
class Paragraph:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Question:
    """A question with what it is scored against; `record` is its whole line of questions.jsonl (a dataset's
    own fields too: MuSiQue's decomposition, IIRC's main passage)."""

    id: str
    question: str
    answers: list[str]
    gold_ids: list[str]
    record: dict[str, Any] = field(repr=False)


@python_terms_class
class Searcher:
    """An open index of a corpus (or a fusion of several, or a served one): `search` and `batch_search`.
    Close it, or use it in a `with` block: an engine holds files and threads."""

    def __init__(self, retriever: Retriever, backend: str) -> None:
        self._retriever, self.backend = retriever, backend
        self._closed = False

    def _open(self) -> Retriever:
        if self._closed:
            raise UsageError(f"this {self.backend} Searcher is closed: open another (corpus.searcher(...))")
        return self._retriever

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        """The `k` best paragraphs for `query`, best first; `titles`: only paragraphs of these pages."""
        _check_k(k)
        return self._open().search(query, k, list(titles) if titles is not None else None)

    @overload
    def batch_search(self, queries: Sequence[str], qids: None = None, k: int = 10) -> list[list[Hit]]: ...

    @overload
    def batch_search(self, queries: Sequence[str], qids: Sequence[str], k: int = 10) -> dict[str, list[Hit]]: ...

    def batch_search(
        self, queries: Sequence[str], qids: Sequence[str] | None = None, k: int = 10
    ) -> list[list[Hit]] | dict[str, list[Hit]]:
        """Each query's `k` best paragraphs, searched together (Lucene's and FAISS's batches run on the engine's own
        threads: `corpus.searcher("lucene", threads=4)`): a list in the order given, or with `qids` (Pyserini's
        `batch_search(queries, qids, k)`) a dict from each query's id to its hits."""
        _check_k(k)
        if isinstance(queries, str) or not all(isinstance(query, str) for query in queries):
            raise UsageError(f"queries must be a list of strings, not {queries!r}")
        if qids is not None and (isinstance(qids, str | int) or len(qids) != len(queries)):
            raise UsageError(f"qids must be a list of ids, one a query ({len(queries)}), not {qids!r} (k is k=...)")
        if qids is not None and len(set(qids)) != len(qids):
            raise UsageError("qids must not repeat an id: each names one query's hits")
        found = self._open().search_many(list(queries), k)
        if qids is None:
            return found
        return {str(qid): hits for qid, hits in zip(qids, found, strict=True)}

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._retriever.close()

    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UsageError(f"k must be a whole number of paragraphs, at least 1, not {k!r}")


@python_terms_class
class Corpus:
    """A corpus built under a data root: its paragraphs, its questions and its indexes."""

    def __init__(self, folder: CorpusDir) -> None:
        self._folder = folder
        self._lock = threading.Lock()
        self._built: tuple[int, int, int] | None = None
        self._fresh()

    def _fresh(self) -> None:
        """What is read of the corpus (its manifest, the table of ids, the questions) is of the corpus on disk now: a
        rebuild since (`build --force` replaces the folder) is read again, never answered from the old tables; a
        corpus moved or removed since it was opened is said so, in one line."""
        try:
            stat = os.stat(self._folder.corpus)
            built = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        except OSError:
            raise UsageError(
                f"corpus '{self._folder.name}' is no longer at {self._folder.root} (moved or removed since it was "
                "opened): open it again where it is (mhindex.corpus(name, home=...))"
            ) from None
        if built != self._built:
            self._manifest = self._folder.manifest()
            self._positions: dict[str, int] = {}
            self._questions: dict[str, Question] | None = None
            self._built = built

    @property
    def name(self) -> str:
        return self._folder.name

    @property
    def path(self) -> Path:
        return self._folder.root

    @property
    def dataset(self) -> str | None:
        """The dataset it was built from (`musique`, `jsonl` for an own corpus)."""
        self._fresh()
        dataset = self._manifest.get("dataset")
        return str(dataset) if dataset is not None else None

    @property
    def manifest(self) -> dict[str, Any]:
        """What `mhindex info` shows: inputs and their hashes, seed, counts."""
        self._fresh()
        return dict(self._manifest)

    @property
    def indexes(self) -> list[str]:
        """The backends it has an index of."""
        self._fresh()
        return list(self._folder.summary()["indexes"])

    def __len__(self) -> int:
        self._fresh()
        return int(self._manifest["counts"]["paragraphs"])

    def __repr__(self) -> str:
        return f"Corpus({self.name!r}, dataset={self.dataset!r}, paragraphs={len(self)}, path={str(self.path)!r})"

    def paragraphs(self) -> Iterator[Paragraph]:
        """Every paragraph, in the corpus's (shuffled) order."""
        self._fresh()
        reader = self._folder.paragraphs()
        try:
            for record in reader:
                yield Paragraph(record["id"], record.get("title", ""), record["text"])
        finally:
            reader.close()

    def paragraph(self, paragraph_id: str) -> Paragraph:
        """One paragraph by its id (the table of ids is read on first use, and again after a rebuild)."""
        with self._lock:
            self._fresh()
            if not self._positions:
                reader = self._folder.paragraphs()
                try:
                    self._positions.update((record["id"], line) for line, record in enumerate(reader))
                finally:
                    reader.close()
        if paragraph_id not in self._positions:
            raise UsageError(f"corpus '{self.name}' has no paragraph {paragraph_id!r}")
        reader = self._folder.paragraphs()
        try:
            record = reader[self._positions[paragraph_id]]
        finally:
            reader.close()
        return Paragraph(record["id"], record.get("title", ""), record["text"])

    def questions(self) -> list[Question]:
        """The questions with their gold answers and gold paragraph ids, in the file's order."""
        return list(self._question_table().values())

    def question(self, question_id: str) -> Question:
        found = self._question_table().get(question_id)
        if found is None:
            raise UsageError(f"corpus '{self.name}' has no question {question_id!r}")
        return found

    def _question_table(self) -> dict[str, Question]:
        from mhindex.eval.run import read_questions_file

        with self._lock:
            self._fresh()
            if self._questions is None:
                records = read_questions_file(self._folder.questions) if self._folder.questions.is_file() else []
                self._questions = {
                    r["id"]: Question(
                        r["id"], r["question"], list(r.get("answers") or []), list(r.get("gold_ids") or []), r
                    )
                    for r in records
                }
            return self._questions

    def index(
        self, backend: str = DEFAULT_BACKEND, *, force: bool = False, preflight: bool = True, **options: Any
    ) -> list[dict[str, Any]]:
        """Index the corpus (each part of a fusion as itself); returns each index's manifest. An index that is
        up to date is kept unless `force`; a new one replaces the old only when complete, and is not begun
        where the memory and disk it is expected to need are not there (unless `preflight=False`)."""
        from mhindex.backends import BackendSpec, build_indexes

        self._fresh()
        built = build_indexes(self._folder, BackendSpec.parse(backend, options), force=force, preflight=preflight)
        return [{"rebuilt": index.rebuilt, **index.manifest} for index in built]

    def searcher(self, backend: str = DEFAULT_BACKEND, **options: Any) -> Searcher:
        """A searcher over this corpus's index: `lucene`, `dense`, `lucene+dense` (fused), a served index's
        `http://HOST:PORT`, with the backend's options as keywords (`k1=0.9`, `threads=4`)."""
        from mhindex.backends import BackendSpec, open_retriever

        self._fresh()
        spec = BackendSpec.parse(backend, options)
        return Searcher(open_retriever(self._folder, spec), spec.label)


@python_terms
def corpus(name: str | None = None, *, home: Path | str | None = None) -> Corpus:
    """The corpus built as `name` under the data root (`home`, else $MHINDEX_HOME, else the default); with
    no name, the only one built (or the one built last)."""
    from mhindex.home import pick_corpus

    found = pick_corpus(resolve_home(home), name)
    assert found is not None  # required: a one-line UsageError otherwise
    return Corpus(found)


@python_terms
def list_corpora(*, home: Path | str | None = None) -> list[Corpus]:
    """Every corpus built under the data root, by name."""
    from mhindex.home import built_corpora

    return [Corpus(folder) for folder in built_corpora(resolve_home(home))]


@python_terms
def build(
    dataset: str,
    *,
    inputs: Sequence[Path | str] | None = None,
    name: str | None = None,
    backend: str | None = DEFAULT_BACKEND,
    force: bool = False,
    home: Path | str | None = None,
    seed: int = 13370,
    skip_bad: bool = False,
    add: Sequence[str] | None = None,
    preflight: bool = True,
    backend_options: dict[str, Any] | None = None,
    **converter_options: Any,
) -> Corpus:
    """Build a corpus from a dataset's release files (`inputs`; else the downloaded release, else the bundled
    sample), or from your own (`build("jsonl", inputs=["paragraphs.jsonl"], name="mine")`), then index it
    with `backend` (None: no index). Unchanged inputs are not converted again unless `force`; a conversion or an
    index whose expected memory and disk are not there is not begun, unless `preflight=False`."""
    from mhindex.backends import BackendSpec
    from mhindex.corpora.build import CorpusOptions

    expect(dataset, str, "dataset", "a dataset's name (musique, jsonl, ...)")
    expect(name, (str, type(None)), "name", "a corpus name")
    if inputs is not None and (isinstance(inputs, str | Path) or not all(isinstance(p, str | Path) for p in inputs)):
        raise UsageError(f"inputs must be a list of paths, not {inputs!r}")
    options = CorpusOptions(
        inputs=[Path(p).expanduser() for p in inputs] if inputs is not None else None,
        name=name,
        seed=seed,
        skip_bad=skip_bad,
        add=list(add) if add else None,
    )
    spec = BackendSpec.parse(backend, backend_options) if backend else None
    # records passed over, a stale index: a notebook shows them as warnings
    built, _ = build_and_index(resolve_home(home), dataset, options, converter_options, spec, force=force,
                               preflight=preflight, warn=lambda note: warnings.warn(note, stacklevel=4))  # fmt: skip
    return Corpus(built.corpus)


def build_and_index(
    root: Path,
    dataset: str,
    options: CorpusOptions,
    converter: dict[str, Any],
    spec: BackendSpec | None,
    force: bool,
    preflight: bool,
    warn: Callable[[str], None],
) -> tuple[BuildResult, list[IndexResult]]:
    """The corpus, then (with a backend) its indexes, a wrong index option refused before any work: what
    `build` does, here and in the CLI; `warn` hears what the user should."""
    from mhindex.backends import build_index
    from mhindex.corpora.build import build_dataset

    parts = spec.index_parts() if spec else ()
    built = build_dataset(root, dataset, options, converter, force=force, preflight=preflight)
    for note in built.notes(indexing=bool(parts)):
        warn(note)
    return built, [build_index(built.corpus, part, force=force, preflight=preflight) for part in parts]
