"""Asking: `ask` a question (or a JSONL stream of them) with a method, and `lm` to check a model."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mhindex import render, ui
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.cli.app import (
    BackendOption,
    Output,
    app,
    arg,
    backend_options,
    common,
    method_options,
    model_from,
    model_options,
    opt,
    write_line,
)
from mhindex.errors import UsageError
from mhindex.lm.base import Generation
from mhindex.methods import DEFAULT_METHOD, METHODS
from mhindex.options import settings_from, with_options
from mhindex.text import shell_unescape

WORKERS_HELP = (
    "Questions answered at once: a remote LM serves them in parallel; a local model gets one llama.cpp slot each "
    "(on two cores no faster than 1: benchmarks/README.md)."
)
WorkersOption = Annotated[int, opt(WORKERS_HELP, min=1, max=64)]
CorpusOption = Annotated[Optional[str], opt("Corpus to search \\[default: the only one built].", "--corpus", "-c")]


@app.command()
@method_options
@backend_options
@model_options
@common()
def ask(
    question: Annotated[str, arg('The question, or "-" to read JSONL {"id", "question"} from stdin.')],
    corpus_name: CorpusOption = None,
    method: Annotated[str, opt(f"One of: {', '.join(METHODS.available())}.", "--method", "-m")] = DEFAULT_METHOD,
    backend: BackendOption = DEFAULT_BACKEND,
    workers: WorkersOption = 1,
    *,
    root: Path,
    out: Output,
    method_options: dict | None = None,
    backend_options: dict | None = None,
    model_options: dict | None = None,
) -> None:
    """Answer a question with retrieval and reasoning, and show the trace and the paragraphs used.

    With "-", reads JSONL from stdin ({"id", "question"}, plus "main_passage" for IIRC) and writes
    one JSON result per line in input order; a bad line gets {"line", "error"} and the exit code is 1.
    """
    from mhindex._api.answering import Asker
    from mhindex.methods import Query
    from mhindex.methods.base import answered

    if not question.strip():
        raise UsageError('the question is empty; ask something, or pass "-" to read JSONL questions from stdin')
    model = dataclasses.asdict(model_from(model_options))
    with ui.graceful_interrupts():
        with Asker(
            method, corpus_name, backend=backend, backend_options=backend_options, workers=workers, home=root,
            **model, **(method_options or {}),
        ) as asker:  # fmt: skip
            if question == "-":
                _answer_stream(asker.method, workers)
                return
            with ui.reporter().activity(f"{method}: starting"):
                answer = answered(asker.method, Query("cli", question))
    out.show(answer.record(), *render.trace(answer))


def _answer_stream(solver, workers: int) -> None:
    from mhindex.methods.run import answer_stream

    stats = answer_stream(solver, sys.stdin, write_line, workers)
    if stats.interrupted:
        ui.reporter().warning(f"interrupted: {stats.answered} answered, {stats.failed} failed")
        raise typer.Exit(130)
    if stats.failed:
        ui.reporter().warning(f"{stats.failed} of {stats.answered + stats.failed} questions failed")
        raise typer.Exit(1)


@app.command(name="lm")
@model_options
@with_options("generation", lambda: {"lm": Generation}, panel="Generation")
@common()
def lm_(
    prompt: Annotated[str, arg("The prompt to complete; \\n and \\t are read as a newline and a tab.")],
    *,
    root: Path,
    out: Output,
    generation: dict,
    model_options: dict | None = None,
) -> None:
    """Complete one prompt and print the text: a check that a model is set up."""
    asked = settings_from(Generation, generation, "lm")
    stops = [shell_unescape(stop) for stop in asked.stop or []]
    with model_from(model_options).load(root) as model:
        call = model.chat if asked.chat else model.complete
        text = shell_unescape(prompt)
        completion = call(text, max_tokens=asked.max_tokens, stop=stops, temperature=asked.temperature, keep=asked.keep)
        data = {"lm": model.name, "context_length": model.context_length, **completion.record()}
    if out.json:
        return out.show(data)
    print(completion.text)
    ui.reporter().info(render.completion_note(model.name, completion))
