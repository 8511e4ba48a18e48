"""Indexes and retrievers. One module per engine behind `base.Backend`; this registry names
them and imports each only when it is used, so `mhindex --help` and a Lucene query never pay
for torch or an Elasticsearch client.

Adding a backend: a module with a class that has `name`, `Options` (a dataclass of its options,
each saying when it takes effect), `build` and `open`, and one line in BACKENDS. Any two or more
built backends fuse as one (`--backend lucene+dense`, backends/hybrid.py).

`--backend` and its options are parsed once, where a command starts, into a `BackendSpec` (the
backend, the options given, checked to be its own); everything below receives that value. An
index lives in `<home>/<corpus>/indexes/<backend>/` with a `manifest.json` that records the
corpus hash it was built from and its index-time options; opening an index built from another
corpus, or asking for other index-time options than it was built with, is refused.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
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
from mhindex.registry import load

__all__ = [
    "BACKENDS",
    "BackendSpec",
    "Hit",
    "IndexResult",
    "OpenedIndex",
    "Retriever",
    "build_index",
    "open_index",
    "open_retriever",
    "options_types",
]

BACKENDS = {
    "lucene": "mhindex.backends.lucene:LuceneBackend",
    "elasticsearch": "mhindex.backends.elasticsearch:ElasticsearchBackend",
    "dense": "mhindex.backends.dense:DenseBackend",
    "colbert": "mhindex.backends.colbert:ColbertBackend",
    "bm25s": "mhindex.backends.bm25s:Bm25sBackend",
    "remote": "mhindex.backends.remote:RemoteBackend",
    "hybrid": "mhindex.backends.hybrid:HybridBackend",
}
DEFAULT_BACKEND = "lucene"
INDEX_STAGES = ("index", "both", "connection")
SEARCH_STAGES = ("search", "both", "connection")


def backend_class(name: str) -> type[Backend]:
    return load(BACKENDS, "backend", name)


def options_types() -> dict[str, type]:
    """Each backend's options dataclass, for the options of index, search, ask and eval.
    Importing a backend module is cheap: engines (torch, FAISS, the JVM) load when used."""
    return {name: backend_class(name).Options for name in BACKENDS}


@dataclass(frozen=True)
class BackendSpec:
    """`--backend` and its options, parsed once: the backend and the options the user gave, each
    checked to be one of its own (`http://HOST:PORT` is the remote backend at that address). The
    options become the backend's `Options` for a build (`index_options`) or, with what the index
    recorded, for a search (`search_options`)."""

    name: str
    backend: type[Backend]
    given: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""  # as the user wrote it (an address, for a served index), for run.json and titles
    parts: tuple[BackendSpec, ...] = ()  # a hybrid's (`lucene+dense`), each with the options it declares

    @classmethod
    def parse(cls, backend: BackendSpec | str, given: Mapping[str, Any] | None = None) -> BackendSpec:
        if isinstance(backend, BackendSpec):
            return backend
        given = {k: v for k, v in (given or {}).items() if v is not None}
        if "+" in backend or backend == "hybrid":
            return cls._hybrid(backend, given)
        label = backend
        if backend.startswith(("http://", "https://")):
            backend, given = "remote", {**given, "remote_url": backend}
        backend_type = backend_class(backend)
        fields = declared(backend_type.Options)
        for name in given:
            if name not in fields:
                owners = [b for b, t in options_types().items() if name in declared(t)]
                raise UsageError(
                    f"{flag_among(name, options_types().values())} is an option of the "
                    f"{' and '.join(owners) or 'no'} backend, not of {backend}"
                )
        return cls(backend, backend_type, given, label)

    @classmethod
    def _hybrid(cls, backend: str, given: Mapping[str, Any]) -> BackendSpec:
        """`lucene+dense`: the parts, each given the options it declares; the fusion's own to the hybrid."""
        from mhindex.backends.hybrid import DEFAULT_PARTS, HybridOptions

        names = list(DEFAULT_PARTS) if backend == "hybrid" else [n.strip() for n in backend.split("+")]
        for name in names:
            if name not in BACKENDS or not getattr(backend_class(name), "builds_index", True) or name == "hybrid":
                built = ", ".join(n for n in BACKENDS if n not in ("remote", "hybrid"))
                raise UsageError(f"--backend {backend}: a hybrid fuses indexes built here ({built}), not {name!r}")
        if len(set(names)) != len(names) or len(names) < 2:
            raise UsageError(f"--backend {backend}: a hybrid fuses two or more different backends, e.g. lucene+dense")
        own = declared(HybridOptions)
        parts = tuple(
            cls(
                name,
                backend_class(name),
                {k: v for k, v in given.items() if k in declared(backend_class(name).Options)},
                name,
            )
            for name in names
        )
        for name in given:
            if name not in own and not any(name in part.given for part in parts):
                owners = [b for b, t in options_types().items() if name in declared(t)]
                raise UsageError(
                    f"{flag_among(name, options_types().values())} is an option of the "
                    f"{' and '.join(owners) or 'no'} backend, not of {'+'.join(names)}"
                )
        fusion = {k: v for k, v in given.items() if k in own}
        return cls("hybrid", backend_class("hybrid"), fusion, "+".join(names), parts)

    @property
    def builds_index(self) -> bool:
        """False for an index served elsewhere: no local corpus index is needed to search it. A
        hybrid's parts are built here."""
        return bool(self.parts) or getattr(self.backend, "builds_index", True)

    def index_options(self) -> Any:
        """The options of a build: a search-time option given to `index` is refused."""
        return self._options(INDEX_STAGES)

    def search_options(self, recorded: Mapping[str, Any] | None = None, corpus: str = "CORPUS") -> Any:
        """The options of a search, over what the index was built with: an index-time option given
        with another value than the index recorded is refused, with the command that rebuilds it."""
        return self._options(SEARCH_STAGES, recorded or {}, corpus)

    def _options(
        self, stages: tuple[str, ...], recorded: Mapping[str, Any] | None = None, corpus: str = "CORPUS"
    ) -> Any:
        fields = declared(self.backend.Options)
        for name, value in self.given.items():
            stage, flag = fields[name][1].stage, flag_of(name, fields[name][1])
            if stage not in stages and stage == "search":
                raise UsageError(
                    f"{flag} of {self.name} applies when searching, not when indexing: give it to search, ask or eval"
                )
            if stage not in stages and stage == "index" and recorded is not None and recorded.get(name) != value:
                built = recorded.get(name)
                raise UsageError(
                    f"the {self.name} index was built with {flag} "
                    f"{built if built is not None else '(default)'}, and {flag} is fixed when the index is built; "
                    f"rebuild it: mhindex index {corpus} --backend {self.name} {flag} {value} --force"
                )
        known = {k: v for k, v in (recorded or {}).items() if k in fields}
        options = self.backend.Options(**{**known, **self.given})
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
    if (
        isinstance(manifest, dict)
        and isinstance(manifest.get("corpus_sha256"), str)
        and isinstance(manifest.get("options", {}), dict)
    ):
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
        if hasattr(inner, "candidates"):  # ids and scores, text for the top only (a hybrid's parts)
            self.candidates = self._checked(inner.candidates)

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


