"""The backends' registry: a name maps to "module:Class", imported only when used (mhindex/registry.py)."""

from __future__ import annotations

from typing import Any

from mhindex.backends.base import Backend
from mhindex.registry import Owners, Registry, missing_members


def _check(loaded: Any) -> str | None:
    if not (isinstance(loaded, type) and issubclass(loaded, Backend)):
        return "is not a subclass of mhindex.backends.base.Backend"
    return missing_members(loaded, ("name", "title", "Settings"))


BACKENDS: Registry[type[Backend]] = Registry(
    "backend",
    {
        "lucene": "mhindex.backends.lucene:LuceneBackend",
        "elasticsearch": "mhindex.backends.elasticsearch:ElasticsearchBackend",
        "dense": "mhindex.backends.dense:DenseBackend",
        "colbert": "mhindex.backends.colbert:ColbertBackend",
        "bm25s": "mhindex.backends.bm25s:Bm25sBackend",
        "pisa": "mhindex.backends.pisa:PisaBackend",
        "milvus": "mhindex.backends.milvus:MilvusBackend",
        "remote": "mhindex.backends.remote:RemoteBackend",
        "hybrid": "mhindex.backends.hybrid:HybridBackend",
    },
    _check,
)
DEFAULT_BACKEND = "lucene"


def backend_class(name: str) -> type[Backend]:
    return BACKENDS.get(name)


def backend_title(name: str) -> str:
    """As tables name it: "BM25 (Lucene)", a fusion its parts' titles joined ("BM25 (Lucene) + dense (FAISS)")."""
    shown = []
    for part in name.split("+"):
        try:
            shown.append(backend_class(part).title)
        except Exception:  # noqa: BLE001 - a backend no longer installed is shown by its name
            shown.append(part)
    return " + ".join(shown)


def engine_names() -> list[str]:
    """The engines --backend names (fusions aside), for its help: plug-ins by name, not imported for a help line."""
    return [name for name in BACKENDS if not BACKENDS.builtin(name) or not BACKENDS[name].fuses]


def settings_types() -> Owners:
    """Each backend's options dataclass, for the options of index, search, ask and eval.
    Importing a backend module is cheap: engines (torch, FAISS, the JVM) load when used."""
    return Owners(BACKENDS, {name: cls.Settings for name, cls in BACKENDS.available().items()})
