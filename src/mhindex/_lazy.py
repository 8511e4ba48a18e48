"""Names a module exports, imported on first use (PEP 562): `import mhindex` and a plug-in's import of
`mhindex.plugins` load none of the layers until a name of theirs is used."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], exports: Mapping[str, str], prepare: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module's `__getattr__` and `__dir__`: a name of `exports` (name -> module) is imported when first
    asked for, and kept in the module's `namespace` (its `globals()`) for the next time. `prepare`: module -> a
    function of it called once before its first name is handed out this way (not when imported otherwise)."""
    prepared: set[str] = set()

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        imported = importlib.import_module(module)
        if prepare and module in prepare and module not in prepared:
            prepared.add(module)
            getattr(imported, prepare[module])()
        value = getattr(imported, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(namespace["__all__"])

    return __getattr__, __dir__
