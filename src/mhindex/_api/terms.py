"""Errors said in Python's terms. The library words its messages for the command line (`--lm-threads takes int`);
raised to a Python caller, a flag reads as the keyword argument it is there (`lm_threads takes int`). A command a
message suggests running (`mhindex index musique --backend dense`) keeps its flags: it is run in a shell."""

from __future__ import annotations

import functools
import inspect
import re
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from mhindex.errors import MhindexError

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
            yield from _respelled(func(*args, **kwargs))

        return generating  # type: ignore[return-value]

    @functools.wraps(func)
    def calling(*args: Any, **kwargs: Any) -> Any:
        try:
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
