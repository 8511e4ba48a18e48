"""`mhindex serve`: one built index shared over HTTP, in mhindex's own JSON API and in the
protocols of IRCoT's, ColBERT's and Search-R1's retrieval servers (routes.py, protocols.py).

Starlette on uvicorn. In front of the routes, one middleware (`Guard`) checks the API key, bounds
the request body in size and in time, and writes the access log. The key may come the ways the
peers' clients can send it, none of which needs them changed: `Authorization: Bearer KEY`,
`X-API-Key: KEY`, HTTP basic auth (`http://key:KEY@HOST:PORT`, which IRCoT's host setting and
`requests` carry), a path prefix (`http://HOST:PORT/k/KEY/retrieve`) or a query parameter
(`?api_key=KEY`). The key never reaches the log: it holds the path without the prefix, and no
query string.
"""

from __future__ import annotations

import base64
import binascii
import errno
import functools
import secrets
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode

import anyio
import orjson

from mhindex.errors import UsageError, redact
from mhindex.server.backlog import Backlog, Shutdown
from mhindex.server.batching import Gatherer
from mhindex.server.errors import Refused, error_body
from mhindex.server.limits import Limits
from mhindex.server.routes import ENDPOINTS, protocol_of, reply


def checked_key(given: str | None, environment: dict[str, str]) -> str | None:
    """The API key to require: `--api-key`, else $MHINDEX_API_KEY; an empty one is refused however it is given
    (click reads an empty variable as no value at all, which would serve without a key)."""
    if given is None and "MHINDEX_API_KEY" in environment:
        given = environment["MHINDEX_API_KEY"]
    if given is not None and not given.strip():
        raise UsageError("--api-key (or $MHINDEX_API_KEY) is empty: give a key, or leave it unset to serve without one")
    return given


def index_info(corpus: Any, backend: str, settings: Any, fingerprint: dict[str, Any] | None = None) -> dict[str, Any]:
    """What `/info` (and each protocol's metadata) says of the served index; its `fingerprint` (the corpus and
    the retrieval environment) is what `mhindex diff` compares."""
    manifest = corpus.manifest()
    return {
        "corpus": corpus.name,
        "dataset": manifest.get("dataset"),
        "paragraphs": manifest.get("counts", {}).get("paragraphs"),
        "corpus_sha256": manifest.get("corpus_sha256"),
        "backend": backend,
        "index": settings,
        "fingerprint": {"corpus": corpus.fingerprint(), "retrieval": fingerprint},
    }


