"""Indexes on disk: each lives in `<home>/<corpus>/indexes/<backend>/` with a `manifest.json` that
records the corpus hash it was built from and its index-time options; opening an index built from
another corpus, or asking for other index-time options than it was built with, is refused."""

from __future__ import annotations

import dataclasses
import math
import numbers
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import orjson

from mhindex import __version__
from mhindex.backends.base import Backend, BackendContext, Footprint, Hit, Retriever
from mhindex.backends.spec import BackendSpec
from mhindex.errors import MhindexError, UsageError, one_line
from mhindex.files import atomic_directory, refuse_unless_room
from mhindex.home import CorpusDir
from mhindex.locks import changing
from mhindex.options import RANK_NEUTRAL, declared


def recorded_options(options: Any) -> dict[str, Any]:
    """The index-time options, as the manifest records them (never connection settings)."""
    fields = declared(type(options))
    return {k: v for k, v in dataclasses.asdict(options).items() if k in fields and fields[k][1].stage == "index"}


@dataclass
class IndexResult:
    path: Path
    manifest: dict[str, Any]
    rebuilt: bool


class IndexDamaged(UsageError):
    """An index that is there but cannot be read or searched: rebuilding it is the way out."""


def _read_manifest(path: Path, strict: bool = False) -> dict[str, Any] | None:
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


P = ParamSpec("P")
R = TypeVar("R")


class _Checked:
    """A retriever whose engine failures (a truncated Lucene segment, a damaged FAISS file) are one
    line that names the index and says how to rebuild it, not an engine's stack trace."""

    def __init__(self, inner: Retriever, what: str, fix: str, most: int | None = None) -> None:
        self._inner, self._what, self._fix = inner, what, fix
        # A k past the corpus's size asks for no more than all of it: cut there, so that an engine never sees a
        # number it cannot take (Lucene's int: -k 2147483648 was taken for a damaged index).
        self._most = most
        if hasattr(inner, "search_titles"):
            self.search_titles = self._checked(inner.search_titles)
        if hasattr(inner, "candidates"):  # ids and scores, text for the top only (a hybrid's parts)
            self.candidates = self._checked(inner.candidates)

    def _checked(self, call: Callable[P, R]) -> Callable[P, R]:
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return call(*args, **kwargs)
            except MhindexError:
                raise
            except Exception as error:  # noqa: BLE001 - an engine's failure, whatever its type, is one line
                raise IndexDamaged(f"{self._what} failed ({one_line(error)}); {self._fix}") from None

        return run

    def _cut(self, k: int) -> int:
        return k if self._most is None else max(1, min(k, self._most))

    def search(self, query: str, k: int = 10, titles: Any = None) -> list[Hit]:
        return self._hits(self._checked(self._inner.search)(query, self._cut(k), titles=titles))

    def search_many(self, queries: Any, k: int = 10) -> list[list[Hit]]:
        found = self._checked(self._inner.search_many)(queries, self._cut(k))
        if not isinstance(found, list) or len(found) != len(queries):
            raise MhindexError(f"{self._what} returned {_kind(found)} for {len(queries)} queries, not a list of hits "
                               "a query: a fault of its backend's code, not of the index")  # fmt: skip
        return [self._hits(hits) for hits in found]

    def _hits(self, hits: Any) -> list[Hit]:
        """What an engine (or a plug-in's) returned, checked at the door: a list of hits, each with a string id,
        title and text and a finite score, never passed on to be read as something else."""
        if not isinstance(hits, list) or not all(_is_hit(hit) for hit in hits):
            wrong = hits if not isinstance(hits, list) else next(h for h in hits if not _is_hit(h))
            shown = _kind(wrong) if wrong is hits else f"a list holding {_kind(wrong)}"
            raise MhindexError(f"{self._what} returned {shown}, not a list of hits: a fault of its backend's code, not "
                               "of the index")  # fmt: skip
        return hits

    def close(self) -> None:
        self._inner.close()

    def __getattr__(self, name: str) -> Any:  # the engine's own attributes (its FAISS index, its encoder)
        return getattr(self._inner, name)


def _is_hit(hit: Any) -> bool:
    score = getattr(hit, "score", 0.0)
    finite = score is None or (isinstance(score, numbers.Real) and not isinstance(score, bool) and math.isfinite(score))
    return (
        isinstance(hit, Hit) and finite and all(isinstance(getattr(hit, n, None), str) for n in ("id", "title", "text"))
    )


def _kind(value: Any) -> str:
    shown = repr(value)
    return f"{shown[:40]}{'...' if len(shown) > 40 else ''} (a {type(value).__name__})"


