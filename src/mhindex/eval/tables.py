"""A paper's table as `eval --table` runs it: each row of the paper that an installed method claims
(`Method.tables`), with that row's settings, in the paper's order; the rows a method adds beyond the paper's,
after them and named so; and each row no method runs, with why. What the evaluation records of it beside each
row (the row's label and the paper's figures on the corpus's dataset) is `TablePlan.record`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mhindex.errors import UsageError
from mhindex.papers import TABLES, PaperRow, PaperTable, paper_table, table_key

#: a row setting given per dataset (`{"hotpotqa": 6, "*": 4}`): its value for datasets not named
ANY_DATASET = "*"


@dataclass(frozen=True)
class TableRow:
    label: str  # the paper's row, or the method's title for a row mhindex adds
    method: str
    overrides: dict[str, Any]
    added: bool = False  # not a row of the paper's table

    @property
    def variant(self) -> str:
        """The row's name in the evaluation (its predictions file): the method, with the row's settings."""
        if not self.overrides:
            return self.method
        return self.method + "@" + ",".join(f"{key}={value}" for key, value in self.overrides.items())


@dataclass(frozen=True)
class TablePlan:
    table: PaperTable
    dataset: str | None
    rows: list[TableRow]
    not_run: list[PaperRow] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """What metrics.json keeps (`table`): the paper's source, measures and note, each variant's row and the
        paper's figures for it on this dataset, and the rows not run with why."""
        rows = {
            row.variant: {
                "row": row.label,
                "added": row.added,
                "paper": None if row.added else self.table.figures(row.label, self.dataset),
            }
            for row in self.rows
        }
        not_run = [
            {"row": row.label, "why": row.why_not, "paper": self.table.figures(row.label, self.dataset)}
            for row in self.not_run
        ]
        return {**self.table.record(self.dataset), "rows": rows, "not_run": not_run}


def _per_dataset(value: Any, dataset: str | None, where: str) -> Any:
    if not isinstance(value, Mapping):
        return value
    if dataset in value:
        return value[dataset]
    if ANY_DATASET in value:
        return value[ANY_DATASET]
    raise UsageError(f"{where}: no value for dataset {dataset!r} (nor {ANY_DATASET!r})")


def plan_table(name: str, dataset: str | None) -> TablePlan:
    """The rows `--table NAME` runs on a corpus of `dataset` (per-dataset settings resolved), and those it does
    not; a one-line error for an unknown table or two rows that would be the same run."""
    from mhindex.methods import METHODS, declared_rows

    table = paper_table(name)
    claimed: dict[str, list[TableRow]] = {}
    for method, cls in METHODS.available(every=True).items():
        for title, declared in declared_rows(cls).items():
            if table_key(title) != table_key(table.name):
                continue
            for label, settings in declared.items():
                where = f"{method}'s row {label!r} of {table.name}"
                resolved = {key: _per_dataset(value, dataset, where) for key, value in settings.items()}
                claimed.setdefault(label, []).append(TableRow(label, method, resolved, table.row(label) is None))
    rows = [r for paper_row in table.rows for r in claimed.get(paper_row.label, [])]
    rows += [r for found in claimed.values() for r in found if r.added]
    seen: dict[str, str] = {}
    for row in rows:
        if row.variant in seen:
            raise UsageError(f"{table.name}'s rows {seen[row.variant]!r} and {row.label!r} are the same run")
        seen[row.variant] = row.label
    return TablePlan(table, dataset, rows, [row for row in table.rows if row.label not in claimed])


def table_names() -> list[str]:
    """The papers' tables `--table` takes, as the papers are written."""
    return sorted(TABLES, key=str.lower)


def table_listing() -> list[dict[str, Any]]:
    """`mhindex list tables`: every row of every paper's table, what runs it (the method and the row's settings, on
    any dataset) or why nothing does, and the paper's figures by dataset and measure; then the rows methods add."""
    listed = []
    for name in table_names():
        table = TABLES[name]
        claims = {row.label: row for row in _claims(table)}
        rows = [*table.rows, *(PaperRow(label, why_not="") for label, row in claims.items() if row.added)]
        for paper_row in rows:
            claim = claims.get(paper_row.label)
            listed.append({
                "table": table.name,
                "row": paper_row.label,
                "runs": claim.variant if claim else None,
                "added": claim is not None and claim.added,
                "why_not": None if claim else paper_row.why_not,
                "paper": {dataset: dict(zip((m.label for m in table.measures), values, strict=True))
                          for dataset, values in paper_row.figures.items()},
            })  # fmt: skip
    return listed


def _claims(table: PaperTable) -> list[TableRow]:
    """The rows methods claim of a table, their per-dataset settings shown as declared."""
    from mhindex.methods import METHODS, declared_rows

    return [
        TableRow(label, method, {key: _shown(value) for key, value in settings.items()}, table.row(label) is None)
        for method, cls in METHODS.available(every=True).items()
        for title, declared in declared_rows(cls).items()
        if table_key(title) == table_key(table.name)
        for label, settings in declared.items()
    ]


def _shown(value: Any) -> Any:
    """A per-dataset setting as `list tables` writes it: 6 on hotpotqa, else 4 -> "hotpotqa:6|4"."""
    if not isinstance(value, Mapping):
        return value
    return "|".join(f"{d}:{v}" if d != ANY_DATASET else str(v) for d, v in value.items())
