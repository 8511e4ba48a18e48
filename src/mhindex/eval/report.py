"""The evaluation table (a row per method, like IRCoT's Table 4) and a recall/F1 bar chart,
as a PNG and, on a terminal, as text bars (like the paper's Figure 3)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

import orjson

from mhindex.errors import UsageError
from mhindex.eval.metrics import (
    EVERY_ROW,
    FEWEST_FOR_AN_INTERVAL,
    KDCOT_METRICS,
    PAPER_METRICS,
    TOO_FEW,
    answer_metrics,
    excludes_zero,
    interval_text,
    stated_interval,
)
from mhindex.eval.ranking import RANKING_METRICS
from mhindex.eval.spread import spread_problem


@dataclass
class Scored:
    """`mhindex score`'s result: each file's metrics by the name it is shown under, their paired differences
    (with two files or more), and the questions file used."""

    methods: dict[str, dict]
    paired: list[dict]
    questions_file: Path
    #: the paper's table the files are rows of (`score --table`), as metrics.json records one
    paper: dict | None = None


def columns() -> list[tuple[str, str, str, float]]:
    """The table's columns: (label, metrics.json key, format, scale), answer metrics of plug-ins included."""
    return [
        *((column, key, "{:.1f}", 100) for key, column, _ in KDCOT_METRICS),
        *((m.column, m.key, "{:.1f}", 100) for m in answer_metrics()),
        *((column, key, "{:.1f}", 100) for key, column, _ in PAPER_METRICS),
        *((column, key, "{:.1f}", 100) for key, column, _ in RANKING_METRICS),
        ("Recall", "recall", "{:.1f}", 100),
        ("#Paras", "retrieved_per_question", "{:.1f}", 1),
        ("LM calls/q", "lm_calls_per_question", "{:.1f}", 1),
        ("Rounds/q", "rounds_per_question", "{:.2f}", 1),
        ("Tokens/q", "tokens_per_question", "{:,.0f}", 1),
        ("s/q", "seconds_per_question", "{:.1f}", 1),
    ]


def method_name(name: str) -> str:
    """As the papers write it: `oner@k=5` -> "OneR (k=5)"."""
    from mhindex.methods import method_title

    return method_title(name)


def dataset_name(name: str) -> str:
    from mhindex.corpora import dataset_title

    return dataset_title(name)


def run_title(dataset: str, questions: int, lm_shown: str, backend_shown: str) -> str:
    """A figure's title in words: "MuSiQue: 50 questions, Qwen2.5-0.5B (local), BM25 (Lucene)"; the model and the
    engine as the session names them (methods.session.titles)."""
    return ", ".join(
        part for part in (f"{dataset_name(dataset)}: {questions} questions", lm_shown, backend_shown) if part
    )


def table_cells(metrics: dict[str, dict], paper: dict | None = None) -> tuple[list[str], list[list[str]]]:
    """The table's header and rows as text (a row starts with the method's own name), intervals included:
    what the Markdown, LaTeX, HTML and terminal tables are made of. With a paper's table (metrics.json's
    `table`): each row's label in the paper and the paper's figures beside ours, its rows not run after ours."""
    budget = next(iter(metrics.values()))["paragraph_budget"] if metrics else 15
    shown = [c for c in columns() if _shown(c[1], metrics, paper)]
    header = ["Method", "n", *(f"Recall (≤{budget})" if label == "Recall" else label for label, *_ in shown)]
    rows = [
        [
            name,
            str(summary["questions"])
            + (f" ({summary['failed']} failed)" if summary.get("failed") else "")
            + (f" ({departed} departed)" if (departed := departed_answers(summary)) else ""),
            *(_cell(summary, key, fmt, scale) for _, key, fmt, scale in shown),
        ]
        for name, summary in metrics.items()
    ]
    if not paper:
        return header, rows
    measures = paper_measures(paper)
    rows_of = paper.get("rows") or {}

    decimals = {m["label"]: m.get("decimals", 1) for m in paper.get("measures") or [] if isinstance(m, dict)}

    def figures(found: dict | None) -> list[str]:
        return [_figure((found or {}).get(m), decimals.get(m, 1)) for m in measures]

    ours = []
    for row in rows:
        found = rows_of.get(row[0]) or {"row": row[0], "added": True}
        label = str(found.get("row")) + (" (added: not in the paper)" if found.get("added") else "")
        ours.append([row[0], label, *row[1:], *figures(found.get("paper"))])
    missing = [["", nr["row"], "not run", *("" for _ in shown), *figures(nr.get("paper"))]
               for nr in paper.get("not_run") or []]  # fmt: skip
    return [header[0], "Paper's row", *header[1:], *(f"Paper: {m}" for m in measures)], ours + missing


