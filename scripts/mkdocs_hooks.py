"""mkdocs hook: the CLI reference page is generated from the Typer application itself (Typer's own
`typer ... utils docs` renderer), so it can never drift from `mhindex --help`."""

from __future__ import annotations

from typing import Any

MARKER = "<!-- cli-reference -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    import click
    import typer
    from typer.cli import get_docs_for_click

    from mhindex.cli import app

    command = typer.main.get_command(app)
    with click.Context(command, info_name="mhindex", obj={"TYPER_RICH_MARKUP_MODE": "markdown"}) as ctx:
        reference = get_docs_for_click(obj=command, ctx=ctx, name="mhindex", title="Command reference")
    # Typer writes `#` headings; this page's own title stays the only `#`.
    reference = "\n".join("#" + line if line.startswith("#") else line for line in reference.splitlines())
    return markdown.replace(MARKER, reference)
