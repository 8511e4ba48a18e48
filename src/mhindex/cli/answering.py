"""Asking: `ask` a question (or a JSONL stream of them) with a method, and `lm` to check a model."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Annotated, Optional

from mhindex import render, ui
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.cli.app import (
    BackendOption,
    Output,
    arg,
    backend_options,
    command,
    method_options,
    model_from,
    model_options,
    opt,
)
from mhindex.errors import UsageError
from mhindex.lm.base import Generation
from mhindex.methods import DEFAULT_METHOD, METHODS
from mhindex.options import with_options

WORKERS_HELP = (
    "Questions answered at once: a remote LM serves them in parallel; a local model gets one llama.cpp slot each "
    "(on two cores no faster than 1: benchmarks/README.md)."
)
WorkersOption = Annotated[int, opt(WORKERS_HELP, min=1, max=64)]
CorpusOption = Annotated[Optional[str], opt("Corpus to search \\[default: the only one built].", "--corpus", "-c")]


@command()
@method_options
@backend_options
@model_options
def ask(
    question: Annotated[str, arg('The question, or "-" to read JSONL {"id", "question"} from stdin.')],
    corpus_name: CorpusOption = None,
    method: Annotated[str, opt(f"One of: {', '.join(METHODS)}.", "--method", "-m")] = DEFAULT_METHOD,
    backend: BackendOption = DEFAULT_BACKEND,
    workers: WorkersOption = 1,
    *,
    root: Path,
    output: Output,
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
    from mhindex.methods.run import answer_stream

    if not question.strip():
        raise UsageError('the question is empty; ask something, or pass "-" to read JSONL questions from stdin')
    model = dataclasses.asdict(model_from(model_options))
    with ui.graceful_interrupts():
        with Asker(
            method, corpus_name, backend=backend, backend_options=backend_options, workers=workers, home=root,
            **model, **(method_options or {}),
        ) as asker:  # fmt: skip
            if question == "-":
                code, said = answer_stream(asker.method, sys.stdin, ui.write_line, workers).outcome()
                return output.failed(said, code) if said else None
            with ui.reporter().activity(f"{method}: starting"):
                answer = answered(asker.method, Query("cli", question))
    output.show(answer.record(), *render.trace(answer))


@command(name="lm")
@model_options
@with_options("generation", lambda: {"lm": Generation}, panel="Generation", checked_as="lm")
def lm_(
    prompt: Annotated[str, arg("The prompt to complete; \\n and \\t are read as a newline and a tab.")],
    *,
    root: Path,
    output: Output,
    generation: Generation,
    model_options: dict | None = None,
) -> None:
    """Complete one prompt and print the text: a check that a model is set up."""
    with model_from(model_options).load(root) as model:
        completion = generation.complete(model, prompt)
        data = {"lm": model.name, "context_length": model.context_length, **completion.record()}
    if output.json:
        return output.show(data)
    print(completion.text)
    ui.reporter().info(render.completion_note(model.name, completion))
