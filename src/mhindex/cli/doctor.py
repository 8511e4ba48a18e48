"""`mhindex doctor`: what is installed, what is missing, and the line that installs it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mhindex import render, ui
from mhindex.cli.app import Output, command, flag

FETCH_HELP = (
    "First fetch Anserini's jar (the Lucene backend's engine) out of pyserini's source package on PyPI into this "
    "Python environment; pyserini itself is not installed."
)


@command()
def doctor(
    fetch_jar: Annotated[bool, flag(FETCH_HELP)] = False,
    *,
    root: Path,
    output: Output,
) -> None:
    """Check everything mhindex runs on (Java, the Anserini jar, llama.cpp, the packaged models, the
    optional engines) and say, in one list, what is missing and how to install it. Exit code 1 when
    something the default path needs (build, search, ask) is missing."""
    from mhindex.doctor import checks, room

    if fetch_jar:
        from mhindex.backends.lucene import PYSERINI_RELEASE
        from mhindex.backends.lucene import fetch_jar as fetch

        with ui.reporter().activity(f"fetching Anserini's jar from {PYSERINI_RELEASE}'s source package (165 MB)"):
            jar = fetch()
        ui.reporter().info(f"Anserini's jar: {jar}")
    found = checks(root)
    missing = [c for c in found if not c.ok and c.needed]
    here = room(root)
    data = {"ok": not missing, "checks": [c.record() for c in found], "room": here.record()}
    output.show(data, *render.doctor_report(found, missing), render.room_table(here))
    if missing:
        raise typer.Exit(1)
