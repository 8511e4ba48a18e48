"""Evaluation from Python: run methods on a corpus's questions (`evaluate`, as `mhindex eval`), read a run
folder back (`read_evaluation`), its table and paired differences as data, its answers, and its report."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast, overload

from mhindex._api.answering import Answer, _model_options
from mhindex._api.corpora import Corpus
from mhindex._api.terms import python_terms, python_terms_class
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.errors import UsageError, expect
from mhindex.home import resolve_home
from mhindex.methods import DEFAULT_EVAL_METHODS


def _frame(rows: list[dict[str, Any]], as_frame: bool | None) -> Any:
    """Rows as a pandas DataFrame where pandas is installed (or asked for), else as they are."""
    if as_frame is False:
        return rows
    try:
        import pandas
    except ImportError:
        if as_frame:
            raise UsageError("a DataFrame needs pandas: pip install pandas") from None
        return rows
    return pandas.DataFrame(rows)


def _in_percent(row: dict[str, Any]) -> dict[str, Any]:
    """A row of metrics.json with each score, its interval's half width and its interval in percent, as the table
    prints them."""
    from mhindex.eval.report import columns

    scores = {key for _, key, _, scale in columns() if scale == 100}
    scaled = scores | {f"{key}_ci95" for key in scores}
    bounds = {f"{key}_interval" for key in scores}

    def shown(key: str, value: Any) -> Any:
        if key in scaled and isinstance(value, int | float) and not isinstance(value, bool):
            return value * 100
        if key in bounds and isinstance(value, list):
            return [bound * 100 for bound in value]
        return value

    return {key: shown(key, value) for key, value in row.items()}


def _difference_in_points(row: dict[str, Any]) -> dict[str, Any]:
    """A paired row in points, its interval only where the questions are enough to state one (as `eval` prints)."""
    from mhindex.eval.metrics import TOO_FEW, stated_interval

    interval = stated_interval(row)
    return {
        **row,
        "difference": row["difference"] * 100,
        "ci95": [bound * 100 for bound in interval] if interval else None,
        **({} if interval else {"no_interval": TOO_FEW}),
    }


@python_terms_class
class Evaluation:
    """An evaluation folder: what `metrics.json` holds (`report`), each method's answers, the report page."""

    def __init__(self, folder: Path, report: dict[str, Any], home: Path | None = None) -> None:
        self.folder, self.report, self._home = folder, report, home

    def __repr__(self) -> str:
        return f"Evaluation({str(self.folder)!r}, methods={self.methods}, questions={self.report.get('questions')})"

    @property
    def methods(self) -> list[str]:
        """The rows of the table (a swept variant as `oner@k=5`)."""
        return list(self.report["methods"])

    @property
    def failed(self) -> int:
        """Answers that failed (an error instead of an answer); each scores 0, and running it again asks them again."""
        return sum(int(row.get("failed", 0)) for row in self.report["methods"].values())

    def table(self, as_frame: bool | None = None) -> Any:
        """The paper-style table: a row per method with its metrics (`f1`, `em`, `recall`, `lm_calls_per_question`,
        `seconds_per_question`...), as a pandas DataFrame where pandas is installed, else a list of dicts
        (`as_frame=False`: always). Scores are in percent, as `mhindex eval` prints them and papers print theirs
        (`report` holds metrics.json's fractions). A paper's table (`table=`) adds each row's label in the paper
        (`paper_row`) and the paper's figures beside ours (`paper: F1 (GPT3)`...)."""
        rows = (self.report.get("table") or {}).get("rows") or {}

        def beside(name: str) -> dict[str, Any]:
            row = rows.get(name)
            if not isinstance(row, dict):
                return {}
            figures = {f"paper: {label}": value for label, value in (row.get("paper") or {}).items()}
            return {"paper_row": row.get("row"), "added": bool(row.get("added")), **figures}

        methods = self.report["methods"].items()
        return _frame([{"method": n, **beside(n), **_in_percent(row)} for n, row in methods], as_frame)

    def paired(self, as_frame: bool | None = None) -> Any:
        """Each pair of methods on the same questions: a minus b's mean difference per metric, its 95% paired
        bootstrap interval (`ci95`), in percentage points as `eval` prints them, and how many questions each won. Under
        ten paired questions there is no interval to state: `ci95` is None and `no_interval` says why."""
        return _frame([_difference_in_points(row) for row in self.report.get("paired", [])], as_frame)

    def spread(self, as_frame: bool | None = None) -> Any:
        """With `seeds=` (a row that samples run on several seeds): each draw of a sampled row (`draw`) minus every
        other row, per metric, in points beside its interval as `paired` gives them, and what the draws say together
        (`verdict`: "holds on every seed", "the seed decides the sign"...); each draw's own scores are its row of
        `table()`. Empty without seeds."""
        rows = [
            {
                "row": entry["row"],
                "draw": draw,
                "other": pair["other"],
                "metric": pair["metric"],
                **_difference_in_points(found),
                "verdict": pair.get("verdict"),
            }
            for entry in self.report.get("spread") or []
            for pair in entry["against"]
            for draw, found in pair["by_draw"].items()
        ]
        return _frame(rows, as_frame)

    def answers(self, method: str) -> list[Answer]:
        """One method's answers, in the order they were written (failed ones with their `error`)."""
        from mhindex.eval.run import read_predictions

        if method not in self.report["methods"]:
            raise UsageError(f"{self.folder}: no method {method!r}; it has {', '.join(self.methods)}")
        if not (self.folder / f"{method}.jsonl").is_file():
            raise UsageError(f"{self.folder}: metrics.json reports {method!r}, but its answers {method}.jsonl are gone")
        return [Answer.from_record(record) for record in read_predictions(self.folder / f"{method}.jsonl")]

    def write_report(self, out: Path | str = "report.html", title: str | None = None) -> Path:
        """The evaluation as one self-contained HTML page (`mhindex report`); returns its path."""
        from mhindex.eval.browse import build_report, write_report

        return write_report(build_report([self.folder], resolve_home(self._home), None, title), Path(out))