def make_app(
    retriever: Any,
    info: dict,
    limits: Limits = Limits(),
    api_key: str | None = None,
    positions: Any = None,
    access_log: bool = True,
    mcp: Callable[[Callable[..., Any]], Any] | None = None,
    host: str = "127.0.0.1",
    batches: bool = False,
):
    """The ASGI application over an open retriever. `positions(id) -> int` gives ColBERT's pid;
    `info` says what is served (its "corpus" and "dataset" are the corpus names IRCoT may ask for). `mcp`, given
    the server's admission of a search (routes.admitted), makes the MCP server (server/mcp.py) answered at /mcp,
    behind the same guard. With
    `batches` (the engine answers a batch in one pass), concurrent requests' queries are searched together."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    if api_key is not None and not api_key.strip():
        raise ValueError("the API key is empty")
    searches = anyio.CapacityLimiter(limits.workers)
    routes, lifespan = [Route(e.path, e.handler, methods=list(e.methods)) for e in ENDPOINTS], None
    state: dict[str, Any] = {}
    if mcp is not None:
        from mhindex.server.mcp import MCP_PATH, SSE_MESSAGES, SSE_PATH

        tools = mcp(functools.partial(_admitted_in, state))
        routes += list(tools.streamable_http_app(streamable_http_path=MCP_PATH, host=host).routes)
        routes += list(tools.sse_app(sse_path=SSE_PATH, message_path=SSE_MESSAGES, host=host).routes)

        @asynccontextmanager
        async def lifespan(_app: Any) -> AsyncIterator[None]:  # MCP's sessions live as long as the server
            async with tools.session_manager.run():
                yield

    app = Starlette(routes=routes, exception_handlers={404: _no_route, 405: _no_route}, lifespan=lifespan)
    app.state.retriever = retriever
    app.state.info = info
    app.state.limits = limits
    app.state.positions = positions or (lambda _id: -1)
    app.state.corpus_names = [n for n in dict.fromkeys([info.get("corpus"), info.get("dataset")]) if n]
    app.state.searches = searches
    app.state.threads = anyio.CapacityLimiter(limits.workers)  # the threads of the workers `searches` admits
    app.state.stopping = Shutdown()
    app.state.backlog = Backlog(limits.workers, limits.max_wait_ms / 1000, _warmed(retriever))
    state["app"] = app
    app.state.gatherer = Gatherer(limits.gather_ms / 1000, limits.batch_chunk) if batches and limits.gather_ms else None
    return Guard(app, api_key, limits, access_log, loopback=host in LOOPBACK)


async def _admitted_in(state: dict[str, Any], function: Callable[..., Any], *args: Any) -> Any:
    """MCP's searches, admitted as HTTP's are (routes.admitted over the app's state)."""
    from mhindex.server.routes import admitted

    return await admitted(state["app"].state, function, *args)


def _warmed(retriever: Any) -> float:
    """The seconds one search takes, timed before the server answers anything: without it the backlog's estimate of
    a query's time is 0 until the first search ends, and a fresh server would queue any burst whatever
    --max-wait-ms says (and the first client would pay the engine's warm-up)."""
    began = time.perf_counter()
    try:
        retriever.search("mhindex warm up", 1)
    except Exception:  # noqa: BLE001 - a search that fails here fails for its client too, said to it there
        return 0.0
    return time.perf_counter() - began


async def _no_route(request, error) -> Any:
    path, status = request.url.path, getattr(error, "status_code", 404)
    known = ", ".join(f"{'/'.join(e.methods)} {e.path}" for e in ENDPOINTS)
    what = "no endpoint" if status == 404 else f"{request.method} is not answered at"
    return reply(error_body(protocol_of(path), f"{what} {path}; this server answers {known}"), status)


#: the addresses a server is on this machine alone at
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class Guard:
    """The API key, the body's size and time limits, and one JSON access-log line a request. A server on a loopback
    address without a key answers only requests addressed to it: a Host or Origin of another site is refused (a web
    page's DNS rebinding would otherwise reach it through the browser; MCP's guidance asks servers to check them)."""

    def __init__(self, app: Any, api_key: str | None, limits: Limits, access_log: bool, loopback: bool = False) -> None:
        self.app = app
        self.api_key = api_key
        self.limits = limits
        self.access_log = access_log
        self.loopback = loopback
        self.stopping: Shutdown = app.state.stopping

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.perf_counter(), [0]
        scope = dict(scope)  # the app sees the path without a key prefix
        given = _take_keys(scope)

        async def sending(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            refusal = self._refusal(scope, given)
            if refusal is not None:
                scope["mhindex.error"] = str(refusal)
                await reply(error_body(protocol_of(scope["path"]), str(refusal)), refusal.status)(
                    scope, receive, sending
                )
            else:
                await self.app(scope, _LimitedBody(receive, self.limits), sending)
        finally:
            if self.access_log:
                line = {
                    "time": round(time.time(), 3),
                    "method": scope.get("method"),
                    "path": scope.get("path"),
                    "status": status[0],
                    "ms": round((time.perf_counter() - started) * 1000, 2),
                }
                if "mhindex.error" in scope:
                    line["error"] = scope["mhindex.error"]
                # A key where no client puts one (/search/k/KEY, //k/KEY) reaches the path as it is: never the log.
                sys.stderr.write(redact(orjson.dumps(line).decode(), [self.api_key or ""]) + "\n")

    def _refusal(self, scope: dict, given: list[str]) -> Refused | None:
        # A load balancer's probe sends no key: /health answers it without one, and says nothing of the index.
        open_probe = scope.get("path") == "/health" and scope.get("method") == "GET"
        if (
            self.api_key is not None
            and not open_probe
            and not any(secrets.compare_digest(k.encode(), self.api_key.encode()) for k in given)
        ):
            return Refused(
                "a valid API key is required: Authorization: Bearer KEY, X-API-Key: KEY, http://key:KEY@HOST, "
                "/k/KEY/... or ?api_key=KEY",
                401,
            )
        headers = dict(scope.get("headers") or [])
        if self.api_key is None and self.loopback and (foreign := _foreign(headers)) is not None:
            return Refused(f"this server answers requests to itself only, not {foreign} (give it an --api-key to "
                           "be reached otherwise)", 403)  # fmt: skip
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limits.max_body_bytes:
            return Refused(f"the request body is over {self.limits.max_body_bytes:,} bytes", 413)
        return None


def _foreign(headers: dict[bytes, bytes]) -> str | None:
    """The Host or Origin of another site than this machine, said ("Host evil.example"), or None."""
    from urllib.parse import urlsplit

    host = headers.get(b"host", b"").decode("latin-1").strip()
    if host and _bare(host) not in LOOPBACK:
        return f"Host {host}"
    origin = headers.get(b"origin", b"").decode("latin-1").strip()
    if origin and origin != "null" and (urlsplit(origin).hostname or "") not in LOOPBACK:
        return f"Origin {origin}"
    return None


def _bare(host: str) -> str:
    """A Host header's name without its port ("[::1]:8000" -> "::1")."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _take_keys(scope: dict) -> list[str]:
    """Every key the request offers; the path prefix and query parameter that carried one are
    taken out of the scope, so that neither the routes nor the log ever see them."""
    given = []
    path = scope.get("path", "")
    if path.startswith("/k/"):
        key, _, rest = path[3:].partition("/")
        given.append(key)
        scope["path"] = "/" + rest
        scope["raw_path"] = scope["path"].encode()
    query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    if any(name == "api_key" for name, _ in query):
        given += [value for name, value in query if name == "api_key"]
        scope["query_string"] = urlencode([(n, v) for n, v in query if n != "api_key"]).encode("latin-1")
    for name, value in scope.get("headers") or []:
        name, text = name.decode("latin-1").lower(), value.decode("latin-1").strip()
        if name == "x-api-key":
            given.append(text)
        elif name == "authorization":
            scheme, _, credentials = text.partition(" ")
            if scheme.lower() == "bearer":
                given.append(credentials.strip())
            elif scheme.lower() == "basic":  # http://key:KEY@HOST: the key as password (or as user)
                try:
                    user, _, password = (
                        base64.b64decode(credentials.strip(), validate=True).decode("utf-8").partition(":")
                    )
                except (binascii.Error, UnicodeDecodeError):
                    continue
                given += [password, user]
    return [k for k in given if k]


class _LimitedBody:
    """The request's `receive`, refusing a body over the size limit (413) or one that does not
    arrive within the time limit (408): a client that trickles its body holds no worker."""

    def __init__(self, receive: Any, limits: Limits) -> None:
        self.receive = receive
        self.limits = limits
        self.left = limits.max_body_bytes
        self.deadline: float | None = None

    async def __call__(self) -> dict:
        if self.deadline is None:
            self.deadline = anyio.current_time() + self.limits.body_seconds
        try:
            with anyio.fail_after(max(0.0, self.deadline - anyio.current_time())):
                message = await self.receive()
        except TimeoutError:
            raise Refused(f"the request body did not arrive within {self.limits.body_seconds:g} s", 408) from None
        if message["type"] == "http.request":
            self.left -= len(message.get("body", b""))
            if self.left < 0:
                raise Refused(f"the request body is over {self.limits.max_body_bytes:,} bytes", 413)
        return message


def listening_socket(host: str, port: int) -> socket.socket:
    """The socket `serve` listens on, bound before the index is opened or "serving" is said: a port in use is one
    line (uvicorn said it after our "serving" line, and exited 3)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as error:
        sock.close()
        hint = ": another server is on it; pick another with --port" if error.errno == errno.EADDRINUSE else ""
        raise UsageError(f"cannot listen on {host}:{port} ({error.strerror or error}){hint}") from None
    return sock


SHUTDOWN_GRACE_S = 10  # seconds: how long a stopping server lets the searches in flight run on


def serve(app: Any, sock: socket.socket) -> None:
    """Run until Ctrl-C or SIGTERM. A shutdown refuses the searches not yet begun (503: retry elsewhere) and
    finishes those in flight, up to SHUTDOWN_GRACE_S; a request cut short past it is one log line, not a traceback
    (routes.answers)."""
    import uvicorn

    stopping: Shutdown = app.stopping

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            stopping.begin()
            await super().shutdown(sockets)

    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=SHUTDOWN_GRACE_S)
    try:
        Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn raises the Ctrl-C it shut down on once it is done: a stop, as uvicorn.run
        pass
    finally:
        sock.close()


def serve_corpus(
    corpus: Any, spec: Any, host: str, port: int, limits: Limits, api_key: str | None, mcp: str | None = None
) -> None:
    """`mhindex serve`: bind the port first (a port in use is said before the index is loaded), open
    the index, warn of a key-less server on a public address, and serve until Ctrl-C or SIGTERM. `mcp`: "http"
    adds the MCP endpoint at /mcp, "stdio" speaks MCP on standard input and output instead of HTTP."""
    import os

    from mhindex import ui
    from mhindex.backends import open_index
    from mhindex.server.protocols import corpus_lines

    api_key = checked_key(api_key, dict(os.environ))
    sock = None if mcp == "stdio" else listening_socket(host, port)
    try:
        opened = open_index(corpus, spec)
    except BaseException:
        if sock is not None:
            sock.close()
        raise
    log = ui.reporter()
    info = index_info(corpus, spec.label, opened.settings, opened.fingerprint)
    positions = corpus_lines(corpus)
    paragraphs = corpus.paragraphs() if mcp else None  # MCP's fetch reads them; HTTP alone does not
    try:
        tools = None if paragraphs is None else _mcp_tools(opened.retriever, info, positions, paragraphs)
        if sock is None:
            assert tools is not None  # stdio is MCP's
            log.info(f"serving {corpus.name} ({spec.label}) over MCP on standard input and output")
            tools(None).run("stdio")  # until the client closes the pipe
            return
        if api_key is None and host not in ("127.0.0.1", "localhost", "::1"):
            log.warning(f"serving on {host} without an API key: anyone who can reach it can search {corpus.name}")
        log.info(f"serving {corpus.name} ({spec.label}) on http://{host}:{port}  (Ctrl-C stops)")
        app = make_app(opened.retriever, info, limits, api_key, positions, not log.quiet, tools, host, spec.batches)
        serve(app, sock)
    finally:
        if paragraphs is not None:
            paragraphs.close()
        opened.retriever.close()


def _mcp_tools(retriever: Any, info: dict, positions: Any, paragraphs: Any) -> Callable[[Any], Any]:
    from mhindex.server.mcp import mcp_server

    lock = threading.Lock()  # the paragraphs' reader is one open file

    def paragraph(at: int) -> dict:
        with lock:
            return dict(paragraphs[at])

    return lambda searches: mcp_server(retriever, info, positions, paragraph, searches)
