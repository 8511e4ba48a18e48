"""Options declared once, beside what they configure.

A method's (or a backend's) settings are a frozen dataclass. Each field a user may set carries
`option(...)` metadata: its help, flag and bounds. The CLI turns the fields of every registered
method into Typer options (`with_options`), so adding a method touches its own module and one
registry line; `settings_from` turns what the user typed back into one method's settings,
refusing an option that the method does not declare, with one line that says whose it is.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Optional

from mhindex.errors import UsageError

#: `Opt.before` of an option that existed from the first run.json on
ALWAYS = object()
#: Index settings that change no ranking (how many threads search, how vectors were batched while encoding, whether
#: the index is memory-mapped), left out of the retrieval environment's fingerprint; the index's corpus_sha256
#: repeats the corpus's, compared once.
RANK_NEUTRAL = frozenset({"threads", "batch_size", "shard_size", "mmap", "corpus_sha256"})


@dataclass(frozen=True)
class Opt:
    help: str
    flag: str | None = None  # default: --field-name
    short: str | None = None  # e.g. "-k"
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None  # how the value is shown in --help, e.g. "DATASET[=FILE,...]"
    # Backends: when the option takes effect. "index": fixed when the index is built (recorded in
    # its manifest); "search": each time it is opened; "both": at both; "connection": where the
    # engine is (never recorded: it may hold credentials).
    stage: str | None = None
    # Methods: an option added later, with the value that describes what runs recorded before it did
    # (a run.json that records the method without it was made that way, so resuming with another is refused).
    before: Any = ALWAYS
    # A file or folder the option names, which is read ("file", "folder"): a record's value is read only from inside
    # the data root (methods.settings_recorded).
    reads: str | None = None


def option(default: Any, help: str, **details: Any) -> Any:
    """A settings field that users may set from the command line."""
    return field(default=default, metadata={"option": Opt(help=help, **details)})


def flag_of(name: str, opt: Opt) -> str:
    return opt.flag or "--" + name.replace("_", "-")


def declared(settings_type: Any) -> dict[str, tuple[dataclasses.Field, Opt, type]]:
    """The user-settable fields of a settings dataclass: name -> (field, option, value type).
    Shared between callers: read it, do not change it."""
    return _declared(settings_type)


@functools.cache  # read for every option of every command at start-up; the types do not change
def _declared(settings_type: Any) -> dict[str, tuple[dataclasses.Field, Opt, type]]:
    hints = typing.get_type_hints(settings_type)
    found = {}
    for f in dataclasses.fields(settings_type):
        if "option" in f.metadata:
            found[f.name] = (f, f.metadata["option"], _value_type(hints[f.name]))
    return found


def _value_type(hint: Any) -> type:
    """int for `int`, `int | None` and `Optional[int]`."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0]
    return hint


def check_choices(settings: Any) -> None:
    """Refuse a value outside a field's declared choices (Typer checks the numeric bounds)."""
    for name, (_, opt, _) in declared(type(settings)).items():
        value = getattr(settings, name)
        if opt.choices and value is not None and value not in opt.choices:
            raise UsageError(f"{flag_of(name, opt)} must be one of {', '.join(opt.choices)}, not {value!r}")


def settings_from(settings_type: type, given: dict[str, Any], owner: str) -> Any:
    """`settings_type` with the values the user gave; an option it does not declare is refused."""
    fields = declared(settings_type)
    foreign = [name for name in given if name not in fields]
    if foreign:
        own = ", ".join(flag_of(n, o) for n, (_, o, _) in fields.items()) or "none"
        raise UsageError(f"{flag_among(foreign[0], [])} is not an option of {owner} (its options: {own})")
    for name, value in given.items():
        check_value(name, fields[name][1], fields[name][2], value)
    settings = settings_type(**given)
    check_choices(settings)
    return settings


