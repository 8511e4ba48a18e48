"""The `mhindex` command. Each subcommand parses, calls the library, prints; errors are one
line on stderr with a non-zero exit code (2 for bad input or usage, 1 otherwise)."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer

from mhindex import __version__, render, ui
from mhindex.backends import BACKENDS
from mhindex.errors import MhindexError, UsageError
from mhindex.home import built_corpora, downloads_dir, open_corpus, resolve_home
from mhindex.methods import METHODS

app = typer.Typer(
    name="mhindex",
    help="Multi-hop question answering over your own corpora: build corpora, index them, ask questions.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)

HomeOption = Annotated[
    Optional[Path],
    typer.Option("--home", help="Data root \\[default: $MHINDEX_HOME, else $XDG_DATA_HOME/mhindex, i.e. ~/.local/share/mhindex].", show_default=False),
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", metavar="", help="No progress bars or log lines (results and errors are still printed).")]
JsonOption = Annotated[bool, typer.Option("--json", metavar="", help="Print machine-readable JSON on stdout.")]


class _Globals:
    home: Path | None = None
    quiet: bool = False
    lm: str | None = None


_globals = _Globals()


def _setup(home: Path | None, quiet: bool) -> Path:
    """Apply the options given before or after the subcommand; returns the data root."""
    ui.configure(quiet=quiet or _globals.quiet)
    return resolve_home(home or _globals.home)


def _print_json(value) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _out():
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = 100_000  # in a pipe or a file, never crop a trace; tables are drawn at their natural width
    return console


def _version(value: bool) -> None:
    if value:
        print(f"mhindex {__version__}")
        raise typer.Exit()


LmOption = Annotated[
    Optional[str],
    typer.Option(
        "--lm",
        help="Language model: local:qwen2.5-0.5b (default), local:smollm2-135m, gguf:PATH, hf:PATH, openai:MODEL@URL, openai-chat:MODEL@URL \\[default: $MHINDEX_LM, else local:qwen2.5-0.5b].",
        show_default=False,
    ),
]


def _model_options(command):
    """How to load the language model (mhindex.lm.ModelOptions), for lm, ask and eval alike."""
    from mhindex.lm import ModelOptions
    from mhindex.options import with_options

    return with_options("model_options", lambda: {"model": ModelOptions}, panel="Model options")(command)


def _model(given: dict | None):
    from mhindex.lm import ModelOptions

    options = ModelOptions(**(given or {}))
    return options if options.lm else dataclasses.replace(options, lm=_globals.lm)


@app.callback()
def _root(
    home: HomeOption = None,
    quiet: QuietOption = False,
    lm: LmOption = None,
    version: Annotated[bool, typer.Option("--version", metavar="", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    """Multi-hop question answering over your own corpora.

    Start with [bold]mhindex build musique[/bold] (corpus and index from the bundled sample), then
    [bold]mhindex ask "..."[/bold]. Data lives under --home (or $MHINDEX_HOME).
    """
    _globals.home = home
    _globals.quiet = quiet
    _globals.lm = lm


DatasetArgument = Annotated[str, typer.Argument(help="hotpotqa, 2wikimultihopqa, musique or iirc.", show_default=False)]
InputsOption = Annotated[
    Optional[list[Path]],
    typer.Option("--input", "-i", help="A release file; repeat for several (train, dev, test; ans and full). Default: the downloaded release, else the bundled sample."),
]
NameOption = Annotated[Optional[str], typer.Option(help="Corpus name \\[default: the dataset name].", show_default=False)]
SeedOption = Annotated[int, typer.Option(help="Seed of the deterministic corpus shuffle (IRCoT's).")]
SkipBadOption = Annotated[bool, typer.Option("--skip-bad", metavar="", help="Pass over malformed records (and count them) instead of stopping.")]


def _convert(root: Path, dataset: str, inputs: list[Path] | None, name: str | None, seed: int, force: bool, skip_bad: bool):
    from mhindex.corpora.build import build_dataset

    result = build_dataset(root, dataset, inputs, name=name, seed=seed, force=force, skip_bad=skip_bad)
    for warning in result.warnings:
        ui.reporter().warning(warning)
    return result


@app.command()
def corpus(
    dataset: DatasetArgument,
    inputs: InputsOption = None,
    name: NameOption = None,
    seed: SeedOption = 13370,
    force: Annotated[bool, typer.Option("--force", metavar="", help="Rebuild even if inputs and seed are unchanged.")] = False,
    skip_bad: SkipBadOption = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Convert a dataset release into a deduplicated, shuffled paragraph corpus and a question file."""
    root = _setup(home, quiet)
    result = _convert(root, dataset, inputs, name, seed, force, skip_bad)
    if result.rebuilt and result.stale_indexes:
        backends = ", ".join(result.stale_indexes)
        ui.reporter().warning(f"the {backends} index of {result.corpus.name} was built from the previous corpus: run `mhindex index {result.corpus.name}` (or `mhindex build`) to rebuild it")
    _report_build(result, json)


