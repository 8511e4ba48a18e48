"""The served index over the Model Context Protocol (the `mcp` SDK's MCPServer), for agents that take their tools
from MCP: `search` (a query, k, an optional title scope), `search_results` (the same in a web search API's shape,
for verl's MCP tool), `fetch` (a paragraph by its id) and `corpora` (what is served). `mhindex serve NAME --mcp http`
adds it to the HTTP server at /mcp (streamable HTTP) and /sse (SSE, verl's transport), behind the same API key, body
limits and access log as every other endpoint; `--mcp stdio` speaks it on standard input and output
instead, for a client that starts the server itself (no port, no key: the pipe is the client's own)."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

import anyio

from mhindex.backends.base import Retriever
from mhindex.errors import MhindexError, UsageError
from mhindex.server.errors import Refused
from mhindex.server.limits import MAX_TITLES
from mhindex.server.protocols import page_url

MCP_PATH = "/mcp"
#: MCP over SSE (the transport verl's MCP tool speaks, through fastmcp's SSETransport with a bearer token)
SSE_PATH, SSE_MESSAGES = "/sse", "/messages/"
MCP_HELP = (
    "MCP too: http (its tools at /mcp by streamable HTTP and /sse by SSE, the same API key) or stdio (MCP "
    "alone, on standard input and output)."
)


class Transport(StrEnum):
    http = "http"
    stdio = "stdio"


MAX_K = 100  # as /search bounds k


def mcp_server(
    retriever: Retriever,
    info: dict[str, Any],
    position: Callable[[str], int],
    paragraph: Callable[[int], dict[str, Any]],
    searches: Callable[..., Any] | None = None,
) -> Any:
    """An MCPServer whose tools search `retriever` (in worker threads, admitted as the HTTP endpoints' searches are:
    `searches` is the server's admission, routes.admitted over its state, with its --workers, --max-waiting and
    --max-wait-ms; over stdio, none), fetch a paragraph by id (`position`, then `paragraph`), and say what is
    served. A refusal (the server busy, a bad title scope) is the client's one-line tool error."""
    import logging

    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        raise UsageError("--mcp needs the MCP SDK: pip install 'mhindex[mcp]'") from None

    # The SDK logs each session's start and end, and a refused call with its traceback: a refusal is the client's
    # answer (one line, below), and the access log already has every request.
    logging.getLogger("mcp").setLevel(logging.ERROR)

    from mhindex import __version__

    corpus = info.get("corpus", "the corpus")
    server = MCPServer(
        "mhindex",
        version=__version__,  # `initialize` says it (serverInfo.version), as every MCP client shows a server's
        instructions=f"Search the paragraphs of {corpus} ({info.get('backend')}); fetch a paragraph by its id.",
    )

    async def in_thread(function: Callable[..., Any], *args: Any) -> Any:
        try:
            if searches is None:
                return await anyio.to_thread.run_sync(function, *args)
            return await searches(function, *args)
        except (MhindexError, Refused) as error:  # the server busy (503 over HTTP), a scope refused: said, not traced
            raise ToolError(str(error)) from None

    @server.tool()
    async def search(query: str, k: int = 10, titles: list[str] | None = None) -> list[dict[str, Any]]:
        """The paragraphs that best match the query, best first: id, title, text and score. `titles` keeps the
        search within the paragraphs of those titles (as IRCoT searches a page)."""
        if not query.strip():
            raise ToolError("the query is empty")
        if not 1 <= k <= MAX_K:
            raise ToolError(f"k must be between 1 and {MAX_K}, not {k}")
        if titles is not None and len(titles) > MAX_TITLES:
            raise ToolError(f"a title scope names at most {MAX_TITLES:,} titles, not {len(titles):,}")
        hits = await in_thread(lambda: retriever.search(query, k, titles=titles))
        return [hit.record() for hit in hits]

    @server.tool()
    async def search_results(query: str, max_results: int = 5) -> dict[str, Any]:
        """The best paragraphs in a web search API's shape (Tavily's), which verl's MCP search tool reads
        (`web_search_results`); a url names the paragraph's page here (`mhindex://CORPUS/TITLE`)."""
        if not query.strip():
            raise ToolError("the query is empty")
        if not 1 <= max_results <= MAX_K:
            raise ToolError(f"max_results must be between 1 and {MAX_K}, not {max_results}")
        hits = await in_thread(lambda: retriever.search(query, max_results))
        return web_search_results(query, hits, str(corpus))

    @server.tool()
    async def fetch(id: str) -> dict[str, Any]:
        """The paragraph with this id: id, title and text."""
        at = await in_thread(position, id)
        if at < 0:
            raise ToolError(f"no paragraph of {corpus} has the id {id!r}")
        record = await in_thread(paragraph, at)
        return {"id": record["id"], "title": record["title"], "text": record["text"]}

    @server.tool()
    async def corpora() -> list[dict[str, Any]]:
        """What this server searches: its corpus (name, dataset, paragraphs) and its index (backend, options)."""
        return [{key: info.get(key) for key in ("corpus", "dataset", "paragraphs", "backend", "index")}]

    return server


def web_search_results(query: str, hits: Any, corpus: str) -> dict[str, Any]:
    """Hits in a web search API's shape (Tavily's: `query`, and `results` of `title`, `url`, `content`, `score`), as
    verl's MCP search tool reads them from the text (volcengine/verl@b178a3c verl/tools/mcp_search_tool.py
    `_parse_tool_result`; set its `tool_selected_list` to search_results)."""
    return {"query": query, "results": [{"title": hit.title, "url": page_url(corpus, hit.title), "content": hit.text,
                                         "score": hit.score, "id": hit.id} for hit in hits]}  # fmt: skip
