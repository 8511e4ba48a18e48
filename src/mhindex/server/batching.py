"""Searches of concurrent requests searched together, for the engines that answer a batch in one pass (a dense
encoder's one forward pass and one FAISS search; Milvus's one request; Anserini's threaded batch): an RL
rollout's workers each send a few queries at a time, and searched one request at a time the encoder runs on
batches of one.

A request's queries join the batch being gathered; the batch is searched once it holds `most` queries, or
`window` seconds after its first query came, whichever is first, in one worker thread as any search is (so the
server's queue and its 503 apply to it), and each request gets its own queries' hits back. Lucene's batch runs
on Anserini's own threads (`--threads`), where single searches go one at a time: gathered, 120 RL clients on a
million passages got 134 requests/s against 95 (benchmarks/results/bench_rl_load.txt). The server gathers only
for the engines that say they batch (`Backend.batches`), and only when asked (`--gather-ms`): on two cores with
the MiniLM encoder, one batch encoded in one thread lost to four threads each encoding its own request
(benchmarks/results/bench_serve_gather.txt).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

Search = Callable[[Sequence[str], int], Awaitable[list[Any]]]


class Gatherer:
    """Gathers queries into batches for `search(queries, k)` (the server's worker-thread search)."""

    def __init__(self, window: float, most: int) -> None:
        self.window, self.most = window, most
        self._pending: list[tuple[list[str], int, asyncio.Future[list[Any]]]] = []
        self._count = 0
        self._timer: asyncio.TimerHandle | None = None
        self._running: set[asyncio.Task[None]] = set()

    async def search(self, search: Search, queries: list[str], k: int) -> list[Any]:
        """`queries`' hits, `k` each, searched in a batch with whatever other requests' queries came with them."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Any]] = loop.create_future()
        self._pending.append((queries, k, future))
        self._count += len(queries)
        if self._count >= self.most:
            self._flush(search)
        elif self._timer is None:
            self._timer = loop.call_later(self.window, self._flush, search)
        return await future

    def _flush(self, search: Search) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        taken, self._pending, self._count = self._pending, [], 0
        if taken:
            task = asyncio.ensure_future(self._run(search, taken))
            self._running.add(task)  # held until done: the loop keeps only a weak reference to a task
            task.add_done_callback(self._running.discard)

    @staticmethod
    async def _run(search: Search, taken: list[tuple[list[str], int, asyncio.Future[list[Any]]]]) -> None:
        queries = [query for asked, _, _ in taken for query in asked]
        try:
            found = await search(queries, max(k for _, k, _ in taken))  # a ranking's top k is its first k
        except BaseException as error:  # noqa: BLE001 - each request answers with it (a 503, a failed search)
            for _, _, future in taken:
                if not future.done():
                    future.set_exception(error)
            return
        at = 0
        for asked, k, future in taken:
            if not future.done():  # a request whose client went away was cancelled
                future.set_result([hits[:k] for hits in found[at : at + len(asked)]])
            at += len(asked)
