"""The tables the README and benchmarks/README.md show, made from the stored results, never typed: each sits between
two markers (`<!-- made by benchmarks/tables/readme_tables.py: NAME -->` and `<!-- end NAME -->`), and this script
makes it again from the results files it names. tests/test_docs.py fails when a committed table is not what this
script makes of the stored results.

    .venv/bin/python benchmarks/tables/readme_tables.py            # say which tables differ (exit 1 if one does)
    .venv/bin/python benchmarks/tables/readme_tables.py --write    # write them
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
PAPER_TABLES = RESULTS / "qwen2.5-1.5b-paper-tables"

#: SearChain's rows as benchmarks/README.md shows them: (the row's file stem in its folder, the label shown)
SEARCHAIN_ROWS = (
    ("direct@prompt=zero-shot", "Direct Prompting (0-shot, mhindex's wording)"),
    ("cot@style=plain,max_demos=4", "CoT (4-shot, ReAct's format)"),
    ("direct-r@prompt=zero-shot,k=5", "Direct Retrieval (0-shot, K = 5)"),
    ("selfask@demos=press,step_tokens=256", "Self-Ask (Press et al.'s demonstrations, loop and reading)"),
    ("react@fallback=cot-sc", "React→CoT-SC (5 chains, the paper's 21)"),
    ("searchain", "SearChain, its answer / all its LM wrote"),
)
#: the paper's row each of ours is (papers/searchain.py), for its figure
SEARCHAIN_PAPER = {"direct": "Direct Prompting", "cot": "CoT", "direct-r": "Direct Retrieval", "selfask": "Self-Ask",
                   "react": "React→CoT-SC", "searchain": "SearChain"}  # fmt: skip


def _metrics(folder: Path) -> dict[str, dict]:
    """A results folder's rows by name; none where the run has not made its metrics yet."""
    path = folder / "metrics.json"
    return json.loads(path.read_text(encoding="utf-8"))["methods"] if path.is_file() else {}


def _row(found: dict[str, dict], stem: str) -> tuple[str, dict] | None:
    """The row whose name is `stem` (or starts so, for React's per-dataset demonstrations)."""
    for name, summary in found.items():
        if name == stem or (stem.startswith("react") and name.startswith(stem)):
            return name, summary
    return None


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}"