def build_index(corpus: CorpusDir, spec: BackendSpec, force: bool = False, preflight: bool = True) -> IndexResult:
    """Index the corpus, unless an index of the same corpus and options exists. The new index is
    built beside the old one and replaces it only when complete; with `preflight`, only when the memory and
    disk the backend expects to need are there (`check_room`)."""
    if spec.parts:
        raise UsageError(f"a hybrid has no index of its own: build each part ({', '.join(p.name for p in spec.parts)})")
    if not spec.builds_index:
        raise UsageError(
            f"the {spec.name} backend searches an index that lives elsewhere: there is nothing to build here"
        )
    options = spec.index_options()
    with changing(corpus.root.parent, corpus.name, f"building its {spec.name} index"):
        return _build_index(corpus, spec.backend(), options, force, preflight)


def build_indexes(
    corpus: CorpusDir, spec: BackendSpec, force: bool = False, preflight: bool = True
) -> list[IndexResult]:
    """Every index a backend searches: a fusion's parts, each built as itself, or its own."""
    return [build_index(corpus, part, force, preflight) for part in spec.index_parts()]


def footprint_of(corpus: CorpusDir, backend: Backend, options: Any) -> Footprint | None:
    """What indexing this corpus with this backend is expected to take at its peak (None: the backend cannot say)."""
    return backend.footprint(corpus.manifest()["counts"]["paragraphs"], corpus.corpus.stat().st_size, options)


def check_room(corpus: CorpusDir, backend: Backend, options: Any) -> None:
    """Refuse, in one line, a build whose expected peak does not fit (an old index is kept until the new one is
    whole, so it frees nothing)."""
    need = footprint_of(corpus, backend, options)
    if need is not None:
        refuse_unless_room(f"index '{corpus.name}' with {backend.name}", need.memory, need.disk, corpus.root.parent)


def _build_index(corpus: CorpusDir, backend: Backend, options: Any, force: bool, preflight: bool) -> IndexResult:
    corpus_sha = corpus.manifest()["corpus_sha256"]
    target = corpus.index_dir(backend.name)
    old = _read_manifest(target)
    index_options = recorded_options(options)
    if not force and old and old.get("corpus_sha256") == corpus_sha:
        if old.get("options") == index_options:
            return IndexResult(target, old, rebuilt=False)
        if other := _ranking_options_differ(old.get("options"), index_options):
            raise UsageError(_variant_taken(corpus, backend.name, old.get("options"), index_options, other))
    if preflight:
        check_room(corpus, backend, options)
    started = time.perf_counter()
    with atomic_directory(target, corpus.root.parent) as staging:
        try:
            facts = backend.build(corpus, staging, options, BackendContext(corpus.root.parent))
        except (MhindexError, KeyboardInterrupt, MemoryError):
            raise
        except Exception as error:  # noqa: BLE001 - an engine's or a plug-in's failure: one line, nothing replaced
            raise MhindexError(
                f"the {backend.name} build of '{corpus.name}' failed ({one_line(error)}); nothing was replaced"
            ) from None
        expected = corpus.manifest()["counts"]["paragraphs"]
        if not isinstance(facts, dict):
            raise MhindexError(f"the {backend.name} build returned {_kind(facts)}, not its facts; nothing was replaced")
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


def search_stream(
    retriever: Retriever,
    items: Iterable[tuple[int, dict[str, Any] | str]],
    k: int,
    batch: int,
    emit: Callable[[dict[str, Any]], None],
) -> int:
    """Answer a stream of (line number, {"id", "query"} or why the line is bad) in input order,
    `batch` queries at a time: {"id", "hits"} or {"line", "error"} to `emit`; returns the bad lines."""
    failed = 0
    pending: list[tuple[int, dict[str, Any] | str]] = []

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
    #: the retrieval environment (`index_fingerprint`): what `mhindex diff` compares
    fingerprint: dict[str, Any] = dataclasses.field(default_factory=dict)

    def close(self) -> None:
        self.retriever.close()

    def variant(self) -> dict[str, Any]:
        """Which index this is, as a search says it: the backend and the settings that decide its ranking."""
        return {key: value for key, value in self.fingerprint.items() if key not in ("queries", "corpus_sha256")}


def _ranking_options_differ(old: Any, new: dict[str, Any]) -> list[str]:
    """The build options, other than those that change no ranking (threads, shard size), that differ."""
    before = old if isinstance(old, dict) else {}
    return sorted(key for key in {*before, *new} - RANK_NEUTRAL if before.get(key) != new.get(key))


def _variant_taken(corpus: CorpusDir, backend: str, old: Any, new: dict[str, Any], differing: list[str]) -> str:
    """An index built with other options is another variant of it (Milvus's vectors against vectors+bm25, another
    encoder): replacing it changes every later search's ranking, so it is never done without --force."""
    before = old if isinstance(old, dict) else {}
    built = ", ".join(f"{key}={before.get(key)!r}" for key in differing)
    asked = ", ".join(f"{key}={new.get(key)!r}" for key in differing)
    return (f"the {backend} index of '{corpus.name}' was built with {built}; building it with {asked} would replace "
            f"it (and change what every later search ranks): add --force to replace it")  # fmt: skip


