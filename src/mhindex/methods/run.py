"""Running a method over a stream of questions: results come out in input order, each flushed
as soon as it and all before it are done; `workers` questions run at once (useful with a
remote LM); a question that fails, for whatever reason, becomes an error record and the run goes
on; Ctrl-C stops after writing every answer already finished."""

from __future__ import annotations

import os
import stat
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

from mhindex import ui
from mhindex.errors import MhindexError
from mhindex.methods.base import Method, Query, answered, unread_keys, unread_note


@dataclass
class RunStats:
    answered: int = 0
    failed: int = 0
    interrupted: bool = False

    def outcome(self) -> tuple[int, str | None]:
        """The exit code of a stream of questions (130 interrupted, 1 when any failed), and what to say."""
        if self.interrupted:
            return 130, f"interrupted: {self.answered} answered, {self.failed} failed"
        if self.failed:
            return 1, f"{self.failed} of {self.answered + self.failed} questions failed"
        return 0, None


def _answer(method: Method, number: int, item: Query | str) -> dict[str, Any]:
    if isinstance(item, str):
        return {"line": number, "error": item}
    try:
        return answered(method, item).record()
    except MhindexError as error:
        return {"line": number, "id": item.id, "error": str(error)}
    except Exception as error:  # noqa: BLE001 - one failing question is one error record, never the end of a run
        return {"line": number, "id": item.id, "error": f"{type(error).__name__}: {error}"}
    except SystemExit as error:  # a method (a plug-in's) that calls sys.exit: that question's error, not the run's end
        return {"line": number, "id": item.id, "error": f"the method exited (SystemExit: {error.code})"}


def answer_records(
    method: Method, items: Iterable[tuple[int, Query | str]], workers: int = 1
) -> Iterator[dict[str, Any]]:
    """Each item's answer record (or error record), in input order, as soon as it and all before it are
    done. On Ctrl-C the answers already finished come out before KeyboardInterrupt goes on."""
    if workers <= 1:
        for number, item in items:
            ui.check_stop()
            yield _answer(method, number, item)
        return
    pending: deque[Future[Any]] = deque()
    executor = ThreadPoolExecutor(max_workers=workers)
    try:
        for number, item in items:
            ui.check_stop()
            pending.append(executor.submit(_answer, method, number, item))
            while pending and (pending[0].done() or len(pending) >= workers * 2):
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except KeyboardInterrupt:
        for future in pending:
            future.cancel()
        for future in pending:
            if future.done() and not future.cancelled():
                yield future.result()
        raise
    finally:
        # Never waits on a call in flight: after Ctrl-C or an early stop its answer is not wanted.
        executor.shutdown(wait=False, cancel_futures=True)


def run_questions(
    method: Method, items: Iterable[tuple[int, Query | str]], emit: Callable[[dict[str, Any]], None], workers: int = 1
) -> RunStats:
    """items: (line number, query) or (line number, why the line is not a query)."""
    stats = RunStats()
    try:
        for record in answer_records(method, items, workers):
            if "error" in record:
                stats.failed += 1
            else:
                stats.answered += 1
            emit(record)
    except KeyboardInterrupt:
        stats.interrupted = True
    return stats


def answer_stream(method: Method, lines: IO[str], emit: Callable[[dict[str, Any]], None], workers: int = 1) -> RunStats:
    """`ask -`: every JSONL line of `lines` ({"id", "question"}) answered, in input order, with a bar of
    questions done on a terminal, and in a pipe a JSON progress line a question (none when quiet)."""
    from mhindex.files import read_jsonl_stream

    said: set[str] = set()

    def items() -> Iterator[tuple[int, Query | str]]:
        for number, record in read_jsonl_stream(lines, "question"):
            if unsaid := [key for key in unread_keys(record) if key not in said]:  # each key said once, where first
                said.update(unsaid)
                ui.reporter().warning(unread_note(unsaid, f"line {number}"))
            try:
                yield number, record if isinstance(record, str) else Query.from_record(record, str(number))
            except ValueError as error:
                yield number, str(error)

    log, total, started, done = ui.reporter(), _lines_in_file(lines), time.perf_counter(), 0
    with log.progress("answering questions", total=total, lines=False) as bar:  # its own line a question

        def emit_and_count(record: dict[str, Any]) -> None:
            nonlocal done
            emit(record)
            done += 1
            bar.advance()
            if not log.interactive:
                seconds = time.perf_counter() - started
                log.info(
                    f"{done}{f'/{total}' if total else ''} questions answered", done=done, total=total,
                    seconds=round(seconds, 1), per_minute=round(done * 60 / seconds, 2) if seconds else None,
                )  # fmt: skip

        return run_questions(method, items(), emit_and_count, workers=workers)


def _lines_in_file(lines: IO[str]) -> int | None:
    """How many non-blank lines a stream holds when it is a file (`ask - < q.jsonl`), read with pread so
    that its offset does not move; None for a pipe or a terminal (no total known)."""
    try:
        descriptor = lines.fileno()
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        count, offset, last = 0, 0, b""
        while block := os.pread(descriptor, 1 << 20, offset):
            for line in (last + block).split(b"\n")[:-1]:
                count += bool(line.strip())
            last = (last + block).rsplit(b"\n", 1)[-1]
            offset += len(block)
        return count + bool(last.strip())
    except (OSError, ValueError, AttributeError):  # no descriptor (a StringIO): no total
        return None
