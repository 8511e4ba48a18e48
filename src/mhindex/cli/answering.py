"""Asking: `ask` a question (or a JSONL stream of them) with a method, and `lm` to check a model."""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import sys
import time
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
    method_options,
    model_from,
    model_options,
    print_json,
    setup,
    write_line,
)
from mhindex.errors import UsageError
from mhindex.methods import DEFAULT_METHOD, METHODS

WorkersOption = Annotated[
    int,
    typer.Option(
        min=1,
        max=64,
        help="Questions answered at once: a remote LM serves them in parallel; a local model gets one "
        "llama.cpp slot each (on two cores no faster than 1: benchmarks/README.md).",
    ),
]
CorpusOption = Annotated[
    Optional[str],
    typer.Option("--corpus", "-c", help="Corpus to search \\[default: the only one built].", show_default=False),
]


@app.command()
@method_options
@backend_options
@model_options
def ask(
    question: Annotated[
        str,
        typer.Argument(help='The question, or "-" to read JSONL {"id", "question"} from stdin.', show_default=False),
    ],
    corpus_name: CorpusOption = None,
    method: Annotated[
        str, typer.Option("--method", "-m", help=f"One of: {', '.join(METHODS.available())}.")
    ] = DEFAULT_METHOD,
    backend: BackendOption = DEFAULT_BACKEND,
    workers: WorkersOption = 1,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
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

    root = setup(home, quiet)
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
                answer = asker.method.answer(Query("cli", question))
    if json:
        print_json(answer.record())
        return
    out = console()
    for part in render.trace(answer):
        out.print(part)


def _stdin_lines() -> int | None:
    """How many non-blank lines stdin holds when it is a file (`ask - < q.jsonl`), read with pread so
    that its offset does not move; None for a pipe or a terminal (no total known)."""
    try:
        if not stat.S_ISREG(os.fstat(0).st_mode):
            return None
        count, offset, last = 0, 0, b""
        while block := os.pread(0, 1 << 20, offset):
            for line in (last + block).split(b"\n")[:-1]:
                count += bool(line.strip())
            last = (last + block).rsplit(b"\n", 1)[-1]
            offset += len(block)
        return count + bool(last.strip())
    except OSError:
        return None


def _answer_stream(solver, workers: int) -> None:
    from mhindex.files import read_jsonl_stream
    from mhindex.methods import Query
    from mhindex.methods.run import run_questions

    def items():
        for number, record in read_jsonl_stream(sys.stdin, "question"):
            try:
                yield number, record if isinstance(record, str) else Query.from_record(record, str(number))
            except ValueError as error:
                yield number, str(error)

    log, total, started, done = ui.reporter(), _stdin_lines(), time.perf_counter(), 0
    # A bar of questions done on a terminal; in a pipe, a JSON progress line a question (not with --quiet).
    with log.progress("answering questions", total=total) as bar:

        def emit(record: dict) -> None:
            nonlocal done
            write_line(record)
            done += 1
            bar.advance()
            if not log.interactive:
                seconds = time.perf_counter() - started
                log.info(
                    f"{done}{f'/{total}' if total else ''} questions answered",
                    done=done,
                    total=total,
                    seconds=round(seconds, 1),
                    per_minute=round(done * 60 / seconds, 2) if seconds else None,
                )

        stats = run_questions(solver, items(), emit, workers=workers)
    if stats.interrupted:
        ui.reporter().warning(f"interrupted: {stats.answered} answered, {stats.failed} failed")
        raise typer.Exit(130)
    if stats.failed:
        ui.reporter().warning(f"{stats.failed} of {stats.answered + stats.failed} questions failed")
        raise typer.Exit(1)


def _unescape(text: str) -> str:
    r"""\n, \t and \\ as typed in a shell; everything else (accents, other scripts) as it is."""
    return re.sub(r"\\([nt\\])", lambda m: {"n": "\n", "t": "\t", "\\": "\\"}[m.group(1)], text)


@app.command(name="lm")
@model_options
def lm_(
    prompt: Annotated[
        str,
        typer.Argument(help="The prompt to complete; \\n and \\t are read as a newline and a tab.", show_default=False),
    ],
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Most tokens to generate.")] = 64,
    stop: Annotated[
        Optional[list[str]],
        typer.Option("--stop", help="Stop sequence (repeatable; \\n for a newline, \\t for a tab)."),
    ] = None,
    temperature: Annotated[float, typer.Option(help="0 is greedy.")] = 0.0,
    chat: Annotated[
        bool, typer.Option("--chat", metavar="", help="Send the prompt as one user turn through the chat template.")
    ] = False,
    keep: Annotated[
        int,
        typer.Option(
            "--keep",
            min=0,
            metavar="CHARS",
            help="How many leading characters open every prompt alike (demonstrations): a local model keeps their "
            "evaluation on disk for the next process, as methods do with theirs.",
        ),
    ] = 0,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
    model_options: dict | None = None,
) -> None:
    """Complete one prompt and print the text: a check that a model is set up."""
    root = setup(home, quiet)
    prompt, stops = _unescape(prompt), [_unescape(s) for s in stop or []]
    with model_from(model_options).load(root) as model:
        call = model.chat if chat else model.complete
        completion = call(prompt, max_tokens=max_tokens, stop=stops, temperature=temperature, keep=keep)
        if json:
            print_json({"lm": model.name, "context_length": model.context_length, **completion.record()})
            return
    print(completion.text)
    ui.reporter().info(
        f"{model.name}: {completion.prompt_tokens} prompt + {completion.completion_tokens} completion tokens "
        f"in {completion.seconds:.2f}s{' (cached)' if completion.cached else ''}"
    )
