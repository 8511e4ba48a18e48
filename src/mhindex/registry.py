"""The lazy registries of methods, backends and datasets: a name maps to "module:Class", and the
module is imported only when that name is used, so `mhindex --help` and a Lucene search never load
torch or the JVM for an engine they do not touch."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from typing import Any

from mhindex.errors import UsageError


def unknown(kind: str, name: str, known: Mapping[str, Any] | list[str]) -> UsageError:
    """The one-line error for a name that is not registered, with the nearest one if any."""
    names = list(known)
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return UsageError(f"unknown {kind} '{name}'; {hint}choose one of: {', '.join(names)}")


def load(registry: Mapping[str, str], kind: str, name: str) -> Any:
    """The class registered as `name` ("module:Class"), imported now; an unknown name is a
    one-line error that lists the known ones."""
    if name not in registry:
        raise unknown(kind, name, registry)
    module, attribute = registry[name].split(":")
    return getattr(importlib.import_module(module), attribute)
