"""The `mhindex` command, one module per job (corpora, indexes, answering, evaluation, training), each
parsing, calling the library and printing. Errors are one line on stderr with a non-zero exit
code (2 for bad input or usage, 1 otherwise)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, cast

from mhindex import ui
from mhindex._api.terms import on_command_line
from mhindex.errors import MhindexError
from mhindex.registry import named_on_command_line, named_only

with named_only(named_on_command_line(sys.argv)):
    from mhindex.cli.app import app

    for _job in ("corpora", "indexes", "answering", "evaluation", "training", "doctor"):  # --help's order
        importlib.import_module(f"mhindex.cli.{_job}")


def _usage_problem(error: BaseException) -> int | None:
    """Show click's usage errors as one line (a bare `mhindex` shows the help); returns the exit code.

    Recognised by class name along the MRO, not by class: typer 0.29 raises the exceptions of its
    own vendored click (`typer._click`), older typers raise click's, and both must read the same.
    """
    names = {cls.__name__ for cls in type(error).__mro__}
    if "NoArgsIsHelpError" in names:
        cast(Any, error).show()
        return 2
    if "ClickException" in names:
        ctx = getattr(error, "ctx", None)
        hint = f" (see '{ctx.command_path} -h')" if ctx is not None else ""
        message = " ".join(str(cast(Any, error).format_message()).split())
        print(f"mhindex: error: {message}{hint}", file=sys.stderr)
        return int(getattr(error, "exit_code", 2))
    if "Abort" in names:
        print("mhindex: aborted", file=sys.stderr)
        return 1
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code instead of raising, so tests can call it in-process."""
    with ui.stop_signals() as stopped, on_command_line():  # messages name flags, not the Python API's keywords
        code = _run(argv, stopped)
    if code == 130 and stopped:  # Typer turns a KeyboardInterrupt into a bare 130: the one line is said here
        print(f"mhindex: {stopped[-1]}", file=sys.stderr)
        return 143 if stopped[-1] == "terminated" else 130
    return code


def _run(argv: list[str] | None, stopped: list[str]) -> int:
    given = sys.argv[1:] if argv is None else [str(a) for a in argv]  # a Path among them, as click takes it
    if not given or "-h" in given or "--help" in given:
        from mhindex.render import help_layout

        help_layout()
    try:
        # a plug-in the command does not name is not imported: a slow or broken one delays only the commands using it
        with named_only(named_on_command_line(["mhindex", *given])):
            code = app(args=argv, prog_name="mhindex", standalone_mode=False)
        if isinstance(code, int):
            return code
    except MhindexError as error:
        message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
        print(f"mhindex: {error.label}: {message}", file=sys.stderr)
        return 143 if "terminated" in stopped else error.exit_code
    except KeyboardInterrupt:  # outside a command (Typer takes it inside one, see main)
        return 130
    except OSError as error:  # a read-only or full disk, a folder where a file should be: one line, not a traceback
        where = f"{error.filename}: " if error.filename else ""
        print(f"mhindex: error: {where}{error.strerror or error}", file=sys.stderr)
        return 1
    except Exception as error:
        if type(error).__name__ == "Exit":  # typer.Exit, from either click
            return int(getattr(error, "exit_code", 0) or 0)
        code = _usage_problem(error)
        if code is None:
            raise
        return code
    return 0


def entry() -> None:
    """The `mhindex` program. After Ctrl-C a model call abandoned in a helper thread may still be inside llama.cpp
    (a long prompt cannot be cut short): everything is written and flushed by then, so the process exits at once."""
    from mhindex import files

    files.PROCESS_TEMPORARY = True  # this process's temporary files under the data root (files.temporary_under)
    code = main()
    if code in (130, 143):
        from mhindex.files import remove_now

        remove_now()  # what this process made for itself alone (ask --no-cache's prompt states)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


if __name__ == "__main__":
    entry()
