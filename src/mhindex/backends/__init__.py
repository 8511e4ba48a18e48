"""Indexes and retrievers. One module per engine behind `base.Backend`; this registry names
them and imports each only when it is used, so `mhindex --help` and a Lucene query never pay
for torch or an Elasticsearch client.

Adding a backend: a module with a class that has `name`, `Options` (a dataclass of its options,
each saying when it takes effect), `build` and `open`, and one line in BACKENDS.

An index lives in `<home>/<corpus>/indexes/<backend>/` with a `manifest.json` that records the
corpus hash it was built from and its index-time options; opening an index built from another
corpus, or asking for other index-time options than it was built with, is refused.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mhindex import __version__
from mhindex.backends.base import Backend, BackendContext, Hit, Retriever
from mhindex.errors import MhindexError, UsageError, one_line
from mhindex.files import atomic_directory
from mhindex.home import CorpusDir
from mhindex.locks import changing
from mhindex.options import check_choices, declared, flag_among, flag_of

__all__ = ["BACKENDS", "Hit", "IndexResult", "Retriever", "build_index", "get_backend", "index_manifest", "open_retriever", "options_types"]

BACKENDS = {
    "lucene": "mhindex.backends.lucene:LuceneBackend",
    "elasticsearch": "mhindex.backends.elasticsearch:ElasticsearchBackend",
    "dense": "mhindex.backends.dense:DenseBackend",
    "colbert": "mhindex.backends.colbert:ColbertBackend",
    "bm25s": "mhindex.backends.bm25s:Bm25sBackend",
    "remote": "mhindex.backends.remote:RemoteBackend",
}
DEFAULT_BACKEND = "lucene"
INDEX_STAGES = ("index", "both", "connection")
SEARCH_STAGES = ("search", "both", "connection")


def get_backend(name: str) -> Backend:
    return backend_class(name)()


def resolve_backend(name: str, given: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """`--backend http://HOST:PORT` names the remote backend at that address."""
    if name.startswith(("http://", "https://")):
        return "remote", {**(given or {}), "remote_url": name}
    return name, dict(given or {})


def builds_index(name: str) -> bool:
    """False for an index served elsewhere: no local corpus index is needed to search it."""
    return getattr(backend_class(resolve_backend(name)[0]), "builds_index", True)


def backend_class(name: str) -> type:
    name = resolve_backend(name)[0]
    if name not in BACKENDS:
        raise UsageError(f"unknown backend '{name}'; choose one of: {', '.join(BACKENDS)}")
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def options_types() -> dict[str, type]:
    """Each backend's options dataclass, for the options of index, search, ask and eval.
    Importing a backend module is cheap: engines (torch, FAISS, the JVM) load when used."""
    return {name: backend_class(name).Options for name in BACKENDS}


def _options(backend: str, given: dict[str, Any] | None, stages: tuple[str, ...], recorded: dict[str, Any] | None = None, corpus: str = "CORPUS") -> Any:
    """The backend's options from what the user gave (and, at search time, what the index recorded).
    An option of another backend, or of the other stage, is a one-line error that says what to do."""
    cls = backend_class(backend).Options
    fields = declared(cls)
    given = {k: v for k, v in (given or {}).items() if v is not None}
    for name, value in given.items():
        if name not in fields:
            owners = [b for b, t in options_types().items() if name in declared(t)]
            raise UsageError(f"{flag_among(name, options_types().values())} is an option of the {' and '.join(owners) or 'no'} backend, not of {backend}")
        stage = fields[name][1].stage
        flag = flag_of(name, fields[name][1])
        if stage not in stages and stage == "search":
            raise UsageError(f"{flag} of {backend} applies when searching, not when indexing: give it to search, ask or eval")
        if stage not in stages and stage == "index" and recorded is not None and recorded.get(name) != value:
            built = recorded.get(name)
            raise UsageError(
                f"the {backend} index was built with {flag} {built if built is not None else '(default)'}, and {flag} is fixed when the index is built; "
                f"rebuild it: mhindex index {corpus} --backend {backend} {flag} {value} --force"
            )
    known = {k: v for k, v in (recorded or {}).items() if k in fields}
    options = cls(**{**known, **given})
    check_choices(options)
    return options


def recorded_options(options: Any) -> dict[str, Any]:
    """The index-time options, as the manifest records them (never connection settings)."""
    fields = declared(type(options))
    return {k: v for k, v in dataclasses.asdict(options).items() if k in fields and fields[k][1].stage == "index"}


@dataclass
class IndexResult:
    path: Path
    manifest: dict
    rebuilt: bool


class IndexDamaged(UsageError):
    """An index that is there but cannot be read or searched: rebuilding it is the way out."""


def _read_manifest(path: Path, strict: bool = False) -> dict | None:
    """An index's manifest, None when there is none; one that is not an index manifest is None
    too, or with `strict` an error (a build rebuilds it; a search says to)."""
    try:
        manifest = orjson.loads((path / "manifest.json").read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError) as error:
        manifest, why = None, f"cannot be read ({error})"
    else:
        why = "is not an index manifest"
    if isinstance(manifest, dict) and isinstance(manifest.get("corpus_sha256"), str) and isinstance(manifest.get("options", {}), dict):
        return manifest
    if strict:
        raise IndexDamaged(f"{path / 'manifest.json'} {why}")
    return None


def _rebuild(corpus: CorpusDir, backend: str) -> str:
    return f"rebuild it: mhindex index {corpus.name} --backend {backend} --force"


class _Checked:
    """A retriever whose engine failures (a truncated Lucene segment, a damaged FAISS file) are one
    line that names the index and says how to rebuild it, not an engine's stack trace."""

    def __init__(self, inner: Retriever, what: str, fix: str) -> None:
        self._inner, self._what, self._fix = inner, what, fix
        if hasattr(inner, "search_titles"):
            self.search_titles = self._checked(inner.search_titles)

    def _checked(self, call):
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return call(*args, **kwargs)
            except MhindexError:
                raise
            except Exception as error:  # noqa: BLE001 - an engine's failure, whatever its type, is one line
                raise IndexDamaged(f"{self._what} failed ({one_line(error)}); {self._fix}") from None

        return run

    def search(self, query: str, k: int = 10, titles: Any = None) -> list[Hit]:
        return self._checked(self._inner.search)(query, k, titles=titles)

    def search_many(self, queries: Any, k: int = 10) -> list[list[Hit]]:
        return self._checked(self._inner.search_many)(queries, k)

    def close(self) -> None:
        self._inner.close()

    def __getattr__(self, name: str) -> Any:  # the engine's own attributes (its FAISS index, its encoder)
        return getattr(self._inner, name)


