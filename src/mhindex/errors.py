"""Errors a user can act on. The CLI prints them as one line on stderr, never a traceback, and
never with a secret in it (`redact`)."""

from __future__ import annotations

import re
from collections.abc import Iterable


class MhindexError(Exception):
    """A failure with a message that says what went wrong and, where possible, what to run."""

    exit_code = 1
    label = "error"  # printed as "mhindex: <label>: <message>"


class BadInput(MhindexError):
    """Input data (a file, a record, a field) is malformed; the message names file, line and field."""

    exit_code = 2


class UsageError(MhindexError):
    """The command line asks for something that does not exist (unknown corpus, backend, dataset)."""

    exit_code = 2


class Interrupted(MhindexError):
    """Ctrl-C during long work (an evaluation, a training run); what is done is kept."""

    exit_code = 130
    label = "interrupted"


_CREDENTIALS = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"), r"\1 ***"),
    (
        re.compile(
            r"(?i)((?:api[_-]?key|authorization|token|password)[\"']?\s*[:=]\s*[\"']?)(?!(?:bearer|basic)\b)[^\s\"',}]+"
        ),
        r"\1***",
    ),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@"), r"\1***@"),
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with the given secrets, bearer tokens, key fields and URL credentials blanked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    for pattern, replacement in _CREDENTIALS:
        text = pattern.sub(replacement, text)
    return text


#: an option whose value is a secret, whatever it is called (--api-key, --remote-api-key, --es-api-key, --milvus-token)
_SECRET_FLAG = re.compile(r"(?i)^--?[a-z0-9-]*(?:key|token|password|secret)$")


def redact_command(argv: Iterable[str]) -> str:
    """A command line as it may be written anywhere (a lock file, a log): the value of every option that holds a
    secret blanked (`--api-key K`, `--remote-api-key=K`), and credentials in a URL (`http://user:PASS@host`) too.
    The one redaction of a command line: nothing else writes one."""
    said, hide = [], False
    for word in argv:
        flag, equals, _ = word.partition("=")
        if hide:
            said.append("***")
        elif equals and _SECRET_FLAG.match(flag):
            said.append(f"{flag}=***")
        else:
            said.append(redact(word))
        hide = not equals and bool(_SECRET_FLAG.match(word))
    return " ".join(said)


def one_line(error: BaseException, limit: int = 200) -> str:
    """An exception as one short line: an engine's (Java's, through pyjnius) carries its stack
    trace after the first line."""
    text = str(error).strip().removeprefix("JVM exception occurred: ")
    line = f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__
    return line if len(line) <= limit else line[: limit - 1] + "…"


def expect(value: object, kinds: type | tuple[type, ...], what: str, expected: str) -> None:
    """A value given to the Python API of the wrong type: one line saying what was expected (the CLI's own
    parsing makes these impossible there), not a traceback from deep inside."""
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise UsageError(f"{what} must be {expected}, not {value!r}")
    if not isinstance(value, kinds):
        raise UsageError(f"{what} must be {expected}, not {value!r} (a {type(value).__name__})")