def _figure(value: object, decimals: object = 1) -> str:
    """A paper's figure with the decimals the paper printed (`papers.Measure.decimals`): one decimal printed
    SearChain's 31.95 as 31.9 and its 33.95 as 34.0 (a binary float's rounding), and its 11.10 as 11.1."""
    if value is None:
        return "-"
    places = decimals if isinstance(decimals, int) and 0 <= decimals <= 6 else 1
    return f"{float(value):.{places}f}"  # type: ignore[arg-type]


def paper_measures(paper: dict) -> list[str]:
    """The paper's columns that hold a figure for this dataset in any row (none where its figures were lost)."""
    figures = [row.get("paper") or {} for row in [*(paper.get("rows") or {}).values(), *(paper.get("not_run") or [])]]
    return [m["label"] for m in paper.get("measures") or [] if any(f.get(m["label"]) is not None for f in figures)]


def departed_answers(summary: dict) -> int:
    """How many of a row's answers departed from the release's reading (the most of any one kind: an answer can
    depart in several ways, counted under each)."""
    kinds = summary.get("departures") or {}
    return max((int(n) for n in kinds.values()), default=0) if isinstance(kinds, dict) else 0


def departure_notes(metrics: dict[str, dict]) -> list[str]:
    """Under the table, each row's departures from its release's reading, one line a kind: never silent."""
    return [
        f"departed: {method_name(name)}: {count} of {summary['questions']} answers: {kind}"
        for name, summary in metrics.items()
        for kind, count in (summary.get("departures") or {}).items()
    ]


def paper_notes(paper: dict | None) -> list[str]:
    """What a paper's table says under ours: where its figures come from, what to know, and why each row not
    run was not, one line each."""
    if not paper:
        return []
    lines = [f"The paper's figures: {paper.get('source', '')}" + (f"; {paper['note']}" if paper.get("note") else "")]
    lines += [f"not run: {nr['row']}: {nr['why']}" for nr in paper.get("not_run") or []]
    return lines


def table_text(metrics: dict[str, dict], title: str, form: str, paper: dict | None = None) -> str:
    """The table as Markdown or LaTeX (booktabs), intervals included, for a paper or a README."""
    header, rows = table_cells(metrics, paper)
    rows = [[method_name(row[0]), *row[1:]] for row in rows]
    if form == "md":
        lines = [f"**{title}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        notes = [*departure_notes(metrics), *paper_notes(paper)]
        lines += ["", f"{CAPTION}{cached_note(metrics)}.", *(f"\n{note}" for note in notes)]
        return "\n".join(lines) + "\n"

    def tex(text: str) -> str:
        for raw, escaped in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#")):
            text = text.replace(raw, escaped)
        return text.replace("±", r"$\pm$").replace("≤", r"$\leq$")

    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}",
        r"\toprule",
        " & ".join(tex(h) for h in header) + r" \\",
        r"\midrule",
        *(" & ".join(tex(cell) for cell in row) + r" \\" for row in rows),
        r"\bottomrule",
        r"\end{tabular}",
        r"\caption{"
        + tex(title)
        + r". $\pm$: half-width of the 95\% interval over the sampled questions"
        + tex(cached_note(metrics))
        + "".join(". " + tex(note) for note in [*departure_notes(metrics), *paper_notes(paper)])
        + ".}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


CAPTION = "±: half-width of the 95% interval over the sampled questions"


def cached_note(metrics: dict[str, dict]) -> str:
    """What a starred s/q means, where a row has one."""
    if not any(summary.get("cached_answers") for summary in metrics.values()):
        return ""
    return "; s/q*: with the call cache's answers timed as their calls took when first made"


def _cell(summary: dict, key: str, fmt: str, scale: float) -> str:
    value = (
        summary["prompt_tokens_per_question"] + summary["completion_tokens_per_question"]
        if key == "tokens_per_question"
        else summary.get(key)
    )
    if value is None:
        return "-"
    spread = summary.get(f"{key}_ci95")
    cached = "*" if key == "seconds_per_question" and summary.get("cached_answers") else ""
    return fmt.format(value * scale) + ("" if spread is None else f" ±{spread * scale:.1f}") + cached


_OPTIONAL = {
    "rounds_per_question",
    *(key for key, *_ in KDCOT_METRICS),
    *(key for key, *_ in PAPER_METRICS),
    *(key for key, *_ in RANKING_METRICS),
}


