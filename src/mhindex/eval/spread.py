"""The spread over seeds (`eval --seeds N`) beside the paired intervals.

A paired bootstrap interval says how much a difference between two rows could move with another sample of
questions; it says nothing of how much it moves with another seed of a row that samples (React->CoT-SC's chains).
For such a row, run N times on seeds no two runs share, each draw's score and its paired difference against every
other row are set side by side: a difference whose sign holds on every seed and whose interval excludes 0 on each
is the row's, not a lucky draw's; a range over seeds as wide as the interval says the seed alone can decide it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mhindex.eval.metrics import PAIRED_METRICS, stated_interval

#: the measures a spread is given for where the rows have them (metrics.json's keys), after a paper's own
SPREAD_METRICS = ("f1", "em", "recall")


def _range(values: Sequence[float]) -> dict[str, Any]:
    return {"values": list(values), "mean": sum(values) / len(values), "min": min(values), "max": max(values)}


def _against(row: str, draws: Sequence[str], paired: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each other row's paired difference with every draw (this row minus the other), by metric."""
    mine = set(draws)
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for pair in paired:
        a, b = str(pair["a"]), str(pair["b"])
        if (a in mine) == (b in mine):  # two draws of this row, or two other rows
            continue
        other, draw, sign = (b, a, 1.0) if a in mine else (a, b, -1.0)
        entry = found.setdefault((other, str(pair["metric"])), {"row": row, "other": other,
                                                                "metric": pair["metric"], "by_draw": {}})  # fmt: skip
        interval = stated_interval(pair)
        entry["by_draw"][draw] = {  # + 0.0: a difference of nothing is 0.0, never -0.0
            "difference": sign * float(pair["difference"]) + 0.0,
            "ci95": None if interval is None else sorted(sign * bound + 0.0 for bound in interval),
            "questions": pair.get("questions"),
        }
    complete = [entry for entry in found.values() if set(entry["by_draw"]) == mine]
    for entry in complete:
        entry["by_draw"] = {draw: entry["by_draw"][draw] for draw in draws}
        differences = [d["difference"] for d in entry["by_draw"].values()]
        entry.update(_range(differences))
        entry["verdict"] = _verdict(differences, [d["ci95"] for d in entry["by_draw"].values()])
    return sorted(complete, key=lambda e: (e["other"], PAIRED_METRICS.index(e["metric"])
                                           if e["metric"] in PAIRED_METRICS else len(PAIRED_METRICS)))  # fmt: skip


def _verdict(differences: Sequence[float], intervals: Sequence[Sequence[float] | None]) -> str:
    """What the draws say of a difference together: whether its sign, and its interval's, hold whatever the seed."""
    signs = {(d > 0) - (d < 0) for d in differences}
    if signs == {0}:
        return "no difference on any seed"
    if {1, -1} <= signs:
        return "the seed decides the sign"
    if any(bounds is None for bounds in intervals):
        return "one sign; too few questions for an interval"
    if all(bounds[0] > 0 or bounds[1] < 0 for bounds in intervals):  # type: ignore[index]
        return "holds on every seed"
    return "one sign; an interval spans 0"


def seed_spread(
    draws: Mapping[str, Sequence[str]],
    metrics: Mapping[str, Mapping[str, Any]],
    paired: Sequence[Mapping[str, Any]],
    measures: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """metrics.json's `spread`: for each sampled row, its draws' scores (each, mean, min, max) by measure (`measures`:
    a paper's table's own first), and its paired differences against every other row, draw by draw, with their
    intervals."""
    spread = []
    for row, names in draws.items():
        if not all(name in metrics for name in names):
            continue
        scores = {}
        for key in dict.fromkeys([*measures, *SPREAD_METRICS]):
            values = [metrics[name].get(key) for name in names]
            if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                scores[key] = _range([float(v) for v in values])  # type: ignore[arg-type]
        spread.append({"row": row, "draws": list(names), "metrics": scores,
                       "against": _against(row, names, paired)})  # fmt: skip
    return spread


def spread_problem(spread: Any) -> str | None:
    """What in a metrics.json's `spread` the table could not read, else None."""
    if not isinstance(spread, list):
        return "field 'spread' should be a list of rows"
    for number, entry in enumerate(spread):
        where = f"field 'spread[{number}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("row"), str):
            return f"{where}.row' should be a method's name"
        names = entry.get("draws")
        if not isinstance(names, list) or len(names) < 2 or not all(isinstance(n, str) for n in names):
            return f"{where}.draws' should list two or more variants' names"
        for key in ("metrics", "against"):
            if not isinstance(entry.get(key), dict if key == "metrics" else list):
                return f"{where}.{key}' is missing or of the wrong kind"
        for part in [*entry["metrics"].values(), *entry["against"]]:
            if not isinstance(part, dict) or not all(_number(part.get(k)) for k in ("mean", "min", "max")):
                return f"{where}': each measure and difference should have a number mean, min and max"
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def draws_of(spread: Any) -> dict[str, list[str]]:
    """A recorded spread's draws by row (`rerun` makes the same spread again)."""
    if spread_problem(spread) is not None:
        return {}
    return {entry["row"]: list(entry["draws"]) for entry in spread}


def _percent(value: float, signed: bool = False) -> str:
    return f"{value * 100:+.1f}" if signed else f"{value * 100:.1f}"


def draws_caption(spread: Sequence[Mapping[str, Any]]) -> str:
    """Which runs the seeds are, each its own predictions file."""
    from mhindex.eval.report import method_name

    return "; ".join(f"{method_name(e['row'])}: " + " · ".join(f"{n}.jsonl" for n in e["draws"]) for e in spread)


def score_cells(spread: Sequence[Mapping[str, Any]], labels: Mapping[str, str]) -> tuple[list[str], list[list[str]]]:
    """The first spread table: each sampled row's measures, seed by seed, their mean and range."""
    from mhindex.eval.report import method_name

    header = ["Row", "Measure", "Each seed", "Mean", "Range"]
    rows = [
        [
            method_name(entry["row"]),
            labels.get(key, key),
            " · ".join(_percent(v) for v in got["values"]),
            _percent(got["mean"]),
            f"{(got['max'] - got['min']) * 100:.1f}",
        ]  # fmt: skip
        for entry in spread
        for key, got in entry["metrics"].items()
    ]
    return header, rows


def pair_cells(spread: Sequence[Mapping[str, Any]], labels: Mapping[str, str]) -> tuple[list[str], list[list[str]]]:
    """The second: each sampled row minus every other row, seed by seed, beside each seed's paired 95% interval."""
    from mhindex.eval.report import method_name

    def interval(found: Mapping[str, Any]) -> str:
        bounds = found.get("ci95")
        return "too few" if bounds is None else f"[{_percent(bounds[0], True)}, {_percent(bounds[1], True)}]"

    header = ["Rows", "Metric", "Difference, each seed", "Range", "95% interval, each seed", "Verdict"]
    rows = []
    for entry in spread:
        for pair in entry["against"]:
            found = list(pair["by_draw"].values())
            rows.append([f"{method_name(entry['row'])} - {method_name(pair['other'])}",
                         labels.get(pair["metric"], pair["metric"]),
                         " · ".join(_percent(f["difference"], True) for f in found),
                         f"{_percent(pair['min'], True)} to {_percent(pair['max'], True)}",
                         " ".join(interval(f) for f in found), str(pair.get("verdict", ""))])  # fmt: skip
    return header, rows
