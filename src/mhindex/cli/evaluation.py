"""Evaluation: `eval` methods on a corpus's questions, `score` a predictions file, `chart` and
`curve` several runs, `report` them as one HTML page."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Optional

import typer

from mhindex import render, ui
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.cli.answering import WorkersOption
from mhindex.cli.app import (
    BackendOption,
    JsonOption,
    Output,
    QuietOption,
    app,
    arg,
    backend_options,
    command,
    method_options,
    model_from,
    model_options,
    opt,
    setup,
)
from mhindex.eval.report import TableFormat
from mhindex.eval.settings import EvalSettings
from mhindex.eval.tables import table_names
from mhindex.methods import DEFAULT_EVAL_METHODS, METHODS
from mhindex.options import flag_of, with_options

FormatOption = Annotated[TableFormat, opt("The table as text (on a terminal), md (Markdown) or latex.", "--format")]
_judge = EvalSettings.__dataclass_fields__["judge_lm"].metadata["option"]
JudgeOption = Annotated[Optional[str], opt(_judge.help, flag_of("judge_lm", _judge))]
METHODS_HELP = (
    f"Comma-separated methods, of: {', '.join(METHODS)} \\[default: {','.join(DEFAULT_EVAL_METHODS)}, unless --table]."
)
TABLE_HELP = (f"A paper's table row for row, as the paper ran each, its figures by ours: {', '.join(table_names())} "
              "(`mhindex list tables`: its rows); --method adds rows of mhindex's own, shown apart.")  # fmt: skip
SCORE_TABLE_HELP = "The files are rows of this paper's table (each named as its row's run: direct-r.jsonl)."
RUNS_HELP = (
    "Evaluation folders (`mhindex eval` outputs): any datasets, methods \\[default: the latest evaluation of --corpus]."
)
PREDICTIONS_HELP = (
    "Prediction files: `ask --json` records (one a line), TREC runs or `search -` results; several side by side."
)


def _show(output: Output, data: dict, view: str | list) -> None:
    """JSON with --json; a table as Markdown or LaTeX text, printed as it is; else rich renderables."""
    if isinstance(view, str) and not output.json:
        print(view, end="")
    else:
        output.show(data, *([] if isinstance(view, str) else view))


@command(name="eval")
@method_options
@backend_options
@model_options
@with_options("eval_options", lambda: {"eval": EvalSettings}, panel="Evaluation options")
def eval_(
    name: Annotated[str, arg("Corpus whose questions.jsonl is evaluated.")],
    methods: Annotated[Optional[str], opt(METHODS_HELP, "--method", "-m")] = None,
    table: Annotated[Optional[str], opt(TABLE_HELP)] = None,
    table_format: FormatOption = TableFormat.text,
    backend: BackendOption = DEFAULT_BACKEND,
    workers: WorkersOption = 1,
    *,
    root: Path,
    output: Output,
    eval_options: dict,
    method_options: dict | None = None,
    backend_options: dict | None = None,
    model_options: dict | None = None,
) -> None:
    """Run methods on a reproducible sample of a corpus's questions and print the paper-style table.

    Predictions are appended to <out>/<method>.jsonl as each question finishes, so an interrupted run
    resumes where it stopped; metrics go to <out>/metrics.json and a recall/F1 chart to <out>/chart.png;
    `mhindex rerun <out>` makes the evaluation again from that record and says which answers moved."""
    from mhindex._api.evaluation import evaluate
    from mhindex.eval.report import evaluation_view

    model = dataclasses.asdict(model_from(model_options))
    with ui.graceful_interrupts():
        result = evaluate(name, methods, table=table, **eval_options, backend=backend, backend_options=backend_options,
                          workers=workers, home=root, **model, **(method_options or {}))  # fmt: skip
    _show(output, result.report, evaluation_view(result.report, name, backend, result.folder, table_format,
                                                 output.terminal))  # fmt: skip
    if result.failed:  # as `ask -`: the table is written, and the exit code says it is not whole
        output.failed(f"{result.failed} answers failed and score 0 in the table; the same command asks them again")


@command()
def score(
    predictions: Annotated[list[Path], arg(PREDICTIONS_HELP)],
    questions: Annotated[
        str, opt("A corpus name (its questions.jsonl) or a questions.jsonl with gold answers and paragraph ids.")
    ],
    budget: Annotated[int, opt("Recall counts the first this many paragraphs retrieved.", min=1)] = 15,
    chart: Annotated[Optional[Path], opt("Also write a recall/F1 bar chart here (PNG).")] = None,
    judge_lm: JudgeOption = None,
    table_format: FormatOption = TableFormat.text,
    table: Annotated[Optional[str], opt(SCORE_TABLE_HELP)] = None,
    *,
    root: Path,
    output: Output,
) -> None:
    """Score prediction files side by side against a question file: one a row, with their paired differences.
    With --json: one file's metrics by its name; several (or --table) as metrics.json has them."""
    from mhindex.eval.report import scored_view
    from mhindex.eval.run import score_files

    with ui.graceful_interrupts(kept="the judge's calls so far are cached"):
        scored = score_files(predictions, questions, budget, root, judge_lm, table=table)
    _show(output, *scored_view(scored, predictions, table_format, output.terminal, chart))


