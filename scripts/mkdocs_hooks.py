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
    # The page's own title is its only `#`: Typer's is dropped, and each command is a `##`, listed in the sidebar.
    lines = [line for line in reference.splitlines() if line != "# Command reference"]
    return markdown.replace(MARKER, "\n".join(_placeholders_shown(lines)))


def _placeholders_shown(lines: list[str]) -> list[str]:
    """`<out>/<method>.jsonl` in help text is text, not HTML: escaped outside code, where Markdown would take it
    for a tag and show nothing (inside fences and backticks it is shown as written)."""
    fenced, shown = False, []
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or line.lstrip().startswith("```"):
            shown.append(line)
            continue
        parts = line.split("`")
        parts[::2] = [part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for part in parts[::2]]
        shown.append("`".join(parts))
    return shown