def build_index(
    corpus: CorpusDir, backend: BackendSpec | str, given: Mapping[str, Any] | None = None, force: bool = False
) -> IndexResult:
    """Index the corpus, unless an index of the same corpus and options exists. The new index is
    built beside the old one and replaces it only when complete."""
    spec = BackendSpec.parse(backend, given)
    if spec.parts:
        raise UsageError(f"a hybrid has no index of its own: build each part ({', '.join(p.name for p in spec.parts)})")
    if not spec.builds_index:
        raise UsageError(
            f"the {spec.name} backend searches an index that lives elsewhere: there is nothing to build here"
        )
    options = spec.index_options()
    with changing(corpus.root.parent, corpus.name, f"building its {spec.name} index"):
        return _build_index(corpus, spec.backend(), options, force)


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
            raise MhindexError(
                f"the {backend.name} build indexed {facts.get('paragraphs')} of the {expected:,} paragraphs of "
                f"'{corpus.name}'; nothing was replaced: run it again with --force"
            )
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


@dataclass
class OpenedIndex:
    """An index opened for searching: its retriever, and what decides its rankings (the options it
    was built with, the search options in effect, what it records of its model), which run.json
    and the server's /info report; never connection settings, which may hold credentials."""

    retriever: Retriever
    settings: dict[str, Any]

    def close(self) -> None:
        self.retriever.close()


