"""How long-running work talks to people: rich progress on a terminal, JSON lines in pipes.

The library reports through the module-level reporter; the CLI configures it once per
command. Nothing here decides *what* happens, only how it is shown.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson


class _NullTask:
    """Stands in for a progress bar where none is shown (pipes, --quiet, tests)."""

    def advance(self, amount: float = 1) -> None:
        pass

    def update(
        self, completed: float | None = None, total: float | None = None, description: str | None = None
    ) -> None:
        pass


class _PipeTask:
    """A bar's progress where no bar is drawn (a pipe, a log): a JSON line a minute, so that a log reader sees
    long work going on. With `lines` a line a minute at most as work advances; with or without, a heartbeat
    when nothing was said for a minute (one IRCoT question once ran 10 minutes without a line), saying what is
    being worked on (`note`) and the time left at the pace so far."""

    EVERY = 60.0  # seconds; $MHINDEX_LOG_EVERY sets another

    def __init__(self, reporter: Reporter, description: str, total: float | None, unit: str, lines: bool) -> None:
        self.reporter, self.description, self.total, self.unit = reporter, description, total, unit
        self.EVERY = log_every()
        self.lines = lines
        self.done = 0.0
        self.started = self.said = time.monotonic()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="mhindex-heartbeat", daemon=True)
        if self.EVERY > 0:  # a line at every step (0) needs no heartbeat, and would spin
            self._beat.start()

    def advance(self, amount: float = 1) -> None:
        self.done += amount
        if self.lines:
            self._say()

    def update(
        self, completed: float | None = None, total: float | None = None, description: str | None = None
    ) -> None:
        self.done = self.done if completed is None else completed
        self.total = self.total if total is None else total
        self.description = description or self.description
        if self.lines:
            self._say()

    def close(self) -> None:
        self._stopped.set()
        if self._beat.is_alive():
            self._beat.join()

    def _heartbeat(self) -> None:
        while not self._stopped.wait(min(self.EVERY / 4, 5.0)):
            if time.monotonic() - max(self.said, self.reporter.last_said) >= self.EVERY:
                self._say(working=True)

    def _say(self, working: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self.said < self.EVERY:
                return
            self.said = now
        shown = (
            f"{self.done:,.0f}"
            + (f" of {self.total:,.0f}" if self.total else "")
            + (f" {self.unit}" if self.unit else "")
        )
        elapsed = now - self.started
        # The time left at the pace so far: what a bar's column shows, for a log reader of a long eval too.
        left = (self.total - self.done) * elapsed / self.done if self.total and self.done else None
        said = f", about {_duration(left)} left" if left else ""
        doing = _working_on if working else None
        self.reporter.info(
            f"{self.description}: {shown}{said}" + (f"; now: {doing}" if doing else ""), done=self.done,
            total=self.total, seconds=round(elapsed, 1), seconds_left=None if left is None else round(left, 1),
            **({"working_on": doing} if doing else {}),
        )  # fmt: skip


def log_every() -> float:
    """Seconds between a pipe's progress lines: $MHINDEX_LOG_EVERY (a positive number), else a minute."""
    from mhindex.errors import UsageError

    text = os.environ.get("MHINDEX_LOG_EVERY", "").strip()
    if not text:
        return _PipeTask.EVERY
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < 1e9:
        raise UsageError(f"MHINDEX_LOG_EVERY should be a number of seconds above 0, not {text[:40]!r}")
    return seconds


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


