"""What converters produce, and the careful reading of what they consume.

A converter reads a dataset release and yields `Paragraph`s and `Question`s. Every record it
reads goes through a `RecordGuard`, so that a malformed record either stops the run with a
one-line error naming file, line (or record index) and field, or, with --skip-bad, is counted
and passed over as a whole: a record contributes all of its items or none.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import hashlib
import io
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ijson

from mhindex.errors import BadInput
from mhindex.files import parse_jsonl
from mhindex.home import id_key


def paragraph_id(title: str, text: str) -> str:
    """A stable 64-bit id from content, as 16 hex digits: the same paragraph gets the same id in
    every build and corpus."""
    return hashlib.blake2b(f"{title}\n{text}".encode(), digest_size=8).hexdigest()


def paragraph_key(title: str, text: str) -> int:
    """The id as an integer: the builder deduplicates on it."""
    return int(paragraph_id(title, text), 16)


def join_sentences(sentences: Iterable[str]) -> str:
    """Sentences to one paragraph, as IRCoT does: strip each, join with single spaces."""
    return " ".join(s.strip() for s in sentences if s.strip())


class Paragraph:
    """One paragraph. Its content id is computed on first use and kept: a build meets most
    paragraphs many times and needs the id only of the first meeting and of gold ones. A corpus
    of the user's own gives its ids (`given`): those are kept, and the builder keeps one paragraph an id."""

    __slots__ = ("title", "text", "meta", "_id", "given")

    def __init__(self, title: str, text: str, meta: dict | None = None, id: str | None = None) -> None:
        self.title, self.text, self.meta = title, text, meta
        self._id: str | None = id
        self.given = id is not None

    @property
    def id(self) -> str:
        if self._id is None:
            self._id = paragraph_id(self.title, self.text)
        return self._id

    @property
    def key(self) -> int:
        return id_key(self.id) if self.given else int(self.id, 16)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Paragraph) and (self.title, self.text, self.meta) == (
            other.title,
            other.text,
            other.meta,
        )

    def __repr__(self) -> str:
        return f"Paragraph(title={self.title!r}, text={self.text[:40]!r}..., id={self.id})"


@dataclass(slots=True)
class Question:
    id: str
    question: str
    answers: list[str]
    gold_ids: list[str]
    dataset: str
    extra: dict = field(default_factory=dict)
    # Gold references (titles, snippets) that named no paragraph: reported, never silently dropped.
    unmapped: list[str] = field(default_factory=list)

    def record(self) -> dict:
        return {
            "id": self.id,
            "question": self.question,
            "answers": self.answers,
            "gold_ids": self.gold_ids,
            "dataset": self.dataset,
            **self.extra,
        }


_SPLIT_NAME = re.compile(r"(?:^|[^a-z])(train|dev|test|validation|val)(?:[^a-z]|$)")


@functools.cache
def split_of(path: Path | str) -> str | None:
    """The split a release file holds, from its name (`musique_ans_v1.0_dev.jsonl`, `hotpot_train_v1.1.json`,
    `WebQSP.test.json`, `test-00000-of-00002.parquet`); validation is dev."""
    found = _SPLIT_NAME.search(Path(path).name.lower())
    if found is None:
        return None
    return "dev" if found.group(1) in ("validation", "val") else found.group(1)


def stamp_split(question: Question, path: Path | str) -> None:
    """Give a question the split of the file it came from, unless its record named one."""
    if "split" not in question.extra and (split := split_of(path)) is not None:
        question.extra["split"] = split


class FieldError(ValueError):
    """A record lacks a field or has one of the wrong type; the message names the field."""


_TYPE_NAMES = {
    str: "a string",
    list: "a list",
    dict: "an object",
    int: "an integer",
    bool: "true or false",
    float: "a number",
}


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


_MISSING = object()


