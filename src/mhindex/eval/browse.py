"""`mhindex report`: evaluation folders as one self-contained HTML file, browsed question by question.

The overview and the question list are rendered into the page (they read with JavaScript off); one
question's side-by-side view is drawn by a small inline script from a JSON block, so a paragraph
retrieved by four methods for a thousand questions is stored once. Every text goes through Jinja2's
autoescaping or, in the script, `textContent`: a paragraph holding `<script>` shows as text.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from mhindex.errors import UsageError
from mhindex.eval.hops import diagnose
from mhindex.eval.metrics import (
    FEWEST_FOR_AN_INTERVAL,
    KDCOT_METRICS,
    excludes_zero,
    interval_text,
    paired_differences,
    score_one,
)
from mhindex.eval.report import (
    HOP_CAPTION,
    HOP_TITLE,
    PAIRED_LABELS,
    SPREAD_LABELS,
    bar_chart,
    budget_curve,
    dataset_name,
    hop_cells,
    method_name,
    paper_notes,
    read_metrics,
    run_title,
    spread_sections,
    table_cells,
    tuned_summary,
)
from mhindex.methods import trace_of
from mhindex.methods.session import titles

#: Question fields a list can be filtered by, where the dataset has them (MuSiQue's hops, HotpotQA's
#: type and level, 2WikiMultihopQA's type, IIRC's answer type).
FACETS = (("hops", "hops"), ("type", "type"), ("level", "level"), ("answer_type", "answer type"))


@dataclass
class Run:
    """One `mhindex eval` folder: its metrics.json, run.json and each method's predictions."""

    folder: Path
    report: dict
    predictions: dict[str, list[dict]]
    scored: set[str] = field(default_factory=set)  # the question ids of the table, set once the gold is read
    _indexed: dict[str, dict[str, dict]] = field(default_factory=dict, repr=False)

    def by_id(self, method: str) -> dict[str, dict]:
        if method not in self._indexed:
            self._indexed[method] = {p["id"]: p for p in self.predictions[method]}
        return self._indexed[method]

    @property
    def dataset(self) -> str:
        from mhindex.corpora import shown_dataset

        return shown_dataset(self.report.get("dataset"), str(self.report.get("corpus") or self.folder.name))


@dataclass
class DatasetView:
    """The questions of one dataset and every method that answered them, across the folders given."""

    name: str
    runs: list[Run] = field(default_factory=list)
    methods: dict[str, tuple[Run, str]] = field(default_factory=dict)  # column -> (run, method in that run)


def load_run(folder: Path) -> Run:
    from mhindex.eval.run import read_predictions

    report = read_metrics(folder)
    folder = folder if folder.is_dir() else folder.parent
    run_file = folder / "run.json"
    if run_file.is_file():  # metrics.json carries the same fields; run.json is what made the predictions
        try:
            report = {**orjson.loads(run_file.read_bytes()), **report}
        except orjson.JSONDecodeError as error:
            raise UsageError(f"{run_file}: not valid JSON ({error})") from None
    predictions = {}
    for name in report["methods"]:
        file = folder / f"{name}.jsonl"
        if not file.is_file():
            raise UsageError(f"{file}: no such file, though {folder / 'metrics.json'} lists method '{name}'")
        predictions[name] = read_predictions(file)
    return Run(folder, report, predictions)


def _questions_for(run: Run, questions: Path | None, home: Path, cache: dict[Path, dict]) -> dict[str, dict]:
    from mhindex.eval.run import read_questions
    from mhindex.home import open_corpus

    if questions is None:
        corpus = run.report.get("corpus")
        if not corpus:
            raise UsageError(f"{run.folder}: metrics.json names no corpus; give --questions FILE")
        try:
            questions = open_corpus(home, str(corpus)).questions
        except UsageError as error:
            raise UsageError(f"{run.folder}: {error}; or give the questions file with --questions FILE") from None
    if questions not in cache:
        if not questions.is_file():
            raise UsageError(f"{questions}: no such file")
        cache[questions] = read_questions(questions)
    return cache[questions]


