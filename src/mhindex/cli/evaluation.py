"""Evaluation: `eval` methods on a corpus's questions, `score` a predictions file, `chart` several runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Optional

import typer

from mhindex import ui
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.cli.answering import WorkersOption
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
)
from mhindex.eval.splits import SPLIT_HELP
from mhindex.methods import DEFAULT_EVAL_METHODS, METHODS, paper_tables

JudgeOption = Annotated[
    Optional[str],
    typer.Option(
        "--judge-lm",
        help="Also score EfficientRAG's Accuracy: this LM (any --lm spec) judges each answer with the released "
        "prompt \\[default: none].",
        show_default=False,
    ),
]


FormatOption = Annotated[
    str, typer.Option("--format", help="The table as text (on the terminal), md (Markdown) or latex (booktabs).")
]


def _show_metrics(metrics: dict, title: str, chart: Path | None, dataset: str = "", form: str = "text") -> None:
    from mhindex.eval.report import bar_chart, table, table_text, terminal_bars

    if form in ("md", "latex"):
        print(table_text(metrics, title, form), end="")
        if chart is not None:
            bar_chart({dataset: metrics}, chart, title)
        return
    out = console()
    out.print(table(metrics, title))
    if chart is not None:
        bar_chart({dataset: metrics}, chart, title)
        out.print(f"[dim]chart: {chart}[/dim]")
    if out.is_terminal:
        out.print(terminal_bars(metrics))


def _check_format(form: str) -> None:
    if form not in ("text", "md", "latex"):
        from mhindex.errors import UsageError

        raise UsageError(f"--format must be text, md or latex, not {form!r}")


@app.command(name="eval")
@method_options
@backend_options
@model_options
def eval_(
    name: Annotated[str, typer.Argument(help="Corpus whose questions.jsonl is evaluated.", show_default=False)],
    methods: Annotated[
        Optional[str],
        typer.Option(
            "--method",
            "-m",
            help=f"Comma-separated methods, of: {', '.join(METHODS.available())} \\[default: "
            f"{','.join(DEFAULT_EVAL_METHODS)}, unless --table].",
            show_default=False,
        ),
    ] = None,
    table: Annotated[
        Optional[str],
        typer.Option(
            "--table",
            help=f"Every row of a paper's table, each with the paper's settings: {', '.join(paper_tables())} "
            "(`mhindex list methods` shows whose rows); --method adds others.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        Optional[int],
        typer.Option(
            min=1, help="Evaluate a seeded sample of this many questions \\[default: all].", show_default=False
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the question sample.")] = 13370,
    split: Annotated[str, typer.Option(help=SPLIT_HELP)] = "auto",
    sweep: Annotated[
        Optional[list[str]],
        typer.Option(
            metavar="[METHOD.]SETTING=V,V,...",
            help="Run each method once per value, as METHOD@SETTING=V with its own predictions file (repeatable; "
            "several multiply): --sweep oner.k=5,10,15 --sweep ircot.k=2,4,6,8.",
            show_default=False,
        ),
    ] = None,
    tune_on: Annotated[
        Optional[int],
        typer.Option(
            min=1,
            help="Pick each method's best --sweep setting on this many questions, then report it on --limit others "
            "(disjoint, as IRCoT's paper chose K on 100 dev questions); a method not swept answers only the others.",
            show_default=False,
        ),
    ] = None,
    tune_metric: Annotated[str, typer.Option(help="What --tune-on maximises: recall, f1 or em.")] = "recall",
    table_format: FormatOption = "text",
    out: Annotated[
        Optional[Path],
        typer.Option(
            help="Output folder \\[default: <home>/NAME/eval/<lm>-<backend>-s<seed>; a larger --limit grows it].",
            show_default=False,
        ),
    ] = None,
    budget: Annotated[
        int, typer.Option(min=1, help="Recall counts the first this many paragraphs retrieved (IRCoT's budget).")
    ] = 15,
    judge_lm: JudgeOption = None,
    backend: BackendOption = DEFAULT_BACKEND,
    workers: WorkersOption = 1,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
    method_options: dict | None = None,
    backend_options: dict | None = None,
    model_options: dict | None = None,
) -> None:
    """Run methods on a reproducible sample of a corpus's questions and print the paper-style table.

    Predictions are appended to <out>/<method>.jsonl as each question finishes, so an interrupted run
    resumes where it stopped; metrics go to <out>/metrics.json and a recall/F1 chart to <out>/chart.png.
    """
    from mhindex._api.evaluation import evaluate

    _check_format(table_format)
    root = setup(home, quiet)
    with ui.graceful_interrupts():
        result = evaluate(
            name,
            None if methods is None else [m.strip() for m in methods.split(",") if m.strip()],
            table=table,
            limit=limit,
            seed=seed,
            split=split,
            sweep=sweep or [],
            tune_on=tune_on,
            tune_metric=tune_metric,
            out=out,
            budget=budget,
            judge_lm=judge_lm,
            backend=backend,
            backend_options=backend_options,
            workers=workers,
            home=root,
            **dataclasses.asdict(model_from(model_options)),
            **(method_options or {}),
        )
    report = result.report
    if json:
        print_json(report)
    else:
        title = (
            f"{name}: {report['questions']} {report['split'].replace('all', '')} questions, {report['lm']}, {backend}"
        )
        _show_metrics(report["methods"], " ".join(title.split()), None, form=table_format)
        if table_format != "text":
            return
        from mhindex.eval.report import paired_table, tuned_summary

        if report["paired"]:
            console().print(paired_table(report["paired"]))
        for method, tuned in report.get("tuned", {}).items():
            console().print(f"{method}: {tuned_summary(tuned)}")
        console().print(f"[dim]predictions, metrics.json and chart.png in {result.folder}[/dim]")
        console().print(f"[dim]browse them question by question: mhindex report {result.folder}[/dim]")
    failed = sum(summary["failed"] for summary in report["methods"].values())
    if failed:  # as `ask -`: the table is written, and the exit code says it is not whole
        ui.reporter().warning(f"{failed} answers failed and score 0 in the table; the same command asks them again")
        raise typer.Exit(1)


@app.command()
def score(
    predictions: Annotated[
        Path, typer.Argument(help="A predictions file (ask --json records, one a line).", show_default=False)
    ],
    questions: Annotated[
        str,
        typer.Option(
            "--questions",
            help="A corpus name (its questions.jsonl) or a questions.jsonl with gold answers and gold paragraph ids.",
        ),
    ],
    budget: Annotated[int, typer.Option(min=1, help="Recall counts the first this many paragraphs retrieved.")] = 15,
    chart: Annotated[
        Optional[Path], typer.Option(help="Also write a recall/F1 bar chart here (PNG).", show_default=False)
    ] = None,
    judge_lm: JudgeOption = None,
    table_format: FormatOption = "text",
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Score an existing predictions file against a question file."""
    _check_format(table_format)
    from mhindex.eval.run import score_file
    from mhindex.lm import ModelOptions

    root = setup(home, quiet)
    with ui.graceful_interrupts(kept="the judge's calls so far are cached"):
        summary, questions_file = score_file(predictions, questions, budget, root, judge_lm, ModelOptions())
    if json:
        print_json(summary)
        return
    _show_metrics(
        summary, f"{predictions.name}, scored on {questions_file}", chart, questions_file.parent.name, table_format
    )


