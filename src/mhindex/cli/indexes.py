"""Indexes: `index` a built corpus with a backend, and `search` it."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from mhindex import render, ui
from mhindex.cli.app import BackendOption, HomeOption, JsonOption, QuietOption, app, backend_options, console, print_json, setup, write_line
from mhindex.home import open_corpus


def report_index(result, json: bool) -> None:
    if json:
        print_json({"rebuilt": result.rebuilt, "path": str(result.path), **result.manifest})
    else:
        console().print(render.index_summary(result))


@app.command()
@backend_options
def index(
    name: Annotated[str, typer.Argument(help="Corpus name (see mhindex list).", show_default=False)],
    backend: BackendOption = "lucene",
    force: Annotated[bool, typer.Option("--force", metavar="", help="Rebuild even if the index is up to date.")] = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
    backend_options: dict | None = None,
) -> None:
    """Index a built corpus. The new index replaces the old one only when complete."""
    from mhindex.backends import build_index

    root = setup(home, quiet)
    report_index(build_index(open_corpus(root, name), backend, backend_options, force=force), json)


@app.command()
@backend_options
def search(
    name: Annotated[str, typer.Argument(help="Corpus name.", show_default=False)],
    query: Annotated[str, typer.Argument(help='Query text, or "-" to read JSONL {"id", "query"} from stdin.', show_default=False)],
    k: Annotated[int, typer.Option("-k", min=1, help="Paragraphs per query.")] = 10,
    backend: BackendOption = "lucene",
    batch: Annotated[int, typer.Option(min=1, help="Stdin queries searched together.")] = 64,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
    backend_options: dict | None = None,
) -> None:
    """Search a corpus's index. With "-", one JSONL result per input line, in order:
    {"id", "hits": [{"id", "title", "text", "score"}]}; a bad line gets {"line", "error"}."""
    from mhindex.backends import open_retriever, search_stream
    from mhindex.files import read_jsonl_stream

    root = setup(home, quiet)
    retriever = open_retriever(open_corpus(root, name), backend, backend_options)
    try:
        if query == "-":
            failed = search_stream(retriever, read_jsonl_stream(sys.stdin, "query"), k, batch, write_line)
            if failed:
                ui.reporter().warning(f"{failed} input lines were not valid queries")
                raise typer.Exit(1)
            return
        hits = retriever.search(query, k)
    finally:
        retriever.close()
    if json:
        print_json({"query": query, "hits": [h.record() for h in hits]})
    else:
        out = console()
        out.print(render.hits_table(hits, expand=out.is_terminal) if hits else "no paragraph matches")