def _report_build(result, json: bool) -> None:
    if json:
        _print_json({"rebuilt": result.rebuilt, "path": str(result.corpus.root), **result.manifest})
    else:
        _out().print(render.build_summary(result))


@app.command()
def download(
    dataset: Annotated[str, typer.Argument(help="hotpotqa, 2wikimultihopqa, musique or iirc.", show_default=False)],
    only: Annotated[Optional[list[str]], typer.Option("--file", help="Fetch only this release file (repeatable).")] = None,
    home: HomeOption = None,
    quiet: QuietOption = False,
) -> None:
    """Fetch a dataset's official release files into <home>/downloads/DATASET (resumable, verified)."""
    from mhindex.corpora import get_dataset
    from mhindex.corpora.download import download_release

    root = _setup(home, quiet)
    spec = get_dataset(dataset)
    folder = downloads_dir(root, spec.name)
    files = download_release(spec, folder, only)
    _out().print(f"{len(files)} files of {spec.name} in {folder}; next: mhindex corpus {spec.name}")


@app.command(name="list")
def list_(home: HomeOption = None, quiet: QuietOption = False, json: JsonOption = False) -> None:
    """List the corpora built under the data root, with counts, indexes and sizes."""
    root = _setup(home, quiet)
    rows = [c.summary() for c in built_corpora(root)]
    if json:
        _print_json(rows)
    else:
        _out().print(render.corpora_table(rows, root) if rows else f"no corpora in {root}; try: mhindex build musique")


