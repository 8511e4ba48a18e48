"""Question-answering methods: one module each behind `base.Method`, named here.

Adding a method: a module with a `Method` subclass (its `title`, `Settings` dataclass of options,
`needs_retriever`, `trace_steps`, paper and paper metrics: see `base.Method`) and one line in METHODS,
or an entry point in the group `mhindex.methods` of a package of its own (mhindex/registry.py). The
CLI, `eval`, `report` and `run.json` read all they need from the class: nothing else changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from mhindex.errors import UsageError
from mhindex.methods.base import Answer, Method, MethodContext, Query, TraceStep
from mhindex.options import check_choices, check_value, declared, flag_among, flag_of, settings_from
from mhindex.registry import Owners, Registry, missing_members

__all__ = [
    "METHODS",
    "Answer",
    "Method",
    "MethodContext",
    "Query",
    "make_method",
    "method_class",
    "method_rows",
    "declared_rows",
    "method_title",
    "resumable_work",
    "trace_of",
    "settings_for",
    "settings_types",
]


def _check(loaded: Any) -> str | None:
    if not (isinstance(loaded, type) and issubclass(loaded, Method)):
        return "is not a subclass of mhindex.methods.Method"
    return missing_members(loaded, ("name", "title", "Settings", "answer")) or (
        None if callable(getattr(loaded.Settings, "recorded", None)) else "its Settings lack recorded(dataset)"
    )


METHODS: Registry[type[Method]] = Registry(
    "method",
    {
        "nor": "mhindex.methods.nor:NoRetrieval",
        "oner": "mhindex.methods.oner:OneRetrieval",
        "ircot": "mhindex.methods.ircot:IRCoT",
        "searchain": "mhindex.methods.searchain:SearChain",
        "kdcot": "mhindex.methods.kdcot:KDCoT",
        "efficientrag": "mhindex.methods.efficientrag:EfficientRAG",
        "cot": "mhindex.methods.cot:CoT",
        "selfask": "mhindex.methods.selfask:SelfAsk",
        "iterretgen": "mhindex.methods.iterretgen:IterRetGen",
        "react": "mhindex.methods.react:ReAct",
        "decompose": "mhindex.methods.decompose:Decompose",
        "direct": "mhindex.methods.direct:Direct",
        "direct-r": "mhindex.methods.direct:DirectRetrieval",
        "retrieve": "mhindex.methods.retrieve:Retrieve",
        "searchr1": "mhindex.methods.searchr1:SearchR1",
        "r1searcher": "mhindex.methods.r1searcher:R1Searcher",
        "flare": "mhindex.methods.flare:Flare",
        "naive-gen": "mhindex.methods.sequential:NaiveGeneration",
        "standard-rag": "mhindex.methods.sequential:StandardRAG",
        "adaptive": "mhindex.methods.adaptive:Adaptive",
    },
    _check,
)
DEFAULT_METHOD = "ircot"
#: what `eval` compares unless told: IRCoT's paper's table (no retrieval, one retrieval, IRCoT)
DEFAULT_EVAL_METHODS = ("nor", "oner", "ircot")


def method_class(name: str) -> type[Method]:
    """The method registered as `name`, or as the method part of a variant (`oner@k=5`)."""
    return METHODS.get(name.partition("@")[0])


def method_title(name: str) -> str:
    """As the papers write it: `oner@k=5` -> "OneR (k=5)"; a name no longer registered as itself."""
    method, _, setting = name.partition("@")
    try:
        shown = method_class(method).title
    except UsageError:
        shown = method
    return f"{shown} ({setting})" if setting else shown


def declared_rows(cls: type[Method]) -> dict[str, dict[str, Any]]:
    """The rows of the papers' tables a method runs, as it declares them (`Method.tables`): {table: {row label:
    its settings}}. The older form, one row's settings ({} or {"k": 10}), is one row named as the method is
    titled."""
    rows = {}
    for table, given in cls.tables.items():
        if given and all(isinstance(settings, Mapping) for settings in given.values()):
            rows[table] = {label: dict(settings) for label, settings in given.items()}
        else:
            rows[table] = {cls.title: dict(given)}
    return rows


def method_rows() -> list[dict[str, Any]]:
    """Each installed method as `mhindex list methods` shows it: name, title, paper, whether it retrieves, tables."""
    return [
        {
            "name": name,
            "title": cls.title,
            "paper": cls.paper,
            "retrieves": cls.needs_retriever,
            "tables": [
                f"{table}: {label}" + "".join(f" ({k}={v})" for k, v in settings.items())
                for table, rows in declared_rows(cls).items()
                for label, settings in rows.items()
            ],
        }
        for name, cls in METHODS.available(every=True).items()
    ]


def settings_types() -> Owners:
    """Each method's settings dataclass, for the options of ask and eval (broken plug-ins left out)."""
    return Owners(METHODS, {name: cls.Settings for name, cls in METHODS.available().items()})