def need(record: Any, key: str, kind: type | tuple[type, ...], at: str = "") -> Any:
    """record[key], checked to be of `kind`; `at` is the path of `record` inside the top record.
    Called for every field of every record: the message is built only when the check fails."""
    if isinstance(record, dict):
        value = record.get(key, _MISSING)
        if value is not _MISSING and isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return value
    where = f"{at}.{key}" if at else key
    if not isinstance(record, dict):
        raise FieldError(f"'{at or 'record'}' should be an object, got {_type_name(record)}")
    if key not in record:
        raise FieldError(f"field '{where}' is missing")
    kinds = kind if isinstance(kind, tuple) else (kind,)
    expected = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
    raise FieldError(f"field '{where}' should be {expected}, got {_type_name(record[key])}")


def optional(record: dict, key: str, kind: type | tuple[type, ...], default: Any = None, at: str = "") -> Any:
    if not isinstance(record, dict) or record.get(key) is None:
        return default
    return need(record, key, kind, at)


def strings(record: dict, key: str, at: str = "", required: bool = True) -> list[str]:
    """A list of strings, each checked."""
    values = need(record, key, list, at) if required else optional(record, key, list, [], at)
    where = f"{at}.{key}" if at else key
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise FieldError(f"field '{where}[{i}]' should be a string, got {_type_name(value)}")
    return values


class RecordGuard:
    """Runs one record's conversion, turning a FieldError into a located error or a skip."""

    def __init__(self, skip_bad: bool = False, on_skip: Callable[[str], None] | None = None) -> None:
        self.skip_bad = skip_bad
        self.skipped = 0
        self.first_skipped: list[str] = []
        self._on_skip = on_skip
        # Things a converter dropped on purpose, by reason, for the build report and manifest.
        self.notes: Counter[str] = Counter()

    def fail(self, path: Path | str, where: object, message: str) -> None:
        located = f"{path} {where}: {message}"
        if not self.skip_bad:
            raise BadInput(located + " (use --skip-bad to pass over bad records)")
        self.skipped += 1
        if len(self.first_skipped) < 5:
            self.first_skipped.append(located)
        if self._on_skip:
            self._on_skip(located)

    def convert(self, path: Path | str, where: object, record: Any, convert: Callable[[Any], list]) -> list:
        if isinstance(record, FieldError):
            self.fail(path, where, str(record))
            return []
        try:
            items = convert(record)
        except FieldError as error:
            self.fail(path, where, str(error))
            return []
        for item in items:
            if isinstance(item, Question):
                stamp_split(item, path)
        return items


COMPRESSED = (".bz2", ".gz", ".zst", ".zstd")


def open_binary(path: Path):
    """Open a possibly compressed file (.bz2, .gz, .zst) for binary reading, streamed. A compressed file that
    ends early (a download cut short) or is not what its name says is a BadInput naming it, never a short read:
    a truncated archive must not become a smaller corpus, even with --skip-bad."""
    import io

    if path.suffix == ".bz2":
        return checked_stream(bz2.open(path, "rb"), path, "bzip2")
    if path.suffix == ".gz":
        return checked_stream(gzip.open(path, "rb"), path, "gzip")
    if path.suffix in (".zst", ".zstd"):
        return io.BufferedReader(_Zstd(path), 1 << 20)
    return open(path, "rb")


def checked_stream(inner: Any, path: Path, kind: str) -> io.BufferedReader:
    """A decompressing stream (gzip, bzip2) whose truncation or corruption is a BadInput naming `path`."""
    return io.BufferedReader(_Checked(inner, path, kind), 1 << 20)


def _truncated(path: Path, kind: str) -> BadInput:
    return BadInput(f"{path}: the {kind} stream ends before its end marker: the file is truncated (fetch it again)")


class _Checked(io.RawIOBase):
    """A gzip or bzip2 stream whose failures name the file: Python raises EOFError for a truncated one (which
    the command line took for a Ctrl-D: "aborted") and an OSError with no file name for one that is not."""

    def __init__(self, inner: Any, path: Path, kind: str) -> None:
        self._inner, self._path, self._kind = inner, path, kind

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._inner.read(len(buffer))
        except EOFError:
            raise _truncated(self._path, self._kind) from None
        except OSError as error:
            raise BadInput(f"{self._path}: not a readable {self._kind} file ({error})") from None
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._inner.close()
        super().close()