@app.command()
def info(
    name: Annotated[str, typer.Argument(help="Corpus name.", show_default=False)],
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Show one corpus: its manifest (inputs, hashes, seed, counts) and indexes."""
    found = open_corpus(_setup(home, quiet), name)
    summary = {**found.summary(), "manifest": found.manifest()}
    if json:
        _print_json(summary)
    else:
        _out().print(render.corpus_info(summary))


BackendOption = Annotated[str, typer.Option("--backend", "-b", help=f"Retrieval engine: {', '.join(BACKENDS)} (lucene is embedded; see the README).")]


def _backend_options(command):
    """Every registered backend's options, grouped by when they take effect (see mhindex/options.py):
    index-time ones are also accepted when searching, to be checked against what the index was built with."""
    from mhindex.backends import options_types
    from mhindex.options import with_options

    panels = {"index": "Backend options, fixed when the index is built", "search": "Backend options, applied when searching"}
    return with_options("backend_options", options_types, panel=lambda opt: panels.get(opt.stage, "Backend options"))(command)


def _report_index(result, json: bool) -> None:
    if json:
        _print_json({"rebuilt": result.rebuilt, "path": str(result.path), **result.manifest})
    else:
        _out().print(render.index_summary(result))


@app.command()
@_backend_options
def index(
    name: Annotated[str, typer.Argument(help="Corpus name (see mhindex list).", show_default=False)],
    backend: BackendOption = "lucene",
    force: Annotated[bool, typer.Option("--force", metavar="", help="Rebuild even if the index is up to date.")] = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
    backend_options: dict | None = None,
) -> None:
    """Index a built corpus. The new index replaces the old one only when complete."""
    from mhindex.backends import build_index

    root = _setup(home, quiet)
    _report_index(build_index(open_corpus(root, name), backend, backend_options, force=force), json)


@app.command()
@_backend_options
def build(
    dataset: DatasetArgument,
    inputs: InputsOption = None,
    name: NameOption = None,
    backend: BackendOption = "lucene",
    seed: SeedOption = 13370,
    force: Annotated[bool, typer.Option("--force", metavar="", help="Rebuild corpus and index.")] = False,
    skip_bad: SkipBadOption = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
    backend_options: dict | None = None,
) -> None:
    """Corpus, then index, in one command: `mhindex build musique`."""
    from mhindex.backends import build_index

    root = _setup(home, quiet)
    built = _convert(root, dataset, inputs, name, seed, force, skip_bad)
    indexed = build_index(built.corpus, backend, backend_options, force=force)
    if json:
        _print_json({"corpus": {"rebuilt": built.rebuilt, **built.manifest}, "index": {"rebuilt": indexed.rebuilt, **indexed.manifest}})
        return
    _report_build(built, False)
    _report_index(indexed, False)
    if indexed.rebuilt or built.rebuilt:
        _out().print(f'next: mhindex search {built.corpus.name} "your query"   or   mhindex ask "your question" --corpus {built.corpus.name}')


def _write_line(record: dict) -> None:
    sys.stdout.write(orjson.dumps(record).decode() + "\n")
    sys.stdout.flush()


@app.command()
@_backend_options
def search(
    name: Annotated[str, typer.Argument(help="Corpus name.", show_default=False)],
    query: Annotated[str, typer.Argument(help='Query text, or "-" to read JSONL {"id", "query"} from stdin.', show_default=False)],
    k: Annotated[int, typer.Option("-k", min=1, help="Paragraphs per query.")] = 10,
    backend: BackendOption = "lucene",
    batch: Annotated[int, typer.Option(min=1, help="Stdin queries searched together.")] = 64,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
    backend_options: dict | None = None,
) -> None:
    """Search a corpus's index. With "-", one JSONL result per input line, in order:
    {"id", "hits": [{"id", "title", "text", "score"}]}; a bad line gets {"line", "error"}."""
    from mhindex.backends import open_retriever, search_stream
    from mhindex.files import read_jsonl_stream

    root = _setup(home, quiet)
    found = open_corpus(root, name)
    options = backend_options
    retriever = open_retriever(found, backend, options)
    try:
        if query == "-":
            failed = search_stream(retriever, read_jsonl_stream(sys.stdin, "query"), k, batch, _write_line)
            if failed:
                ui.reporter().warning(f"{failed} input lines were not valid queries")
                raise typer.Exit(1)
            return
        hits = retriever.search(query, k)
    finally:
        retriever.close()
    if json:
        _print_json({"query": query, "hits": [h.record() for h in hits]})
    else:
        out = _out()
        out.print(render.hits_table(hits, expand=out.is_terminal) if hits else "no paragraph matches")


def _unescape(text: str) -> str:
    r"""\n, \t and \\ as typed in a shell; everything else (accents, other scripts) as it is."""
    import re

    return re.sub(r"\\([nt\\])", lambda m: {"n": "\n", "t": "\t", "\\": "\\"}[m.group(1)], text)


@app.command(name="lm")
@_model_options
def lm_(
    prompt: Annotated[str, typer.Argument(help="The prompt to complete; \\n and \\t are read as a newline and a tab.", show_default=False)],
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Most tokens to generate.")] = 64,
    stop: Annotated[Optional[list[str]], typer.Option("--stop", help="Stop sequence (repeatable; \\n for a newline, \\t for a tab).")] = None,
    temperature: Annotated[float, typer.Option(help="0 is greedy.")] = 0.0,
    chat: Annotated[bool, typer.Option("--chat", metavar="", help="Send the prompt as one user turn through the chat template.")] = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
    model_options: dict | None = None,
) -> None:
    """Complete one prompt and print the text: a check that a model is set up."""
    root = _setup(home, quiet)
    prompt, stops = _unescape(prompt), [_unescape(s) for s in stop or []]
    with _model(model_options).load(root) as model:
        call = model.chat if chat else model.complete
        completion = call(prompt, max_tokens=max_tokens, stop=stops, temperature=temperature)
        if json:
            _print_json({"lm": model.name, "context_length": model.context_length, **completion.record()})
            return
    print(completion.text)
    ui.reporter().info(
        f"{model.name}: {completion.prompt_tokens} prompt + {completion.completion_tokens} completion tokens "
        f"in {completion.seconds:.2f}s{' (cached)' if completion.cached else ''}"
    )


WorkersOption = Annotated[int, typer.Option(min=1, max=64, help="Questions answered at once (useful with a remote LM).")]
CorpusOption = Annotated[Optional[str], typer.Option("--corpus", "-c", help="Corpus to search \\[default: the only one built].", show_default=False)]


def _method_options(command):
    """Every registered method's settings, as options of `ask` and `eval` (see mhindex/options.py)."""
    from mhindex.methods import settings_types
    from mhindex.options import with_options

    return with_options("method_options", settings_types, panel="Method options")(command)


def _print_trace(answer) -> None:
    out = _out()
    for part in render.trace(answer):
        out.print(part)


@app.command()
@_method_options
@_backend_options
@_model_options
def ask(
    question: Annotated[str, typer.Argument(help='The question, or "-" to read JSONL {"id", "question"} from stdin.', show_default=False)],
    corpus_name: CorpusOption = None,
    method: Annotated[str, typer.Option("--method", "-m", help=f"One of: {', '.join(METHODS)}.")] = "ircot",
    backend: BackendOption = "lucene",
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
    from mhindex.home import pick_corpus
    from mhindex.methods import Query, method_class, settings_for
    from mhindex.methods.session import Session

    root = _setup(home, quiet)
    if not question.strip():
        raise UsageError('the question is empty; ask something, or pass "-" to read JSONL questions from stdin')
    settings = settings_for([method], method_options or {})[method]
    found = pick_corpus(root, corpus_name, required=method_class(method).needs_retriever)
    with ui.graceful_interrupts():
        with Session(found, methods=[method], backend=backend, backend_options=backend_options, model=_model(model_options), home=root) as session:
            solver = session.method(method, settings)
            if question == "-":
                _answer_stream(solver, workers)
                return
            with ui.reporter().activity(f"{method}: starting"):
                answer = solver.answer(Query("cli", question))
    if json:
        _print_json(answer.record())
    else:
        _print_trace(answer)


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

    stats = run_questions(solver, items(), _write_line, workers=workers)
    if stats.interrupted:
        ui.reporter().warning(f"interrupted: {stats.answered} answered, {stats.failed} failed")
        raise typer.Exit(130)
    if stats.failed:
        ui.reporter().warning(f"{stats.failed} of {stats.answered + stats.failed} questions failed")
        raise typer.Exit(1)


def _show_metrics(metrics: dict, title: str, chart: Path | None, dataset: str = "") -> None:
    from mhindex.eval.report import bar_chart, table, terminal_bars

    out = _out()
    out.print(table(metrics, title))
    if chart is not None:
        bar_chart({dataset: metrics}, chart, title)
        out.print(f"[dim]chart: {chart}[/dim]")
    if out.is_terminal:
        out.print(terminal_bars(metrics))


@app.command(name="eval")
@_method_options
@_backend_options
@_model_options
def eval_(
    name: Annotated[str, typer.Argument(help="Corpus whose questions.jsonl is evaluated.", show_default=False)],
    methods: Annotated[str, typer.Option("--method", "-m", help=f"Comma-separated methods, of: {', '.join(METHODS)}.")] = "nor,oner,ircot",
    limit: Annotated[Optional[int], typer.Option(min=1, help="Evaluate a seeded sample of this many questions \\[default: all].", show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="Seed of the question sample.")] = 13370,
    out: Annotated[Optional[Path], typer.Option(help="Output folder \\[default: <home>/NAME/eval/<lm>-<backend>-s<seed>-n<limit>].", show_default=False)] = None,
    budget: Annotated[int, typer.Option(min=1, help="Recall counts the first this many paragraphs retrieved (IRCoT's budget).")] = 15,
    backend: BackendOption = "lucene",
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
    from mhindex.eval.run import evaluate

    root = _setup(home, quiet)
    names = [m.strip() for m in methods.split(",") if m.strip()]
    with ui.graceful_interrupts():
        result = evaluate(
            open_corpus(root, name), names, model=_model(model_options), backend=backend, method_options=method_options, backend_options=backend_options,
            limit=limit, seed=seed, out=out, workers=workers, budget=budget, home=root,
        )  # fmt: skip
    report = result.report
    if json:
        _print_json(report)
        return
    _show_metrics(report["methods"], f"{name}: {report['questions']} questions, {report['lm']}, {backend}", None)
    _out().print(f"[dim]predictions, metrics.json and chart.png in {result.folder}[/dim]")


@app.command()
def score(
    predictions: Annotated[Path, typer.Argument(help="A predictions file (ask --json records, one a line).", show_default=False)],
    questions: Annotated[str, typer.Option("--questions", help="A corpus name (its questions.jsonl) or a questions.jsonl with gold answers and gold paragraph ids.")],
    budget: Annotated[int, typer.Option(min=1, help="Recall counts the first this many paragraphs retrieved.")] = 15,
    chart: Annotated[Optional[Path], typer.Option(help="Also write a recall/F1 bar chart here (PNG).", show_default=False)] = None,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Score an existing predictions file against a question file."""
    from mhindex.eval.run import score_file

    root = _setup(home, quiet)
    summary, questions_file = score_file(predictions, questions, budget, root)
    if json:
        _print_json(summary)
        return
    _show_metrics(summary, f"{predictions.name} against {questions_file.name}", chart, questions_file.parent.name)


@app.command()
def chart(
    runs: Annotated[list[Path], typer.Argument(help="Evaluation folders (or their metrics.json), one per dataset.", show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="The PNG to write.")] = Path("chart.png"),
    title: Annotated[Optional[str], typer.Option(help="Title \\[default: the model and the question count].", show_default=False)] = None,
    quiet: QuietOption = False,
) -> None:
    """Draw several `mhindex eval` runs in one figure: recall and F1 per dataset, methods side by side."""
    from mhindex.eval.report import chart_runs

    _setup(None, quiet)
    _out().print(f"chart: {chart_runs(runs, out, title)}")


def _usage_problem(error: BaseException) -> int | None:
    """Show click's usage errors as one line (a bare `mhindex` shows the help); returns the exit code.

    Recognised by class name along the MRO, not by class: typer 0.29 raises the exceptions of its
    own vendored click (`typer._click`), older typers raise click's, and both must read the same.
    """
    names = {cls.__name__ for cls in type(error).__mro__}
    if "NoArgsIsHelpError" in names:
        error.show()
        return 2
    if "ClickException" in names:
        ctx = getattr(error, "ctx", None)
        hint = f" (see '{ctx.command_path} -h')" if ctx is not None else ""
        message = " ".join(str(error.format_message()).split())
        print(f"mhindex: error: {message}{hint}", file=sys.stderr)
        return int(getattr(error, "exit_code", 2))
    if "Abort" in names:
        print("mhindex: aborted", file=sys.stderr)
        return 1
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code instead of raising, so tests can call it in-process."""
    try:
        code = app(args=argv, prog_name="mhindex", standalone_mode=False)
        if isinstance(code, int):
            return code
    except MhindexError as error:
        message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
        print(f"mhindex: {error.label}: {message}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("mhindex: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if type(error).__name__ == "Exit":  # typer.Exit, from either click
            return int(getattr(error, "exit_code", 0) or 0)
        code = _usage_problem(error)
        if code is None:
            raise
        return code
    return 0


def entry() -> None:
    """The `mhindex` program. After Ctrl-C a model call abandoned in a helper thread may still be
    inside llama.cpp (a long prompt cannot be cut short): everything is written and flushed by
    then, so the process exits without waiting for it."""
    code = main()
    if code == 130:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    raise SystemExit(code)


if __name__ == "__main__":
    entry()
