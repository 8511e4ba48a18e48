"""Training: `train efficientrag` fits EfficientRAG's Labeler & Tagger and Filter on a built
corpus's gold decompositions, where `ask --method efficientrag` then finds them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from mhindex import render, ui
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.cli.app import BackendOption, Output, app, command, flag, opt
from mhindex.options import with_options
from mhindex.training.efficientrag import TrainSettings

train_app = typer.Typer(
    help="Train the small models a method needs (EfficientRAG's Labeler & Tagger and Filter).", no_args_is_help=True
)
app.add_typer(train_app, name="train")


@command(group=train_app)
@with_options(
    "train_options", lambda: {"training": TrainSettings}, panel="Training options", checked_as="train efficientrag"
)
def efficientrag(
    corpus_name: Annotated[str, opt("The built corpus to learn from (MuSiQue: its gold decompositions).", "--from")],
    backend: BackendOption = DEFAULT_BACKEND,
    restart: Annotated[bool, flag("Start over instead of resuming from the last checkpoint.")] = False,
    *,
    root: Path,
    output: Output,
    train_options: TrainSettings,
) -> None:
    """Train EfficientRAG's Labeler & Tagger and Filter from a corpus's gold decompositions, with no LLM.

    The models go to <home>/models/efficientrag/NAME/, with trained.json (what they learnt from,
    held-out scores); `mhindex ask --method efficientrag` uses them without further flags.
    """
    from mhindex.backends import BackendSpec
    from mhindex.home import open_corpus
    from mhindex.training.efficientrag import train

    corpus = open_corpus(root, corpus_name)
    settings = replace(train_options, backend=backend)
    with ui.graceful_interrupts(kept="the work done so far is kept to resume from"):
        result = train(root, corpus, settings, BackendSpec.parse(backend), restart=restart)
    output.show(result.record(), render.training_summary(result, corpus.name))


@command(group=train_app)
def adaptive(
    folder: Annotated[Path, opt("An evaluation's folder of NoR's, OneR's and IRCoT's answers.", "--from")],
    name: Annotated[Optional[str], opt("The router's name \\[default: the evaluation's corpus].")] = None,
    restart: Annotated[bool, flag("Encode the questions again instead of resuming.")] = False,
    *,
    root: Path,
    output: Output,
) -> None:
    """Train Adaptive-RAG's router from an evaluation's own answers: the simplest of NoR, OneR and IRCoT that
    answered each question right. `mhindex ask --method adaptive` uses it for the corpus without further flags."""
    from mhindex.training.adaptive import train

    with ui.graceful_interrupts(kept="the encoded questions are kept to resume from"):
        result = train(root, folder, name, restart)
    output.show(result.record(), render.router_summary(result))
