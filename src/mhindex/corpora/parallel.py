"""Large JSON-lines releases converted on every core, into the very corpus one process makes.

The inputs are cut at line boundaries into one contiguous part per worker (forked processes,
which start in milliseconds and share the loaded converter). Each worker converts its part's
lines with the dataset's `convert_line`, writes a paragraph to a file of its own the first time
it meets its content, and writes its questions as they come, noting how many paragraphs it had
written before each. The parent then walks the parts in input order, keeping each paragraph id
the first time it appears and checking each question's gold ids against the paragraphs kept
before it, as the one-process loop does, so the kept lines are in the order one process stages
them, and the shuffled corpus, copied from the parts' files, is the same byte for byte.

Workers recognise repeated content by Python's 64-bit hash of (title, text) before they compute
a paragraph's key: most paragraphs of a question-context release are repeats (MuSiQue's are 20
per question from a pool), and the hash costs a fifth of the blake2b key. Two different
paragraphs with the same 64-bit hash in one part (as unlikely as two with the same id) would be
kept once.
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.connection
import os
import signal
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from mhindex.corpora.records import COMPRESSED, FieldError, Paragraph, Question, RecordGuard, first_char
from mhindex.errors import MhindexError
from mhindex.files import parse_jsonl
from mhindex.processes import die_with_parent

#: Below this many input bytes one process is faster than forking and merging.
MIN_BYTES = 32 << 20


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def can_split(dataset, inputs: list[Path]) -> bool:
    """A dataset converted line by line, from plain (uncompressed) JSON-lines files, on a system that forks."""
    return (
        dataset.convert_line is not None
        and "fork" in multiprocessing.get_all_start_methods()
        and all(p.suffix not in COMPRESSED and p.is_file() and first_char(p) == "{" for p in inputs)
    )


@dataclass
class Segment:
    path: str
    start: int
    end: int


def split(inputs: list[Path], parts: int) -> list[list[Segment]]:
    """The inputs, in order, as `parts` runs of whole lines of about equal bytes (fewer for tiny inputs)."""
    sizes = [p.stat().st_size for p in inputs]
    target = max(1, sum(sizes) // parts)
    result: list[list[Segment]] = [[]]
    room = target
    for path, size in zip(inputs, sizes, strict=True):
        start = 0
        with open(path, "rb") as handle:
            while start < size:
                if room <= 0 and len(result) < parts:
                    result.append([])
                    room = target
                end = size if len(result) == parts or start + room >= size else _line_end(handle, start + room, size)
                result[-1].append(Segment(str(path), start, end))
                room -= end - start
                start = end
    return [part for part in result if part]


def _line_end(handle, at: int, size: int) -> int:
    """The end of the line that byte `at` is on."""
    handle.seek(at - 1)
    handle.readline()
    return min(handle.tell(), size)


@dataclass
class PartResult:
    """What one worker made of its part; the paragraphs and questions themselves are in its files."""

    paragraph_ends: array  # end offset of each paragraph line in its file
    keys: array  # each paragraph line's key
    # per question line: (id, gold ids, unmapped references, paragraph lines written before it, line length)
    questions: list[tuple[str, list[str], list[str], int, int]]
    paragraphs_read: int
    skipped: int
    first_skipped: list[str]
    notes: Counter = field(default_factory=Counter)


_progress: Any = None  # bytes read by all workers (a shared counter; the parent draws the bar)


def _worker(parent: int, progress, connection, *task) -> None:
    """One forked worker: converts its part and sends back the result, or the error that stopped it."""
    global _progress
    _progress = progress
    die_with_parent(parent)  # a parent killed outright takes its workers with it
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the workers
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's SIGTERM handler is not for workers
    try:
        result = _convert_part(*task)
    except BaseException as error:  # noqa: BLE001 - any failure goes to the parent, which raises it
        connection.send(error)
    else:
        connection.send(result)
    connection.close()


def _convert_part(
    convert_line: Callable[[dict], list], segments: list[Segment], folder: str, number: int, skip_bad: bool
) -> PartResult:
    guard = RecordGuard(skip_bad=skip_bad)
    seen: set[int] = set()
    ends, keys = array("q"), array("Q")
    questions: list = []
    read, position, dumps = 0, 0, orjson.dumps
    # Runs once per paragraph read (millions): locals instead of attribute lookups.
    seen_add, ends_append, keys_append = seen.add, ends.append, keys.append
    with (
        open(Path(folder) / f"part-{number}.paragraphs", "wb", buffering=1 << 20) as paragraphs,
        open(Path(folder) / f"part-{number}.questions", "wb") as out,
    ):
        write = paragraphs.write
        for path, where, record in _lines(segments):
            for item in guard.convert(path, where, record, convert_line):
                if type(item) is Paragraph:
                    read += 1
                    content = item.key if item.given else hash((item.title, item.text))
                    if content in seen:
                        continue
                    seen_add(content)
                    line = paragraph_line(item)
                    write(line)
                    position += len(line)
                    ends_append(position)
                    keys_append(item.key)
                elif isinstance(item, Question):
                    line = dumps(item.record()) + b"\n"
                    out.write(line)
                    questions.append((item.id, item.gold_ids, item.unmapped, len(ends), len(line)))
    return PartResult(ends, keys, questions, read, guard.skipped, guard.first_skipped, guard.notes)


class _LineNumber:
    """'line N' of a part's file, counted from the file's start only when a message needs it:
    counting the lines before a part reads up to half the input."""

    __slots__ = ("segment", "in_part")

    def __init__(self, segment: Segment, in_part: int) -> None:
        self.segment, self.in_part = segment, in_part

    def __str__(self) -> str:
        return f"line {_count_lines(self.segment.path, self.segment.start) + self.in_part}"


def _lines(segments: list[Segment]) -> Iterator[tuple[str, _LineNumber, object]]:
    """(file, its line number, record or FieldError) for each non-blank line of the segments, read
    by `files.parse_jsonl` as one process reads them, so that a bad line gets the same message."""
    progress = _Progress()
    for segment in segments:
        with open(segment.path, "rb") as handle:
            for number, record, problem in parse_jsonl(_segment_lines(handle, segment), progress.add):
                yield segment.path, _LineNumber(segment, number), FieldError(problem) if problem else record
    progress.flush()


def _segment_lines(handle, segment: Segment) -> Iterator[bytes]:
    handle.seek(segment.start)
    remaining = segment.end - segment.start
    while remaining > 0 and (line := handle.readline(remaining)):
        remaining -= len(line)
        yield line


class _Progress:
    """Bytes read, added to the workers' shared counter a megabyte at a time (it takes a lock)."""

    def __init__(self) -> None:
        self.pending = 0

    def add(self, count: int) -> None:
        self.pending += count
        if self.pending >= 1 << 20:
            self.flush()

    def flush(self) -> None:
        with _progress.get_lock():
            _progress.value += self.pending
        self.pending = 0


