"""One change of a thing at a time, with advisory `flock`s that the kernel drops when their holder exits,
however it exits, so a killed command never leaves anything locked.

- A build of a corpus or of one of its indexes holds a lock on its name in the data root
  (`<home>/.locks/NAME.lock`), so that two builds of one name never rename folders under each other. A
  second build waits for the first and says who holds the lock; the small lock file stays for the next build.
- An evaluation holds a lock on its folder's run.json while it records its configuration, and one on
  each predictions file while it answers into it (`<folder>/.locks/NAME.lock`, in the folder itself, so
  that evaluations from two data roots into one `--out` see each other): two `eval`s into one folder
  (other methods, on a machine with cores to spare) both land in run.json, and one of the same method
  waits rather than ask the questions twice.

A lock folder that is a symbolic link is refused, never followed: a lock file is written nowhere else.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mhindex.errors import UsageError, redact_command
from mhindex.files import unlinked
from mhindex.ui import reporter


@contextmanager
def changing(home: Path, name: str, what: str) -> Iterator[None]:
    """Hold the lock of corpus `name` while `what` (e.g. "building the corpus") runs."""
    with _held(home / ".locks" / f"{name}.lock", f"'{name}' is being changed", what):
        yield


@contextmanager
def evaluating(folder: Path, name: str | None, what: str) -> Iterator[None]:
    """Hold the lock of an evaluation folder's run.json (`name` None) or of its predictions of method `name`,
    kept in the folder: whichever data root an evaluation runs from, one into the same folder sees it."""
    target = folder / (f"{name}.jsonl" if name else "run.json")
    # A variant's name (oner@k=5) is a file name already (its predictions file); hashed past 100 characters.
    stem = name or "run.json"
    if len(stem) > 100:
        stem = hashlib.sha256(stem.encode()).hexdigest()[:16]
    with _held(folder / ".locks" / f"{stem}.lock", f"{target} is being written", what):
        yield


@contextmanager
def _held(lock: Path, busy: str, what: str) -> Iterator[None]:
    if lock.parent.is_symlink():
        raise UsageError(f"{lock.parent} is a symbolic link; mhindex writes its locks only there: remove the link")
    unlinked(lock)
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:  # O_NOFOLLOW: a lock file that is a link (made after the check) is refused, never written through
        descriptor = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise
        raise UsageError(f"{lock} is a symbolic link; mhindex writes its lock there only: remove the link") from None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(descriptor, 4096, 0).decode("utf-8", "replace").strip() or "another process"
            reporter().warning(f"{busy} by {holder}; waiting for it to finish")
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        command = redact_command(sys.argv[1:]) or "mhindex"  # a key or a password given on it is never written
        note = f"process {os.getpid()} ({what}: {command}), since {time.strftime('%H:%M:%S')}"
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, note.encode(), 0)
        yield
    finally:
        os.close(descriptor)  # releases the lock