class _Zstd(io.RawIOBase):
    """A Zstandard file of one or more frames, streamed. Hand-written over zstandard's decompressobj because
    its stream reader ends a truncated frame silently (911 of 2,000 paragraphs became a corpus)."""

    def __init__(self, path: Path) -> None:
        import zstandard

        self._path, self._file = path, open(path, "rb")
        self._context = zstandard.ZstdDecompressor()
        self._frame = self._context.decompressobj()
        self._pending, self._offset = b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        import zstandard

        while self._offset >= len(self._pending):
            chunk = self._file.read(1 << 20)
            if not chunk:
                if not self._frame.eof:
                    raise _truncated(self._path, "zstd")
                return 0
            try:
                out = self._frame.decompress(chunk)
                while self._frame.eof and self._frame.unused_data:  # the next frame starts in this chunk
                    rest = self._frame.unused_data
                    self._frame = self._context.decompressobj()
                    out += self._frame.decompress(rest)
            except zstandard.ZstdError as error:
                raise BadInput(f"{self._path}: not a readable zstd file ({error})") from None
            self._pending, self._offset = out, 0
        size = min(len(buffer), len(self._pending) - self._offset)
        buffer[:size] = memoryview(self._pending)[self._offset : self._offset + size]
        self._offset += size
        return size

    def close(self) -> None:
        self._file.close()
        super().close()


def first_char(path: Path) -> str:
    """The first non-blank character of a (possibly compressed) file: '[' or '{' tells the format."""
    with open_binary(path) as handle:
        while chunk := handle.read(4096):
            stripped = chunk.lstrip()
            if stripped:
                return stripped[:1].decode("ascii", "replace")
    return ""


def read_jsonl(path: Path, on_bytes: Callable[[int], None] | None = None) -> Iterator[tuple[str, Any]]:
    """(location, record) for each non-blank line; an unparsable line yields a FieldError."""
    with open_binary(path) as handle:
        for number, record, problem in parse_jsonl(handle, on_bytes):
            yield f"line {number}", FieldError(problem) if problem else record


def read_json_array(path: Path, on_bytes: Callable[[int], None] | None = None) -> Iterator[tuple[str, Any]]:
    """(location, record) for each element of a top-level JSON array, streamed."""
    if (start := first_char(path)) != "[":
        raise BadInput(f"{path}: expected a JSON array of records, but the file starts with {start or 'nothing'!r}")
    return read_json_items(path, on_bytes)


def read_json_items(
    path: Path, on_bytes: Callable[[int], None] | None = None, prefix: str = "item", where: str = "record {}"
) -> Iterator[tuple[str, Any]]:
    """(location, record) for each element at ijson's `prefix` (`Questions.item`: a list inside an
    object), streamed. A syntax error cannot be skipped past inside one JSON document, so it stops the run."""
    from mhindex.files import CountingReader

    index = -1
    with open_binary(path) as raw:
        source = CountingReader(raw, on_bytes) if on_bytes else raw
        try:
            for index, record in enumerate(ijson.items(source, prefix, use_float=True)):
                yield where.format(index), record
        except ijson.JSONError as error:
            reason = str(error).strip().splitlines()[0]
            raise BadInput(f"{path} {where.format(index + 1)}: not valid JSON ({reason})") from None


def read_records(path: Path, on_bytes: Callable[[int], None] | None = None) -> Iterator[tuple[str, Any]]:
    """Records of a JSON array or a JSON-lines file, told apart by the first character."""
    if not path.is_file():
        raise BadInput(f"{path}: no such file")
    if first_char(path) == "[":
        return read_json_array(path, on_bytes)
    return read_jsonl(path, on_bytes)