def check_value(name: str, opt: Opt, value_type: Any, value: Any) -> None:
    """What Typer checks on a command line (the type, the bounds), for values given from Python."""
    if value is None:
        return
    flag = flag_of(name, opt)
    expected = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}.get(value_type)
    if expected and (not isinstance(value, expected) or (value_type is not bool and isinstance(value, bool))):
        raise UsageError(f"{flag} takes {value_type.__name__}, not {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number, not {value!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if (opt.min is not None and value < opt.min) or (opt.max is not None and value > opt.max):
            bounds = " and ".join(
                f"{word} {bound:g}"
                for word, bound in (("at least", opt.min), ("at most", opt.max))
                if bound is not None
            )
            raise UsageError(f"{flag} must be {bounds}, not {value!r}")


def flag_among(name: str, settings_types: Iterable[type]) -> str:
    """The flag of field `name` as the first of `settings_types` that declares it spells it."""
    for settings_type in settings_types:
        if name in (fields := declared(settings_type)):
            return flag_of(name, fields[name][1])
    return "--" + name.replace("_", "-")


# Which command parameter names the owners an option group is for: `--help` shows only their options.
_CHOOSERS = {"method_options": ("method", "methods"), "backend_options": ("backend",)}
_FLAGS = {"method": ("--method", "-m"), "methods": ("--method", "-m"), "backend": ("--backend",)}


def _chosen_owners(
    group: str, signature: inspect.Signature, argv: list[str], named: Callable[[str], set[str]] | None
) -> set[str] | None:
    """With --help on the command line, the methods or backends it names (else the command's default),
    whose options the help shows; None when the help is not asked for or the group is not chosen.
    `named`: which owners a value names (a backend address or fusion names others than it spells)."""
    if not ({"--help", "-h"} & set(argv)) or group not in _CHOOSERS:
        return None
    param = next((signature.parameters[n] for n in _CHOOSERS[group] if n in signature.parameters), None)
    if param is None:
        return None
    value = param.default if isinstance(param.default, str) else ""
    flags = _FLAGS[param.name]
    for i, arg in enumerate(argv):
        if arg in flags and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(tuple(f"{f}=" for f in flags if f.startswith("--"))):
            value = arg.partition("=")[2]
    chosen = named(value) if named else {part.strip() for part in re.split(r"[,+]", value) if part.strip()}
    return chosen or None


#: One owner's declaration of an option: (owner, the dataclass field, its Opt, its value type).
_Use = tuple[str, dataclasses.Field, Opt, type]


def with_options(
    group: str,
    owners: Callable[[], dict[str, type]],
    panel: str | Callable[[Opt], str],
    named: Callable[[str], set[str]] | None = None,
    checked_as: str | None = None,
) -> Callable:
    """Give a Typer command one option per field declared by any of `owners()` (name -> settings
    type), all defaulting to unset; the command receives the ones the user set as a dict in its
    parameter `group`, or with `checked_as` (one owner) its settings object, checked by `settings_from`
    under that name. Options shared by several owners (`-k`) appear once, with each default."""

    def decorate(command: Callable) -> Callable:
        original = inspect.signature(command, eval_str=True)  # Typer reads real annotations, not strings
        owner_types = _without_clashes(owners(), {p for p in original.parameters if p != group}, command.__name__)
        by_name: dict[str, list[_Use]] = {}
        for owner, settings_type in owner_types.items():
            for name, (f, opt, kind) in declared(settings_type).items():
                by_name.setdefault(name, []).append((owner, f, opt, kind))
        shown_for = _chosen_owners(group, original, sys.argv, named)
        builds = command.__name__ in ("index", "build")
        made = [
            _option_parameter(name, uses, len(owner_types), shown_for, group, builds, panel)
            for name, uses in by_name.items()
        ]
        generated = [parameter for parameter, _ in made]
        kept = [p for p in original.parameters.values() if p.name != group]
        clash = [p.name for p in generated if p.name in {k.name for k in kept}]
        if clash:
            raise TypeError(f"{command.__name__}: generated options clash with its own parameters: {clash}")
        checked_type = next(iter(owner_types.values())) if checked_as is not None else None
        wrapper = _passing_options(command, group, [p.name for p in generated], checked_type, checked_as)
        if shown_for is not None and any(hidden for _, hidden in made):
            _say_whose_options(wrapper, command, group, shown_for, builds)
        wrapper.__signature__ = original.replace(parameters=[*kept, *generated])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {
            p.name: p.annotation for p in [*kept, *generated] if p.annotation is not inspect.Parameter.empty
        }
        return wrapper

    return decorate


def _without_clashes(owner_types: dict[str, type], taken: set[str], command: str) -> dict[str, type]:
    """The owners less each plug-in whose option takes the name of one of the command's own (eval's `--budget`):
    refused by its registry with one warning, so that the command, `--help` and `doctor` keep working. A built-in
    that clashes is mhindex's mistake: the TypeError below says so."""
    registry = getattr(owner_types, "registry", None)
    if registry is None:
        return owner_types
    kept = dict(owner_types)
    for owner, settings_type in owner_types.items():
        clash = sorted(set(declared(settings_type)) & taken)
        if clash and not registry.builtin(owner):
            flags = ", ".join(flag_of(name, declared(settings_type)[name][1]) for name in clash)
            registry.refuse(owner, f"its option {flags} is one `{command.rstrip('_')}` has itself: rename it")
            del kept[owner]
    return kept


def _option_parameter(
    name: str,
    uses: list[_Use],
    owner_count: int,
    shown_for: set[str] | None,
    group: str,
    builds: bool,
    panel: str | Callable[[Opt], str],
) -> tuple[inspect.Parameter, bool]:
    """One field's option as a Typer parameter (its help with each owner's default), and whether `--help` hides it."""
    _, _, opt, kind = uses[0]
    flag = flag_of(name, opt)
    # With one method (or backend) asked about, its own default alone, and no list of who else takes it.
    said = [use for use in uses if shown_for is None or use[0] in shown_for] or uses
    defaults = {owner: f.default for owner, f, _, _ in said if f.default is not None}
    if len(set(map(str, defaults.values()))) == 1:
        shown = str(next(iter(defaults.values())))
    else:
        shown = ", ".join(f"{owner} {value}" for owner, value in defaults.items())
    listed = shown_for is None and len(uses) != owner_count
    owners_note = f" ({', '.join(owner for owner, *_ in uses)})" if listed else ""
    text = f"{opt.help}{owners_note}" + (f" \\[default: {shown}]" if shown else "")
    names = [flag, opt.short] if opt.short else [flag]
    if not flag.startswith("--"):  # a short name alone (-k): the field's long name beside it, as help lists
        names = ["--" + name.replace("_", "-"), flag]
    if kind is bool:
        names = [f"{flag}/--no-{flag[2:]}"]
    details: dict[str, Any] = {k: v for k, v in (("min", opt.min), ("max", opt.max)) if v is not None}
    if opt.metavar:
        details["metavar"] = opt.metavar
    # `ask --help` shows the options of the method and backend asked about, not all 200 of them;
    # options fixed when an index is built show on `index` and `build`, where they are set.
    hidden = shown_for is not None and (
        not any(owner in shown_for for owner, *_ in uses)
        or (group == "backend_options" and opt.stage == "index" and not builds)
    )
    where = panel(opt) if callable(panel) else panel
    info = _typer().Option(*names, help=text, show_default=False, hidden=hidden, rich_help_panel=where, **details)
    keyword = inspect.Parameter.KEYWORD_ONLY
    return inspect.Parameter(name, keyword, default=None, annotation=Annotated[Optional[kind], info]), hidden


def _passing_options(
    command: Callable, group: str, generated: list[str], settings_type: type | None, checked_as: str | None
) -> Callable:
    """The command called with the generated options the user set gathered into its parameter `group`."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        chosen = {name: kwargs.pop(name) for name in generated if kwargs.get(name) is not None}
        for name in generated:
            kwargs.pop(name, None)
        if settings_type is not None and checked_as is not None:
            return command(*args, **kwargs, **{group: settings_from(settings_type, chosen, checked_as)})
        return command(*args, **kwargs, **{group: chosen})

    return wrapper


def _say_whose_options(wrapper: Callable, command: Callable, group: str, shown_for: set[str], builds: bool) -> None:
    """The help's one line on whose options it shows (the method's and the backend's groups together)."""
    what = "method" if group == "method_options" else "backend"
    later = "" if builds or what == "method" else "; `mhindex index --help`: those fixed when an index is built"
    notes = [
        *getattr(command, "shown_notes", []),
        f"{what} {', '.join(sorted(shown_for))} (`--{what} NAME --help`: another's{later})",
    ]
    base = getattr(command, "base_doc", inspect.cleandoc(command.__doc__ or ""))
    wrapper.__doc__ = f"{base}\n\nOptions shown: those of {' and '.join(notes)}."
    wrapper.shown_notes, wrapper.base_doc = notes, base  # type: ignore[attr-defined]


def _typer():
    import typer

    return typer
