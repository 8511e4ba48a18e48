"""How long-running work talks to people: rich progress on a terminal, JSON lines in pipes.

The library reports through the module-level reporter; the CLI configures it once per
command. Nothing here decides *what* happens, only how it is shown.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

import orjson


class _NullTask:
    """Stands in for a progress bar where none is shown (pipes, --quiet, tests)."""

    def advance(self, amount: float = 1) -> None:
        pass

    def update(self, completed: float | None = None, total: float | None = None, description: str | None = None) -> None:
        pass


class _RichTask:
    def __init__(self, progress, task_id) -> None:
        self._progress = progress
        self._task_id = task_id

    def advance(self, amount: float = 1) -> None:
        self._progress.advance(self._task_id, amount)

    def update(self, completed: float | None = None, total: float | None = None, description: str | None = None) -> None:
        kwargs = {k: v for k, v in (("completed", completed), ("total", total), ("description", description)) if v is not None}
        self._progress.update(self._task_id, **kwargs)


class Reporter:
    """Progress bars and log lines for one command.

    interactive: stderr is a terminal and not --quiet, so rich bars and readable lines are shown.
    Otherwise log lines are JSON objects on stderr (one per line), and --quiet silences everything
    except errors.
    """

    def __init__(self, quiet: bool = False, interactive: bool | None = None) -> None:
        self.quiet = quiet
        if interactive is None:
            interactive = sys.stderr.isatty()
        self.interactive = interactive and not quiet
        self._console = None

    @property
    def console(self):
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False)
        return self._console

    def _emit(self, level: str, message: str, fields: dict) -> None:
        if self.quiet and level == "info":
            return
        if self.interactive:
            style = {"info": "", "warning": "yellow", "error": "bold red"}[level]
            prefix = "" if level == "info" else f"{level}: "
            self.console.print(f"{prefix}{message}", style=style or None, markup=False)
        else:
            record = {"level": level, "message": message, **fields}
            sys.stderr.write(orjson.dumps(record, default=str).decode() + "\n")
            sys.stderr.flush()

    def info(self, message: str, **fields) -> None:
        self._emit("info", message, fields)

    def warning(self, message: str, **fields) -> None:
        self._emit("warning", message, fields)

    @contextmanager
    def progress(self, description: str, total: float | None = None, unit: str = "") -> Iterator[_NullTask | _RichTask]:
        if not self.interactive:
            yield _NullTask()
            return
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        counter = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
        columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), counter, TimeElapsedColumn(), TimeRemainingColumn()]
        with Progress(*columns, console=self.console, transient=True) as progress:
            yield _RichTask(progress, progress.add_task(description, total=total))


_reporter = Reporter(quiet=True, interactive=False)


def reporter() -> Reporter:
    return _reporter


def configure(quiet: bool = False, interactive: bool | None = None) -> Reporter:
    global _reporter
    _reporter = Reporter(quiet=quiet, interactive=interactive)
    return _reporter
