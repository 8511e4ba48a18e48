"""`mhindex doctor`: what is installed, what is missing, and the line that installs it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mhindex import render
from mhindex.cli.app import Output, command, flag, model_from

DETERMINISM_HELP = (
    "Instead, check that the model (--lm, else the configured one) writes the same completions whatever ran before: "
    "a handful of calls made again in another order, with the prompt states warm, at another thread count and two "
    "at a time, compared byte for byte. The result is kept for the fingerprints of later evaluations (mhindex diff). "
    "Exit code 1 when a completion differs."
)
FETCH_HELP = (
    "First fetch Anserini's jar (the Lucene backend's engine) out of pyserini's source package on PyPI into this "
    "Python environment; pyserini itself is not installed."
)


@command()
def doctor(
    fetch_jar: Annotated[bool, flag(FETCH_HELP)] = False,
    determinism: Annotated[bool, flag(DETERMINISM_HELP)] = False,
    *,
    root: Path,
    output: Output,
) -> None:
    """Check everything mhindex runs on (Java, the Anserini jar, llama.cpp, the packaged models, the
    optional engines) and say, in one list, what is missing and how to install it. Exit code 1 when
    something the default path needs (build, search, ask) is missing."""
    from mhindex.doctor import examine

    if determinism:
        from mhindex.doctor import determinism as checked

        result = checked(root, model_from(None).lm)
        output.show(result, *render.determinism_report(result))
        raise typer.Exit(0 if result["identical"] else 1)
    found = examine(root, fetch_jar)
    output.show(found.record(), *render.doctor_report(found.checks, found.missing), render.room_table(found.room))
    if found.missing:
        raise typer.Exit(1)