def read_paragraphs(corpus: Path, wanted: set[str]) -> dict[str, tuple[str, str]]:
    """Title and text of the `wanted` paragraph ids, in one pass over corpus.jsonl. A line's id is read
    from its first bytes (mhindex writes `{"id":...` first), so a large corpus costs a scan, not a parse."""
    found: dict[str, tuple[str, str]] = {}
    if not wanted or not corpus.is_file():
        return found
    prefix = b'{"id":"'
    with open(corpus, "rb") as handle:
        for line in handle:
            if line.startswith(prefix):
                end = line.find(b'"', len(prefix))
                raw_id = line[len(prefix) : end]
                if b"\\" not in raw_id and raw_id.decode(errors="replace") not in wanted:
                    continue  # an id with an escape in it is parsed whole below
            record = orjson.loads(line)
            if record.get("id") in wanted:
                found[record["id"]] = (str(record.get("title") or ""), str(record.get("text") or ""))
                if len(found) == len(wanted):
                    break
    return found


def _group(runs: list[Run]) -> list[DatasetView]:
    views: dict[str, DatasetView] = {}
    for run in runs:
        view = views.setdefault(run.dataset, DatasetView(run.dataset))
        view.runs.append(run)
        for name in run.predictions:
            # The same method in two folders of one dataset (two models, two backends) keeps both, named apart.
            column = name if name not in view.methods else f"{name} ({run.folder.name})"
            view.methods[column] = (run, name)
    return list(views.values())


def _svg(draw, salt: str) -> str:
    """A matplotlib figure as inline SVG: text kept as text (searchable, small), its ids salted by its place
    in the page (two figures in one page must not share an id; the same inputs give the same page)."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"mhindex-{salt}"}):
        draw(buffer)
    svg = buffer.getvalue()
    return svg[svg.find("<svg") :]


def build_report(folders: list[Path], home: Path, questions_file: Path | None = None, title: str | None = None) -> str:
    """The report's HTML for these evaluation folders."""
    from mhindex import __version__

    if not folders:
        raise UsageError("give at least one evaluation folder (an `mhindex eval` output)")
    runs = [load_run(folder) for folder in folders]
    gold_cache: dict[Path, dict] = {}
    views = _group(runs)
    datasets: list[dict] = []
    data_sets: list[dict] = []
    wanted_paragraphs: dict[Path | None, set[str]] = {}
    for view in views:
        gold: dict[str, dict] = {}
        for run in view.runs:
            gold.update(_questions_for(run, questions_file, home, gold_cache))
        for run in view.runs:
            run.scored = _scored_ids(run, gold, home)
        answered = _answered(view, gold)
        datasets.append(_dataset_page(view, gold, answered))
        data_sets.append(_dataset_data(view, gold, answered))
        corpus_path = _corpus_path(view.runs[0], home)
        wanted_paragraphs.setdefault(corpus_path, set()).update(_paragraph_ids(data_sets[-1]))
    paragraphs: dict[str, list[str]] = {}
    for corpus_path, wanted in wanted_paragraphs.items():
        if corpus_path is not None:
            paragraphs.update({pid: list(pair) for pid, pair in read_paragraphs(corpus_path, wanted).items()})
    for data in data_sets:  # titles the predictions carry, for paragraphs the corpus no longer has
        for pid, title_seen in data.pop("titles").items():
            paragraphs.setdefault(pid, [title_seen, ""])
    payload = orjson.dumps({"datasets": data_sets, "paragraphs": paragraphs}).decode()
    # Inside <script type="application/json">, "</script>" would end the block: JSON's \u escapes keep it inert.
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    environment = _environment()
    return environment.get_template("report.html.j2").render(
        title=title or "mhindex evaluation report",
        datasets=datasets,
        payload=payload,
        version=__version__,
        fewest=FEWEST_FOR_AN_INTERVAL,
        hop_caption=HOP_CAPTION,
        spread_labels=SPREAD_LABELS,
    )


def _corpus_path(run: Run, home: Path) -> Path | None:
    from mhindex.home import corpus_dir

    corpus = run.report.get("corpus")
    if not corpus:
        return None
    try:
        return corpus_dir(home, str(corpus)).corpus
    except UsageError:
        return None