def build_index(corpus: CorpusDir, backend_name: str, given: dict[str, Any] | None = None, force: bool = False) -> IndexResult:
    """Index the corpus, unless an index of the same corpus and options exists. The new index is
    built beside the old one and replaces it only when complete."""
    backend = get_backend(backend_name)
    if not getattr(backend, "builds_index", True):
        raise UsageError(f"the {backend.name} backend searches an index that lives elsewhere: there is nothing to build here")
    options = _options(backend_name, given, INDEX_STAGES)
    with changing(corpus.root.parent, corpus.name, f"building its {backend.name} index"):
        return _build_index(corpus, backend, options, force)


def _build_index(corpus: CorpusDir, backend: Backend, options: Any, force: bool) -> IndexResult:
    corpus_sha = corpus.manifest()["corpus_sha256"]
    target = corpus.index_dir(backend.name)
    old = _read_manifest(target)
    index_options = recorded_options(options)
    if not force and old and old.get("corpus_sha256") == corpus_sha and old.get("options") == index_options:
        return IndexResult(target, old, rebuilt=False)
    started = time.perf_counter()
    with atomic_directory(target, corpus.root.parent) as staging:
        facts = backend.build(corpus, staging, options, BackendContext(corpus.root.parent))
        expected = corpus.manifest()["counts"]["paragraphs"]
        if facts.get("paragraphs") != expected:  # checked before the new index replaces the old one
            raise MhindexError(f"the {backend.name} build indexed {facts.get('paragraphs')} of the {expected:,} paragraphs of '{corpus.name}'; nothing was replaced: run it again with --force")
        manifest = {
            "backend": backend.name,
            "corpus": corpus.name,
            "corpus_sha256": corpus_sha,
            "options": index_options,
            **facts,
            "seconds": round(time.perf_counter() - started, 2),
            "tool_version": __version__,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (staging / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
    return IndexResult(target, manifest, rebuilt=True)


def index_manifest(corpus: CorpusDir, backend_name: str) -> dict | None:
    """What the corpus's index of this backend records (options, encoder, corpus hash), if built."""
    if not builds_index(backend_name):
        return None
    return _read_manifest(corpus.index_dir(get_backend(backend_name).name))


def retrieval_settings(corpus: CorpusDir, backend_name: str, given: dict[str, Any] | None = None) -> dict[str, Any]:
    """What decides a ranking, for run.json: the options the index was built with and the
    search-time ones in effect (never connection settings), and what the index records of its model."""
    manifest = index_manifest(corpus, backend_name) or {}
    backend_name, given = resolve_backend(backend_name, given)
    options = _options(backend_name, given, SEARCH_STAGES, recorded=manifest.get("options") or {}, corpus=corpus.name)
    fields = declared(type(options))
    effective = {k: v for k, v in dataclasses.asdict(options).items() if k in fields and fields[k][1].stage != "connection"}
    return {**effective, **{k: manifest[k] for k in ("encoder", "checkpoint", "corpus_sha256") if k in manifest}}


def search_stream(retriever: Retriever, items, k: int, batch: int, emit) -> int:
    """Answer a stream of (line number, {"id", "query"} or why the line is bad) in input order,
    `batch` queries at a time: {"id", "hits"} or {"line", "error"} to `emit`; returns the bad lines."""
    failed = 0
    pending: list[tuple[int, dict | str]] = []

    def flush() -> None:
        good = [(n, r) for n, r in pending if isinstance(r, dict)]
        results = iter(retriever.search_many([r["query"] for _, r in good], k))
        for number, record in pending:
            if isinstance(record, str):
                emit({"line": number, "error": record})
            else:
                emit({"id": record.get("id", str(number)), "hits": [h.record() for h in next(results)]})
        pending.clear()

    for number, record in items:
        failed += isinstance(record, str)
        pending.append((number, record))
        if len(pending) >= batch:
            flush()
    flush()
    return failed


def open_retriever(corpus: CorpusDir | None, backend_name: str, given: dict[str, Any] | None = None) -> Retriever:
    """A retriever over the corpus's index, or a one-line error saying what to run. An index
    served elsewhere needs no local corpus (`corpus` may be None)."""
    backend_name, given = resolve_backend(backend_name, given)
    backend = get_backend(backend_name)
    if not getattr(backend, "builds_index", True):
        return backend.open(corpus, None, {}, _options(backend_name, given, SEARCH_STAGES), BackendContext(corpus.root.parent if corpus else Path(".")))
    if corpus is None:
        raise UsageError(f"the {backend.name} backend searches a built corpus; name one with --corpus")
    target = corpus.index_dir(backend.name)
    try:
        manifest = _read_manifest(target, strict=True)
    except IndexDamaged as error:
        raise IndexDamaged(f"the {backend.name} index of '{corpus.name}' is damaged: {error}; {_rebuild(corpus, backend.name)}") from None
    rebuild = f"run `mhindex index {corpus.name} --backend {backend.name}`"
    if manifest is None:
        raise UsageError(f"corpus '{corpus.name}' has no {backend.name} index; {rebuild}")
    if manifest.get("corpus_sha256") != corpus.manifest()["corpus_sha256"]:
        raise UsageError(f"the {backend.name} index of '{corpus.name}' was built from an older corpus; {rebuild}")
    options = _options(backend_name, given, SEARCH_STAGES, recorded=manifest.get("options") or {}, corpus=corpus.name)
    what = f"the {backend.name} index of '{corpus.name}' ({target})"
    try:
        opened = backend.open(corpus, target, manifest, options, BackendContext(corpus.root.parent))
    except MhindexError:
        raise
    except Exception as error:  # noqa: BLE001 - a damaged index file, whatever the engine raises
        raise IndexDamaged(f"{what} cannot be opened ({one_line(error)}); {_rebuild(corpus, backend.name)}") from None
    return _Checked(opened, f"searching {what}", _rebuild(corpus, backend.name))
