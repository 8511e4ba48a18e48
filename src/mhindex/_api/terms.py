"""Errors said in Python's terms. The library words its messages for the command line (`--lm-threads takes int`);
raised to a Python caller, a flag reads as the keyword argument it is there (`lm_threads takes int`). A command a
message suggests running (`mhindex index musique --backend dense`) keeps its flags: it is run in a shell.

And each argument a Python caller gives is checked where it enters, against the function's own annotations
(`check_arguments`): `read_evaluation(5)`, `ask_many("abc")` (a string where a list is meant) or `evaluate(...,
workers=0)` are one UsageError naming the argument, as the CLI's options are, not a TypeError from deep inside or
a string read as its characters."""

from __future__ import annotations

import functools
import inspect
import math
import os
import re
import types
import typing
from collections import abc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from mhindex.errors import MhindexError, UsageError

_ON_COMMAND_LINE: ContextVar[bool] = ContextVar("mhindex_on_command_line", default=False)
_FLAG = re.compile(r"(?<![\w-])--(no-)?([a-z][a-z0-9]*(?:-[a-z0-9]+)*)|(?<![\w-])-([a-zA-Z])(?![\w-])")
# a command to run, up to the quote, bracket or semicolon that ends it
_COMMAND = re.compile(r"\bmhindex [a-z][^`'\"();]*")

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)


@contextmanager
def on_command_line() -> Iterator[None]:
    """The CLI runs inside this: its messages keep their flags, whatever of the Python API it calls."""
    token = _ON_COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _ON_COMMAND_LINE.reset(token)


def in_python_terms(message: str) -> str:
    """`message` with each flag outside a suggested command as its keyword argument (`--no-cache` as
    `cache=False`)."""

    def keyword(match: re.Match[str]) -> str:
        if match.group(3):  # a short flag: -k
            return match.group(3)
        name = match.group(2).replace("-", "_")
        return f"{name}=False" if match.group(1) else name

    said, start = [], 0
    for command in _COMMAND.finditer(message):
        said += [_FLAG.sub(keyword, message[start : command.start()]), command.group()]
        start = command.end()
    return "".join([*said, _FLAG.sub(keyword, message[start:])])


def _respell(error: MhindexError) -> None:
    if not _ON_COMMAND_LINE.get() and len(error.args) == 1 and isinstance(error.args[0], str):
        error.args = (in_python_terms(error.args[0]),)


def _respelled(items: Iterator[Any]) -> Iterator[Any]:
    try:
        yield from items
    except MhindexError as error:
        _respell(error)
        raise


def python_terms(func: F) -> F:
    """`func` raising its errors in Python's terms; an iterator it returns (or yields) does so too."""
    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def generating(*args: Any, **kwargs: Any) -> Any:
            if not _ON_COMMAND_LINE.get():
                try:
                    check_arguments(func, args, kwargs)
                except MhindexError as error:
                    _respell(error)
                    raise
            yield from _respelled(func(*args, **kwargs))

        return generating  # type: ignore[return-value]

    @functools.wraps(func)
    def calling(*args: Any, **kwargs: Any) -> Any:
        try:
            if not _ON_COMMAND_LINE.get():  # the CLI's values were checked as it parsed them
                check_arguments(func, args, kwargs)
            result = func(*args, **kwargs)
        except MhindexError as error:
            _respell(error)
            raise
        return _respelled(result) if isinstance(result, types.GeneratorType) else result

    return calling  # type: ignore[return-value]


def python_terms_class(cls: C) -> C:
    """Each public method of `cls` (and its constructor) raising in Python's terms."""
    for name, value in list(vars(cls).items()):
        if inspect.isfunction(value) and (not name.startswith("_") or name == "__init__"):
            setattr(cls, name, python_terms(value))
    return cls


# -- each argument of the Python API checked at its door, against the function's own annotations -----------------

