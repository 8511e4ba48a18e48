"""What one server takes on: `mhindex serve`'s options are these fields (kept apart from the app so that
the command line reads them without loading the server)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mhindex.options import option

#: the most titles one search's scope may name, over HTTP and MCP alike (IRCoT names a handful; 4,096 is a batch's
#: most queries)
MAX_TITLES = 4096

#: how a client gives the key `serve --api-key` requires (server/app.py's Guard reads them all)
API_KEY_HELP = (
    "Require this key: Authorization: Bearer KEY, X-API-Key, http://key:KEY@HOST, /k/KEY/... or ?api_key=KEY "
    "\\[default: $MHINDEX_API_KEY, else none]."
)


@dataclass(frozen=True)
class Limits:
    # More is answered with this many, as ColBERT's server caps k at 100.
    max_k: int = option(100, "Most paragraphs a query gets; asking for more gets this many.", min=1)
    # Search-R1's training sends 512 queries a search step (PPO) or 2,560 (GRPO) in one request.
    max_batch: int = option(4096, "Most queries in one batch request (Search-R1's GRPO sends 2,560).", min=1)
    max_body_bytes: int = 8_000_000
    body_seconds: float = 30.0  # a request body must arrive within this time
    workers: int = option(4, "Searches run at once (in threads).", min=1, max=256)
    # A batch is searched a chunk at a time, each chunk queued for a worker as a single search is: a request of
    # thousands of queries then holds a worker for one chunk's time, not its whole batch's (RL rollouts send
    # batches of 1-16 queries beside Search-R1's 512-2,560).
    batch_chunk: int = option(64, "A batch is searched this many queries at a time, its turn shared fairly.", min=1)
    # Off by default: measured on two cores with MiniLM, one batch in one thread lost to four threads each encoding
    # its own request (benchmarks/results/bench_serve_gather.txt); it pays where the encoder dominates (a GPU).
    gather_ms: float = option(
        0.0, "Queries of requests arriving within this many ms are searched as one batch (dense, Milvus, hybrid; "
        "Lucene with --threads above 1); 0: each request alone.", min=0.0, max=1000.0,
    )  # fmt: skip
    # verl's search tool sends from 120 workers by default: the queue holds them; past it, 503 and Retry-After.
    max_waiting: int = option(
        512, "Searches waiting for a worker, at most; more is answered 503 with Retry-After (never queued).", min=1
    )

    # RL rollout workers are a closed population (verl: 120, each waiting for its answer), so their queue is bounded
    # by their number, and refusing them only adds verl's retry sleeps (at 5 s, 120 workers on five million passages
    # were refused hundreds of times); past their number (more trainers, bursts) the queue's time grows without
    # end. 10 s, a third of verl's 30 s timeout, answers an overload before its clients give up; 1 s holds its
    # answered p99 near the sustainable one (benchmarks/results/bench_rl_load.txt has each).
    max_wait_ms: float = option(
        10000.0, "A request that would wait longer than this for a worker (the queries ahead of it times their recent "
        "seconds) is answered 503 with Retry-After at once; 0: no limit.", min=0.0,
    )  # fmt: skip

    def public(self) -> dict[str, Any]:
        return {"max_k": self.max_k, "max_batch": self.max_batch, "max_body_bytes": self.max_body_bytes,
                "batch_chunk": self.batch_chunk, "max_waiting": self.max_waiting,
                "max_wait_ms": self.max_wait_ms}  # fmt: skip