@functools.cache  # in a worker, which converts one part of one build and exits
def _count_lines(path: str, end: int) -> int:
    """Lines before byte `end` (a part's line numbers count from its file's start)."""
    count = 0
    with open(path, "rb") as handle:
        while end > 0 and (block := handle.read(min(end, 1 << 22))):
            count += block.count(b"\n")
            end -= len(block)
    return count


def paragraph_line(item: Paragraph) -> bytes:
    record = {"id": item.id, "title": item.title, "text": item.text}
    if item.meta:
        record.update(item.meta)
    return orjson.dumps(record) + b"\n"


def convert_parts(
    dataset,
    inputs: list[Path],
    folder: Path,
    workers: int,
    skip_bad: bool,
    advance: Callable[[int], None],
    forked: Callable[[], None] = lambda: None,
) -> list[PartResult]:
    """Run one worker per part of the inputs; returns their results in input order. A worker's error
    (a bad record) is raised here, and a worker that dies (out of memory) is an error, not a hang.
    `forked` is called once every worker is started (the parent may start threads from then on)."""
    parts = split(inputs, workers)
    context = multiprocessing.get_context("fork")
    progress = context.Value("q", 0)
    processes, connections = [], []
    try:
        for number, part in enumerate(parts):
            receive, send = context.Pipe(duplex=False)
            process = context.Process(
                target=_worker,
                args=(os.getpid(), progress, send, dataset.convert_line, part, str(folder), number, skip_bad),
                daemon=True,
            )
            process.start()
            send.close()
            processes.append(process)
            connections.append(receive)
        forked()
        results: dict[int, PartResult] = {}
        shown = 0
        while len(results) < len(parts):
            for ready in multiprocessing.connection.wait(
                [c for i, c in enumerate(connections) if i not in results], timeout=0.1
            ):
                number = connections.index(ready)  # type: ignore[arg-type]  # wait() gives back what it was given
                try:
                    outcome = connections[number].recv()
                except EOFError:
                    processes[number].join()
                    raise MhindexError(
                        f"a conversion worker stopped with exit code {processes[number].exitcode} (out of "
                        "memory?); try --workers 1"
                    ) from None
                if isinstance(outcome, BaseException):
                    raise outcome
                results[number] = outcome
            advance(progress.value - shown)
            shown = progress.value
        return [results[number] for number in range(len(parts))]
    finally:
        for process in processes:  # also on Ctrl-C or a bad record: no worker outlives the build
            if process.is_alive():
                process.terminate()
            process.join()


