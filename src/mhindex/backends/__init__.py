"""Indexes and retrievers. One module per engine behind `base.Backend`; this registry names
them and imports each only when it is used, so `mhindex --help` and a Lucene query never pay
for torch or an Elasticsearch client.

An index lives in `<home>/<corpus>/indexes/<backend>/` with a `manifest.json` that records the
corpus hash it was built from; opening an index built from another corpus is refused.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mhindex import __version__
from mhindex.backends.base import Backend, Hit, Retriever
from mhindex.errors import UsageError
from mhindex.files import atomic_directory
from mhindex.home import CorpusDir

__all__ = ["BACKENDS", "Hit", "Retriever", "IndexResult", "get_backend", "build_index", "open_retriever"]

BACKENDS = {
    "lucene": "mhindex.backends.lucene:LuceneBackend",
    "elasticsearch": "mhindex.backends.elasticsearch:ElasticsearchBackend",
    "dense": "mhindex.backends.dense:DenseBackend",
    "colbert": "mhindex.backends.colbert:ColbertBackend",
}
DEFAULT_BACKEND = "lucene"


def get_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise UsageError(f"unknown backend '{name}'; choose one of: {', '.join(BACKENDS)}")
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)()


def _options(backend: Backend, given: dict[str, Any] | None) -> dict[str, Any]:
    options = dict(getattr(backend, "defaults", {}))
    options.update({k: v for k, v in (given or {}).items() if v is not None})
    return options


@dataclass
class IndexResult:
    path: Path
    manifest: dict
    rebuilt: bool


def _read_manifest(path: Path) -> dict | None:
    try:
        return orjson.loads((path / "manifest.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None


def build_index(corpus: CorpusDir, backend_name: str, options: dict[str, Any] | None = None, force: bool = False) -> IndexResult:
    """Index the corpus, unless an index of the same corpus and options exists. The new index is
    built beside the old one and replaces it only when complete."""
    backend = get_backend(backend_name)
    options = _options(backend, options)
    corpus_sha = corpus.manifest()["corpus_sha256"]
    target = corpus.index_dir(backend.name)
    old = _read_manifest(target)
    index_options = {k: v for k, v in options.items() if k not in getattr(backend, "search_only", ())}
    if not force and old and old.get("corpus_sha256") == corpus_sha and old.get("options") == index_options:
        return IndexResult(target, old, rebuilt=False)
    started = time.perf_counter()
    with atomic_directory(target) as staging:
        facts = backend.build(corpus.corpus, staging, options)
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


def open_retriever(corpus: CorpusDir, backend_name: str, options: dict[str, Any] | None = None) -> Retriever:
    """A retriever over the corpus's index, or a one-line error saying what to run."""
    backend = get_backend(backend_name)
    target = corpus.index_dir(backend.name)
    manifest = _read_manifest(target)
    rebuild = f"run `mhindex index {corpus.name} --backend {backend.name}`"
    if manifest is None:
        raise UsageError(f"corpus '{corpus.name}' has no {backend.name} index; {rebuild}")
    if manifest.get("corpus_sha256") != corpus.manifest()["corpus_sha256"]:
        raise UsageError(f"the {backend.name} index of '{corpus.name}' was built from an older corpus; {rebuild}")
    merged = {**getattr(backend, "defaults", {}), **manifest.get("options", {})}
    merged.update({k: v for k, v in (options or {}).items() if v is not None})
    return backend.open(target, manifest, merged)