def settings_for(names: list[str], given: dict[str, Any]) -> dict[str, Any]:
    """Each named method's settings from the options given. An option that none of them declares
    is refused, saying whose it is; one that only some of them declare applies to those."""
    classes = {name: method_class(name) for name in names}
    for option in given:
        if not any(option in declared(cls.Settings) for cls in classes.values()):
            owners = {n: t for n, t in settings_types().items() if option in declared(t)}
            if not owners:
                own = sorted({flag_among(o, [c.Settings]) for c in classes.values() for o in declared(c.Settings)})
                raise UsageError(
                    f"{flag_among(option, [])} is not an option of {', '.join(names)} (its options: "
                    f"{', '.join(own) or 'none'})"
                )
            raise UsageError(
                f"{flag_among(option, owners.values())} is an option of {', '.join(owners)}, not of {', '.join(names)}"
            )
    return {
        name: settings_from(
            cls.Settings, {k: v for k, v in given.items() if k in declared(cls.Settings)}, f"method {name}"
        )
        for name, cls in classes.items()
    }


def settings_recorded(name: str, recorded: Any, where: str, home: Path | None = None) -> Any:
    """A method's settings as a record (run.json) holds them, checked as the command line's are: its type and
    bounds, its choices, no setting the method does not know (what `recorded()` and `recorded_models()` add besides
    are known), and a file or folder a setting names inside the data root `home` (a record names what is read and
    where it is sent: a tampered one must not read a file of the user's and send it to a server). One line naming
    the record, the method and the setting otherwise."""
    import dataclasses

    cls = method_class(name)
    if not isinstance(recorded, dict):
        raise UsageError(f"{where}: the settings of {name} are not a JSON object")
    fields, options = {f.name for f in dataclasses.fields(cast(Any, cls.Settings))}, declared(cls.Settings)
    known = fields | set(cls.Settings().recorded(None)) | set(cls.recorded_keys)
    unknown = sorted(set(recorded) - known)
    if unknown:
        raise UsageError(f"{where}: {name} records settings this mhindex does not know: {', '.join(unknown)}")
    for key, value in recorded.items():
        if key in options:
            try:
                check_value(key, options[key][1], options[key][2], value)
            except UsageError as error:
                raise UsageError(f"{where}: {name}: {error}") from None
            if options[key][1].reads and isinstance(value, str) and home is not None:
                _inside_the_root(Path(value).expanduser(), home, f"{where}: {name}'s {flag_of(key, options[key][1])}")
    settings = cls.Settings(**{k: v for k, v in recorded.items() if k in fields})
    try:
        check_choices(settings)
    except UsageError as error:
        raise UsageError(f"{where}: {name}: {error}") from None
    return settings


def _inside_the_root(path: Path, home: Path, said: str) -> None:
    try:
        path.resolve().relative_to(home.resolve())
    except ValueError:
        raise UsageError(
            f"{said} names {path}, outside the data root {home}: a record is not read from there (give the option "
            "yourself: mhindex eval ... with it)"
        ) from None


def trace_of(record: dict[str, Any], name: str = "") -> list[TraceStep]:
    """A record's trace as its method draws it (`Method.trace_steps`: `ask`'s tree and the report's page);
    a record of a method no longer installed shows its steps, as every method records them."""
    try:
        return method_class(str(record.get("method") or name)).trace_steps(record)
    except UsageError:
        return Method.trace_steps(record)


def resumable_work(home: Path, every: bool = False) -> list[Path]:
    """What the methods keep under the data root so that an interrupted run resumes (`Method.resumable`): every
    method's for `gc` (`every`), which must not remove a plug-in's; the built-ins' and those named, elsewhere."""
    return [path for method in METHODS.available(every).values() for path in method.resumable(home)]


def make_method(name: str, retriever: Any, lm: Any, settings: Any, context: MethodContext | None = None) -> Method:
    return method_class(name)(retriever, lm, settings, context or MethodContext())