@python_terms
def read_evaluation(folder: Path | str, *, home: Path | str | None = None) -> Evaluation:
    """An `mhindex eval` output folder (or its metrics.json), read back."""
    from mhindex.eval.browse import read_metrics

    path = Path(folder).expanduser()
    return Evaluation(path if path.is_dir() else path.parent, read_metrics(path), resolve_home(home))


@python_terms
def latest_evaluation(corpus: Corpus | str | None = None, *, home: Path | str | None = None) -> Evaluation:
    """The corpus's evaluation written last (by its metrics.json; `mhindex report` with no folder reads it);
    with no corpus, the default one's."""
    from mhindex.eval.browse import latest_run

    root = resolve_home(home if home is not None or not isinstance(corpus, Corpus) else corpus.path.parent)
    return read_evaluation(latest_run(root, corpus.name if isinstance(corpus, Corpus) else corpus), home=root)


def _method_names(methods: Sequence[str] | str | None, table: str | None) -> list[str]:
    """`methods` as names (a comma-separated string too), each checked; eval's defaults with neither them nor a
    table."""
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    for method in methods or ():
        expect(method, str, "each of methods", "a method's name")
    return list(methods or ()) if methods is not None or table is not None else list(DEFAULT_EVAL_METHODS)


def _check_call(given: dict[str, Any], corpus: Any, table: Any) -> None:
    """`evaluate`'s arguments checked as `mhindex eval` checks its options (same bounds, choices and messages)."""
    from mhindex.eval.settings import EvalSettings
    from mhindex.options import settings_from

    settings_from(EvalSettings, given, "eval")
    out = given["out"]
    if out is not None and Path(out).expanduser().exists() and not Path(out).expanduser().is_dir():
        raise UsageError(f"out must be a folder (an evaluation's), and {out} is a file")
    expect(corpus, (Corpus, str), "corpus", "a Corpus or a corpus's name")
    expect(table, (str, type(None)), "table", "a paper's table, as --table takes it")