def _paragraph_ids(data: dict) -> set[str]:
    ids: set[str] = set()
    for question in data["questions"]:
        ids.update(question["gold_ids"])
        for answer in question["answers"].values():
            ids.update(answer["retrieved"])
            for step in answer["trace"]:
                ids.update(step["ids"])
    return ids


def _environment():
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("mhindex.eval", "templates"),
        autoescape=True,  # every value is text unless marked safe (only the SVG charts matplotlib drew)
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["pct"] = lambda value: "–" if value is None else f"{value * 100:.0f}"
    return environment


def _is_right(score: dict | None) -> bool:
    """Exact match, or on WebQSP and CWQ the measure their papers report (KD-CoT's Hit@1)."""
    if not score:
        return False
    return bool((score.get("kdcot_hit1", score["em"]) or 0.0) >= 1.0)  # None: a retrieval-only record


#: Per listed question id: each column that answered it, with its record and its scores (None: it failed).
Answered = dict[str, dict[str, tuple[dict, dict | None]]]


def _answered(view: DatasetView, gold: dict[str, dict]) -> Answered:
    """Each (question, method) scored once, for the list and for the one-question view alike."""
    answered: Answered = {}
    for qid in _question_ids(view, gold):
        answered[qid] = {}
        for column, (run, name) in view.methods.items():
            record = run.by_id(name).get(qid) if qid in run.scored else None
            if record is not None:
                budget = run.report.get("budget") or 15
                answered[qid][column] = (record, None if "error" in record else score_one(record, gold[qid], budget))
    return answered


def _dataset_data(view: DatasetView, gold: dict[str, dict], answered: Answered) -> dict:
    """What the script needs to draw one question: per method its answer, scores, trace and paragraphs."""
    titles: dict[str, str] = {}
    questions = []
    for qid, columns in answered.items():
        question = gold[qid]
        answers = {}
        for column, (record, scored) in columns.items():
            for paragraph in record.get("retrieved", []):
                titles.setdefault(paragraph["id"], str(paragraph.get("title") or ""))
            answers[column] = {
                "answer": record.get("answer", ""),
                "error": record.get("error"),
                "scores": None
                if scored is None
                else {"em": scored["em"], "f1": scored["f1"], "recall": scored["recall"]},
                "right": _is_right(scored),
                "cost": {k: record.get(k) for k in ("lm_calls", "prompt_tokens", "completion_tokens", "seconds")},
                "retrieved": [p["id"] for p in record.get("retrieved", [])],
                "trace": trace_of(record, view.methods[column][1]),
            }
        questions.append(
            {
                "id": qid,
                "question": question.get("question", ""),
                "gold_answers": question.get("answers", []),
                "gold_ids": question.get("gold_ids", []),
                "answers": answers,
            }
        )
    methods = [[column, _column_name(column)] for column in view.methods]
    return {"name": view.name, "methods": methods, "questions": questions, "titles": titles}


def _question_ids(view: DatasetView, gold: dict[str, dict]) -> list[str]:
    """The questions the runs scored, in the questions file's order. A folder's predictions file may hold
    more (a larger --limit once): the table's sample is what is listed. A scored question the file does
    not have is a one-line error (the folder and the questions do not belong together)."""
    asked: set[str] = set()
    for run in view.runs:
        unknown = set(run.scored) - gold.keys()
        if unknown:
            raise UsageError(
                f"{run.folder}: {len(unknown)} questions scored there are not in the questions file "
                f"(first: {sorted(unknown)[0]}); give the corpus's own with --questions"
            )
        asked |= run.scored
    return [qid for qid in gold if qid in asked]