def _shown(key: str, metrics: dict[str, dict], paper: dict | None = None) -> bool:
    """A column that no method reports is left out (rounds, for a table without SearChain; KD-CoT's
    scores, for datasets other than WebQSP and CWQ). A paper's measure that every row has (EfficientRAG's
    EM) is shown where a method in the table declares it (`Method.paper_metrics`)."""
    if all(summary.get("scored") == "retrieval" for summary in metrics.values()):  # eval/ranking.py: no answers
        return key not in {m.key for m in answer_metrics()} | EVERY_ROW and (
            key not in _OPTIONAL or any(key in summary for summary in metrics.values())
        )
    if key in {m.key for m in answer_metrics()} and all(summary.get(key) is None for summary in metrics.values()):
        return False  # retrieval-only rows (`retrieve`, a TREC run): no answer column at all, "-" beside answers
    if key in EVERY_ROW and paper:  # a paper's table: its own measures (no EfficientRAG column in SearChain's)
        return any(isinstance(m, dict) and m.get("key") == key for m in paper.get("measures") or [])
    if key in EVERY_ROW:
        return any(key in _declared_metrics(name) for name in metrics)
    return key not in _OPTIONAL or any(key in summary for summary in metrics.values())


def _declared_metrics(name: str) -> tuple[str, ...]:
    from mhindex.errors import UsageError
    from mhindex.methods import method_class

    try:
        return method_class(name).paper_metrics
    except UsageError:  # a method no longer installed declares nothing
        return ()


def table(metrics: dict[str, dict], title: str, paper: dict | None = None):
    from rich.table import Table

    header, rows = table_cells(metrics, paper)
    caption = "\n".join([CAPTION + cached_note(metrics), *departure_notes(metrics), *paper_notes(paper)])
    grid = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    labels = 2 if paper else 1  # the method, and the paper's row
    for number, column in enumerate(header):
        grid.add_column(column, justify="left" if number < labels else "right")
    for row in rows:
        grid.add_row(*row)
    return grid


PAIRED_LABELS = {
    "f1": "F1", "em": "EM", "recall": "Recall", "hops_all": "All hops",
    **{key: column for key, column, _ in RANKING_METRICS},
}  # fmt: skip


def tuned_summary(tuned: dict) -> str:
    """What a tuning chose, on which questions, from which scores (metrics.json's `tuned` of one method):
    the line `eval` prints after its table and the report shows."""
    scores = ", ".join(
        f"{name.partition('@')[2]} {'-' if value is None else f'{value * 100:.1f}'}"
        for name, value in tuned["scores"].items()
    )
    on = tuned["chosen_on"]
    return (
        f"{tuned['chosen'].partition('@')[2]} chosen on {on['questions']} other {on['split']} questions "
        f"by {tuned['metric']} ({scores})"
    )


def paired_table(paired: list[dict]):
    """Differences between methods on the same questions, with their paired bootstrap intervals; where no pair has
    questions enough for one (`eval --limit 2`), one line instead of a table of rows that all say so."""
    from rich.table import Table

    if paired and all(stated_interval(row) is None for row in paired):
        most = max(row["questions"] for row in paired)
        return f"Paired differences: {TOO_FEW} in each of {len(paired)} pairs (at most {most}); metrics.json has them"
    grid = Table(
        title="Paired differences (first minus second, same questions)",
        title_justify="left",
        caption=f"interval: 95% paired bootstrap over the questions (10,000 resamples); * excludes 0 (on "
        f"{FEWEST_FOR_AN_INTERVAL} questions or more)",
        caption_justify="left",
    )
    for column in ("Methods", "Metric", "Difference", "95% interval", "n", "wins"):
        grid.add_column(column, justify="left" if column in ("Methods", "Metric") else "right")
    for row in paired:
        mark = " *" if excludes_zero(row) else ""
        grid.add_row(
            f"{row['a']} - {row['b']}",
            PAIRED_LABELS.get(row["metric"], row["metric"]),
            f"{row['difference'] * 100:+.1f}{mark}",
            interval_text(row),
            str(row["questions"]),
            f"{row['a_better']}:{row['b_better']}",
        )
    return grid


def terminal_bars(metrics: dict[str, dict], width: int = 40) -> str:
    lines = []
    for name, summary in metrics.items():
        for label, key in (("recall", "recall"), _second_measure(metrics)[:2]):
            value = summary.get(key)
            if value is None:
                lines.append(f"{name:>8} {label:>6} {'':<{width}}     -")
                continue
            lines.append(f"{name:>8} {label:>6} {'█' * round(value * width):<{width}} {value * 100:5.1f}")
    return "\n".join(lines)


