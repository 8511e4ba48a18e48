"""Files that are either complete or absent: every output is written to a temporary path
in the same folder and renamed into place when done, so an interrupted run leaves nothing
half-written behind."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import orjson

from mhindex.errors import MhindexError, UsageError


def file_digest(path: Path, algorithm: str = "sha256", chunk: int = 1 << 20) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


_DIGESTS: dict[str, str] = {}  # this process's digests, by what `content_digest` keys them on


def content_digest(path: Path, cache: Path | None = None) -> str:
    """The sha256 of a file, or of a folder (each file's relative path and sha256, in order): what a model or an
    encoder was, for the environment's fingerprint. Hashing a model of gigabytes takes seconds, so a digest is
    remembered by the path, size and modification time, in this process and in `cache`/digests.json where a
    cache folder is given (a data root's; nothing is written anywhere else, and a cache that cannot be written
    is only slower)."""
    path = path.resolve()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    key = f"{path}|" + "|".join(f"{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)
    stored = cache / "digests.json" if cache else None
    remembered: dict[str, str] = {}
    if stored and stored.is_file():
        with contextlib.suppress(OSError, orjson.JSONDecodeError, AttributeError):
            remembered = {k: v for k, v in orjson.loads(stored.read_bytes()).items() if isinstance(v, str)}
    if key not in _DIGESTS and key in remembered:
        _DIGESTS[key] = remembered[key]
    elif key not in _DIGESTS:
        if path.is_dir():
            parts = "\n".join(f"{p.relative_to(path)} {file_digest(p)}" for p in files)
            _DIGESTS[key] = hashlib.sha256(parts.encode()).hexdigest()
        else:
            _DIGESTS[key] = file_digest(path)
    if stored and key not in remembered:
        with contextlib.suppress(OSError):
            stored.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(stored) as handle:
                handle.write(orjson.dumps({**remembered, key: _DIGESTS[key]}))
    return _DIGESTS[key]


class OutsideRoot(MhindexError):
    """A path that a command would replace or delete leads out of the data root."""


def inside(root: Path, path: Path) -> Path:
    """`path` if, every link followed, it lies inside `root`; else a one-line error. Whatever is
    replaced or deleted goes through here first: nothing outside the data root is ever touched,
    whatever links are inside it."""
    real_root, real = root.resolve(), path.resolve()
    if real != real_root and real_root not in real.parents:
        raise OutsideRoot(
            f"{path} leads out of the data root {root} (to {real}) through a symbolic link; nothing was "
            "changed: remove the link"
        )
    if path.is_symlink():
        raise OutsideRoot(
            f"{path} is a symbolic link; mhindex replaces only folders it made: nothing was changed, remove the link"
        )
    return path


# The data roots this process writes under (home.resolve_home adds each): below one, every file mhindex writes is
# checked first (`unlinked`), so that a symbolic link inside the root never takes a write outside it.
_ROOTS: set[Path] = set()


def write_under(root: Path) -> None:
    """Register a data root: from now on, writes below it refuse to go through a link inside it."""
    _ROOTS.add(Path(os.path.abspath(root)))


def unlinked(path: Path) -> Path:
    """`path`, if nothing between a data root and it (itself included) is a symbolic link; else a one-line error,
    before anything is written. A path outside every data root (an `--out` the user named) is theirs, unchecked.
    Every file and folder mhindex writes below the root goes through here (atomic files and folders, locks,
    predictions, the call cache, prompt states, downloads, models), since following a link there could
    overwrite a file anywhere."""
    absolute = Path(os.path.abspath(path))
    for root in _ROOTS:
        if absolute != root and root not in absolute.parents:
            continue
        current = root
        for part in absolute.relative_to(root).parts:
            current = current / part
            if current.is_symlink():
                raise OutsideRoot(
                    f"{current} is a symbolic link inside the data root {root}; mhindex does not write through "
                    f"links there (writing {path}): nothing was written, remove the link"
                )
    return path


# A temporary folder is named after what it will replace and the process that made it
# (`.NAME.tmp-PID-XXXX`, `.NAME.old-PID`), so that one left by a process that died can be told
# apart from one in use.
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?:tmp|old)-(?P<pid>\d+)(?:-.*)?$")
_OLD_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?:tmp|old)-[a-z0-9_]{8}$")  # before the PID was in the name


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_temporaries(folder: Path, name: str | None = None) -> list[Path]:
    """Temporary folders and files in `folder` (of `name` only, if given) left by processes that
    are gone: interrupted builds that could not clean up (killed, power cut)."""
    if not folder.is_dir():
        return []
    stale = []
    for entry in folder.iterdir():
        found = _TEMPORARY.match(entry.name) or _OLD_TEMPORARY.match(entry.name)
        if not found or (name is not None and found["name"] != name):
            continue
        pid = int(found["pid"]) if "pid" in found.groupdict() and found["pid"] else None
        if pid is None or (pid != os.getpid() and not process_alive(pid)):
            stale.append(entry)
    return sorted(stale)


#: Set by the `mhindex` program (cli.entry): its temporary files go under the data root (`temporary_under`)
PROCESS_TEMPORARY = False


def temporary_under(root: Path) -> Path | None:
    """The process's temporary folder, `<root>/.tmp/.process.tmp-PID`, made TMPDIR (and Python's tempfile's) for
    the process and every engine it starts (the JVM is told too: -Djava.io.tmpdir), so that nothing mhindex or an
    engine writes lands outside the data root, and a full disk is the data root's, said so. Removed at exit; one a
    killed process left is swept by `mhindex gc`. Only for the `mhindex` program: a library's caller keeps its own
    (None then)."""
    if not PROCESS_TEMPORARY:
        return None
    folder = root / ".tmp" / f".process.tmp-{os.getpid()}"
    if tempfile.tempdir != str(folder):
        _sweep_dead(folder.parent)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:  # a read-only or full root: the command says so where it writes, or runs on without writing
            return None
        remove_at_exit(folder.parent, only_if_empty=True)  # after the folder (last in, first out): no empty .tmp
        remove_at_exit(folder)
        os.environ["TMPDIR"] = tempfile.tempdir = str(folder)
    return folder


def _sweep_dead(temporary: Path) -> None:
    """The temporary folders of `mhindex` processes that were killed (SIGKILL, a crash): the next command removes
    them, as `mhindex gc` would."""
    import psutil

    try:
        found = list(temporary.glob(".process.tmp-*"))
    except OSError:
        return
    for left in found:
        pid = left.name.rpartition("-")[2]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            remove(left)


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


_AT_EXIT: list[tuple[Path, bool]] = []


def remove_at_exit(path: Path, only_if_empty: bool = False) -> None:
    """Remove `path` when the process ends (`only_if_empty`: a folder others may share, left where it holds
    anything): at a normal exit (atexit), and from `remove_now()`, which the command calls before it leaves at once
    after Ctrl-C (os._exit runs no atexit handler). The last registered is removed first."""
    import atexit

    if not _AT_EXIT:
        atexit.register(remove_now)
    _AT_EXIT.append((path, only_if_empty))


def remove_now() -> None:
    while _AT_EXIT:
        path, only_if_empty = _AT_EXIT.pop()
        if not only_if_empty:
            remove(path)
            continue
        try:
            path.rmdir()
        except OSError:  # another process's folder is in it, or it is gone
            pass


def size_on_disk(path: Path) -> int:
    if path.is_file() or path.is_symlink():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def with_path(error: BaseException, final: Path) -> BaseException:
    """A write's OSError without a file name (a full disk: "No space left on device") as one naming what was
    being written; any other error as it is."""
    if isinstance(error, OSError) and not error.filename and error.errno is not None:
        return OSError(error.errno, f"{error.strerror or error} (writing {final})")
    return error


@contextmanager
def atomic_directory(final: Path, root: Path) -> Iterator[Path]:
    """Yield an empty temporary folder beside `final`; on success it replaces `final` whole.
    `final` must lie inside the data root `root`. Temporary folders of `final` left by dead
    processes are removed first."""
    unlinked(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    inside(root, final)
    for stale in stale_temporaries(final.parent, final.name):
        remove(stale)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-{os.getpid()}-", dir=final.parent))
    try:
        yield staging
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        named = with_path(error, final)
        if named is not error:
            raise named from None
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
def atomic_file(final: Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary file beside `final` for writing; it becomes `final` only on success."""
    unlinked(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.tmp-{os.getpid()}-", dir=final.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
        os.replace(tmp, final)
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        named = with_path(error, final)
        if named is not error:
            raise named from None
        raise


def parse_jsonl(
    lines: Iterable[bytes | str], on_bytes: Callable[[int], None] | None = None
) -> Iterator[tuple[int, Any, str | None]]:
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


QUERY_FIELDS = ("query", "question", "text")  # mhindex's, a questions.jsonl's, BEIR's queries.jsonl


#: `search -`'s input, as read_query_stream reads it
QUERY_STREAM_HELP = (
    'Query text, or "-" for one query a line from stdin: JSONL {"id", "query"} (or "question", as in '
    "questions.jsonl), id<TAB>query as Pyserini's topics, or plain text."
)


def read_query_stream(stream):
    """(line number, {"id", "query"}) for each non-blank line of stdin as search users write them:
    JSON lines with `query`, `question` (a corpus's own questions.jsonl) or `text` (BEIR's queries),
    `id` or `_id`; Pyserini's topics TSV (`id<TAB>query`); or plain text, one query a line (its id is
    its line number). A JSON line with no query field gives (line number, why) in its place."""
    import orjson

    for number, line in enumerate(stream, start=1):
        text = line.strip()
        if not text:
            continue
        if text.startswith("{"):
            try:
                record = orjson.loads(text)
            except orjson.JSONDecodeError as error:
                yield number, f"not valid JSON ({error})"
                continue
            query = next((record[f] for f in QUERY_FIELDS if isinstance(record.get(f), str)), None)
            if query is None:
                yield number, "no query: give a string field 'query' (or 'question', or 'text')"
                continue
            qid = next((record[f] for f in ("id", "_id", "qid") if isinstance(record.get(f), str | int)), number)
            yield number, {"id": str(qid), "query": query}
        elif "\t" in text:
            qid, query = text.split("\t", 1)
            yield number, {"id": qid, "query": query.strip()}
        else:
            yield number, {"id": str(number), "query": text}


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


def room() -> tuple[int | None, Callable[[Path], int]]:
    """The memory available now to this process (None where nothing can tell), and the disk free under a folder.
    In a container, that is its cgroup's limit less what the cgroup uses, where that is less than the host has:
    the host's figure would let a build start that the container's OOM killer then ends with no word."""
    try:
        import psutil

        memory: int | None = int(psutil.virtual_memory().available)
    except (ImportError, OSError):
        memory = None
    contained = cgroup_memory_left()
    if contained is not None:
        memory = contained if memory is None else min(memory, contained)
    return memory, lambda folder: shutil.disk_usage(next(p for p in (folder, *folder.parents) if p.exists())).free


def cgroup_memory_left(system: Path = Path("/")) -> int | None:
    """The memory this process's cgroup may still take (its limit less its usage), cgroup v2 or v1; None where
    there is no limit (or none can be read). `system`: the root the /proc and /sys files are read under."""
    try:
        lines = (system / "proc" / "self" / "cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        relative = path.lstrip("/")
        if number == "0" and controllers == "":  # v2: the unified hierarchy
            folders = [system / "sys/fs/cgroup" / relative, system / "sys/fs/cgroup"]
            found = _limit_and_use(folders, "memory.max", "memory.current")
        elif "memory" in controllers.split(","):  # v1: the memory controller's own hierarchy
            folders = [system / "sys/fs/cgroup/memory" / relative, system / "sys/fs/cgroup/memory"]
            found = _limit_and_use(folders, "memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        if found is not None:
            return found
    return None


def _limit_and_use(folders: list[Path], limit_file: str, usage_file: str) -> int | None:
    for folder in folders:
        try:
            limit_text = (folder / limit_file).read_text().strip()
            usage = int((folder / usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit_text == "max" or not limit_text.isdigit() or int(limit_text) >= 1 << 60:  # no limit set
            return None
        return max(0, int(limit_text) - usage)
    return None


def refuse_unless_room(work: str, memory: int, disk: int, root: Path) -> None:
    """The preflight of `corpus` and `index`: refuse, in one line, work whose expected peak does not fit in the
    memory available or the disk free under the data root ROOT, where FlashRAG's users learnt it when the kernel
    killed a 21M-passage build at 126 GB (RUC-NLPIR/FlashRAG issue #233)."""
    available, free_under = room()
    free = free_under(root)
    short = [
        *([f"{human_size(memory)} of memory at its peak, {human_size(available)} available"]
          if available is not None and memory > available else []),
        *([f"{human_size(disk)} of disk at its peak, {human_size(free)} free under {root}"] if disk > free else []),
    ]  # fmt: skip
    if short:  # how the figures are estimated: `mhindex doctor`, a backend's `footprint`, corpora/build.py
        raise UsageError(
            f"not enough room to {work}: about {'; and '.join(short)}; free some, or pass --no-preflight to go on"
        )


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"
