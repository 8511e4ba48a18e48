"""How results look to a person on a terminal: build summaries, tables of corpora and hits, an
`ask` trace. The CLI prints these; `--json` prints the records themselves instead."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mhindex.methods.base import TITLE_SEPARATOR


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def build_summary(result) -> str:
    """One line for a corpus build (corpora.build.BuildResult)."""
    manifest, name, root = result.manifest, result.corpus.name, result.corpus.root
    if not result.rebuilt:
        return f"{name} is up to date (same inputs and seed); --force rebuilds it: {root}"
    counts = manifest["counts"]
    return (
        f"built corpus [bold]{name}[/bold]: {plural(counts['paragraphs'], 'paragraph')} "
        f"({plural(counts['duplicate_paragraphs'], 'duplicate')} dropped), {plural(counts['questions'], 'question')} "
        f"in {manifest['seconds']:.1f}s -> {root}"
    )


def index_summary(result) -> str:
    """One line for an index build (backends.IndexResult)."""
    manifest = result.manifest
    if not result.rebuilt:
        return f"the {manifest['backend']} index of {manifest['corpus']} is up to date; --force rebuilds it"
    return (
        f"indexed [bold]{manifest['corpus']}[/bold] with {manifest['backend']}: "
        f"{plural(manifest['paragraphs'], 'paragraph')} in {manifest['seconds']:.1f}s -> {result.path}"
    )


def corpora_table(rows: Sequence[dict], root: Path):
    from rich.table import Column, Table

    table = Table(
        "name",
        "dataset",
        Column("paragraphs", justify="right"),
        Column("questions", justify="right"),
        "indexes",
        Column("size", justify="right"),
        title=str(root),
        title_justify="left",
    )
    for row in rows:
        table.add_row(
            row["name"],
            row["dataset"],
            f"{row['paragraphs']:,}",
            f"{row['questions']:,}",
            ", ".join(row["indexes"]) or "-",
            row["size"],
        )
    return table


def methods_table(rows: Sequence[dict]):
    """`mhindex list methods`: each method, what it is from, and the papers' tables it is a row of."""
    from rich.table import Table

    table = Table("method", "title", "retrieves", "paper", "rows of (eval --table)")
    for row in rows:
        table.add_row(
            row["name"], row["title"], "yes" if row["retrieves"] else "no", row["paper"], ", ".join(row["tables"])
        )
    return table


def corpus_info(summary: dict) -> str:
    manifest = summary["manifest"]
    lines = [f"[bold]{summary['name']}[/bold] ({manifest['dataset']}) at {summary['path']}, {summary['size']}"]
    lines += [f"  {key}: {value:,}" for key, value in manifest["counts"].items()]
    lines.append(f"  seed: {manifest['seed']}, built {manifest['created_at']} by mhindex {manifest['tool_version']}")
    lines += [f"  input: {item['path']} (sha256 {item['sha256'][:12]}…)" for item in manifest["inputs"]]
    lines.append(f"  indexes: {', '.join(summary['indexes']) or 'none (run mhindex index ' + summary['name'] + ')'}")
    return "\n".join(lines)


def hits_table(hits: Sequence, expand: bool):
    from rich.table import Table

    table = Table("#", "score", "title", "text", show_lines=False, expand=expand)
    for rank, hit in enumerate(hits, start=1):
        snippet = hit.text if len(hit.text) <= 160 else hit.text[:157] + "..."
        table.add_row(str(rank), f"{hit.score:.2f}", hit.title, snippet)
    return table


def trace(answer) -> list:
    """The answer, then a tree of its trace as its method draws it (`Method.trace_steps`, which the
    report draws too), the paragraphs used and the cost."""
    from rich.text import Text
    from rich.tree import Tree

    from mhindex.methods import trace_of

    drawn = trace_of({**answer.record(), "steps": [step.costed() for step in answer.steps]})
    tree = Tree(Text(f"{answer.method}: {answer.question}", style="dim"))
    for step in drawn:
        node = tree.add(Text(step["title"], style="bold" if step["title"].endswith("(the question)") else ""))
        for label, text in step["rows"]:
            node.add(Text(f"{label}: {text}" if label else text, style="" if label else "dim"))
    shown = [Text(answer.answer or "(no answer)", style="bold green"), tree]
    titles = TITLE_SEPARATOR.join(dict.fromkeys(r["title"] for r in answer.retrieved))
    if titles:
        shown.append(Text(f"paragraphs used ({len(answer.retrieved)}): {titles}", style="dim"))
    shown.append(
        Text(
            f"{answer.seconds:.1f}s, {plural(answer.lm_calls, 'LM call')}, {answer.prompt_tokens:,} prompt + "
            f"{answer.completion_tokens:,} completion tokens",
            style="dim",
        )
    )
    return shown