def _second_measure(metrics: dict[str, dict]) -> tuple[str, str, str]:
    """Beside recall, the answer's F1; for a retrieval evaluation (no answers), nDCG@10."""
    if metrics and all(summary.get("scored") == "retrieval" for summary in metrics.values()):
        return "nDCG@10", "ndcg_10", "nDCG@10 (%)"
    return "F1", "f1", "Answer F1 (%)"


def bar_chart(runs: dict[str, dict[str, dict]], path: Path | IO[str], title: str) -> Path | IO[str]:
    """Retrieval recall and answer F1 side by side (two panels), datasets along the x axis and
    one bar per method, each with its 95% interval, like the figures of IRCoT's paper.

    runs: {dataset: {method: summary}}; path: a PNG file, or a text stream that takes SVG. A zero is
    drawn as a labelled baseline tick; a method with no retrieval (NoR) is marked "n/a" in the recall
    panel rather than drawn as zero.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    datasets = list(runs)
    methods = list(dict.fromkeys(m for summaries in runs.values() for m in summaries))
    width = 0.8 / max(1, len(methods))
    colours = plt.get_cmap("tab10").colors  # type: ignore[attr-defined]  # a ListedColormap
    figure, axes = plt.subplots(
        1,
        2,
        figsize=(max(6.4, 2.2 + 1.6 * len(datasets) * max(1, len(methods)) / 2), 3.6),
        sharey=True,
        constrained_layout=True,
    )
    summaries = [summary for by_method in runs.values() for summary in by_method.values()]
    _, second, second_label = _second_measure({str(i): summary for i, summary in enumerate(summaries)})
    for axis, (key, label) in zip(axes, (("recall", "Retrieval recall (%)"), (second, second_label)), strict=True):
        for j, method in enumerate(methods):
            for i, dataset in enumerate(datasets):
                summary = runs[dataset].get(method)
                if summary is not None:
                    x, name = i - 0.4 + width * (j + 0.5), method_name(method) if i == 0 else None
                    _bar(axis, x, width, summary, key, colours[j % len(colours)], name)
        _bar_panel(axis, label, [dataset_name(d) for d in datasets])
    legend: dict[str, Any] = {}
    for axis in axes:  # NoR has bars only in the F1 panel
        for handle, name in zip(*axis.get_legend_handles_labels(), strict=True):
            legend.setdefault(name, handle)
    ordered = [method_name(m) for m in methods if method_name(m) in legend]
    figure.legend(
        [legend[m] for m in ordered],
        ordered,
        loc="outside lower center",
        ncols=max(1, len(ordered)),
        frameon=False,
        fontsize=9,
    )
    figure.suptitle(title, fontsize=10)
    figure.text(
        0.99, 0.01, "bars: 95% intervals over the sampled questions", ha="right", va="bottom", fontsize=6, color="0.4"
    )
    _save(figure, path)
    return path


def _bar(axis: Any, x: float, width: float, summary: dict, key: str, colour: Any, label: str | None) -> None:
    """One method's bar on one dataset, with its 95% interval and its value above; "n/a" where it has none."""
    value = summary.get(key)
    if value is None:
        axis.text(x, 1, "n/a", ha="center", va="bottom", fontsize=7, color="0.4", rotation=90)
        return
    # The bootstrap interval where the run has one (inside 0-100%), else the older ± half-width, clipped.
    interval = summary.get(f"{key}_interval")
    if interval is None and summary.get(f"{key}_ci95") is not None:
        spread = summary[f"{key}_ci95"]
        interval = (max(0.0, value - spread), min(1.0, value + spread))
    errors = None if interval is None else [[(value - interval[0]) * 100], [(interval[1] - value) * 100]]
    axis.bar(
        x,
        value * 100,
        width * 0.92,
        color=colour,
        label=label,
        yerr=errors,
        capsize=2,
        error_kw={"elinewidth": 0.8, "ecolor": "0.25"},
    )
    top = (interval[1] if interval else value) * 100
    axis.text(x, top + 1.5, f"{value * 100:.0f}", ha="center", va="bottom", fontsize=7)


def _bar_panel(axis: Any, label: str, datasets: list[str]) -> None:
    """A bar chart's panel: 0-100% with room above for the values, the datasets along x."""
    axis.set_title(label.replace(" (%)", ""), fontsize=10)
    axis.set_ylabel(label)
    axis.set_xticks(range(len(datasets)), datasets, fontsize=9)
    axis.set_xlim(-0.6, len(datasets) - 0.4)
    axis.set_ylim(0, 118)  # room above 100% for a bar's value label, below the panel's title
    axis.set_yticks(range(0, 101, 20))
    axis.axhline(0, color="0.2", linewidth=0.8)
    axis.grid(axis="y", color="0.9")
    axis.set_axisbelow(True)
    axis.spines[["top", "right"]].set_visible(False)