def _scored_ids(run: Run, gold: dict[str, dict], home: Path) -> set[str]:
    """metrics.json's question ids; for a folder from before eval wrote them, its seeded sample drawn again
    from the corpus (as eval draws it), kept where every id has a prediction, else every predicted id."""
    if isinstance(run.report.get("question_ids"), list):
        return {str(qid) for qid in run.report["question_ids"]}
    predicted = [p["id"] for records in run.predictions.values() for p in records]
    try:
        from mhindex.eval.run import sample_of_split
        from mhindex.home import open_corpus

        tuned = run.report.get("tuned") or {}
        skip = max((t.get("chosen_on", {}).get("questions", 0) for t in tuned.values()), default=0)
        corpus = open_corpus(home, str(run.report.get("corpus")))
        seed, split = int(run.report.get("seed") or 13370), run.report.get("split") or "auto"
        sample, _ = sample_of_split(corpus, run.report.get("limit"), seed, split, skip)
        ids = {q["id"] for q in sample}
        if ids and len(ids) == run.report.get("questions") and ids <= set(predicted):
            return ids
    except UsageError:
        pass
    return {qid for qid in predicted if qid in gold}


def _dataset_page(view: DatasetView, gold: dict[str, dict], answered: Answered) -> dict:
    """What the template renders for one dataset: the tables, the charts and the question list."""
    tables: list[dict] = []
    for run in view.runs:
        header, rows = table_cells(run.report["methods"], run.report.get("table"))
        report = run.report
        tables.append(
            {
                "title": run_title(
                    view.name, int(report.get("questions") or 0), *titles(str(report.get("lm")), _backend(run))
                ),
                "folder": str(run.folder),
                "header": header,
                "rows": [[method_name(row[0]), *row[1:]] for row in rows],
                "paper": paper_notes(run.report.get("table")),
                "labels": 2 if run.report.get("table") else 1,  # the method, and the paper's row: not numbers
                "paired": _paired_rows(run, gold),
                "spread": spread_sections(report.get("spread") or []),
                "hops": hop_cells(report["methods"]),
                "hop_title": HOP_TITLE.format(budget=report.get("budget") or 15),
                "configuration": _configuration(report),
                "tuned": {method: tuned_summary(t) for method, t in (report.get("tuned") or {}).items()},
                "charts": _charts(run, f"{view.name}-{len(tables)}"),
            }
        )
    listed = list(answered)
    facets = [
        (key, label, sorted({str(gold[qid][key]) for qid in listed if key in gold[qid]})) for key, label in FACETS
    ]
    facets = [facet for facet in facets if facet[2]]
    question_rows = []
    for number, qid in enumerate(listed):
        question = gold[qid]
        cells: list[dict | None] = []
        for column in view.methods:
            record, scores = answered[qid].get(column, ({}, None))
            if not record:
                cells.append(None)
                continue
            if scores is None:
                cells.append({"failed": str(record["error"]), "answer": "", "right": False})
                continue
            cells.append(
                {
                    "answer": str(record.get("answer", "")),
                    "em": scores["em"],
                    "f1": scores["f1"],
                    "recall": scores["recall"],
                    "right": _is_right(scores),
                    # The dataset's own measures where it has them (KD-CoT's Hit@1 and F1 on WebQSP and CWQ).
                    "own": [(label, scores[key]) for key, label, *_ in KDCOT_METRICS if key in scores],
                    "lm_calls": record.get("lm_calls") or 0,
                    "tokens": (record.get("prompt_tokens") or 0) + (record.get("completion_tokens") or 0),
                    "seconds": record.get("seconds") or 0,
                    "hops": _hop_strip(record, question, int(view.runs[0].report.get("budget") or 15)),
                }
            )
        question_rows.append(
            {
                "number": number,
                "id": qid,
                "question": str(question.get("question", "")),
                "gold": "; ".join(map(str, question.get("answers") or [])),
                "facets": {key: str(question[key]) for key, _, _ in facets if key in question},
                "cells": cells,
            }
        )
    return {
        "name": view.name,
        "shown_name": dataset_name(view.name),
        "slug": re.sub(r"[^a-z0-9]+", "-", view.name.lower()).strip("-") or "dataset",
        "methods": [_column_name(column) for column in view.methods],
        "tables": tables,
        "facets": facets,
        "rows": question_rows,
    }


def _hop_strip(record: dict, question: dict, budget: int) -> str:
    """One answer's hops in a line: ✓ a hop whose paragraph it kept (with the step that found it), ✗ one it
    missed; empty for a question without hops."""
    found = diagnose(record, question, budget) or []
    return " ".join(f"{hop['hop']}{'✓' if hop['kept'] else '✗'}" + (f"@{hop['step']}" if hop["step"] else "")
                    for hop in found)  # fmt: skip