@command()
def rerun(
    folder: Annotated[Path, arg("An evaluation folder (what `mhindex eval` wrote).")],
    page: Annotated[
        Optional[Path], opt("Where the new run goes \\[default: beside it, FOLDER.rerun-TIME].", "--out")
    ] = None,
    *,
    root: Path,
    output: Output,
) -> None:
    """Make an evaluation again from its own folder (corpus hash, index, model, threads, every method's
    settings, the questions), the call cache off, and compare every answer with the recorded one, timings
    aside. Exit code 1 when any differs, naming the questions."""
    from mhindex._api.evaluation import rerun_folder

    with ui.graceful_interrupts():
        again = rerun_folder(folder, root, page)
    output.show(again.record(), *render.rerun_summary(again))
    if again.moved:
        raise typer.Exit(1)


@command()
def diff(
    first: Annotated[
        str, arg("An evaluation folder (what `mhindex eval` wrote), or a served index's http://HOST:PORT.")
    ],
    second: Annotated[str, arg("The other, likewise (a served index's key from $MHINDEX_API_KEY).")],
    *,
    root: Path,
    output: Output,
) -> None:
    """Whether two evaluations (or served indexes) had the same environment: the corpus, every setting that changes a
    ranking, the model and each method's settings; one line per difference, exit code 1 when any."""
    from mhindex.eval.environment import compare

    compared = compare(first, second)
    output.show(compared, render.differences(compared))
    if compared["differences"]:
        raise typer.Exit(1)


@app.command()
def chart(
    runs: Annotated[list[Path], arg("Evaluation folders (or their metrics.json), one per dataset.")],
    out: Annotated[Path, opt("The PNG to write.", "--out", "-o")] = Path("chart.png"),
    title: Annotated[Optional[str], opt("Title \\[default: the model and the question count].")] = None,
    quiet: QuietOption = False,
) -> None:
    """Draw several `mhindex eval` runs in one figure: recall and F1 per dataset, methods side by side."""
    from mhindex.eval.report import chart_runs

    setup(None, quiet)
    ui.result_console().print(f"chart: {chart_runs(runs, out, title)}")


@app.command()
def curve(
    runs: Annotated[list[Path], arg("Evaluation folders with --sweep runs (or their metrics.json), a panel each.")],
    out: Annotated[Path, opt("The PNG to write.", "--out", "-o")] = Path("curve.png"),
    title: Annotated[Optional[str], opt("Title \\[default: the model].")] = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Recall of gold paragraphs against paragraphs retrieved, a line per method over its sweep (IRCoT's Figure 3)."""
    from mhindex.eval.report import budget_curve, curve_table

    setup(None, quiet)
    path, rows = budget_curve(runs, out, title)
    Output(json).show({"figure": str(path), "points": rows}, curve_table(rows), f"curve: {path}")


@command(json=False)
def report(
    runs: Annotated[Optional[list[Path]], arg(RUNS_HELP, metavar="EVAL_DIR")] = None,
    page: Annotated[Path, opt("The HTML file to write.", "--out", "-o")] = Path("report.html"),
    questions: Annotated[
        Optional[Path], opt("The questions file with gold answers \\[default: those of the corpus each run names].")
    ] = None,
    title: Annotated[Optional[str], opt("The page's title \\[default: mhindex evaluation report].")] = None,
    corpus: Annotated[
        Optional[str],
        opt("With no EVAL_DIR: this corpus's latest evaluation \\[default: the default corpus].", "--corpus", "-c"),
    ] = None,
    *,
    root: Path,
    output: Output,
) -> None:
    """One self-contained HTML file to browse evaluations: the tables and charts, every question with each
    method's answer, and one question's traces and paragraphs side by side. Opens from disk, no server."""
    from mhindex.eval.browse import report_page

    with ui.graceful_interrupts(kept="the page is written whole or not at all"):
        path = report_page(runs, page, root, questions, title, corpus, ui.reporter().info)
    output.show(None, f"report: {path} ({path.stat().st_size / 1e6:.1f} MB)")