def _save(figure, target: Path | IO[str]) -> None:
    import matplotlib.pyplot as plt

    if isinstance(target, Path):
        target.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(target, dpi=160)
    else:
        figure.savefig(target, format="svg", metadata={"Date": None})  # no timestamp: same inputs, same bytes
    plt.close(figure)


def chart_runs(runs: list[Path], out: Path, title: str | None = None) -> Path:
    """Several evaluation folders (one per dataset) in one figure."""
    reports = [read_metrics(path) for path in runs]
    by_dataset = {
        report.get("dataset") or report.get("corpus") or str(path): report["methods"]
        for path, report in zip(runs, reports, strict=True)
    }
    models = sorted({str(report.get("lm")) for report in reports})
    sizes = sorted({int(report.get("questions") or 0) for report in reports})
    bar_chart(by_dataset, out, title or f"{', '.join(models)}: {'/'.join(map(str, sizes))} questions per dataset")
    return out


def read_metrics(path: Path) -> dict:
    """The metrics.json of an evaluation folder (or the file itself), checked enough to chart."""
    file = path / "metrics.json" if path.is_dir() else path
    try:
        report = orjson.loads(file.read_bytes())
    except FileNotFoundError:
        raise UsageError(f"{file}: no such file (is {path} an `mhindex eval` folder?)") from None
    except orjson.JSONDecodeError as error:
        if file.name != "metrics.json":
            raise UsageError(f"{file} is not an `mhindex eval` folder, nor its metrics.json") from None
        raise UsageError(f"{file}: not valid JSON ({error})") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is not an `mhindex eval` folder: it has no metrics.json") from None
    if not isinstance(report, dict) or not isinstance(report.get("methods"), dict):
        raise UsageError(f"{file}: field 'methods' is missing; is this the metrics.json of `mhindex eval`?")
    problem = metrics_problem(report)
    if problem:
        raise UsageError(f"{file}: {problem}; is this the metrics.json of `mhindex eval`?")
    return report


def _numbers(value: Any) -> bool:
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return True
    return isinstance(value, list) and all(_numbers(item) for item in value)