class _RichTask:
    def __init__(self, progress, task_id) -> None:
        self._progress = progress
        self._task_id = task_id

    def advance(self, amount: float = 1) -> None:
        self._progress.advance(self._task_id, amount)

    def update(
        self, completed: float | None = None, total: float | None = None, description: str | None = None
    ) -> None:
        kwargs = {
            k: v for k, v in (("completed", completed), ("total", total), ("description", description)) if v is not None
        }
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
        self.last_said = 0.0  # when the last line was written (monotonic): a heartbeat waits a minute past it

    @property
    def console(self):
        if self._console is None:
            # A copy of descriptor 2, taken now: engines that send their own chatter to a log by
            # redirecting descriptor 2 (ColBERT, FAISS) must not swallow our bars and lines.
            self._console = safe_console(file=os.fdopen(os.dup(2), "w", buffering=1), highlight=False)
        return self._console

    def _emit(self, level: str, message: str, fields: dict) -> None:
        if self.quiet and level == "info":
            return
        self.last_said = time.monotonic()
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
    def progress(
        self, description: str, total: float | None = None, unit: str = "", lines: bool = True
    ) -> Iterator[_NullTask | _PipeTask | _RichTask]:
        """A bar on a terminal; in a pipe a JSON line a minute (as work advances with `lines`, else only where
        nothing else was said for a minute), none with --quiet."""
        if not self.interactive:
            if self.quiet:
                yield _NullTask()
                return
            task = _PipeTask(self, description, total, unit, lines)
            try:
                yield task
            finally:
                task.close()
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

        if total is None:  # no bar that sits at "0/?": a spinner, what is happening, and the time so far
            columns = [SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()]
        else:
            counter = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
            columns = [
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                counter,
                TimeElapsedColumn(),
                TimeRemainingColumn(),
            ]
        # rich would route what is printed to stdout above the bar, on stderr: `ask - > answers.jsonl` run on a
        # terminal wrote its answers to the screen. Only a stdout on the same terminal is drawn above the bar.
        above = sys.stdout.isatty()
        with Progress(*columns, console=self.console, transient=True, redirect_stdout=above) as progress:
            yield _RichTask(progress, progress.add_task(description, total=total))

    @contextmanager
    def activity(self, description: str) -> Iterator[None]:
        """A live line on stderr for one long piece of work (one `ask`): what it is doing now,
        tokens so far and the time; the library updates it through `ui.note(...)`."""
        if not self.interactive:
            yield
            return
        with self.progress(description, total=None) as task:
            assert isinstance(task, _RichTask)  # interactive: a real bar
            token = _activity.set(_Activity(task, description))
            try:
                yield
            finally:
                _activity.reset(token)


_reporter = Reporter(quiet=True, interactive=False)


def reporter() -> Reporter:
    return _reporter


def show_progress(on: bool = True) -> None:
    """From Python (`mhindex.show_progress()`): progress bars and log lines while mhindex works, drawn by
    rich on stderr (a notebook shows them under the cell); off by default, as a library is quiet."""
    configure(quiet=not on, interactive=on)


def configure(quiet: bool = False, interactive: bool | None = None) -> Reporter:
    global _reporter
    _reporter = Reporter(quiet=quiet, interactive=interactive)
    return _reporter


# -- what a long `ask` is doing now --------------------------------------------------------------


class _Activity:
    def __init__(self, task: _RichTask, label: str) -> None:
        self.task = task
        self.label = label


_activity: contextvars.ContextVar[_Activity | None] = contextvars.ContextVar("mhindex_activity", default=None)


#: what the work in progress is doing, as last noted (for a pipe's heartbeat line; any thread may note it)
_working_on: str | None = None


def note(label: str) -> None:
    """Say what the current activity is doing: on a terminal, its live line (under `Reporter.activity`); in a pipe,
    the next heartbeat line."""
    global _working_on
    _working_on = label
    if (current := _activity.get()) is not None:
        current.label = label
        current.task.update(description=label)


def note_prompt(progress: dict) -> None:
    """How much of the call's prompt the model has read (llama.cpp's `prompt_progress`: total, cache and
    processed tokens, cache included in processed): reading a prompt of thousands of tokens takes minutes
    on two cores, and a line that only says "0 tokens generated" looks hung."""
    if (current := _activity.get()) is None:
        return
    try:
        cached, total, processed = int(progress["cache"]), int(progress["total"]), int(progress["processed"])
    except (KeyError, TypeError, ValueError):
        return
    kept = f", {cached:,} kept" if cached else ""
    current.task.update(
        description=f"{current.label} · reading the prompt: {processed - cached:,} of {total - cached:,} tokens{kept}"
    )


def note_tokens(generated: int) -> None:
    """Tokens generated so far by the call in progress, shown beside what it is doing."""
    if (current := _activity.get()) is not None:
        current.task.update(description=f"{current.label} · {generated} token{'' if generated == 1 else 's'} generated")


# -- Ctrl-C: stop after the current call, or at once on the second press ---------------------------


class Terminated(KeyboardInterrupt):
    """SIGTERM, taken as Ctrl-C is: the command unwinds, so that its temporary files are removed
    and its child processes stopped, and only complete output is left."""


@contextmanager
def stop_signals() -> Iterator[list[str]]:
    """Ctrl-C and SIGTERM as KeyboardInterrupt (and Terminated) while a command runs; yields the list
    that says which stopped it ("interrupted", "terminated"), for the one line the command ends with."""
    stopped: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield stopped
        return

    def terminate(signum: int, frame: Any) -> None:
        stopped.append("terminated")
        raise Terminated

    def interrupt(signum: int, frame: Any) -> None:
        stopped.append("interrupted")
        raise KeyboardInterrupt

    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, terminate),
        signal.SIGINT: signal.signal(signal.SIGINT, interrupt),
    }
    try:
        yield stopped
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


_stop = threading.Event()


def stop_requested() -> bool:
    """True once Ctrl-C was pressed under `graceful_interrupts`: long work stops at its next call."""
    return _stop.is_set()


