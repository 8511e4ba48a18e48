"""One change of a corpus at a time: a build of its corpus or of one of its indexes holds a lock
on its name in the data root (`<home>/.locks/NAME.lock`, an advisory `flock`), so that two builds
of one name never rename folders under each other. A second build waits for the first and says
who holds the lock. The kernel drops the lock when its holder exits, however it exits, so a
killed build never leaves a name locked; the small lock file itself stays for the next build.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mhindex.ui import reporter


@contextmanager
def changing(home: Path, name: str, what: str) -> Iterator[None]:
    """Hold the lock of corpus `name` while `what` (e.g. "building the corpus") runs."""
    folder = home / ".locks"
    folder.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(descriptor, 4096, 0).decode("utf-8", "replace").strip() or "another process"
            reporter().warning(f"'{name}' is being changed by {holder}; waiting for it to finish")
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        note = (
            f"process {os.getpid()} ({what}: {' '.join(sys.argv[1:]) or 'mhindex'}), since {time.strftime('%H:%M:%S')}"
        )
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, note.encode(), 0)
        yield
    finally:
        os.close(descriptor)  # releases the lock
