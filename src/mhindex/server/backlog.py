"""How long a new request would wait for a worker: the queries queued ahead of it times the seconds a query has
taken lately, over the workers. Past `--max-wait-ms` a request is refused at once (503, Retry-After) rather than
queued, so that under more traffic than the server can take, the requests it does answer stay about as fast as at
the rate it sustains (RL rollouts time out after 30 s and retry a 503: a quick refusal costs them less than a
long wait). The count of waiting searches (`--max-waiting`) bounds the queue's length; this bounds its time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import anyio

T = TypeVar("T")

#: the weight of the latest search in the running estimate of a query's seconds (an exponential average)
WEIGHT = 0.1


class Backlog:
    def __init__(self, workers: int, max_wait: float, per_query: float = 0.0) -> None:
        self.workers, self.max_wait = workers, max_wait
        self.waiting = 0  # queries queued for a worker
        self.per_query = per_query  # seconds a query has taken lately (the server times one before it serves)
        self._lock = threading.Lock()

    def wait(self) -> float:
        """Seconds a request arriving now would wait for a worker, as things stand."""
        return self.waiting * self.per_query / self.workers

    def over(self) -> float | None:
        """The estimated wait where it is past `max_wait` (a limit of 0 is none), else None."""
        wait = self.wait()
        return wait if self.max_wait and wait > self.max_wait else None

    def queued(self, function: Callable[[], T], queries: int) -> tuple[Callable[[], T], Callable[[], None]]:
        """`function` counted as `queries` waiting until a worker starts it, and timed there; and what to call
        once the search is over or given up (a request cancelled before a worker took it is uncounted there)."""
        started = threading.Event()
        with self._lock:
            self.waiting += queries

        def leave() -> None:
            with self._lock:
                if not started.is_set():
                    started.set()
                    self.waiting -= queries

        def run() -> T:
            leave()
            began = time.perf_counter()
            result = function()
            seconds = (time.perf_counter() - began) / max(1, queries)
            with self._lock:
                self.per_query = seconds if not self.per_query else (1 - WEIGHT) * self.per_query + WEIGHT * seconds
            return result

        return run, leave


class Shutdown:
    """A stopping server, as its searches see it: once begun, no search begins, and those waiting for a worker are
    woken to be refused at once (503) instead of waiting out the grace uvicorn gives the ones in flight. Begun in
    the event loop (server.app.serve); read from worker threads too."""

    def __init__(self) -> None:
        self._begun = threading.Event()
        self.waiting: set[anyio.CancelScope] = set()  # each search waiting for a worker

    def begin(self) -> None:
        self._begun.set()
        for scope in list(self.waiting):
            scope.cancel()

    def is_set(self) -> bool:
        return self._begun.is_set()
