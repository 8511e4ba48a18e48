"""Indexes: `index` a built corpus with a backend, `search` it, `serve` it over HTTP."""

from __future__ import annotations

import sys
from contextlib import closing
from pathlib import Path
from typing import Annotated, Optional

from mhindex import render, ui
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.cli.app import BackendOption, Output, PreflightOption, arg, backend_options, command, flag, opt
from mhindex.files import QUERY_STREAM_HELP
from mhindex.home import open_corpus
from mhindex.options import with_options
from mhindex.server.limits import API_KEY_HELP, Limits
from mhindex.server.mcp import MCP_HELP, Transport

FORMAT_HELP = (
    'With "-": jsonl, or trec (a TREC run file, "qid Q0 docid rank score tag", for trec_eval and ir_measures; bad '
    "lines then go to stderr)."
)


@command()
@backend_options
def index(
    name: Annotated[str, arg("Corpus name (see mhindex list).")],
    backend: BackendOption = DEFAULT_BACKEND,
    force: Annotated[bool, flag("Rebuild even if the index is up to date.")] = False,
    preflight: PreflightOption = True,
    *,
    root: Path,
    output: Output,
    backend_options: dict | None = None,
) -> None:
    """Index a built corpus. The new index replaces the old one only when complete."""
    from mhindex.backends import BackendSpec, build_indexes

    spec = BackendSpec.parse(backend, backend_options)
    for built in build_indexes(open_corpus(root, name), spec, force, preflight):
        output.show({"rebuilt": built.rebuilt, "path": str(built.path), **built.manifest}, render.index_summary(built))


@command()
@backend_options
def search(
    name: Annotated[str, arg("Corpus name.")],
    query: Annotated[str, arg(QUERY_STREAM_HELP)],
    k: Annotated[int, opt("Paragraphs per query (Pyserini's --hits).", "--hits", "-k", min=1)] = 10,
    backend: BackendOption = DEFAULT_BACKEND,
    batch: Annotated[int, opt("Stdin queries searched together.", min=1)] = 64,
    output_format: Annotated[ui.RunFormat, opt(FORMAT_HELP)] = ui.RunFormat.jsonl,
    *,
    root: Path,
    output: Output,
    backend_options: dict | None = None,
) -> None:
    """Search a corpus's index. With "-", one JSONL result per input line, in order:
    {"id", "hits": [{"id", "title", "text", "score"}]}; a bad line gets {"line", "error"}."""
    from mhindex.backends import BackendSpec, index_of, search_stream
    from mhindex.files import read_query_stream

    spec = BackendSpec.parse(backend, backend_options)
    emit = output_format.writer(f"mhindex-{spec.label}")
    with closing(index_of(root, name, spec)) as index:
        if query == "-":
            if failed := search_stream(index.retriever, read_query_stream(sys.stdin), k, batch, emit):
                output.failed(f"{failed} input lines were not valid queries")
            return
        hits = index.retriever.search(query, k)
    if output_format == "trec":
        return emit({"id": "1", "hits": [h.record() for h in hits]})
    used, records = index.variant(), [h.record() for h in hits]  # which index answered: said with its hits
    output.show({"query": query, "index": used, "hits": records}, render.hits_shown(hits, used, output.terminal))


@command(json=False)
@backend_options
@with_options("limits", lambda: {"serve": Limits}, panel="Server limits", checked_as="serve")
def serve(
    name: Annotated[str, arg("Corpus name.")],
    backend: BackendOption = DEFAULT_BACKEND,
    host: Annotated[str, opt("Address to listen on (loopback; set --api-key before opening it wider).")] = "127.0.0.1",
    port: Annotated[int, opt("Port to listen on.", min=1, max=65535)] = 8765,
    api_key: Annotated[Optional[str], opt(API_KEY_HELP, "--api-key", envvar="MHINDEX_API_KEY")] = None,
    mcp: Annotated[Optional[Transport], opt(MCP_HELP)] = None,
    *,
    root: Path,
    output: Output,
    limits: Limits,
    backend_options: dict | None = None,
) -> None:
    """Serve a corpus's index over HTTP: mhindex's JSON API, the retrieval protocols of IRCoT (POST /retrieve/),
    ColBERT (GET /api/search, also at / for DSPy) and Search-R1 (POST /retrieve), and MCP's tools (--mcp)."""
    from mhindex.backends import BackendSpec
    from mhindex.server.app import serve_corpus

    serve_corpus(open_corpus(root, name), BackendSpec.parse(backend, backend_options), host, port, limits, api_key, mcp)