def _column_name(column: str) -> str:
    name, _, folder = column.partition(" (")
    return method_name(name) + (f" ({folder}" if folder else "")


def _backend(run: Run) -> str:
    return str(run.report.get("backend") or "")


def _paired_rows(run: Run, gold: dict[str, dict]) -> list[dict]:
    paired = run.report.get("paired")
    if paired is None and len(run.predictions) > 1:  # a folder from before eval recorded them
        paired = paired_differences(
            run.predictions, {qid: gold[qid] for qid in gold if qid in run.scored}, run.report.get("budget") or 15
        )
    rows = []
    for row in paired or []:
        rows.append(
            {
                "methods": f"{method_name(row['a'])} − {method_name(row['b'])}",
                "metric": PAIRED_LABELS.get(row["metric"], row["metric"]),
                "difference": f"{row['difference'] * 100:+.1f}",
                "interval": interval_text(row),
                "excludes_zero": excludes_zero(row),
                "questions": row["questions"],
                "wins": f"{row['a_better']}:{row['b_better']}",
            }
        )
    return rows


def _configuration(report: dict) -> list[tuple[str, str]]:
    shown = []
    for key in ("lm", "backend", "corpus", "corpus_sha256", "split", "seed", "limit", "budget", "tool_version"):
        if report.get(key) is not None:
            shown.append((key, str(report[key])))
    if report.get("index"):
        shown.append(("index", orjson.dumps(report["index"]).decode()))
    for method, settings in (report.get("settings") or {}).items():
        shown.append((f"{method} settings", orjson.dumps(settings).decode()))
    return shown


def _charts(run: Run, place: str) -> list[str]:
    metrics = run.report["methods"]
    title = run_title(
        run.dataset, int(run.report.get("questions") or 0), *titles(str(run.report.get("lm")), _backend(run))
    )
    charts = [_svg(lambda target: bar_chart({run.dataset: metrics}, target, title), f"{place}-bars")]
    from collections import Counter

    from mhindex.eval.sweep import base_method

    swept = [*metrics, *run.report.get("tuning_methods", {})]  # a tuned sweep: on its tuning sample
    variants = Counter(base_method(name) for name in dict.fromkeys(swept) if "@" in name)
    if any(count > 1 for count in variants.values()):  # a sweep: the recall-budget curve as well
        charts.append(_svg(lambda target: budget_curve([run.folder], target), f"{place}-curve"))
    return charts


def latest_run(home: Path, corpus: str | None) -> Path:
    """The folder of the corpus's evaluation written last (by its metrics.json); with no corpus, the default one's."""
    from mhindex.home import pick_corpus

    found = pick_corpus(home, corpus)
    assert found is not None  # required: a one-line UsageError otherwise
    done = sorted((p.stat().st_mtime, p.parent) for p in (found.root / "eval").glob("*/metrics.json"))
    if not done:
        raise UsageError(f"corpus '{found.name}' has no finished evaluation; run `mhindex eval {found.name}` first")
    return done[-1][1]


def report_page(
    runs: list[Path] | None,
    out: Path,
    home: Path,
    questions: Path | None = None,
    title: str | None = None,
    corpus: str | None = None,
    say: Callable[[str], None] | None = None,
) -> Path:
    """`mhindex report`: the page of these evaluation folders, or with none, of the latest evaluation of `corpus`
    (else of the default corpus), said through `say`; written whole or not at all. Returns its path."""
    if not runs:
        runs = [latest_run(home, corpus)]
        if say:
            say(f"report of {runs[0]}, the latest evaluation of corpus '{runs[0].parent.parent.name}'")
    return write_report(build_report(runs, home, questions, title), out)


def write_report(html: str, out: Path) -> Path:
    from mhindex.files import atomic_file

    if out.is_dir():
        raise UsageError(f"-o {out} is a folder; give the HTML file to write, e.g. {out / 'report.html'}")

    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(out) as handle:
        handle.write(html.encode())
        # A page to share (a colleague, a web server): readable as any new file is, not the temporary file's 0600.
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(handle.fileno(), 0o666 & ~mask)
    return out
