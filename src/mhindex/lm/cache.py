"""A persistent cache of LM calls, keyed by model identity, prompt and parameters.

Greedy decoding makes a call a pure function, so a rerun of an evaluation costs nothing (the
IRCoT authors cached their GPT-3 calls the same way). Stored in SQLite under
`<home>/cache/lm.sqlite`; `--no-cache` bypasses it.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from mhindex.lm.base import Completion, LanguageModel, Messages, StopWhen
from mhindex.ui import reporter


class CallCache:
    """A full disk, a read-only data root or a damaged file makes the cache unusable, never the run: calls go on
    without it, said once (its stored calls may have cost money: a damaged file is left for its owner)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=30)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, completion BLOB NOT NULL)")
        except BaseException:
            self._db.close()
            raise
        self._lock = threading.Lock()
        self._failed = False
        self._closed = False

    @classmethod
    def open(cls, path: Path) -> CallCache | None:
        """The cache at `path`, or None (with one warning) where it cannot be used."""
        try:
            return cls(path)
        except (sqlite3.Error, OSError) as error:
            reporter().warning(f"the LM call cache {path} cannot be used ({error}): calls are made without it")
            return None

    def _gave_up(self, error: Exception) -> None:
        if not self._failed:
            self._failed = True
            reporter().warning(f"the LM call cache {self.path} failed ({error}): later calls are made without it")

    @staticmethod
    def key(
        identity: str,
        kind: str,
        prompt: Messages,
        max_tokens: int,
        stop: Sequence[str],
        temperature: float,
        logprobs: bool = False,
    ) -> str:
        """A conversation is keyed by its turns; `logprobs` enters only when asked, so calls stored
        before it existed keep their keys."""
        turns = prompt if isinstance(prompt, str) else [dict(m) for m in prompt]
        payload = orjson.dumps(
            [identity, kind, turns, max_tokens, list(stop), temperature, *(["logprobs"] if logprobs else [])]
        )
        return hashlib.sha256(payload).hexdigest()

    def get(self, key: str) -> Completion | None:
        if self._failed:
            return None
        try:
            with self._lock:
                if self._closed:
                    return None
                row = self._db.execute("SELECT completion FROM calls WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as error:
            self._gave_up(error)
            return None
        if not row:
            return None
        stored = orjson.loads(row[0])
        if stored.get("token_logprobs") is not None:
            stored["token_logprobs"] = [tuple(pair) for pair in stored["token_logprobs"]]
        return Completion(**stored)

    def put(self, key: str, completion: Completion) -> None:
        if self._failed:
            return
        try:
            with self._lock:
                if self._closed:
                    return
                with self._db:
                    record = orjson.dumps(completion.record())
                    self._db.execute("INSERT OR REPLACE INTO calls VALUES (?, ?)", (key, record))
        except sqlite3.Error as error:
            self._gave_up(error)

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def close(self) -> None:
        """Waits for a statement in flight; later calls go on without the cache. A call a worker thread was left
        making after Ctrl-C may end while the command closes this, and a connection closed under a statement
        crashes the process in C (lm/state.py's PromptStates.close says how it was seen)."""
        with self._lock:
            self._closed = True
            self._db.close()


class CachedModel(LanguageModel):
    """Wraps a model; sampled calls (temperature > 0) are never cached."""

    def __init__(self, inner: LanguageModel, cache: CallCache) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.context_length = inner.context_length
        self.threads = inner.threads

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def parameters(self) -> int | None:
        return self.inner.parameters

    def fingerprint(self) -> dict[str, Any]:
        return self.inner.fingerprint()

    @property
    def seq2seq(self) -> bool:
        return self.inner.seq2seq

    def _call(
        self,
        kind: str,
        prompt: Messages,
        max_tokens: int,
        stop: Sequence[str],
        temperature: float,
        logprobs: bool,
        stop_when: StopWhen | None,
        keep: int = 0,
        seed: int | None = None,
    ) -> Completion:
        """A generation that ended on its own is stored under the call's key, and also serves a call
        that would have stopped early (it goes on past the stopping point, which such callers
        ignore); one that `stop_when` cut short is stored under a key that names the test."""

        def call(
            prompt: Messages,
            max_tokens: int,
            stop: Sequence[str],
            temperature: float,
            logprobs: bool,
            stop_when: StopWhen | None,
        ) -> Completion:
            sampled = {"seed": seed} if seed is not None else {}  # an LM of a plug-in may take no seed
            if kind == "chat":
                return self.inner.chat(prompt, max_tokens, stop, temperature, logprobs, stop_when, keep, **sampled)
            assert isinstance(prompt, str)
            return self.inner.complete(prompt, max_tokens, stop, temperature, logprobs, stop_when, keep, **sampled)

        if temperature > 0:
            return call(prompt, max_tokens, stop, temperature, logprobs, stop_when)
        whole = CallCache.key(self.identity, kind, prompt, max_tokens, stop, temperature, logprobs)
        stopped = (
            CallCache.key(
                self.identity,
                kind,
                prompt,
                max_tokens,
                [*stop, f"stop_when:{stop_when.__qualname__}"],
                temperature,
                logprobs,
            )
            if stop_when
            else None
        )
        for key in (whole, stopped):
            if key is not None and (hit := self.cache.get(key)) is not None:
                return replace(hit, cached=True)
        completion = call(prompt, max_tokens, stop, temperature, logprobs, stop_when)
        self.cache.put(stopped if completion.finish_reason == "stop_when" and stopped else whole, completion)
        return completion

    def complete(
        self,
        prompt: str,
        max_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        logprobs: bool = False,
        stop_when: StopWhen | None = None,
        keep: int = 0,
        seed: int | None = None,
    ) -> Completion:
        return self._call("complete", prompt, max_tokens, stop, temperature, logprobs, stop_when, keep, seed)

    def chat(
        self,
        messages: Messages,
        max_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        logprobs: bool = False,
        stop_when: StopWhen | None = None,
        keep: int = 0,
        seed: int | None = None,
    ) -> Completion:
        return self._call("chat", messages, max_tokens, stop, temperature, logprobs, stop_when, keep, seed)

    def chat_prompt(self, messages: Messages) -> str | None:
        return self.inner.chat_prompt(messages)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def close(self) -> None:
        self.inner.close()
        self.cache.close()
