"""How long an evaluation will take, said before its first answer and again as each row finishes.

A paper's table with a local model runs for hours, and a user once learnt its cost only by waiting (three of six
rows in 13 minutes, then stopped). The estimate is each row's questions still to answer times the most LM calls a
question can take there (`Method.most_calls`, from its loop's limits) times the model's measured seconds a call on
this machine: kept per model and thread count in `<home>/cache/lm-pace.json`, from the answers of earlier runs,
and updated as rows finish. An upper bound, said as one: most questions take fewer calls than their loop allows.
Where no pace has been measured yet, the first answered question gives one.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

PACE_FILE = "lm-pace.json"


@dataclass
class Row:
    name: str
    questions: int  # still to answer
    most_calls: int | None  # a question's bound; None: the loop sets none


def pace_of(record: dict[str, Any]) -> tuple[float, int] | None:
    """(seconds, calls) of an answer whose calls were made now (an answer from the call cache says nothing of the
    machine's pace)."""
    served = record.get("lm")
    calls, seconds = record.get("lm_calls"), record.get("seconds")
    if (
        (isinstance(served, dict) and served.get("calls_from_cache"))
        or not isinstance(calls, int)
        or calls < 1
        or "error" in record
    ):
        return None
    if not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds < 0:
        return None
    return float(seconds), calls


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


class Estimate:
    """One evaluation's estimate: said with `say` (a line through `ui.reporter`), updated by `answered`."""

    def __init__(self, rows: Sequence[Row], home: Path, model: str, workers: int = 1) -> None:
        self.rows = {row.name: row for row in rows}
        self.path, self.model, self.workers = home / "cache" / PACE_FILE, model, max(1, workers)
        self.seconds_per_call = self._read()
        self._measured = (0.0, 0)

    def _read(self) -> float | None:
        try:
            kept = orjson.loads(self.path.read_bytes()).get(self.model)
        except (OSError, orjson.JSONDecodeError, AttributeError):
            return None  # none kept yet, or a damaged file: the first answers measure it again
        value = kept.get("seconds_per_call") if isinstance(kept, dict) else None
        return float(value) if isinstance(value, int | float) and math.isfinite(value) and value > 0 else None

    def _keep(self) -> None:
        """The pace measured in this run, kept for the next one (a failure to write it is no failure of the run)."""
        seconds, calls = self._measured
        if not calls:
            return
        try:
            kept = orjson.loads(self.path.read_bytes()) if self.path.is_file() else {}
            kept = kept if isinstance(kept, dict) else {}
        except (OSError, orjson.JSONDecodeError):
            kept = {}
        kept[self.model] = {"seconds_per_call": round(seconds / calls, 3), "calls": calls}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            staging = self.path.with_name(f".{PACE_FILE}.tmp-{os.getpid()}")
            staging.write_bytes(orjson.dumps(kept, option=orjson.OPT_INDENT_2))
            staging.replace(self.path)
        except OSError:
            pass

    def text(self, lead: str) -> str:
        """`lead`, then the most calls still to make and, at the pace measured, the most time they take."""
        left = [row for row in self.rows.values() if row.questions]
        if not left:
            return f"{lead}: nothing left to answer"
        bounded = [row for row in left if row.most_calls is not None]
        calls = sum(row.questions * (row.most_calls or 0) for row in bounded)
        said = f"{lead}: at most {calls:,} LM calls for {', '.join(r.name for r in bounded)}" if bounded else ""
        if self.seconds_per_call is not None and bounded:
            most = calls * self.seconds_per_call / self.workers  # questions answered `workers` at a time
            said += (f", at most about {_duration(most)} at {self.seconds_per_call:.1f} s a call (measured here for "
                     f"{self.model}{f', {self.workers} at a time' if self.workers > 1 else ''})")  # fmt: skip
        elif bounded:
            said += f"; no pace measured here yet for {self.model}: the first answer gives one"
        if unbounded := [row.name for row in left if row.most_calls is None]:
            said += ("; " if said else f"{lead}: ") + (f"{', '.join(unbounded)}: no bound on calls (their own pace "
                                                        "shows in their progress)")  # fmt: skip
        return said

    def drop(self, names: Sequence[str]) -> None:
        """Rows that will not be answered after all (the variants a tuning did not choose)."""
        for name in names:
            if name in self.rows:
                self.rows[name].questions = 0

    def answered(self, name: str, record: dict[str, Any]) -> str | None:
        """Count one answer of row `name`; the line to say when it is the first pace this run measured."""
        row = self.rows.get(name)
        if row is not None and row.questions:
            row.questions -= 1
        first = self._measured[1] == 0
        if (pace := pace_of(record)) is not None:
            seconds, calls = self._measured
            self._measured = (seconds + pace[0], calls + pace[1])
            if first and self.seconds_per_call is None:
                self.seconds_per_call = self._measured[0] / self._measured[1]
                return self.text("estimate, from the first answer")
        return None

    def finished(self, name: str) -> str:
        """A row is done: the pace measured so far is kept, and what is left said again."""
        if self._measured[1]:
            self.seconds_per_call = self._measured[0] / self._measured[1]
            self._keep()
        return self.text(f"{name} done; left")
