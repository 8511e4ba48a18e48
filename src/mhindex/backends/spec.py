"""`--backend` and its options, parsed once where a command starts into a `BackendSpec`; everything
below receives that value, never the string again."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mhindex.backends.base import Backend
from mhindex.backends.registry import BACKENDS, backend_class, settings_types
from mhindex.errors import UsageError
from mhindex.options import check_choices, check_value, declared, flag_among, flag_of

INDEX_STAGES = ("index", "both", "connection")
SEARCH_STAGES = ("search", "both", "connection")


def _served_at(backend: str) -> type[Backend] | None:
    """The backend an address names (`http://HOST:PORT`: a served index), if any."""
    for cls in BACKENDS.available().values():
        if cls.addresses and backend.startswith(cls.addresses):
            return cls
    return None


def _fusion() -> type[Backend] | None:
    return next((cls for cls in BACKENDS.available().values() if cls.fuses), None)


def named_by(value: str) -> set[str]:
    """The backends a `--backend` value names, for `--help` to show their options: an address's backend,
    a fusion's parts and the fusion itself."""
    served = _served_at(value)
    if served is not None:
        return {served.name}
    chosen = {part.strip() for part in re.split(r"[,+]", value) if part.strip()}
    fusion = _fusion()
    if fusion is not None and (fusion.name in chosen or "+" in value):
        chosen |= {fusion.name} | (set(fusion.default_parts) if chosen == {fusion.name} else set())
    return chosen


def _not_an_option_of(name: str, backend: str) -> UsageError:
    owners = [b for b, t in settings_types().items() if name in declared(t)]
    whose = f"the {' and '.join(owners)} backend{'s' if len(owners) > 1 else ''}" if owners else "no backend"
    return UsageError(f"{flag_among(name, settings_types().values())} is an option of {whose}, not of {backend}")


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
    def parse(cls, backend: str, given: Mapping[str, Any] | None = None) -> BackendSpec:
        """The one place a `--backend` value and its options are read (a command's edge)."""
        given = {k: v for k, v in (given or {}).items() if v is not None}
        fusion = _fusion()
        if "+" in backend or (fusion is not None and backend == fusion.name):
            return cls._hybrid(backend, given)
        label = backend
        served = _served_at(backend)
        if served is not None:
            backend, given = served.name, {**given, served.address_option: backend}
        backend_type = backend_class(backend)
        fields = declared(backend_type.Settings)
        for name, value in given.items():
            if name not in fields:
                raise _not_an_option_of(name, backend)
            check_value(name, fields[name][1], fields[name][2], value)  # what the CLI checks, for values from Python
        return cls(backend, backend_type, given, label)

    @classmethod
    def _hybrid(cls, backend: str, given: Mapping[str, Any]) -> BackendSpec:
        """`lucene+dense`: the parts, each given the options it declares; the fusion's own to the fusion."""
        fusion = _fusion()
        if fusion is None:
            raise UsageError(f"--backend {backend}: no backend that fuses rankings is installed")
        names = list(fusion.default_parts) if backend == fusion.name else [n.strip() for n in backend.split("+")]
        built = [n for n, b in BACKENDS.available().items() if b.builds_index]
        for name in names:
            if name not in built:
                raise UsageError(
                    f"--backend {backend}: a hybrid fuses indexes built here ({', '.join(built)}), not {name!r}"
                )
        if len(set(names)) != len(names) or len(names) < 2:
            example = "+".join(fusion.default_parts) or "A+B"
            raise UsageError(f"--backend {backend}: a hybrid fuses two or more different backends, e.g. {example}")
        own = declared(fusion.Settings)
        parts = tuple(
            cls(
                name,
                backend_class(name),
                {k: v for k, v in given.items() if k in declared(backend_class(name).Settings)},
                name,
            )
            for name in names
        )
        for name, value in given.items():
            if name not in own and not any(name in part.given for part in parts):
                raise _not_an_option_of(name, "+".join(names))
            if name in own:
                check_value(name, own[name][1], own[name][2], value)
        for part in parts:
            fields = declared(part.backend.Settings)
            for name, value in part.given.items():
                check_value(name, fields[name][1], fields[name][2], value)
        return cls(fusion.name, fusion, {k: v for k, v in given.items() if k in own}, "+".join(names), parts)

    @property
    def builds_index(self) -> bool:
        """False for an index served elsewhere: no local corpus index is needed to search it. A
        hybrid's parts are built here."""
        return bool(self.parts) or self.backend.builds_index

    @property
    def batches(self) -> bool:
        """Its searches gain from being searched in batches: it batches, or one of a hybrid's parts does."""
        return self.backend.batches or any(part.backend.batches for part in self.parts)

    def index_parts(self) -> tuple[BackendSpec, ...]:
        """What gets an index of its own: a fusion's parts, each as itself, or this backend. Each one's build
        options are checked here, so that a wrong one fails before any work."""
        parts = self.parts or (self,)
        for part in parts:
            part.index_options()
        return parts

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
        fields = declared(self.backend.Settings)
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
        options = self.backend.Settings(**{**known, **self.given})
        check_choices(options)
        return options