def metrics_problem(report: dict) -> str | None:
    """What in a metrics.json the table, the charts and the report could not read (the field named), else None:
    every metric a number (or null, or an interval of numbers), the pairs and the sample as `eval` writes them."""
    if not report["methods"]:
        return "field 'methods' lists no method"
    for name, summary in report["methods"].items():
        if not isinstance(summary, dict):
            return f"field 'methods.{name}' should be an object of metrics"
        for key, value in summary.items():
            if key == "scored" and value == "retrieval":  # eval/ranking.py: scored on its ranking, not answers
                continue
            if key == "hops" and isinstance(value, dict):  # eval/hops.py: numbers, and numbers by hop
                value = [v for part in value.values() for v in (part.values() if isinstance(part, dict) else [part])]
            if key == "departures" and isinstance(value, dict):  # eval/metrics.py: a count by kind of departure
                value = list(value.values())
            if not _numbers(value):
                return f"field 'methods.{name}.{key}' should be a number, not {value!r}"[:200]
    paired = report.get("paired", [])
    shapes: dict[str, type | tuple[type, ...]] = {
        "a": str,
        "b": str,
        "metric": str,
        "difference": (int, float),
        "ci95": (list, type(None)),  # None: too few questions to state one (metrics.stated_interval)
    }
    if not isinstance(paired, list) or not all(
        isinstance(pair, dict) and all(isinstance(pair.get(k), t) for k, t in shapes.items()) for pair in paired
    ):
        return 'field \'paired\' should be a list of {"a", "b", "metric", "difference", "ci95"}'
    for key in ("questions", "limit", "seed", "budget"):
        if report.get(key) is not None and (not isinstance(report[key], int) or isinstance(report[key], bool)):
            return f"field '{key}' should be a whole number, not {report[key]!r}"[:200]
    ids = report.get("question_ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        return "field 'question_ids' should be a list of question ids"
    return spread_problem(report["spread"]) if "spread" in report else None


def _curve_points(summaries: dict[str, dict], method: str) -> list[tuple[float, float, Any, str]]:
    """(paragraphs a question, recall, its interval, variant) of each variant of `method` with a recall,
    fewest paragraphs first."""
    from mhindex.eval.sweep import base_method

    return sorted(
        (
            (summary["retrieved_per_question"], summary["recall"], summary.get("recall_interval"), name)
            for name, summary in summaries.items()
            if base_method(name) == method and summary.get("recall") is not None
        ),
        key=lambda point: point[0],
    )


def budget_curve(paths: list[Path], out: Path | IO[str], title: str | None = None) -> tuple[Path | IO[str], list[dict]]:
    """Recall of gold paragraphs against paragraphs retrieved a question, one line per method over
    its sweep (IRCoT's Figure 3), a panel per evaluation folder, with 95% bootstrap intervals; and the
    points as rows for a table. A method that retrieves nothing (NoR) has no point. In a tuned folder
    the sweep was answered on the tuning sample only (dashed, hollow) and the chosen setting on the
    reported one (solid): both are drawn, each row saying which sample it is."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mhindex.eval.sweep import base_method

    reports = [read_metrics(path) for path in paths]
    rows: list[dict] = []
    figure, axes = plt.subplots(
        1, len(reports), figsize=(4.2 * len(reports) + 0.6, 3.6), sharey=True, constrained_layout=True, squeeze=False
    )
    colours = plt.get_cmap("tab10").colors  # type: ignore[attr-defined]  # a ListedColormap
    methods = list(dict.fromkeys(base_method(n) for r in reports for n in r["methods"]))
    legend: dict[str, Any] = {}
    for axis, path, report in zip(axes[0], paths, reports, strict=True):
        dataset = report.get("dataset") or report.get("corpus") or str(path)
        samples = [("reported", report["methods"])]
        if isinstance(report.get("tuning_methods"), dict):
            samples.insert(0, ("tuning", report["tuning_methods"]))
        for colour, method in zip(itertools.cycle(colours), methods):
            for sample, summaries in samples:
                points = _curve_points(summaries, method)
                if points:
                    label = method_name(method) + (f" ({sample} sample)" if len(samples) > 1 else "")
                    legend.setdefault(label, _curve(axis, points, colour, tuning=sample == "tuning"))
                    rows.extend(
                        {
                            "dataset": dataset,
                            "method": method,
                            "variant": name,
                            "sample": sample,
                            "paragraphs": x,
                            "recall": recall,
                            "interval": interval,
                            "questions": summaries[name]["questions"],
                        }
                        for x, recall, interval, name in points
                    )
        axis.set_title(dataset_name(dataset), fontsize=10)
        axis.set_xlabel("paragraphs retrieved per question")
        axis.set_ylim(0, 104)  # room for a point at 100% and its marker
        axis.grid(color="0.9")
        axis.spines[["top", "right"]].set_visible(False)
    axes[0][0].set_ylabel("recall of gold paragraphs (%)")
    if legend:
        figure.legend(
            list(legend.values()),
            list(legend),
            loc="outside lower center",
            ncols=min(len(legend), 2 * len(reports)),  # about two entries fit under a panel
            frameon=False,
            fontsize=8 if len(legend) > 2 else 9,
        )
    models = sorted({str(report.get("lm")) for report in reports})
    figure.suptitle(title or f"Recall against paragraphs retrieved ({', '.join(models)})", fontsize=10)
    _save(figure, out)
    return out, rows


def _curve(axis: Any, points: list, colour: Any, tuning: bool) -> Any:
    """One method's recall curve with its intervals: dashed and hollow on the tuning sample, solid on the reported."""
    xs, ys = [p[0] for p in points], [p[1] * 100 for p in points]
    low = [y - (p[2][0] * 100 if p[2] else y) for p, y in zip(points, ys, strict=True)]
    high = [(p[2][1] * 100 if p[2] else y) - y for p, y in zip(points, ys, strict=True)]
    return axis.errorbar(
        xs,
        ys,
        yerr=[low, high],
        marker="o",
        markersize=3.5 if tuning else 5,
        markerfacecolor="white" if tuning else colour,
        linestyle="--" if tuning else "-",
        capsize=2,
        color=colour,
        alpha=0.75 if tuning else 1.0,
    )


def curve_table(rows: list[dict]):
    from rich.table import Table

    grid = Table(title="Recall against paragraphs retrieved", title_justify="left")
    tuned = any(row["sample"] == "tuning" for row in rows)
    labels = ("Dataset", "Method", "Setting", *(("Sample",) if tuned else ()), "Paragraphs/q", "Recall")
    for column in (*labels, "95% interval", "n"):
        grid.add_column(column, justify="left" if column in ("Dataset", "Method", "Setting", "Sample") else "right")
    for row in rows:
        interval = row["interval"]
        grid.add_row(
            row["dataset"],
            row["method"],
            row["variant"].partition("@")[2] or "-",
            *((row["sample"],) if tuned else ()),
            f"{row['paragraphs']:.1f}",
            f"{row['recall'] * 100:.1f}",
            "-" if not interval else f"{interval[0] * 100:.1f}-{interval[1] * 100:.1f}",
            str(row["questions"]),
        )
    return grid


class TableFormat(StrEnum):
    """How a table is printed: text (rich, on a terminal), md (Markdown) or latex, as it is."""

    text = "text"
    md = "md"
    latex = "latex"


def metrics_view(
    summary: dict, title: str, form: str, terminal: bool, chart: Path | None = None, paper: dict | None = None
) -> str | list:
    """A table of methods' metrics: Markdown or LaTeX text as it is, else rich renderables (with bars on a
    terminal, and where the chart was written); with a paper's table, its figures beside ours."""
    if form in ("md", "latex"):
        return table_text(summary, title, form, paper)
    return [
        table(summary, title, paper),
        *([f"[dim]chart: {chart}[/dim]"] if chart is not None else []),
        *([terminal_bars(summary)] if terminal else []),
    ]


def scored_view(scored: Scored, files: Sequence[Path], form: str, terminal: bool, chart: Path | None) -> tuple:
    """What `mhindex score` shows (the table, the chart written first where asked, the paired differences), and
    its --json data: one file's metrics by its name, several's as metrics.json has them."""
    title = f"{', '.join(p.name for p in files)}, scored on {scored.questions_file}"
    if chart is not None:
        bar_chart({scored.questions_file.parent.name: scored.methods}, chart, title)
    view = metrics_view(scored.methods, title, form, terminal, chart, scored.paper)
    if not isinstance(view, str):
        timed, hops = lm_time_table(scored.methods), hop_table(scored.methods)
        view = [
            *view,
            *([timed] if timed is not None else []),
            *([hops] if hops is not None else []),
            *([paired_table(scored.paired)] if scored.paired else []),
        ]
    data = {"methods": scored.methods, "paired": scored.paired, **({"table": scored.paper} if scored.paper else {})}
    return (data if len(files) > 1 or scored.paper else scored.methods), view


HOP_TITLE = "Hops: each hop's gold paragraph among the first {budget} kept, and the step it was first found at"
HOP_CAPTION = (
    "hop n: in the order the release lists them (MuSiQue's decomposition; HotpotQA's and 2WikiMQA's supporting "
    "pages); steps/miss: steps taken where a hop was missed"
)


def hop_cells(metrics: dict[str, dict]) -> tuple[list[str], list[list[str]]] | None:
    """The hop table's header and rows (eval/hops.py), for the terminal and the report alike; None where no row
    has hops."""
    rows = {name: summary["hops"] for name, summary in metrics.items() if summary.get("hops")}
    if not rows:
        return None
    depth = max(len(hops["recall"]) - 1 for hops in rows.values())
    counts = max((hops.get("with_hop") or {} for hops in rows.values()), key=len)
    numbers = range(1, depth + 1)
    # the deeper hops only some questions have: how many
    labels = [f"hop {n}" + (f" (n={counts[str(n)]})" if n > 2 and str(n) in counts else "") for n in numbers]
    header = ["Method", "n", *labels, "all hops", *(f"hop {n} step" for n in numbers), "steps/miss"]

    def shown(value: float | None, scale: float = 100, form: str = "{:.1f}") -> str:
        return "-" if value is None else form.format(value * scale)

    return header, [
        [
            method_name(name),
            str(hops["questions"]),
            *(shown(hops["recall"].get(str(n))) for n in numbers),
            shown(hops["recall"]["all"]),
            *(shown(hops["first_step"].get(str(n)), 1, "{:.2f}") for n in numbers),
            shown(hops["steps_when_missed"], 1),
        ]
        for name, hops in rows.items()
    ]


def hop_table(metrics: dict[str, dict]) -> Any:
    """Which hop each method missed, as the terminal shows it; None where no row has hops."""
    from rich.table import Table

    cells = hop_cells(metrics)
    if cells is None:
        return None
    budget = next(iter(metrics.values())).get("paragraph_budget")
    grid = Table(title=HOP_TITLE.format(budget=budget), title_justify="left", caption=HOP_CAPTION,
                 caption_justify="left")  # fmt: skip
    header, rows = cells
    for column in header:
        grid.add_column(column, justify="left" if column == "Method" else "right")
    for row in rows:
        grid.add_row(*row)
    return grid


def lm_time_table(metrics: dict[str, dict]) -> Any:
    """Where each method's model seconds went, a question (calls the call cache answered aside): restoring and
    saving prompt states, reading the prompt, generating, and outside the model; None where no model said."""
    from rich.table import Table

    from mhindex.methods.base import SECONDS_PARTS

    split = {
        name: {part: s[f"lm_{part}_seconds_per_question"] for part in SECONDS_PARTS}
        for name, s in metrics.items()
        if all(f"lm_{part}_seconds_per_question" in s for part in SECONDS_PARTS)
    }
    if not split:
        return None
    grid = Table("method", *SECONDS_PARTS, "LM s/q", title="The model's seconds a question, by part",
                 title_justify="left")  # fmt: skip
    for name, parts in split.items():
        values = [parts.get(part, 0.0) for part in SECONDS_PARTS]
        grid.add_row(method_name(name), *(f"{v:.2f}" for v in values), f"{sum(values):.2f}")
    return grid


#: the spread tables' columns that name, not count
SPREAD_LABELS = ("Row", "Rows", "Measure", "Metric", "Verdict")
SPREAD_TITLES = (
    "Spread over seeds: each run of a sampling row, on seeds no two runs share (the same questions)",
    "Each seed's paired difference beside its interval (the sampled row minus the other)",
)


def _spread_cells(spread: list[dict]) -> list[tuple[list[str], list[list[str]]]]:
    from mhindex.eval.spread import pair_cells, score_cells

    labels = {key: label for label, key, *_ in columns()} | PAIRED_LABELS
    return [score_cells(spread, labels), pair_cells(spread, labels)]


def spread_sections(spread: list[dict]) -> list[dict[str, Any]]:
    """The spread tables as `mhindex report`'s page draws them: a title, a header, rows and a caption each."""
    from mhindex.eval.spread import draws_caption

    if not spread:
        return []
    captions = (f"the seeds' runs: {draws_caption(spread)}", "")
    tables = zip(SPREAD_TITLES, captions, _spread_cells(spread), strict=True)
    return [{"title": title, "header": header, "rows": rows, "caption": caption}
            for title, caption, (header, rows) in tables]  # fmt: skip


def spread_tables(spread: list[dict]) -> list[Any]:
    """`eval --seeds`: the sampled rows' scores seed by seed, then their differences with every other row seed by
    seed beside each one's paired interval (eval/spread.py)."""
    from rich.table import Table

    tables = []
    for section in spread_sections(spread):
        grid = Table(title=section["title"], title_justify="left", caption=section["caption"] or None,
                     caption_justify="left")  # fmt: skip
        for column in section["header"]:
            grid.add_column(column, justify="left" if column in SPREAD_LABELS else "right")
        for row in section["rows"]:
            grid.add_row(*row)
        tables.append(grid)
    return tables


def spread_text(spread: list[dict]) -> str:
    """The spread tables in Markdown, after a Markdown or LaTeX table (LaTeX's users paste what they keep)."""
    lines = []
    for section in spread_sections(spread):
        header = section["header"]
        lines += ["", f"**{section['title']}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in section["rows"]]
        lines += ["", section["caption"][:1].upper() + section["caption"][1:] + "."] if section["caption"] else []
    return "\n".join(lines) + "\n"


def evaluation_view(report: dict, corpus: str, backend: str, folder: Path, form: str, terminal: bool) -> str | list:
    """What `mhindex eval` prints: the table, then (as text) its paired differences, what tuning chose,
    and where the files are."""
    title = f"{corpus}: {report['questions']} {report['split'].replace('all', '')} questions, {report['lm']}, {backend}"
    if report.get("table"):
        title = f"{report['table'].get('name')}'s table: {title}"
    shown = metrics_view(report["methods"], " ".join(title.split()), form, terminal, paper=report.get("table"))
    if isinstance(shown, str):
        return shown + (spread_text(report["spread"]) if report.get("spread") else "")
    timed, hops = lm_time_table(report["methods"]), hop_table(report["methods"])
    return [
        *shown,
        *([timed] if timed is not None else []),
        *([hops] if hops is not None else []),
        *([paired_table(report["paired"])] if report["paired"] else []),
        *spread_tables(report.get("spread") or []),
        *(f"{method}: {tuned_summary(tuned)}" for method, tuned in report.get("tuned", {}).items()),
        f"[dim]predictions, metrics.json and chart.png in {folder}[/dim]",
        f"[dim]browse them question by question: mhindex report {folder}[/dim]",
    ]
