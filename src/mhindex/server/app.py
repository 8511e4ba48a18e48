"""`mhindex serve`: one built index shared over HTTP, in mhindex's own JSON API and in the
protocols of IRCoT's, ColBERT's and Search-R1's retrieval servers (see protocols.py).

Starlette on uvicorn. Searches run in a pool of worker threads (the Lucene searcher and FAISS
are safe to share between threads), so one slow query does not hold up the others. Requests are
bounded in size, batch length and k; an API key, when set, is required as `Authorization: Bearer
KEY` or `X-API-Key: KEY`. Each request is one JSON line on stderr unless --quiet.

Own API:
    GET  /health                      {"status": "ok"}
    GET  /info                        corpus, backend, paragraph count, index options, limits
    POST /search                      {"query", "k"?, "titles"?} -> {"query", "hits": [{"id", "title", "text", "score"}]}
    POST /search/batch                {"queries": [...], "k"?} -> {"results": [{"query", "hits"}]}
"""

from __future__ import annotations

import secrets
import sys
import time
from dataclasses import dataclass
from typing import Any

import orjson

from mhindex.server.protocols import BadRequest, colbert_answer, field, ircot_answer, search_r1_answer


@dataclass(frozen=True)
class Limits:
    max_k: int = 100
    max_batch: int = 256
    max_body_bytes: int = 1_000_000
    threads: int = 4


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def make_app(retriever: Any, info: dict, limits: Limits = Limits(), api_key: str | None = None, positions: Any = None, access_log: bool = True):
    """The ASGI application over an open retriever. `positions(id) -> int` gives ColBERT's pid."""
    import anyio
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    workers = anyio.CapacityLimiter(limits.threads)

    def reply(value: Any, status: int = 200) -> Response:
        return Response(orjson.dumps(value), status_code=status, media_type="application/json")

    async def run(function, *args, **kwargs):
        return await anyio.to_thread.run_sync(lambda: function(*args, **kwargs), limiter=workers)

    def check_k(k: int, name: str) -> int:
        if k < 1 or k > limits.max_k:
            raise BadRequest(f"{name} should be between 1 and {limits.max_k}")
        return k

    async def body_of(request: Request) -> Any:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
            raise _Refused(413, f"the request body is over {limits.max_body_bytes:,} bytes")
        received = bytearray()
        async for chunk in request.stream():
            received += chunk
            if len(received) > limits.max_body_bytes:
                raise _Refused(413, f"the request body is over {limits.max_body_bytes:,} bytes")
        try:
            return orjson.loads(received)
        except orjson.JSONDecodeError as error:
            raise BadRequest(f"the request body is not JSON: {error}") from None

    def queries_of(values: Any, name: str) -> list[str]:
        if not isinstance(values, list) or not all(isinstance(q, str) for q in values):
            raise BadRequest(f"field '{name}' should be a list of strings")
        if len(values) > limits.max_batch:
            raise BadRequest(f"{len(values)} queries in one request; at most {limits.max_batch}")
        return values

    async def health(request: Request) -> Response:
        return reply({"status": "ok"})

    async def about(request: Request) -> Response:
        return reply({**info, "limits": {"max_k": limits.max_k, "max_batch": limits.max_batch, "max_body_bytes": limits.max_body_bytes}})

    async def search(request: Request) -> Response:
        body = await body_of(request)
        query = field(body, "query", str)
        k = check_k(field(body, "k", int, 10), "k")
        titles = field(body, "titles", list, None)
        hits = await run(retriever.search, query, k, titles=titles)
        return reply({"query": query, "hits": [h.record() for h in hits]})

    async def search_batch(request: Request) -> Response:
        body = await body_of(request)
        queries = queries_of(field(body, "queries", list), "queries")
        k = check_k(field(body, "k", int, 10), "k")
        results = await run(retriever.search_many, queries, k) if queries else []
        return reply({"results": [{"query": q, "hits": [h.record() for h in hits]} for q, hits in zip(queries, results)]})

    async def retrieve(request: Request) -> Response:
        """IRCoT's `/retrieve/` and Search-R1's `/retrieve`, told apart by their bodies."""
        body = await body_of(request)
        if isinstance(body, dict) and "queries" in body:
            queries = queries_of(body["queries"], "queries")
            k = check_k(field(body, "topk", int, 3), "topk")
            results = await run(retriever.search_many, queries, k) if queries else []
            return reply(search_r1_answer(results, bool(body.get("return_scores"))))
        started = time.perf_counter()
        if isinstance(body, dict):
            check_k(field(body, "max_hits_count", int, 3), "max_hits_count")
        retrieval = await run(ircot_answer, body, retriever.search, info.get("corpus", ""))
        return reply({"retrieval": retrieval, "time_in_seconds": round(time.perf_counter() - started, 1)})

    async def colbert(request: Request) -> Response:
        query = request.query_params.get("query")
        if not query:
            raise BadRequest("query parameter 'query' is missing")
        k_text = request.query_params.get("k") or "10"
        if not k_text.isdigit():
            raise BadRequest("query parameter 'k' should be a whole number")
        k = min(int(k_text), limits.max_k)  # ColBERT's own server caps k (at 100) rather than refusing
        hits = await run(retriever.search, query, max(1, k))
        return reply(colbert_answer(query, hits, positions or (lambda _id: -1)))

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/info", about, methods=["GET"]),
        Route("/search", search, methods=["POST"]),
        Route("/search/batch", search_batch, methods=["POST"]),
        Route("/retrieve/", retrieve, methods=["POST"]),
        Route("/retrieve", retrieve, methods=["POST"]),
        Route("/api/search", colbert, methods=["GET"]),
    ]

    def authorised(headers) -> bool:
        if api_key is None:
            return True
        given = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
        return secrets.compare_digest(given.encode(), api_key.encode())

    class Guard:
        """API key, one-line errors for refused requests, and the JSON access log."""

        def __init__(self, app) -> None:
            self.app = app

        async def __call__(self, scope, receive, send) -> None:
            if scope["type"] != "http":
                return await self.app(scope, receive, send)
            started, status = time.perf_counter(), [500]

            async def sending(message) -> None:
                if message["type"] == "http.response.start":
                    status[0] = message["status"]
                await send(message)

            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            try:
                if authorised(headers):
                    await self.app(scope, receive, sending)
                else:
                    await reply({"error": "a valid API key is required (Authorization: Bearer KEY or X-API-Key: KEY)"}, 401)(scope, receive, sending)
            finally:
                if access_log:
                    line = {"time": round(time.time(), 3), "method": scope.get("method"), "path": scope.get("path"), "status": status[0], "ms": round((time.perf_counter() - started) * 1000, 2)}
                    sys.stderr.write(orjson.dumps(line).decode() + "\n")

    async def refused(request: Request, error: Exception) -> Response:
        return reply({"error": str(error)}, error.status if isinstance(error, _Refused) else 400)

    return Guard(Starlette(routes=routes, exception_handlers={BadRequest: refused, _Refused: refused}))


def serve(app, host: str, port: int) -> None:
    """Run until Ctrl-C or SIGTERM; uvicorn finishes the requests in flight before it stops."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, timeout_graceful_shutdown=10)