@dataclass
class KeptLines:
    """Where each kept paragraph line lies, in input order: line i is bytes `starts[i]:ends[i]` of
    `files[part[i]]` (of `files[0]` when `part` is None). The shuffled corpus is copied from there,
    so the workers' lines go into it with no staged copy in between."""

    files: list[Path]
    starts: Sequence[int]
    ends: Sequence[int]
    part: array | None = None


def merge_parts(results: list[PartResult], folder: Path, add_question: Callable[..., None]) -> KeptLines:
    """Keep each paragraph id's first line, in input order, and hand each question to
    `add_question` (build._Questions.add) once the paragraphs before it are kept."""
    kept: set[int] = set()
    starts, ends, parts = array("q"), array("q"), array("H")
    for number, result in enumerate(results):
        walk = _KeyWalk(result, number, (starts, ends, parts), kept)
        questions_file = folder / f"part-{number}.questions"
        with open(questions_file, "rb") as questions:
            for qid, gold, unmapped, before, length in result.questions:
                walk.upto(before)
                line = questions.read(length)
                add_question(
                    qid,
                    gold,
                    unmapped,
                    lambda fixed, line=line: (
                        line if fixed is None else orjson.dumps({**orjson.loads(line), "gold_ids": fixed}) + b"\n"
                    ),
                    kept,
                )
        walk.upto(len(result.keys))
        questions_file.unlink()
    return KeptLines([folder / f"part-{number}.paragraphs" for number in range(len(results))], starts, ends, parts)


class _KeyWalk:
    """Walks a part's paragraph lines in order, keeping those whose key is new."""

    def __init__(self, part: PartResult, number: int, lines: tuple[array, array, array], kept: set[int]) -> None:
        self.part, self.number, self.lines, self.kept = part, number, lines, kept  # lines: their starts, ends and parts
        self.next = 0  # the next line of the part to look at

    def upto(self, end: int) -> None:
        kept, ends, keys, number = self.kept, self.part.paragraph_ends, self.part.keys, self.number
        starts_append, ends_append, part_append = (column.append for column in self.lines)
        for i in range(self.next, end):
            key = keys[i]
            if key in kept:
                continue
            kept.add(key)
            starts_append(ends[i - 1] if i else 0)
            ends_append(ends[i])
            part_append(number)
        self.next = max(self.next, end)
