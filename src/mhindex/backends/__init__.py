"""Indexes and retrievers. One module per engine behind `base.Backend`; `registry.BACKENDS` names
them and imports each only when it is used, so `mhindex --help` and a Lucene query never pay for torch
or an Elasticsearch client.

Adding a backend: a module with a `Backend` subclass (its `name`, `title`, `Settings`, `requirements`,
`build` and `open`) and one line in `registry.BACKENDS`, or an entry point in the group
`mhindex.backends` of a package of its own. Any two or more built backends fuse as one
(`--backend lucene+dense`, backends/hybrid.py).

`--backend` and its options are parsed once, where a command starts, into a `BackendSpec`
(backends/spec.py); everything below receives that value. Indexes on disk, their manifests, building
and opening them: backends/indexes.py.
"""

from __future__ import annotations

from mhindex.backends.base import Backend, Hit, Retriever
from mhindex.backends.indexes import (
    IndexDamaged,
    IndexResult,
    OpenedIndex,
    build_index,
    build_indexes,
    index_of,
    open_index,
    open_retriever,
    recorded_options,
    retriever_of,
    search_stream,
)
from mhindex.backends.registry import (
    BACKENDS,
    DEFAULT_BACKEND,
    backend_class,
    backend_title,
    engine_names,
    settings_types,
)
from mhindex.backends.spec import BackendSpec

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "Backend",
    "BackendSpec",
    "Hit",
    "IndexDamaged",
    "IndexResult",
    "OpenedIndex",
    "Retriever",
    "backend_class",
    "engine_names",
    "backend_title",
    "build_index",
    "build_indexes",
    "index_of",
    "open_index",
    "open_retriever",
    "settings_types",
    "recorded_options",
    "retriever_of",
    "search_stream",
]