def check_stop() -> None:
    """Raise KeyboardInterrupt here if Ctrl-C was pressed: a safe point between two calls."""
    if _stop.is_set():
        raise KeyboardInterrupt


@contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM held back until the block ends, then delivered as if they came then: for the few
    steps that must not be cut in the middle (a KeyboardInterrupt between llama.cpp's server starting and
    its being kept would free it, and freeing it waits forever on its thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {
        number: signal.signal(number, lambda n, f: held.append(n)) for number in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for signum in held:
            signal.raise_signal(signum)


@contextmanager
def graceful_interrupts(kept: str = "finished answers are kept") -> Iterator[None]:
    """Ctrl-C during work that calls a language model.

    The first press says so at once and stops the command at once: the call in flight is
    abandoned (a local model stops generating at its next token), finished answers are kept and
    the command says how to go on. Model calls run in helper threads, so the press is taken
    even while llama.cpp evaluates a long prompt. The second press quits on the spot. Results
    are written a whole line at a time, so either way only complete output is left.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_interrupt(signum, frame) -> None:
        if _stop.is_set():
            from mhindex.files import remove_now

            remove_now()  # what the process made for itself alone: os._exit runs no atexit handler
            os.write(2, b"mhindex: interrupted\n")
            os._exit(130)
        _stop.set()
        os.write(2, f"mhindex: stopping; {kept} (Ctrl-C again to quit at once)\n".encode())
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_interrupt)
    _stop.clear()
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _stop.clear()


def print_json(value: Any) -> None:
    """A command's result as indented JSON on stdout (--json)."""
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def write_line(record: dict) -> None:
    """One JSONL record on stdout, flushed, so a pipe sees each answer as it is ready."""
    sys.stdout.write(orjson.dumps(record).decode() + "\n")
    sys.stdout.flush()


class RunFormat(StrEnum):
    """How search results are written a line at a time: mhindex's JSONL, or a TREC run."""

    jsonl = "jsonl"
    trec = "trec"

    def writer(self, tag: str) -> Callable[[dict], None]:
        return write_line if self is RunFormat.jsonl else functools.partial(write_trec, tag)


def write_trec(tag: str, record: dict) -> None:
    """One query's hits as TREC run lines on stdout (qid Q0 docid rank score tag: trec_eval's and ir_measures'
    input), flushed; a bad input line (`{"line", "error"}`) said on stderr instead."""
    if "error" in record:
        print(f"mhindex: line {record['line']}: {record['error']}", file=sys.stderr)
        return
    qid = "".join(record["id"].split()) or "-"  # a TREC run's fields are whitespace-separated
    ranked = enumerate(record["hits"], 1)
    sys.stdout.write("".join(f"{qid} Q0 {hit['id']} {rank} {hit['score']} {tag}\n" for rank, hit in ranked))
    sys.stdout.flush()


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """Control characters (ESC, BEL, ...) written out as escapes (`\\x1b`): text from a corpus or a model is shown,
    never obeyed by the terminal (an escape sequence can retitle it, or write the clipboard)."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def safe_console(**options: Any) -> Any:
    """A rich Console that shows every character of what it prints: rich's own styling is made after this, so only
    the text itself, whatever it came from, has its control characters made visible (`visible`)."""
    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        def _render_buffer(self, buffer: Any) -> str:
            shown = (Segment(visible(s.text), s.style, s.control) if s.control is None else s for s in buffer)
            return super()._render_buffer(shown)

    return SafeConsole(**options)


def result_console():
    """Where results print: the terminal's width on one; in a pipe or a file, never cropped ($COLUMNS, if set)."""
    out = safe_console(highlight=False, soft_wrap=True)
    if not out.is_terminal and not os.environ.get("COLUMNS"):
        out.width = 100_000
    return out


# -- engines that print from C: their output to a log while they run -------------------------------


@contextlib.contextmanager
def engine_output_to(log: Path) -> Iterator[None]:
    """Engines that print from C or C++ (colbert-ai's configuration and progress on stdout, FAISS's k-means warnings
    and PISA's progress on descriptor 2): both descriptors go to `log` while the engine runs, so that our output
    (and the progress line, which writes to its own copy of descriptor 2) stays ours."""
    log.parent.mkdir(parents=True, exist_ok=True)
    if _reporter.interactive:
        _reporter.console  # noqa: B018 - takes its copy of descriptor 2 now, before it is redirected
    sys.stdout.flush()
    sys.stderr.flush()
    with open(log, "a") as sink:
        saved = [os.dup(1), os.dup(2)]
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                yield
        finally:
            sink.flush()
            flush_c_stdio()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def flush_c_stdio() -> None:
    """C's stdout buffer must reach the log before descriptor 1 is given back."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass
