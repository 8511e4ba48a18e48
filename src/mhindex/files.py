"""Files that are either complete or absent: every output is written to a temporary path
in the same folder and renamed into place when done, so an interrupted run leaves nothing
half-written behind."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def file_digest(path: Path, algorithm: str = "sha256", chunk: int = 1 << 20) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def atomic_directory(final: Path) -> Iterator[Path]:
    """Yield an empty temporary folder beside `final`; on success it replaces `final` whole."""
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    retired = None
    if final.exists():
        retired = final.with_name(f".{final.name}.old-{os.getpid()}")
        shutil.rmtree(retired, ignore_errors=True)
        os.replace(final, retired)
    os.replace(staging, final)
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)


@contextmanager
def atomic_file(final: Path, mode: str = "wb") -> Iterator[io.IOBase]:
    """Open a temporary file beside `final` for writing; it becomes `final` only on success."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.tmp-", dir=final.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def parse_jsonl(lines: Iterable[bytes | str], on_bytes: Callable[[int], None] | None = None) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, record, None) for each non-blank JSON line, or (line number, None, why it is
    not JSON): the one reading of JSON lines, for release files, archives and stdin alike."""
    import orjson

    for number, line in enumerate(lines, start=1):
        if on_bytes:
            on_bytes(len(line))
        if not line.strip():
            continue
        try:
            yield number, orjson.loads(line), None
        except orjson.JSONDecodeError as error:
            yield number, None, f"not valid JSON ({error})"


def read_jsonl_stream(stream, required: str):
    """(line number, record) for each non-blank line of a JSONL text stream (stdin), or (line
    number, why the line is not a record with the string field `required`): a bad line is
    reported in its place and the stream goes on."""
    for number, record, problem in parse_jsonl(stream):
        if problem:
            yield number, problem
            continue
        if not isinstance(record, dict) or not isinstance(record.get(required), str):
            yield number, f"field '{required}' is missing or not a string"
            continue
        yield number, record


class CountingReader(io.RawIOBase):
    """A binary reader that reports how many bytes were consumed, for byte-based progress bars."""

    def __init__(self, raw: io.BufferedIOBase, on_read: Callable[[int], None]) -> None:
        self._raw = raw
        self._on_read = on_read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        if n:
            self._on_read(n)
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"