@python_terms
def evaluate(
    corpus: Corpus | str,
    methods: Sequence[str] | None = None,
    *,
    table: str | None = None,
    limit: int | None = None,
    seed: int = 13370,
    split: str = "auto",
    sweep: Sequence[str] = (),
    seeds: int = 1,
    tune_on: int | None = None,
    tune_metric: str = "recall",
    questions_of: Path | str | None = None,
    out: Path | str | None = None,
    budget: int = 15,
    judge_lm: str | None = None,
    backend: str = DEFAULT_BACKEND,
    backend_options: dict[str, Any] | None = None,
    lm: str | None = None,
    lm_threads: int | None = None,
    lm_context: int | None = None,
    cache: bool = True,
    lm_timeout: float | None = None,
    workers: int = 1,
    home: Path | str | None = None,
    **settings: Any,
) -> Evaluation:
    """Run `methods` (default: NoR, OneR and IRCoT) on a seeded sample of the corpus's questions and score them,
    as `mhindex eval` does (same folder, same resuming, same table); `table`: every row of a paper's table
    ("EfficientRAG", "SearChain", "IRCoT", "KD-CoT"), each with its paper's settings, before any `methods`;
    `settings`: the methods' settings as keywords; `seeds`: each row that samples run that many times (`spread()`).
    A table's rows are the paper's as the methods claim them (`Method.tables`); `methods` beside it are mhindex's."""
    from mhindex.backends import BackendSpec
    from mhindex.eval.rerun import reported_questions
    from mhindex.eval.run import EvalPlan
    from mhindex.eval.run import evaluate as run_evaluation
    from mhindex.eval.tables import plan_table
    from mhindex.home import open_corpus
    from mhindex.lm import resolve_spec
    from mhindex.methods.session import Session

    given = dict(limit=limit, seed=seed, split=split, sweep=list(sweep), seeds=seeds, tune_on=tune_on, out=out,
                 tune_metric=tune_metric, questions_of=questions_of, budget=budget, judge_lm=judge_lm)  # fmt: skip
    _check_call(given, corpus, table)
    names = _method_names(methods, table)
    root = resolve_home(home if home is not None or not isinstance(corpus, Corpus) else corpus.path.parent)
    opened = open_corpus(root, corpus if isinstance(corpus, str) else corpus.name)
    planned = plan_table(table, opened.manifest().get("dataset")) if table is not None else None
    spec = BackendSpec.parse(backend, backend_options)
    model = _model_options(lm, lm_threads, lm_context, cache, lm_timeout)
    model = dataclasses.replace(model, lm=resolve_spec(model.lm))
    plan = EvalPlan.make(
        opened,
        names,
        (spec.label, spec.label if spec.parts else spec.name, str(model.lm)),
        settings,
        list(sweep),
        [(row.method, row.overrides) for row in planned.rows] if planned else (),
        limit=limit,
        seed=seed,
        split=split,
        tune_limit=tune_on,
        tune_metric=tune_metric,
        seeds=seeds,
        out=Path(out).expanduser() if out is not None else None,
        workers=workers,
        budget=budget,
        judge=judge_lm,
        table=planned.record() if planned else None,
        question_ids=reported_questions(Path(questions_of).expanduser()) if questions_of is not None else None,
    )

    opening = functools.partial(Session, opened, methods=plan.methods, backend=spec, model=model, home=root,
                                workers=workers, judge=judge_lm)  # fmt: skip
    result = run_evaluation(plan, opening, home=root)
    return read_evaluation(result.folder, home=root)  # as any later reader sees it (JSON's lists, not tuples)


def rerun_folder(folder: Path, home: Path, out: Path | None = None) -> Any:
    """`mhindex rerun`: the evaluation `folder` records made again (eval.rerun.rerun) with the session its run.json
    records: its backend, model, threads and context, the call cache off."""
    from mhindex.eval.rerun import rerun
    from mhindex.methods.session import session_of_record

    return rerun(
        folder, home, lambda plan, run: session_of_record(plan.corpus, plan.methods, run, home, plan.judge), out
    )


@overload
def score(
    predictions: Path | str, questions: Path | str, *, budget: int = 15, home: Path | str | None = None
) -> dict[str, Any]: ...


@overload
def score(
    predictions: Sequence[Path | str], questions: Path | str, *, budget: int = 15, home: Path | str | None = None
) -> dict[str, dict[str, Any]]: ...


@python_terms
def score(
    predictions: Path | str | Sequence[Path | str],
    questions: Path | str,
    *,
    budget: int = 15,
    home: Path | str | None = None,
) -> dict[str, Any]:
    """Predictions files (`ask --json` records, one a line) scored against a questions file or a corpus name, as
    `mhindex score`: one file's metrics, or for a list of files each one's metrics by the name `score` shows it
    under (as metrics.json's `methods`; `paired` differences are what `mhindex score` adds)."""
    from mhindex.eval.run import score_files
    from mhindex.eval.settings import EvalSettings
    from mhindex.options import settings_from

    settings_from(EvalSettings, {"budget": budget}, "score")  # the bounds `mhindex score` checks, with its message
    one = isinstance(predictions, str | Path)
    files: list[Any] = [predictions] if one else list(cast(Sequence[Path | str], predictions))
    if not files or not all(isinstance(file, str | Path) for file in files):
        raise UsageError(f"predictions must be a path or a list of paths, not {predictions!r}")
    scored = score_files([Path(file).expanduser() for file in files], str(questions), budget, resolve_home(home))
    return dict(next(iter(scored.methods.values()))) if one else {name: dict(m) for name, m in scored.methods.items()}


@python_terms
def diff(first: Path | str, second: Path | str) -> list[str]:
    """What differs between two evaluations' environments, from the fingerprint their folders' run.json record (or
    a served index's /info, `http://HOST:PORT`): the corpus (sha256, release files, converter options), the
    backend with every setting that changes a ranking and how queries are read, and between two evaluations the
    model (its file's and chat template's sha256, its context) and each method's settings; one line a difference,
    [] when they are comparable (what only one side records is not compared: `mhindex diff` lists it)."""
    from mhindex.eval.environment import compare

    differences: list[str] = compare(first, second)["differences"]
    return differences
