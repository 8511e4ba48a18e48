"""The papers' tables that `eval --table` reproduces, as the papers print them: each row's label, the
paper's own figures for it, and, for a row no method of mhindex runs, why.

A table is data about a paper, one module each (`papers/searchain.py`...), and names no method: a method
claims the rows it runs (`Method.tables`: table, row label, that row's settings), so a plug-in can run a row
of a paper's table, or add one, with no edit here. A table of another paper is an entry point in the group
`mhindex.tables` (a `PaperTable`), as the other plug-ins are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mhindex.errors import UsageError
from mhindex.registry import Registry


@dataclass(frozen=True)
class Measure:
    """A column of the paper's table: as the paper heads it ("cover-EM", "F1 (GPT3)"), the key of metrics.json
    that mhindex's own figure is compared on, and the decimals the paper prints its figures with (SearChain's
    31.95 and 11.10 are shown so, not rounded to one)."""

    label: str
    key: str
    decimals: int = 1


@dataclass(frozen=True)
class PaperRow:
    """A row as the paper prints it: its label, its figures by dataset (one per measure, None where the paper
    has none, in percent as printed), and why mhindex does not run it where no method claims it."""

    label: str
    figures: Mapping[str, Sequence[float | None]] = field(default_factory=dict)
    why_not: str = "no method installed runs it"


@dataclass(frozen=True)
class PaperTable:
    name: str  # as `--table` takes it and the methods' `tables` name it: "SearChain"
    source: str  # the paper, the table, and the setting its figures were made in
    measures: tuple[Measure, ...]
    rows: tuple[PaperRow, ...]
    note: str = ""  # what to know before comparing (figures lost in extraction, a column missing)

    def row(self, label: str) -> PaperRow | None:
        return next((row for row in self.rows if row.label == label), None)

    def figures(self, label: str, dataset: str | None) -> dict[str, float | None] | None:
        """The paper's figures of a row on a dataset, by measure label; None where the paper has no such row or
        no column for that dataset."""
        row = self.row(label)
        if row is None or dataset is None or dataset not in row.figures:
            return None
        return dict(zip((m.label for m in self.measures), row.figures[dataset], strict=True))

    def record(self, dataset: str | None) -> dict[str, Any]:
        """What metrics.json and the report keep of the table for a dataset: its source, measures and note."""
        shown = any(dataset in row.figures for row in self.rows)
        return {
            "name": self.name,
            "source": self.source,
            "measures": [{"label": m.label, "key": m.key, "decimals": m.decimals} for m in self.measures],
            "note": "; ".join([*([self.note] if self.note else []), *([] if shown else [f"no column for {dataset}"])]),
        }


def _check(loaded: Any) -> str | None:
    return None if isinstance(loaded, PaperTable) else "is not a mhindex.papers.PaperTable"


TABLES: Registry[PaperTable] = Registry(
    "table",
    {
        "IRCoT": "mhindex.papers.ircot:TABLE",
        "SearChain": "mhindex.papers.searchain:TABLE",
        "KD-CoT": "mhindex.papers.kdcot:TABLE",
        "EfficientRAG": "mhindex.papers.efficientrag:TABLE",
        "FlashRAG": "mhindex.papers.flashrag:TABLE",
    },
    _check,
)


def table_key(name: str) -> str:
    """A table's name however it is cased or hyphenated ("kd-cot", "KDCoT")."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


def paper_table(name: str) -> PaperTable:
    """The table `--table NAME` means, or a one-line error listing the known ones."""
    for known in TABLES:
        if table_key(known) == table_key(name):
            return TABLES[known]
    raise UsageError(f"--table must be one of {', '.join(sorted(TABLES, key=str.lower))}, not {name!r}")
