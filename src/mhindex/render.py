"""How results look to a person on a terminal: build summaries, tables of corpora and hits, an
`ask` trace. The CLI prints these; `--json` prints the records themselves instead."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

TITLE_SEPARATOR = " · "  # titles contain commas ("Paris, Texas"), never a middle dot


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
    """The answer, then a tree of its steps (sentence, query, new titles, time, tokens), the reader's
    own line where it differs from the answer, the paragraphs used and the cost."""
    from rich.text import Text
    from rich.tree import Tree

    tree = Tree(Text(f"{answer.method}: {answer.question}", style="dim"))
    for number, step in enumerate(answer.steps):
        node = tree.add(
            Text(
                f"step {number}" + (f": {step.text}" if step.text else " (the question)"),
                style="bold" if not step.text else "",
            )
        )
        if step.query:
            node.add(Text(f"query: {step.query}"))
            node.add(Text(f"retrieved: {TITLE_SEPARATOR.join(step.titles) if step.titles else 'nothing new'}"))
        node.add(
            Text(
                f"{step.seconds:.1f}s, {step.prompt_tokens:,} prompt + {step.completion_tokens:,} completion tokens",
                style="dim",
            )
        )
    # IRCoT's reasoning is its steps, with the reader's own generation after "[reader] " when it
    # differs from the answer; for methods without a chain, the reasoning is the reader's generation.
    chain, _, reader = answer.reasoning.partition("[reader] ")
    if not reader and not any(step.text for step in answer.steps):
        reader = chain
    if answer.details.get("final_content"):  # SearChain: the claims, each citing its query's document
        cited = tree.add(Text(f"final content: {answer.details['final_content']}", style="italic"))
        for reference in answer.details.get("references", []):
            cited.add(Text(f"[{reference['n']}] {reference['title']} ({reference['id']})", style="dim"))
    elif (call := answer.details.get("reader")) is not None:  # the reader's call, whole: why this answer
        node = tree.add(Text(f"reader: {call['output'] or '(nothing)'}", style="italic"))
        node.add(
            Text(
                f"read {plural(call['paragraphs'], 'paragraph')}: {call['prompt_tokens']:,} prompt tokens, "
                f"{call['seconds']:.1f}s",
                style="dim",
            )
        )
        chained = answer.details.get("chain_answer")
        if chained and chained.lower() != answer.answer.lower():
            node.add(Text(f"the chain concluded {chained!r}; the reader's answer stands", style="dim"))
    elif reader.strip() and reader.strip() != answer.answer:
        tree.add(Text(f"reader: {reader.strip()}", style="italic"))
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
