"""`mhindex serve --mcp`: a corpus's index over the Model Context Protocol, spoken to with the `mcp` SDK's own
client, over streamable HTTP (at /mcp, beside the other endpoints and behind the same API key, from a real
`mhindex serve` on 127.0.0.1) and over stdio (the client starts `mhindex serve --mcp stdio` itself). Its tools give
what `search` gives: the same hits, title scopes, paragraphs by id, and one-line refusals."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import anyio
import pytest

import mhindex
from conftest import HANG_S
from mhindex.cli import main
from peers import verl_mcp_client

QUERY = "Van Hook Township"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp-home")
    assert main(["--quiet", "--home", str(root), "build", "musique"]) == 0
    assert main(["--quiet", "--home", str(root), "index", "musique", "--backend", "lucene"]) == 0
    return root


def searched(home, query: str, k: int, titles=None) -> list[dict]:
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import corpus_dir

    retriever = open_retriever(corpus_dir(home, "musique"), BackendSpec.parse("lucene"))
    try:
        return [hit.record() for hit in retriever.search(query, k, titles=titles)]
    finally:
        retriever.close()


async def exercise(session, home) -> None:
    """Every tool, as an MCP client calls it: the hits `search` gives, a scope, a paragraph, the refusals."""
    started = await session.initialize()
    assert (started.server_info.name, started.server_info.version) == ("mhindex", mhindex.__version__)
    assert sorted(tool.name for tool in (await session.list_tools()).tools) == [
        "corpora", "fetch", "search", "search_results"]  # fmt: skip
    found = await session.call_tool("search", {"query": QUERY, "k": 5})
    assert not found.is_error and found.structured_content["result"] == searched(home, QUERY, 5)
    title = found.structured_content["result"][2]["title"]
    scoped = await session.call_tool("search", {"query": QUERY, "k": 3, "titles": [title.upper()]})
    assert scoped.structured_content["result"] == searched(home, QUERY, 3, [title.upper()])
    assert {hit["title"] for hit in scoped.structured_content["result"]} == {title}
    first = found.structured_content["result"][0]
    fetched = await session.call_tool("fetch", {"id": first["id"]})
    assert fetched.structured_content == {key: first[key] for key in ("id", "title", "text")}
    missing = await session.call_tool("fetch", {"id": "no-such-id"})
    assert missing.is_error and missing.content[0].text.endswith(": no paragraph of musique has the id 'no-such-id'")
    refused = await session.call_tool("search", {"query": QUERY, "k": 0})
    assert refused.is_error and refused.content[0].text.endswith(": k must be between 1 and 100, not 0")
    # A title scope past the server's limit: the client's one-line tool error (no "Error executing tool", no
    # traceback in the server's log: the tests read it), as HTTP's 400.
    scoped = await session.call_tool("search", {"query": QUERY, "k": 3, "titles": ["t"] * 5000})
    assert scoped.is_error and scoped.content[0].text.endswith("a title scope names at most 4,096 titles, not 5,000")
    served = (await session.call_tool("corpora", {})).structured_content["result"]
    assert served[0]["corpus"] == "musique" and served[0]["backend"] == "lucene" and served[0]["paragraphs"] > 1000


@pytest.mark.slow
def test_mcp_over_streamable_http_beside_the_other_endpoints_and_behind_their_key(home):
    import httpx
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from servers import free_port

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "mhindex", "--home", str(home), "serve", "musique", "--mcp", "http", "--port",
         str(port), "--api-key", "sekret"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        without = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert without.status_code == 401 and "a valid API key is required" in without.text

        async def client() -> None:
            async with httpx2.AsyncClient(headers={"Authorization": "Bearer sekret"}) as http:
                async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, *_):
                    async with ClientSession(read, write) as session:
                        await exercise(session, home)

        anyio.run(client)

        async def over_sse() -> None:
            """verl's MCP search tool: SSE with a bearer token, `search_results`, its text read by verl's parse."""
            from mcp.client.sse import sse_client

            async with sse_client(f"{url}/sse", headers={"Authorization": "Bearer sekret"}) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    found = await session.call_tool("search_results", {"query": QUERY, "max_results": 3})
                    text, metadata = verl_mcp_client._parse_tool_result(found.content)
                    expected = searched(home, QUERY, 3)
                    assert metadata["status"] == "success" and metadata["queries"] == [QUERY]
                    assert metadata["total_results"] == 3 and all(f'"{h["id"]}"' in text for h in expected)

        anyio.run(over_sse)
        # The other endpoints are still there, on the same port and key.
        hits = httpx.post(f"{url}/search", json={"query": QUERY, "k": 5}, headers={"X-API-Key": "sekret"}).json()
        assert hits["hits"] == searched(home, QUERY, 5)
    finally:
        server.send_signal(signal.SIGTERM)
        _, log = server.communicate(timeout=HANG_S)
    assert server.returncode == 0, log
    assert '"path":"/mcp","status":401' in log and "sekret" not in log and "Traceback" not in log


@pytest.mark.slow
def test_mcp_over_stdio_for_a_client_that_starts_the_server(home, tmp_path):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command = StdioServerParameters(
        command=sys.executable, args=["-m", "mhindex", "--home", str(home), "serve", "musique", "--mcp", "stdio"]
    )

    async def client() -> None:
        with (tmp_path / "stderr.txt").open("w") as errors:
            async with stdio_client(command, errlog=errors) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await exercise(session, home)

    anyio.run(client)
    said = (tmp_path / "stderr.txt").read_text()
    assert "over MCP on standard input and output" in said and "Traceback" not in said