def searchain_table(dataset: str) -> str:
    """SearChain's Table 1 on `dataset` (30 questions, the 1.5B model): each row's cover-EM (the paper's measure),
    the paper's figure with its printed decimals, F1, recall, calls and tokens, and how many answers departed from
    their release's reading. Self-Ask's row is the re-run of Press et al.'s loop (searchain-press/); the others are
    the first run's (searchain/)."""
    from mhindex.papers.searchain import TABLE

    press = {
        ("selfask@demos=press,step_tokens=256" if name == "selfask" else name): m
        for name, m in _metrics(PAPER_TABLES / "searchain-press" / dataset).items()
    }  # its one row, `selfask`
    found = {**_metrics(PAPER_TABLES / "searchain" / dataset), **press}  # fmt: skip
    found.pop("selfask@demos=press", None)  # the first run's, read by EfficientRAG's rule (#75): replaced by the re-run
    lines = ["| row (paper's) | cover-EM | paper | F1 | Recall (≤15) | LM calls/q | tokens/q | departed |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for stem, label in SEARCHAIN_ROWS:
        row = _row(found, stem)
        if row is None:
            continue
        name, m = row
        paper = TABLE.figures(SEARCHAIN_PAPER[name.partition("@")[0]], dataset) or {}
        figure = paper.get("cover-EM")
        cover = _pct(m.get("cover_em_substring"))
        if name == "searchain":
            cover += f" / {_pct(m.get('cover_em_generated'))}"
        tokens = m["prompt_tokens_per_question"] + m["completion_tokens_per_question"]
        departed = max((int(n) for n in (m.get("departures") or {}).values()), default=0)
        shown = "-" if figure is None else f"{figure:.2f}"
        lines.append(f"| {label} | {cover} | {shown} | {_pct(m.get('f1'))} | {_pct(m.get('recall'))} | "
                     f"{m['lm_calls_per_question']:.1f} | {tokens:,.0f} | {departed} |")  # fmt: skip
    return "\n".join(lines)


def seeds_table(dataset: str) -> str:
    """React→CoT-SC at the paper's 21 chains on three seeds (`eval --seeds 3`): its scores seed by seed, then its
    difference with each one-call row seed by seed beside the paired interval, as `mhindex eval` prints them in
    Markdown (eval/report.py's `spread_text`, from the run's metrics.json); until the run is whole, how far it got."""
    from mhindex.eval.report import spread_text

    folder = PAPER_TABLES / "searchain-seeds" / dataset
    if (folder / "metrics.json").is_file():
        return spread_text(json.loads((folder / "metrics.json").read_text(encoding="utf-8"))["spread"]).strip()
    answered = {
        path.stem: len(path.read_text(encoding="utf-8").splitlines()) for path in sorted(folder.glob("*.jsonl"))
    }
    said = ", ".join(f"{row} {n}" for row, n in answered.items()) or "nothing answered"
    return f"Not whole yet (answers so far: {said}; each row and draw answers the same 30 questions)."


def costs_table() -> str:
    """The README's table of what its commands cost and answer (benchmarks/speed/readme_costs.py's last run)."""
    found = json.loads((RESULTS / "readme_costs.json").read_text(encoding="utf-8"))
    lines = ["| command | answer | LM calls | prompt + completion tokens | seconds |", "|---|---|---|---|---|"]
    for row in found["rows"]:
        if "methods" in row:
            m = row["methods"]
            calls = ", ".join(f"{m[n]['lm_calls_per_question']:.1f}" for n in m)
            tokens = ", ".join(f"{m[n]['prompt_tokens_per_question'] + m[n]['completion_tokens_per_question']:,.0f}"
                               for n in m)  # fmt: skip
            scores = "; ".join(f"{n} EM {m[n]['em'] * 100:.0f}, F1 {m[n]['f1'] * 100:.0f}" for n in m)
            lines.append(f"| {row['command']} ({', '.join(m)}) | {scores} | {calls} a question | {tokens} a "
                         f"question | {row['seconds']:.0f} in all |")  # fmt: skip
            continue
        lines.append(f"| {row['command']}, {row['where']} | {row['answer']} | {row['lm_calls']} | "
                     f"{row['prompt_tokens']:,} + {row['completion_tokens']:,} | {row['seconds']:.0f} |")  # fmt: skip
    lines.append("")
    lines.append(f"Measured {found['measured']} at commit {found['commit']} with {found['model']}.")
    return "\n".join(lines)


#: every made table: (file, name) -> what makes it
TABLES: dict[tuple[str, str], Callable[[], str]] = {
    ("README.md", "costs"): costs_table,
    **{
        ("benchmarks/README.md", f"searchain-{d}"): (lambda d=d: searchain_table(d))
        for d in ("hotpotqa", "2wikimultihopqa", "musique")
    },  # fmt: skip
    ("benchmarks/README.md", "searchain-seeds-hotpotqa"): lambda: seeds_table("hotpotqa"),
}


def _region(name: str) -> re.Pattern[str]:
    start = re.escape(f"<!-- made by benchmarks/tables/readme_tables.py: {name} -->")
    return re.compile(start + r"\n(.*?)\n" + re.escape(f"<!-- end {name} -->"), re.S)


def differing(write: bool = False) -> list[str]:
    """The tables whose committed text is not what the results make (written anew with `write`), as
    "FILE: NAME" lines; a file's table that has no markers is said so."""
    said = []
    for (file, name), make in TABLES.items():
        path = REPO / file
        text = path.read_text(encoding="utf-8")
        found = _region(name).search(text)
        if found is None:
            said.append(f"{file}: {name}: no markers")
            continue
        made = make()
        if found[1] != made:
            said.append(f"{file}: {name}")
            if write:
                text = text[: found.start(1)] + made + text[found.end(1) :]
                path.write_text(text, encoding="utf-8")
    return said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write the tables that differ")
    args = parser.parse_args()
    said = differing(args.write)
    for line in said:
        print(("written: " if args.write else "differs: ") + line)
    sys.exit(1 if said and not args.write else 0)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "src"))
    main()
