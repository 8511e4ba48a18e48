"""The registries of plug-ins: methods, backends, datasets, LM providers and metrics.

Each kind is one `Registry`: a name maps to "module:attribute", imported only when that name is
used, so `mhindex --help` and a Lucene search never load torch or the JVM for an engine they do not
touch. Built-ins are one line each in their package's `__init__`; other packages add theirs the way
pytest and Sphinx take plug-ins, through Python entry points (`[project.entry-points."mhindex.methods"]`
and likewise `mhindex.backends`, `mhindex.datasets`, `mhindex.lms`, `mhindex.metrics`, and a paper's table in
`mhindex.tables`), with no edit
to mhindex. A broken plug-in (it does not import, lacks a member, or takes a built-in's name) is one
warning line naming its package and what is wrong; the built-ins keep working. While the command line
builds its commands (`named_only`), only the plug-ins it names are imported: a slow or broken one delays or
warns the commands that use it, not `--help`, `--version` or a build.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.metadata
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

from mhindex.errors import UsageError

T = TypeVar("T")

#: The entry-point group of each kind, for `pyproject.toml`'s `[project.entry-points."GROUP"]`.
GROUPS = {
    "method": "mhindex.methods",
    "backend": "mhindex.backends",
    "dataset": "mhindex.datasets",
    "lm": "mhindex.lms",
    "metric": "mhindex.metrics",
    "table": "mhindex.tables",
}


def unknown(kind: str, name: str, known: Mapping[str, Any] | list[str]) -> UsageError:
    """The one-line error for a name that is not registered, with the nearest one if any."""
    names = list(known)
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return UsageError(f"unknown {kind} '{name}'; {hint}choose one of: {', '.join(names)}")


def _import(target: str) -> Any:
    module, _, attribute = target.partition(":")
    found: Any = importlib.import_module(module)
    for part in attribute.split(".") if attribute else ():
        found = getattr(found, part)
    return found


class Registry(Mapping[str, T], Generic[T]):
    """One kind of plug-in by name: the built-ins, then what installed packages declare under the kind's
    entry-point group (found once, on first use). `registry[name]` imports and checks one; iterating, `in`
    and `len` list the names without importing anything.

    `check` returns what is wrong with a loaded object (a missing member), or None."""

    def __init__(self, kind: str, builtins: Mapping[str, str], check: Callable[[Any], str | None] | None = None):
        self.kind = kind
        self.group = GROUPS[kind]
        self._builtins = dict(builtins)
        self._check = check
        self._found: dict[str, str] | None = None
        self._package: dict[str, str] = {}  # plug-in name -> the distribution that declares it
        self._loaded: dict[str, T] = {}
        self._refused: dict[str, str] = {}  # plug-in name -> why it is left out though it loads

    def _names(self) -> dict[str, str]:
        if self._found is None:
            found = dict(self._builtins)
            for point in _entry_points(self.group):
                package = point.dist.name if point.dist is not None else "an unnamed package"
                if point.name in self._builtins:
                    broken(
                        f"the plug-in {self.kind} '{point.name}' of {package} takes a built-in's name; it is ignored"
                    )
                    continue
                found[point.name] = point.value
                self._package[point.name] = package
            self._found = found
        return self._found

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def target(self, name: str) -> str:
        """Where `name` is declared: "module:attribute"."""
        return self._names()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def builtin(self, name: str) -> bool:
        return name in self._builtins

    def package(self, name: str) -> str | None:
        """The distribution a plug-in came from (None for a built-in)."""
        self._names()
        return self._package.get(name)

    def get(self, name: str) -> T:  # type: ignore[override]  # Mapping.get's default is not wanted here
        """The object registered as `name`, imported now; an unknown name is a one-line error listing the
        known ones, a broken plug-in one that names its package."""
        if name in self._refused:
            raise UsageError(
                f"the plug-in {self.kind} '{name}' of {self.package(name)} is broken: {self._refused[name]}"
            )
        if name in self._loaded:
            return self._loaded[name]
        names = self._names()
        if name not in names:
            raise unknown(self.kind, name, names)
        try:
            loaded: T = _import(names[name])
            problem = self._check(loaded) if self._check else None
        except (Exception, SystemExit, KeyboardInterrupt) as error:  # a plug-in's import may do anything: contained
            from mhindex.ui import Terminated

            if self.builtin(name) or isinstance(error, Terminated):  # SIGTERM is the user's, not the plug-in's
                raise
            problem = f"cannot be imported ({type(error).__name__}: {error})"
        if problem:
            raise UsageError(f"the plug-in {self.kind} '{name}' of {self.package(name)} is broken: {problem}")
        self._loaded[name] = loaded
        return loaded

    def refuse(self, name: str, problem: str) -> None:
        """Leave a plug-in out though it loads (its option takes the name of a command's own), with one warning;
        naming it later is the same one-line error."""
        self._refused[name] = problem
        self._loaded.pop(name, None)
        broken(f"the plug-in {self.kind} '{name}' of {self.package(name)} is broken: {problem}; it is left out")

    def available(self, every: bool = False) -> dict[str, T]:
        """Every name that loads, in order; a broken plug-in is warned about once and left out. Under
        `named_only`, a plug-in not named is left out unimported, unless `every` (what a command lists or uses
        whole: `list methods`, `doctor`, `gc`, every metric's column, the methods that claim a table's rows)."""
        found: dict[str, T] = {}
        for name in self:
            skipped = not every and _named is not None and name not in _named and not self.builtin(name)
            if name in self._refused or skipped:
                continue  # refused (and said so once), or not named while the command line builds its commands
            try:
                found[name] = self.get(name)
            except UsageError as error:
                if self.builtin(name):
                    raise
                broken(str(error))
        return found


_named: Collection[str] | None = None


@contextlib.contextmanager
def named_only(names: Collection[str] | None) -> Iterator[None]:
    """Within it, `available()` imports the built-ins and only the plug-ins in `names` (None: all of them)."""
    global _named
    before, _named = _named, names
    try:
        yield
    finally:
        _named = before


class Owners(dict[str, type]):
    """An option group's owners (name -> settings type), with the registry they come from: a plug-in whose option
    takes the name of a command's own is refused there (`Registry.refuse`), and the command keeps working."""

    def __init__(self, registry: Registry[Any], types: Mapping[str, type]) -> None:
        super().__init__(types)
        self.registry = registry


def named_on_command_line(argv: list[str]) -> set[str] | None:
    """The words of an `mhindex` command line (`--method ircot,pivot` gives ircot and pivot), for `named_only`
    while the CLI makes its commands' options; None (every plug-in) where another program imports the CLI."""
    program = Path(argv[0]) if argv else Path()
    if program.name != "mhindex" and program.parent.name != "mhindex":  # `mhindex` or `python -m mhindex`
        return None
    return {word for arg in argv[1:] for word in re.split(r"[,+=:]", arg) if word}


def _entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
    seen: dict[str, importlib.metadata.EntryPoint] = {}
    for point in importlib.metadata.entry_points(group=group):
        seen.setdefault(point.name, point)  # a distribution seen twice on sys.path declares it twice
    return list(seen.values())


_warned: set[str] = set()


def broken(message: str) -> None:
    """One warning line a broken plug-in, once a process."""
    if message in _warned:
        return
    _warned.add(message)
    from mhindex import ui

    ui.reporter().warning(message)


def missing_members(loaded: Any, members: tuple[str, ...]) -> str | None:
    """ "lacks X, Y" for the members a plug-in must have and does not."""
    lacking = [m for m in members if not hasattr(loaded, m)]
    return f"lacks {', '.join(lacking)}" if lacking else None
