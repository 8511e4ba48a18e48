"""Indexes: `index` a built corpus with a backend, and `search` it."""

from __future__ import annotations

import functools
import os
import sys
from typing import Annotated, Optional

import typer

from mhindex import render, ui
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.cli.app import (
    BackendOption,
    HomeOption,
    JsonOption,
    QuietOption,
    app,
    backend_options,
    console,
    print_json,
    setup,
    write_line,
)
from mhindex.errors import UsageError
from mhindex.home import corpus_dir, open_corpus


def report_index(result, json: bool) -> None:
    if json:
        print_json({"rebuilt": result.rebuilt, "path": str(result.path), **result.manifest})
    else:
        console().print(render.index_summary(result))


@app.command()
@backend_options
def index(
    name: Annotated[str, typer.Argument(help="Corpus name (see mhindex list).", show_default=False)],
    backend: BackendOption = DEFAULT_BACKEND,
    force: Annotated[
        bool, typer.Option("--force", metavar="", help="Rebuild even if the index is up to date.")
    ] = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
    backend_options: dict | None = None,
) -> None:
    """Index a built corpus. The new index replaces the old one only when complete."""
    from mhindex.backends import BackendSpec, build_index

    root = setup(home, quiet)
    spec = BackendSpec.parse(backend, backend_options)
    corpus = open_corpus(root, name)
    for part in spec.parts or (spec,):  # a hybrid's parts, each built as itself
        report_index(build_index(corpus, part, force=force), json)


def write_trec(tag: str, record: dict) -> None:
    """One query's hits as TREC run lines (qid Q0 docid rank score tag); a bad input line to stderr."""
    if "error" in record:
        print(f"mhindex: line {record['line']}: {record['error']}", file=sys.stderr)
        return
    qid = "".join(record["id"].split()) or "-"  # a TREC run's fields are whitespace-separated
    sys.stdout.write(
        "".join(
            f"{qid} Q0 {hit['id']} {rank} {hit['score']} {tag}\n" for rank, hit in enumerate(record["hits"], start=1)
        )
    )
    sys.stdout.flush()


@app.command()
@backend_options
def search(
    name: Annotated[str, typer.Argument(help="Corpus name.", show_default=False)],
    query: Annotated[
        str,
        typer.Argument(
            help='Query text, or "-" for one query a line from stdin: JSONL {"id", "query"} (or "question", as '
            "in questions.jsonl), id<TAB>query as Pyserini's topics, or plain text.",
            show_default=False,
        ),
    ],
    k: Annotated[int, typer.Option("-k", "--hits", min=1, help="Paragraphs per query (Pyserini's --hits).")] = 10,
    backend: BackendOption = DEFAULT_BACKEND,
    batch: Annotated[int, typer.Option(min=1, help="Stdin queries searched together.")] = 64,
    output_format: Annotated[
        str,
        typer.Option(
            help='With "-": jsonl, or trec (a TREC run file, "qid Q0 docid rank score tag", for trec_eval and '
            "ir_measures; bad lines then go to stderr)."
        ),
    ] = "jsonl",
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
    backend_options: dict | None = None,
) -> None:
    """Search a corpus's index. With "-", one JSONL result per input line, in order:
    {"id", "hits": [{"id", "title", "text", "score"}]}; a bad line gets {"line", "error"}."""
    from mhindex.backends import BackendSpec, open_retriever, search_stream
    from mhindex.files import read_query_stream

    if output_format not in ("jsonl", "trec"):
        raise UsageError(f"--output-format must be jsonl or trec, not {output_format!r}")
    root = setup(home, quiet)
    spec = BackendSpec.parse(backend, backend_options)
    # A served index needs no corpus built here: NAME is the corpus as the server knows it.
    corpus = open_corpus(root, name) if spec.builds_index else corpus_dir(root, name)
    retriever = open_retriever(corpus, spec)
    try:
        if query == "-":
            emit = write_line if output_format == "jsonl" else functools.partial(write_trec, f"mhindex-{spec.label}")
            failed = search_stream(retriever, read_query_stream(sys.stdin), k, batch, emit)
            if failed:
                ui.reporter().warning(f"{failed} input lines were not valid queries")
                raise typer.Exit(1)
            return
        hits = retriever.search(query, k)
    finally:
        retriever.close()
    if output_format == "trec":
        write_trec(f"mhindex-{spec.label}", {"id": "1", "hits": [h.record() for h in hits]})
        return
    if json:
        print_json({"query": query, "hits": [h.record() for h in hits]})
    else:
        out = console()
        out.print(render.hits_table(hits, expand=out.is_terminal) if hits else "no paragraph matches")


@app.command()
@backend_options
def serve(
    name: Annotated[str, typer.Argument(help="Corpus name.", show_default=False)],
    backend: BackendOption = DEFAULT_BACKEND,
    host: Annotated[
        str, typer.Option(help="Address to listen on (loopback by default; set --api-key before opening it wider).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8765,
    api_key: Annotated[
        Optional[str],
        typer.Option(
            "--api-key",
            envvar="MHINDEX_API_KEY",
            help="Require this key: Authorization: Bearer KEY, X-API-Key, http://key:KEY@HOST, /k/KEY/... or "
            "?api_key=KEY \\[default: $MHINDEX_API_KEY, else none].",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[int, typer.Option(min=1, max=256, help="Searches run at once (in threads).")] = 4,
    max_k: Annotated[
        int, typer.Option("--max-k", min=1, help="Most paragraphs a query gets; asking for more gets this many.")
    ] = 100,
    max_batch: Annotated[
        int,
        typer.Option("--max-batch", min=1, help="Most queries in one batch request (Search-R1's GRPO sends 2,560)."),
    ] = 4096,
    home: HomeOption = None,
    quiet: QuietOption = False,
    backend_options: dict | None = None,
) -> None:
    """Serve a corpus's index over HTTP: mhindex's JSON API, and the retrieval protocols of IRCoT
    (POST /retrieve/), ColBERT (GET /api/search, also at / for DSPy) and Search-R1 (POST /retrieve)."""
    from mhindex.backends import BackendSpec, open_index
    from mhindex.server.app import Limits, checked_key, index_info, listening_socket, make_app
    from mhindex.server.app import serve as run_server
    from mhindex.server.protocols import corpus_lines

    root = setup(home, quiet)
    api_key = checked_key(api_key, dict(os.environ))
    corpus = open_corpus(root, name)
    spec = BackendSpec.parse(backend, backend_options)
    sock = listening_socket(host, port)
    try:
        opened = open_index(corpus, spec)
    except BaseException:
        sock.close()
        raise
    retriever = opened.retriever
    info = index_info(corpus, backend, opened.settings)
    log = ui.reporter()
    if api_key is None and host not in ("127.0.0.1", "localhost", "::1"):
        log.warning(f"serving on {host} without an API key: anyone who can reach it can search {corpus.name}")
    log.info(f"serving {corpus.name} ({backend}) on http://{host}:{port}  (Ctrl-C stops)")
    try:
        app_ = make_app(
            retriever,
            info,
            Limits(max_k=max_k, max_batch=max_batch, threads=workers),
            api_key,
            corpus_lines(corpus),
            access_log=not log.quiet,
        )
        run_server(app_, sock)
    finally:
        retriever.close()
