"""Question-answering methods: one module each behind `base.Method`, named here.

Adding a method: a module with a `Method` subclass taking (retriever, lm, settings, demo_set),
and one line below.
"""

from __future__ import annotations

import importlib

from mhindex.errors import UsageError
from mhindex.methods.base import Answer, Method, Query
from mhindex.methods.settings import Settings

__all__ = ["METHODS", "Answer", "Method", "Query", "Settings", "make_method"]

METHODS = {
    "nor": "mhindex.methods.nor:NoRetrieval",
    "oner": "mhindex.methods.oner:OneRetrieval",
    "ircot": "mhindex.methods.ircot:IRCoT",
}
DEFAULT_METHOD = "ircot"


def make_method(name: str, retriever, lm, settings: Settings, demo_set: str) -> Method:
    if name not in METHODS:
        raise UsageError(f"unknown method '{name}'; choose one of: {', '.join(METHODS)}")
    module, cls = METHODS[name].split(":")
    return getattr(importlib.import_module(module), cls)(retriever, lm, settings, demo_set)