@app.command()
def chart(
    runs: Annotated[
        list[Path],
        typer.Argument(help="Evaluation folders (or their metrics.json), one per dataset.", show_default=False),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The PNG to write.")] = Path("chart.png"),
    title: Annotated[
        Optional[str], typer.Option(help="Title \\[default: the model and the question count].", show_default=False)
    ] = None,
    quiet: QuietOption = False,
) -> None:
    """Draw several `mhindex eval` runs in one figure: recall and F1 per dataset, methods side by side."""
    from mhindex.eval.report import chart_runs

    setup(None, quiet)
    console().print(f"chart: {chart_runs(runs, out, title)}")


@app.command()
def curve(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Evaluation folders with --sweep runs (or their metrics.json), a panel each.", show_default=False
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The PNG to write.")] = Path("curve.png"),
    title: Annotated[Optional[str], typer.Option(help="Title \\[default: the model].", show_default=False)] = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Recall of gold paragraphs against paragraphs retrieved, a line per method over its sweep (IRCoT's Figure 3)."""
    from mhindex.eval.report import budget_curve, curve_table

    setup(None, quiet)
    path, rows = budget_curve(runs, out, title)
    if json:
        print_json({"figure": str(path), "points": rows})
        return
    console().print(curve_table(rows))
    console().print(f"curve: {path}")


@app.command()
def report(
    runs: Annotated[
        Optional[list[Path]],
        typer.Argument(
            metavar="EVAL_DIR",
            help="Evaluation folders (`mhindex eval` outputs): any datasets, methods \\[default: the latest "
            "evaluation of --corpus].",
            show_default=False,
        ),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write.")] = Path("report.html"),
    questions: Annotated[
        Optional[Path],
        typer.Option(
            help="The questions file with gold answers \\[default: the questions of the corpus each run names].",
            show_default=False,
        ),
    ] = None,
    title: Annotated[
        Optional[str], typer.Option(help="The page's title \\[default: mhindex evaluation report].", show_default=False)
    ] = None,
    corpus: Annotated[
        Optional[str],
        typer.Option(
            "--corpus",
            "-c",
            help="With no EVAL_DIR: this corpus's latest evaluation \\[default: the default corpus].",
            show_default=False,
        ),
    ] = None,
    home: HomeOption = None,
    quiet: QuietOption = False,
) -> None:
    """One self-contained HTML file to browse evaluations: the tables and charts, every question with each
    method's answer, and one question's traces and paragraphs side by side. Opens from disk, no server."""
    from mhindex.eval.browse import build_report, write_report

    root = setup(home, quiet)
    if not runs:
        from mhindex._api.evaluation import latest_evaluation

        runs = [latest_evaluation(corpus, home=root).folder]
        ui.reporter().info(f"report of {runs[0]}, the latest evaluation of corpus '{runs[0].parent.parent.name}'")
    with ui.graceful_interrupts(kept="the page is written whole or not at all"):
        path = write_report(build_report(runs, root, questions, title), out)
    console().print(f"report: {path} ({path.stat().st_size / 1e6:.1f} MB)")
