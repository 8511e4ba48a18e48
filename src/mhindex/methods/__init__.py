"""Question-answering methods: one module each behind `base.Method`, named here.

Adding a method: a module with a `Method` subclass (its `Settings` dataclass declares its
options; `needs_retriever` says whether it retrieves) and one line in METHODS. The CLI, `eval`
and `run.json` pick up its options from the dataclass: nothing else changes.
"""

from __future__ import annotations

from typing import Any

from mhindex.errors import UsageError
from mhindex.methods.base import Answer, Method, MethodContext, Query
from mhindex.options import declared, flag_among, settings_from
from mhindex.registry import load

__all__ = [
    "METHODS",
    "Answer",
    "Method",
    "MethodContext",
    "Query",
    "make_method",
    "method_class",
    "settings_for",
    "settings_types",
]

METHODS = {
    "nor": "mhindex.methods.nor:NoRetrieval",
    "oner": "mhindex.methods.oner:OneRetrieval",
    "ircot": "mhindex.methods.ircot:IRCoT",
    "searchain": "mhindex.methods.searchain:SearChain",
    "kdcot": "mhindex.methods.kdcot:KDCoT",
    "efficientrag": "mhindex.methods.efficientrag:EfficientRAG",
}
DEFAULT_METHOD = "ircot"


def method_class(name: str) -> type[Method]:
    return load(METHODS, "method", name)


def settings_types() -> dict[str, type]:
    """Each method's settings dataclass, for the options of ask and eval."""
    return {name: method_class(name).Settings for name in METHODS}


def settings_for(names: list[str], given: dict[str, Any]) -> dict[str, Any]:
    """Each named method's settings from the options given. An option that none of them declares
    is refused, saying whose it is; one that only some of them declare applies to those."""
    classes = {name: method_class(name) for name in names}
    for option in given:
        if not any(option in declared(cls.Settings) for cls in classes.values()):
            owners = {n: t for n, t in settings_types().items() if option in declared(t)}
            raise UsageError(
                f"{flag_among(option, owners.values())} is an option of {', '.join(owners)}, not of {', '.join(names)}"
            )
    return {
        name: settings_from(
            cls.Settings, {k: v for k, v in given.items() if k in declared(cls.Settings)}, f"method {name}"
        )
        for name, cls in classes.items()
    }


def make_method(name: str, retriever: Any, lm: Any, settings: Any, context: MethodContext | None = None) -> Method:
    return method_class(name)(retriever, lm, settings, context or MethodContext())
