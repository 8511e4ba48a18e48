"""Training: `train efficientrag` fits EfficientRAG's Labeler & Tagger and Filter on a built
corpus's gold decompositions, where `ask --method efficientrag` then finds them."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mhindex import ui
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.cli.app import BackendOption, HomeOption, JsonOption, QuietOption, app, console, print_json, setup
from mhindex.eval.splits import SPLIT_HELP

train_app = typer.Typer(
    help="Train the small models a method needs (EfficientRAG's Labeler & Tagger and Filter).", no_args_is_help=True
)
app.add_typer(train_app, name="train")


@train_app.command()
def efficientrag(
    corpus_name: Annotated[
        str,
        typer.Option(
            "--from",
            help="The built corpus to learn from (MuSiQue: its gold question decompositions).",
            show_default=False,
        ),
    ],
    encoder: Annotated[
        Optional[str],
        typer.Option(
            help="A local transformers encoder folder (e.g. DeBERTa-v3) \\[default: the packaged MiniLM].",
            show_default=False,
        ),
    ] = None,
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the training examples.")] = 4,
    batch_size: Annotated[int, typer.Option(min=1, help="Examples per optimiser step.")] = 16,
    learning_rate: Annotated[
        float,
        typer.Option(
            "--lr", min=0.0, help="AdamW's peak learning rate (linear warm-up over a tenth of the steps, then decay)."
        ),
    ] = 3e-4,
    held_out: Annotated[
        float,
        typer.Option(min=0.0, max=0.99, help="Share of the questions kept out of training to score the models on."),
    ] = 0.1,
    seed: Annotated[int, typer.Option(help="Seed of the batch order.")] = 13370,
    split: Annotated[str, typer.Option(help=SPLIT_HELP)] = "auto",
    device: Annotated[str, typer.Option(help="auto (CUDA when available), cpu or cuda.")] = "auto",
    backend: BackendOption = DEFAULT_BACKEND,
    checkpoint_every: Annotated[int, typer.Option(min=1, help="Optimiser steps between checkpoints.")] = 50,
    stop_after: Annotated[
        Optional[int],
        typer.Option(
            min=1,
            help="Stop after this many optimiser steps (both models together); the same command without it resumes.",
            show_default=False,
        ),
    ] = None,
    threads: Annotated[
        Optional[int], typer.Option(min=1, help="CPU threads \\[default: all cores].", show_default=False)
    ] = None,
    restart: Annotated[
        bool, typer.Option("--restart", metavar="", help="Start over instead of resuming from the last checkpoint.")
    ] = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Train EfficientRAG's Labeler & Tagger and Filter from a corpus's gold decompositions, with no LLM.

    The models go to <home>/models/efficientrag/NAME/, with trained.json (what they learnt from,
    held-out scores); `mhindex ask --method efficientrag` uses them without further flags.
    """
    from mhindex.backends import BackendSpec
    from mhindex.home import open_corpus
    from mhindex.training.efficientrag import TrainSettings, train

    root = setup(home, quiet)
    corpus = open_corpus(root, corpus_name)
    settings = TrainSettings(
        encoder=encoder,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        held_out=held_out,
        seed=seed,
        split=split,
        device=device,
        checkpoint_every=checkpoint_every,
        stop_after=stop_after,
        backend=backend,
        threads=threads,
    )
    with ui.graceful_interrupts(kept="the work done so far is kept to resume from"):
        result = train(root, corpus, settings, BackendSpec.parse(backend), restart=restart)
    if json:
        print_json(
            {
                "folder": str(result.folder),
                "complete": result.complete,
                "steps": result.steps,
                "resumed_from": result.resumed_from,
                **result.report,
            }
        )
        return
    out = console()
    if not result.complete:
        out.print(
            f"stopped after {result.steps} steps; the checkpoint is in {result.folder}: run the same command "
            "without --stop-after to resume"
        )
        return
    scores = result.report.get("held_out", {})
    shown = ", ".join(f"{key} {value}" for key, value in scores.items())
    trained = len(result.report.get("trained_question_ids") or ()) or result.report.get("questions")
    out.print(
        f"EfficientRAG's models are in {result.folder} (trained on {trained} {result.report.get('split', '')} "
        f"questions of '{corpus.name}', {result.report.get('held_out_questions', 0)} more held out to score them); "
        f"held out: {shown}"
    )
