"""The server's endpoints: mhindex's own JSON API and the peers' protocols, in one route table.

Each handler reads what it serves from `request.app.state` (set up by `app.make_app`): the
retriever, the limits, the corpus names it answers to, ColBERT's line numbers. Searches run in
worker threads, at most `limits.workers` at once. A refusal or a failure is answered in the
handler's protocol's error shape (errors.py) and noted for the access log as one line.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from mhindex.backends.base import search_titles
from mhindex.errors import MhindexError, one_line
from mhindex.server.backlog import Shutdown
from mhindex.server.errors import Refused, error_body
from mhindex.server.limits import MAX_TITLES
from mhindex.server.protocols import (
    DEFAULT_K,
    FLASHRAG_FIELDS,
    SINGLE_FIELDS,
    accessed_title,
    colbert_answer,
    field,
    flashrag_answer,
    hits_wanted,
    ircot_request,
    ircot_retrieve,
    only_fields,
    query_k,
    r1_searcher_answer,
    retrieve_dialect,
    search_r1_answer,
    single_query_answer,
    strings,
)

Handler = Callable[[Request], Awaitable[Response]]
PAGE_PARAGRAPHS = 1_000  # the most paragraphs of one page ASearcher's /access returns


def reply(value: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(value), status_code=status, media_type="application/json")


def note(request: Request, message: str) -> None:
    """A line for the access log about what went wrong with this request."""
    request.scope["mhindex.error"] = message


def answers(protocol: str) -> Callable[[Handler], Handler]:
    """The handler's refusals and failures become its protocol's error answer, never a traceback."""

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except Refused as refused:
                note(request, str(refused))
                answer = reply(error_body(protocol, str(refused)), refused.status)
                if refused.retry_after is not None:
                    answer.headers["Retry-After"] = str(refused.retry_after)
                return answer
            except ClientDisconnect:
                note(request, "the client disconnected before its request was read")
                return Response(status_code=499)  # nobody reads it: the status is for the log
            except HungUp:
                note(request, "the client hung up during its search: the rest of its batch was not searched")
                return Response(status_code=499)
            except asyncio.CancelledError:
                if not request.app.state.stopping.is_set():
                    raise
                # uvicorn cancels what is left when the shutdown's grace is over: one answer and one log line,
                # not "Exception in ASGI application" and its traceback
                message = "the server stopped before this search was done; retry on another"
                note(request, message)
                return reply(error_body(protocol, message), 503)
            except Exception as error:  # noqa: BLE001 - a failing search is one error answer and one log line
                reason = (
                    f"{type(error).__name__}: {error}" if isinstance(error, MhindexError) else one_line(error)
                )  # ours are one line already
                message = f"the search failed: {reason}"
                note(request, message)
                return reply(error_body(protocol, message), 500)

        return run

    return decorate


STOPPING = "the server is stopping: this search was not begun; retry on another"


class HungUp(Exception):
    """The client went away while its batch was being searched: the rest of it is not searched."""


async def in_thread(
    request: Request, function: Callable[..., Any], *args: Any, queries: int = 1, admit: bool = True, **kwargs: Any
) -> Any:
    """A search of the request's, admitted by the server's one policy (`admitted`)."""
    return await admitted(request.app.state, function, *args, queries=queries, admit=admit, **kwargs)


async def admitted(
    state: Any, function: Callable[..., Any], *args: Any, queries: int = 1, admit: bool = True, **kwargs: Any
) -> Any:
    """Run a search of `queries` in a worker thread, so that a slow one does not hold up the others; waiting its
    turn behind more than `max_waiting` others, or (a request's first search: `admit`) longer than `max_wait_ms`
    by the backlog's estimate, is refused at once (503, Retry-After), not queued without end. The limiter wakes its
    waiters in the order they came. The one admission of every search the server makes: HTTP's, every dialect's,
    and MCP's tools'."""
    limiter, backlog = state.searches, state.backlog
    waiting = limiter.statistics().tasks_waiting
    if waiting >= state.limits.max_waiting:
        raise Refused(f"the server is busy: {waiting} searches are waiting for a worker; retry in a second", 503, 1)
    if admit and (wait := backlog.over()) is not None:
        raise Refused(f"the server is busy: a search would wait about {wait:.1f} s for a worker (mhindex serve "
                      f"--max-wait-ms {state.limits.max_wait_ms:g}); retry in a second", 503, 1)  # fmt: skip
    run, leave = backlog.queued(functools.partial(function, *args, **kwargs), queries)
    try:
        await _worker(state.stopping, limiter)
        try:  # (the worker is taken: the threads' own limiter, as large, never makes it wait again)
            return await anyio.to_thread.run_sync(run, limiter=state.threads)
        finally:
            limiter.release()
    finally:
        leave()  # a search given up before a worker took it no longer waits


async def _worker(stopping: Shutdown, limiter: anyio.CapacityLimiter) -> None:
    """Wait for a worker (in the order searches came), or be refused when a shutdown begins: the wait is the
    server's limiter's own, taken here rather than by the thread pool, so that a shutdown can wake it."""
    if stopping.is_set():
        raise Refused(STOPPING, 503, 1)
    waiting = anyio.CancelScope()
    stopping.waiting.add(waiting)
    try:
        with waiting:
            await limiter.acquire()
    finally:
        stopping.waiting.discard(waiting)
    if waiting.cancelled_caught:
        raise Refused(STOPPING, 503, 1)


async def search_many(request: Request, queries: list[str], k: int) -> list[Any]:
    """A batch's searches, `batch_chunk` queries at a time, each chunk taking its turn for a worker as a single
    search does: a request of thousands of queries does not starve the others. A client that hung up is not
    searched for any further."""
    state = request.app.state
    chunk, results = state.limits.batch_chunk, list[Any]()

    async def searched(queries: Sequence[str], k: int, admit: bool) -> list[Any]:
        found = await in_thread(request, state.retriever.search_many, list(queries), k, queries=len(queries),
                                admit=admit)  # fmt: skip
        return list(found)

    for start in range(0, len(queries), chunk):
        if start and await request.is_disconnected():
            raise HungUp()
        part = queries[start : start + chunk]
        search = functools.partial(searched, admit=not start)  # a request is admitted (or not) at its first chunk
        results += await (state.gatherer.search(search, part, k) if state.gatherer else search(part, k))
    return results


async def json_body(request: Request) -> Any:
    data = await request.body()  # the size and time limits apply as it arrives (app.Guard)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise Refused(f"the request body is not JSON: {error}") from None


def batch(request: Request, queries: list[str] | None) -> list[str]:
    limit = request.app.state.limits.max_batch
    if queries is not None and len(queries) > limit:
        raise Refused(
            f"{len(queries)} queries in one request; this server takes at most {limit} (mhindex serve --max-batch)", 413
        )
    return queries or []


# -- mhindex's own API ------------------------------------------------------------------------


@answers("mhindex")
async def health(request: Request) -> Response:
    return reply({"status": "ok"})


@answers("mhindex")
async def about(request: Request) -> Response:
    state = request.app.state
    return reply({**state.info, "limits": state.limits.public()})


@answers("mhindex")
async def search(request: Request) -> Response:
    state = request.app.state
    body = await json_body(request)
    if isinstance(body, dict) and ("top_n" in body or "return_score" in body):  # FlashRAG's server (ReCall's client)
        return await _flashrag(request, body, many=False)
    only_fields(body, ("query", "k", "titles"), "POST /search")
    query = field(body, "query", str)
    k = hits_wanted(field(body, "k", int, None), "k", DEFAULT_K["mhindex"], state.limits.max_k)
    titles = strings(body, "titles")
    if titles is not None and len(titles) > MAX_TITLES:
        raise Refused(f"field 'titles' names at most {MAX_TITLES:,} titles, not {len(titles):,}")
    if k and titles is None and state.gatherer is not None:  # searched with other requests' queries
        hits = (await search_many(request, [query], k))[0]
    else:
        hits = await in_thread(request, state.retriever.search, query, k, titles=titles) if k else []
    return reply({"query": query, "hits": [h.record() for h in hits]})


@answers("mhindex")
async def search_batch(request: Request) -> Response:
    state = request.app.state
    body = await json_body(request)
    only_fields(body, ("queries", "k"), "POST /search/batch")
    queries = batch(request, strings(body, "queries", required=True))
    k = hits_wanted(field(body, "k", int, None), "k", DEFAULT_K["mhindex"], state.limits.max_k)
    results = await search_many(request, queries, k) if queries and k else [[] for _ in queries]
    return reply(
        {
            "results": [
                {"query": q, "hits": [h.record() for h in hits]} for q, hits in zip(queries, results, strict=True)
            ]
        }
    )


# -- IRCoT and Search-R1: both POST /retrieve, told apart by their bodies ----------------------


@answers("ircot")  # Search-R1's server is FastAPI too: the same {"detail": ...} errors
async def retrieve(request: Request) -> Response:
    body = await json_body(request)
    dialect = retrieve_dialect(body)
    if dialect == "search-r1":
        return await _search_r1(request, body)
    if dialect == "single":
        return await _single_query(request, body)
    return await _ircot(request, body)


async def _ircot(request: Request, body: Any) -> Response:
    state = request.app.state
    started = time.perf_counter()
    arguments = ircot_request(body, state.corpus_names, state.limits.max_k)
    titles_of = functools.partial(search_titles, state.retriever)
    retrieval = await in_thread(request, ircot_retrieve, arguments, state.retriever.search, titles_of)
    return reply({"retrieval": retrieval, "time_in_seconds": round(time.perf_counter() - started, 1)})


async def _search_r1(request: Request, body: dict) -> Response:
    state = request.app.state
    queries = batch(request, strings(body, "queries", required=True))
    k = hits_wanted(
        field(body, "topk", int, None), "topk", DEFAULT_K["search-r1"], state.limits.max_k, zero_is_default=True
    )
    with_scores = bool(field(body, "return_scores", (bool, int), False))
    results = await search_many(request, queries, k) if queries else []
    return reply(search_r1_answer(results, with_scores, state.corpus_names[0] if state.corpus_names else ""))


async def _single_query(request: Request, body: dict) -> Response:
    """SkyRL's and rllm's one query a request (protocols.single_query_answer): up to 256 workers at once, each
    searched with the others' queries where the server gathers them (`--gather-ms`)."""
    state = request.app.state
    only_fields(body, SINGLE_FIELDS, "POST /retrieve with one query")
    query = field(body, "query", str)
    named = [name for name in ("topk", "top_k", "k") if body.get(name) is not None]
    wanted = field(body, named[0], int) if named else None
    k = hits_wanted(wanted, named[0] if named else "topk", DEFAULT_K["search-r1"], state.limits.max_k,
                    zero_is_default=True)  # fmt: skip
    with_scores = bool(field(body, "return_scores", (bool, int), False))
    hits = (await search_many(request, [query], k))[0] if query.strip() else []
    corpus = state.corpus_names[0] if state.corpus_names else ""
    return reply(single_query_answer(query, hits, with_scores, state.info.get("backend", "mhindex"), corpus))


async def _flashrag(request: Request, body: dict, many: bool) -> Response:
    """FlashRAG's retrieval server as ReCall and ReSearch serve it (protocols.flashrag_answer)."""
    state = request.app.state
    only_fields(body, FLASHRAG_FIELDS, "FlashRAG's " + ("/batch_search" if many else "/search"))
    if many:
        queries = batch(request, strings(body, "query", required=True))
    else:
        queries = [field(body, "query", str)]
        if not queries[0].strip():  # as its server answers an empty query
            raise Refused("Query content cannot be empty")
    k = hits_wanted(field(body, "top_n", int, None), "top_n", 10, state.limits.max_k)
    with_scores = bool(field(body, "return_score", (bool, int), False))
    results = await search_many(request, queries, k) if queries and k else [[] for _ in queries]
    return reply(flashrag_answer(results, with_scores, many))


@answers("ircot")  # FastAPI's {"detail"} errors, as ReCall's server is FastAPI
async def flashrag_batch(request: Request) -> Response:
    return await _flashrag(request, await json_body(request), many=True)


@answers("ircot")  # its server is Flask; a refusal here says why in FastAPI's shape, which it never reads
async def r1_searcher(request: Request) -> Response:
    """R1-Searcher's `/queries` (protocols.r1_searcher_answer)."""
    state = request.app.state
    body = await json_body(request)
    only_fields(body, ("queries", "k"), "R1-Searcher's /queries")
    queries = batch(request, strings(body, "queries", required=True))
    k = hits_wanted(field(body, "k", int, None), "k", 3, state.limits.max_k)  # its server's default: 3
    results = await search_many(request, queries, k) if queries and k else [[] for _ in queries]
    return reply(r1_searcher_answer(queries, results, state.positions))


@answers("ircot")
async def access(request: Request) -> Response:
    """ASearcher's `/access {"urls"}`: each url's page (a `page_url` from a search's documents, or a title), as
    `{"url", "title", "contents"}` with the page's paragraphs in corpus order, "Title"\n first as in
    `/retrieve`'s documents; None for a url this corpus has no page for, as ASearcher's server answers."""
    state = request.app.state
    body = await json_body(request)
    only_fields(body, ("urls",), "ASearcher's /access")
    urls = batch(request, strings(body, "urls", required=True))
    corpus = state.corpus_names[0] if state.corpus_names else ""

    def page(url: str) -> dict | None:
        title = accessed_title(url, corpus)
        hits = state.retriever.search("", PAGE_PARAGRAPHS, titles=[title]) if title else []
        if not hits:
            return None
        hits = sorted(hits, key=lambda hit: state.positions(hit.id))
        text = "\n".join(hit.text for hit in hits)
        return {"url": url, "title": hits[0].title, "contents": f'"{hits[0].title}"\n{text}'}

    return reply({"result": [await in_thread(request, page, url) for url in urls]})


# -- ColBERT (and DSPy's ColBERTv2 client, which may use the server's root URL) ---------------


@answers("colbert")
async def colbert(request: Request) -> Response:
    state = request.app.state
    cap = state.limits.max_k
    if request.method == "POST":  # DSPy's ColBERTv2(post_requests=True)
        body = await json_body(request)
        query = field(body, "query", str)
        k = hits_wanted(field(body, "k", int, None), "k", DEFAULT_K["colbert"], cap)
    else:
        query = request.query_params.get("query")
        if query is None:
            raise Refused("query parameter 'query' is missing")
        k = query_k(request.query_params.get("k"), DEFAULT_K["colbert"], cap)

    def answer() -> dict:
        hits = state.retriever.search(query, k) if k else []
        return colbert_answer(query, hits, state.positions)

    return reply(await in_thread(request, answer))


@answers("colbert")
async def root(request: Request) -> Response:
    """DSPy's client may be given the server's root URL: a search there is ColBERT's; anything
    else is told what this server is and where its endpoints are."""
    if request.method == "POST" or "query" in request.query_params:
        return await colbert(request)
    state = request.app.state
    return reply(
        {
            "message": f"mhindex serve: the {state.info.get('backend')} index of corpus '{state.info.get('corpus')}'",
            "endpoints": {e.path: f"{', '.join(e.methods)}: {e.about}" for e in ENDPOINTS},
        }
    )


@dataclass(frozen=True)
class Endpoint:
    path: str
    methods: tuple[str, ...]
    handler: Handler
    protocol: str  # whose error shape a refusal of this path takes
    about: str


ENDPOINTS = (
    Endpoint(
        "/",
        ("GET", "POST"),
        root,
        "colbert",
        "this page; with ?query= (or a POST), ColBERT's search, for DSPy's ColBERTv2(url=...)",
    ),
    Endpoint("/health", ("GET",), health, "mhindex", "mhindex: {'status': 'ok'}"),
    Endpoint("/info", ("GET",), about, "mhindex", "mhindex: corpus, backend, index options, limits"),
    Endpoint(
        "/search",
        ("POST",),
        search,
        "mhindex",
        'mhindex: {"query", "k", "titles"} -> {"query", "hits"}; FlashRAG\'s {"query", "top_n", "return_score"}',
    ),
    Endpoint("/search/batch", ("POST",), search_batch, "mhindex", 'mhindex: {"queries", "k"} -> {"results"}'),
    Endpoint(
        "/retrieve/",
        ("POST",),
        retrieve,
        "ircot",
        'IRCoT: {"retrieval_method", "query_text", "max_hits_count", ...}; Search-R1: {"queries", "topk", '
        '"return_scores"}',
    ),
    Endpoint("/retrieve", ("POST",), retrieve, "ircot", "the same as /retrieve/"),
    Endpoint("/api/search", ("GET", "POST"), colbert, "colbert", "ColBERT: ?query=&k= -> {'query', 'topk'}"),
    Endpoint(
        "/batch_search",
        ("POST",),
        flashrag_batch,
        "ircot",
        'FlashRAG (ReCall, ReSearch): {"query": [...], "top_n", "return_score"} -> [[{"id", "contents"}]]',
    ),
    Endpoint(
        "/queries",
        ("POST",),
        r1_searcher,
        "ircot",
        'R1-Searcher: {"queries", "k"} -> {"queries", "answers": [["LINE\\tTitle: T Text: text"]]}',
    ),
    Endpoint(
        "/access",
        ("POST",),
        access,
        "ircot",
        'ASearcher: {"urls": [...]} -> {"result": [{"url", "title", "contents"} | null]}',
    ),
)
_PROTOCOLS = {e.path: e.protocol for e in ENDPOINTS}


def protocol_of(path: str) -> str:
    return _PROTOCOLS.get(path, "mhindex")
