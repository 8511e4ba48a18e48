"""Evaluated prompt openings kept on disk, so that a new process does not read the demonstrations again.

A local model spends most of a first question reading its demonstrations (IRCoT's two sets are
some 4,000 tokens each). llama.cpp can save a slot's evaluated prompt (its KV cache and tokens)
to a file and restore it. lm/llamacpp.py saves the slot when it holds exactly a prompt opening's
first M tokens (M a multiple of its micro-batch, so that what follows a restore is evaluated as
from scratch), under a key made of everything that shapes the saved values: the model file, the
runtime and its settings (context, micro-batch; not the threads: the kernels are thread-invariant, so a state
kept at one thread count serves another) and the tokens themselves. A later process restores it before its
first call that opens the same way.

The files live under `<home>/cache/llama-state/`, at most 2 GB of them (`$MHINDEX_PROMPT_STATES_MB`;
the least recently used go first). Each is checked against the sha256 recorded when it was saved before it
is restored: one that does not match, or that llama.cpp cannot read, is removed with a one-line
warning and saved anew by the next call. `--no-cache` bypasses the store: the process keeps its
states in a folder of its own (`.private.tmp-PID-...`, removed when it exits; `mhindex gc` removes
one a killed process left), so that it still switches between its prompt families as quickly,
with the same answers, and reads nothing another process saved.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
import threading
import time
from array import array
from pathlib import Path
from typing import Any

from mhindex.errors import UsageError
from mhindex.files import file_digest, remove, remove_at_exit, stale_temporaries
from mhindex.ui import reporter

# Openings shorter than this (about 500 tokens, one micro-batch) are quick to read again: not worth a file.
MIN_CHARS = 2000
DEFAULT_LIMIT_MB = 2048  # $MHINDEX_PROMPT_STATES_MB sets another


def token_digest(runtime: str, tokens: list[int]) -> str:
    """The key of a state: the runtime that computed it and the tokens it holds."""
    digest = hashlib.sha256(runtime.encode())
    digest.update(b"\0" + array("i", tokens).tobytes())
    return digest.hexdigest()[:32]


_PRIVATE: dict[Path, Path] = {}


def private_folder(shared: Path) -> Path:
    """This process's own state folder beside the shared one (--no-cache), removed at exit; those of processes that
    were killed (no exit to remove them) are removed here, by the next."""
    if shared not in _PRIVATE:
        shared.mkdir(parents=True, exist_ok=True)
        for left in stale_temporaries(shared, "private"):
            remove(left)
        folder = Path(tempfile.mkdtemp(prefix=f".private.tmp-{os.getpid()}-", dir=shared))
        remove_at_exit(folder)
        _PRIVATE[shared] = folder
    return _PRIVATE[shared]


def limit_bytes() -> int:
    given = os.environ.get("MHINDEX_PROMPT_STATES_MB") or str(DEFAULT_LIMIT_MB)
    try:
        megabytes = float(given)
    except ValueError:
        megabytes = -1.0
    if not 0 <= megabytes < float("inf"):
        raise UsageError(f"$MHINDEX_PROMPT_STATES_MB must be a number of megabytes (0 or more), not {given!r}")
    return int(megabytes * (1 << 20))


class PromptStates:
    def __init__(self, folder: Path, limit: int | None = None) -> None:
        self.folder = folder
        self.limit = limit if limit is not None else limit_bytes()
        folder.mkdir(parents=True, exist_ok=True)
        try:
            self._db = self._open()
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError as error:  # overwritten or torn: a cache, so it is made again
            reporter().warning(
                f"the prompt-state index {folder / 'index.sqlite'} is damaged ({error}): its states are dropped "
                "and made again"
            )
            for path in [*folder.glob("index.sqlite*"), *folder.glob("*.bin")]:
                path.unlink(missing_ok=True)
            self._db = self._open()
        self._lock = threading.Lock()
        self._closed = False
        self._checked: set[str] = set()  # files whose digest this process has seen match

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.folder / "index.sqlite", check_same_thread=False, timeout=30)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS states (key TEXT PRIMARY KEY, file TEXT NOT NULL, bytes INTEGER NOT "
                "NULL, sha256 TEXT NOT NULL, used REAL NOT NULL)"
            )
        except BaseException:
            db.close()
            raise
        return db

    def file_of(self, key: str) -> Path:
        return self.folder / f"{key}.bin"

    def lookup(self, key: str) -> Path | None:
        """The kept state of `key`, its digest checked (once a process); None when there is none
        or it was damaged (then it is removed, with a warning, and made again)."""
        rows = self._statement("SELECT file, sha256 FROM states WHERE key = ?", (key,))
        if not rows:
            return None
        row = rows[0]
        path = self.folder / row[0]
        if key not in self._checked:
            try:
                matches = path.is_file() and file_digest(path) == row[1]
            except OSError:
                matches = False
            if not matches:
                self.forget(key, f"the saved prompt state {path} is missing or damaged")
                return None
            self._checked.add(key)
        self._statement("UPDATE states SET used = ? WHERE key = ?", (time.time(), key))
        return Path(path)

    def record(self, key: str, path: Path) -> None:
        """Keep the state just saved at `path` (a file in the folder), then evict beyond the limit."""
        digest, size = file_digest(path), path.stat().st_size
        row = (key, path.name, size, digest, time.time())
        if self._statement("INSERT OR REPLACE INTO states VALUES (?, ?, ?, ?, ?)", row) is None:
            return  # closed; the file is left: its name is the key's, which another process's index may hold
        self._checked.add(key)
        self._evict()

    def forget(self, key: str, why: str | None = None) -> None:
        from mhindex.ui import reporter

        with self._lock:
            if self._closed:
                return
            with self._db:
                row = self._db.execute("SELECT file FROM states WHERE key = ?", (key,)).fetchone()
                self._db.execute("DELETE FROM states WHERE key = ?", (key,))
        if row:
            (self.folder / row[0]).unlink(missing_ok=True)
        self._checked.discard(key)
        if why:
            reporter().warning(f"{why}; the prompt is read again and its state saved anew")

    def _evict(self) -> None:
        kept = 0
        for key, size in self._statement("SELECT key, bytes FROM states ORDER BY used DESC") or ():
            kept += size
            if kept > self.limit:
                self.forget(key)

    def temporary(self) -> Path:
        """Where llama.cpp writes a state before it is renamed into place (whole or not at all)."""
        return self.folder / f".state.tmp-{os.getpid()}-{threading.get_ident()}.bin"

    def _statement(self, sql: str, parameters: tuple[object, ...] = ()) -> list[Any] | None:
        """One statement's rows, in a transaction under the lock; None once closed."""
        with self._lock:
            if self._closed:
                return None
            with self._db:
                return self._db.execute(sql, parameters).fetchall()

    def close(self) -> None:
        """Waits for a statement in flight, and later ones do nothing: after Ctrl-C a model call abandoned in its
        thread may still keep a state while the command closes this, and a connection closed under a statement
        crashes the process in C (sqlite3_last_insert_rowid on a freed handle: a SIGSEGV, seen in CI)."""
        with self._lock:
            self._closed = True
            self._db.close()