#: The least value a whole-number argument of the API takes, by its name (the CLI's options declare the same bounds):
#: a count of questions, workers, paragraphs or threads of 0 is a mistake, never a choice.
LEAST = {"workers": 1, "limit": 1, "k": 1, "threads": 1, "lm_threads": 1, "budget": 1, "seed": 0, "lm_context": 1}
#: How an argument is said where its annotation says it less well (a Corpus or its name, not "a Corpus or a string")
SAID = {
    "corpus": "a Corpus or a corpus's name",
    "method": "a method's name",
    "methods": "a list of methods' names",
    "dataset": "a dataset's name (musique, jsonl, ...)",
    "inputs": "a list of paths",
    "lm": "a model's spec (local:qwen2.5-0.5b, openai:MODEL@URL) or a LanguageModel",
    "qids": "a list of ids, one a query (k is k=...)",
    "table": "a paper's table, as --table takes it",
    "query": "a query's text",
    "queries": "a list of queries' texts",
}


def _described(hint: Any) -> str:
    """A type annotation in words, for the one line that says what an argument must be."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None) and not (a is str and Path in args)]
        return " or ".join(dict.fromkeys(_described(a) for a in kept)) + (" (or None)" if type(None) in args else "")
    if origin is typing.Annotated:
        return _described(args[0])
    if origin in (list, tuple, set, frozenset, abc.Sequence, abc.Iterable, abc.Collection):
        return f"a list of {_plural(_described(args[0])) if args else 'values'}"
    if origin in (dict, abc.Mapping):
        return "a dict"
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    names = {str: "a string", int: "a whole number", float: "a number", bool: "True or False",
             Path: "a path (str or Path)"}  # fmt: skip
    named = getattr(hint, "__name__", str(hint))
    return names.get(hint) or (f"a {named}" if isinstance(hint, type) else named)


def _plural(said: str) -> str:
    """ "a string or a dict" -> "strings or dicts", for "a list of ..."."""
    said = said.replace("a path (str or Path)", "paths (str or Path)")
    parts = said.split(" or ") if "(" not in said else [said]
    return " or ".join(p[2:] + "s" if p.startswith("a ") and p[2:].isalpha() else p for p in parts)


def _fits(value: Any, hint: Any) -> bool:
    """Whether `value` is what `hint` says, as far as a caller's mistake goes (a str for a list of str, an int for a
    path, a bool for a number); a type this cannot tell (a class of mhindex's, a callable) lets it through."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if origin is typing.Annotated:
        return _fits(value, args[0])
    if hint is type(None):
        return value is None
    if origin is typing.Literal:
        return value in args
    if origin in (list, tuple, set, frozenset, abc.Sequence, abc.Iterable, abc.Collection):
        if isinstance(value, str | bytes | dict) or not isinstance(value, abc.Iterable):
            return False
        if not args or not isinstance(value, abc.Sequence | set | frozenset):
            return True  # an iterator is read once, by the function: its items are checked there
        return all(_fits(item, args[0]) for item in value)
    if origin in (dict, abc.Mapping):
        return isinstance(value, abc.Mapping)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is Path:
        return isinstance(value, os.PathLike | str)
    if hint in (str, bool):
        return isinstance(value, hint)
    if isinstance(hint, type) and not getattr(hint, "_is_protocol", False):  # a class of mhindex's: a LanguageModel
        return isinstance(value, hint)
    return True  # a protocol (a Retriever: anything with its methods), a callable: what they need is checked in use


def check_arguments(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Each argument given to `func` is what its annotation says, and a whole number at least its LEAST: else one
    UsageError naming the argument, what it must be and what it was."""
    signature = inspect.signature(func)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as error:
        raise UsageError(f"{func.__name__}(): {error}") from None
    hints = _hints(func)
    for name, value in bound.arguments.items():
        hint = hints.get(name)
        parameter = signature.parameters[name]
        if hint is None or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if not _fits(value, hint):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            said = SAID.get(name) or _described(hint)
            raise UsageError(f"{name} must be {said}, not {shown} (a {type(value).__name__})")
        least = LEAST.get(name)
        if least is not None and isinstance(value, int) and not isinstance(value, bool) and value < least:
            raise UsageError(f"{name} must be at least {least}, not {value}")


@functools.cache
def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func, include_extras=True)
    except Exception:  # noqa: BLE001 - an annotation that cannot be resolved is not checked
        return {}