def open_index(
    corpus: CorpusDir | None, backend: BackendSpec | str, given: Mapping[str, Any] | None = None
) -> OpenedIndex:
    """The corpus's index opened for searching, or a one-line error saying what to run. An index
    served elsewhere needs no local corpus (`corpus` may be None)."""
    spec = BackendSpec.parse(backend, given)
    if spec.parts:
        return _open_hybrid(corpus, spec)
    engine = spec.backend()
    if not spec.builds_index:
        options = spec.search_options()
        context = BackendContext(corpus.root.parent if corpus else Path("."))
        return OpenedIndex(engine.open(corpus, None, {}, options, context), _in_effect(options, {}))
    if corpus is None:
        raise UsageError(f"the {spec.name} backend searches a built corpus; name one with --corpus")
    target = corpus.index_dir(spec.name)
    try:
        manifest = _read_manifest(target, strict=True)
    except IndexDamaged as error:
        raise IndexDamaged(
            f"the {spec.name} index of '{corpus.name}' is damaged: {error}; {_rebuild(corpus, spec.name)}"
        ) from None
    rebuild = f"run `mhindex index {corpus.name} --backend {spec.name}`"
    if manifest is None:
        raise UsageError(f"corpus '{corpus.name}' has no {spec.name} index; {rebuild}")
    if manifest.get("corpus_sha256") != corpus.manifest()["corpus_sha256"]:
        raise UsageError(f"the {spec.name} index of '{corpus.name}' was built from an older corpus; {rebuild}")
    options = spec.search_options(manifest.get("options") or {}, corpus.name)
    what = f"the {spec.name} index of '{corpus.name}' ({target})"
    try:
        opened = engine.open(corpus, target, manifest, options, BackendContext(corpus.root.parent))
    except MhindexError:
        raise
    except Exception as error:  # noqa: BLE001 - a damaged index file, whatever the engine raises
        raise IndexDamaged(f"{what} cannot be opened ({one_line(error)}); {_rebuild(corpus, spec.name)}") from None
    return OpenedIndex(
        _Checked(opened, f"searching {what}", _rebuild(corpus, spec.name)), _in_effect(options, manifest)
    )


def _open_hybrid(corpus: CorpusDir | None, spec: BackendSpec) -> OpenedIndex:
    """Each part's index opened as itself (its own one-line errors), the rankings fused."""
    from mhindex.backends.hybrid import Fused

    options = spec.search_options()
    opened: list[OpenedIndex] = []
    try:
        for part in spec.parts:
            opened.append(open_index(corpus, part))
        retriever = Fused([(part.name, o.retriever) for part, o in zip(spec.parts, opened)], options)
    except BaseException:
        for o in opened:
            o.close()
        raise
    parts = {part.name: o.settings for part, o in zip(spec.parts, opened)}
    return OpenedIndex(retriever, {**_in_effect(options, {}), "parts": parts})


def _in_effect(options: Any, manifest: Mapping[str, Any]) -> dict[str, Any]:
    fields = declared(type(options))
    effective = {
        k: v for k, v in dataclasses.asdict(options).items() if k in fields and fields[k][1].stage != "connection"
    }
    return {**effective, **{k: manifest[k] for k in ("encoder", "checkpoint", "corpus_sha256") if k in manifest}}


def open_retriever(
    corpus: CorpusDir | None, backend: BackendSpec | str, given: Mapping[str, Any] | None = None
) -> Retriever:
    """`open_index(...).retriever`, for callers that need no more than the retriever."""
    return open_index(corpus, backend, given).retriever