def open_index(corpus: CorpusDir | None, spec: BackendSpec) -> OpenedIndex:
    """The corpus's index opened for searching, or a one-line error saying what to run. An index
    served elsewhere needs no local corpus (`corpus` may be None)."""
    if spec.parts:
        return _open_hybrid(corpus, spec)
    engine = spec.backend()
    if not spec.builds_index:
        options = spec.search_options()
        context = BackendContext(corpus.root.parent if corpus else Path("."))
        settings = _in_effect(options, {})
        served = _Checked(engine.connect(corpus, options, context), f"the {spec.name} index served elsewhere",
                          "is the server reachable and well?")  # fmt: skip
        return OpenedIndex(served, settings, index_fingerprint(spec, settings, {}))
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
    settings = _in_effect(options, manifest)
    return OpenedIndex(
        _Checked(opened, f"searching {what}", _rebuild(corpus, spec.name), _paragraphs(corpus)),
        settings,
        index_fingerprint(spec, settings, manifest),
    )


def _paragraphs(corpus: CorpusDir) -> int | None:
    counts = corpus.manifest().get("counts")
    found = counts.get("paragraphs") if isinstance(counts, dict) else None
    return found if isinstance(found, int) and found > 0 else None


def _open_hybrid(corpus: CorpusDir | None, spec: BackendSpec) -> OpenedIndex:
    """Each part's index opened as itself (its own one-line errors), the rankings fused."""
    options = spec.search_options()
    opened: list[OpenedIndex] = []
    try:
        for part in spec.parts:
            opened.append(open_index(corpus, part))
        retriever = spec.backend().fuse([(part.name, o.retriever) for part, o in zip(spec.parts, opened)], options)
    except BaseException:
        for o in opened:
            o.close()
        raise
    parts = {part.name: o.settings for part, o in zip(spec.parts, opened)}
    fused = _in_effect(options, {})
    fingerprint = {
        **index_fingerprint(spec, fused, {}),
        "parts": {part.name: o.fingerprint for part, o in zip(spec.parts, opened)},
    }
    return OpenedIndex(retriever, {**fused, "parts": parts}, fingerprint)


def _in_effect(options: Any, manifest: Mapping[str, Any]) -> dict[str, Any]:
    fields = declared(type(options))
    effective = {
        k: v for k, v in dataclasses.asdict(options).items() if k in fields and fields[k][1].stage != "connection"
    }
    return {**effective, **{k: manifest[k] for k in ("encoder", "checkpoint", "corpus_sha256") if k in manifest}}


#: What the index records of its model besides its options: the encoder's weights and how vectors are made.
_MODEL_FACTS = ("encoder_sha256", "pooling", "normalized", "dim", "vectors")


def index_fingerprint(spec: BackendSpec, settings: dict[str, Any], manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The retrieval environment of an opened index, as `mhindex diff` compares it: the backend, every setting
    that changes a ranking (k1 and b, the encoder and its weights' sha256, pooling and normalisation, the index
    type and its parameters), and how queries are read (the backend's analyzer)."""
    return {
        "backend": spec.label,
        **{key: value for key, value in settings.items() if key not in RANK_NEUTRAL},
        **{key: manifest[key] for key in _MODEL_FACTS if key in manifest},
        "queries": spec.backend.queries,
    }


def corpus_environment(corpus: CorpusDir) -> dict[str, Any]:
    """The corpus's fingerprint (`CorpusDir.fingerprint`) and each index built of it, by backend, as
    `index_fingerprint` gives it with the search options at their defaults (what `mhindex info` shows); an index
    of an unknown backend or a damaged one is left out."""
    found: dict[str, dict[str, Any]] = {}
    for folder in sorted(corpus.indexes.iterdir()) if corpus.indexes.is_dir() else []:
        manifest = _read_manifest(folder) if folder.is_dir() and not folder.name.startswith(".") else None
        try:
            spec = BackendSpec.parse(folder.name) if manifest else None
        except UsageError:  # a plug-in's index, its package gone
            spec = None
        if spec and manifest:
            settings = _in_effect(spec.search_options(manifest.get("options") or {}, corpus.name), manifest)
            found[folder.name] = index_fingerprint(spec, settings, manifest)
    return {"corpus": corpus.fingerprint(), "indexes": found}


def open_retriever(corpus: CorpusDir | None, spec: BackendSpec) -> Retriever:
    """`open_index(...).retriever`, for callers that need no more than the retriever."""
    return open_index(corpus, spec).retriever


def index_of(root: Path, name: str, spec: BackendSpec) -> OpenedIndex:
    """The index of corpus `name` under the data root, opened. A served index needs no corpus built here: `name`
    is the corpus as the server knows it."""
    from mhindex.home import corpus_dir, open_corpus

    return open_index(open_corpus(root, name) if spec.builds_index else corpus_dir(root, name), spec)


def retriever_of(root: Path, name: str, spec: BackendSpec) -> Retriever:
    """`index_of(...).retriever`."""
    return index_of(root, name, spec).retriever
