"""IRCoT's reader call, measured as a trade: what a question would cost and score if the chain's own
conclusion ("So the answer is: X") stood and the reader were asked only where the chain did not conclude.

    .venv/bin/python benchmarks/tables/chain_or_reader.py [--model qwen2.5-1.5b-wikipedia] [--home .mhindex-eval]

Offline, over stored IRCoT predictions (benchmarks/results/<model>/<dataset>/ircot@*.jsonl, the largest file
of each dataset): every record keeps its chain's steps, `chain_answer` where the chain concluded, and the
reader's call (`reader`: prompt tokens, seconds, output). The reader's answer is the recorded one; the chain's
arm takes `chain_answer` where there is one and the recorded answer elsewhere, so the two arms differ only on
the questions whose reader call the chain's answer would save. Scored with eval's own metrics and paired
bootstrap (mhindex.eval.metrics); questions are the corpus's (<home>/<corpus>/questions.jsonl).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mhindex.eval.metrics import best, exact_match, f1, paired_bootstrap
from tables import RESULTS, load


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-1.5b-wikipedia", help="a results folder under benchmarks/results")
    parser.add_argument("--home", type=Path, default=RESULTS.parents[1] / ".mhindex-eval", help="the corpora's root")
    parser.add_argument("--corpus-prefix", default="wikipedia-", help="corpus name = prefix + dataset")
    args = parser.parse_args()
    print(
        "| dataset | file | n | chain concluded | reader differs | F1 reader | F1 chain | F1 chain - reader [95%] "
        "| EM reader | EM chain | reader s/q | s/q saved | reader prompt tok/q saved |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for folder in sorted(p for p in (RESULTS / args.model).iterdir() if p.is_dir()):
        files = sorted(folder.glob("ircot*.jsonl"), key=lambda p: -len(p.read_bytes().splitlines()))
        if not files:
            continue
        questions = load(args.home / f"{args.corpus_prefix}{folder.name}" / "questions.jsonl")
        records = [r for r in load(files[0]).values() if r["id"] in questions]
        print(_row(folder.name, files[0].name, records, questions))
    return 0


def _row(dataset: str, name: str, records: list[dict], questions: dict[str, dict]) -> str:
    n = len(records)
    f1_reader, f1_chain, em_reader, em_chain = [], [], [], []
    concluded = differs = 0
    reader_seconds = saved_seconds = saved_tokens = 0.0
    for record in records:
        answers = questions[record["id"]]["answers"]
        reader = record.get("reader") or {}
        chain = record.get("chain_answer")
        reader_seconds += float(reader.get("seconds") or 0)
        if chain is not None:
            concluded += 1
            differs += chain != record["answer"]
            saved_seconds += float(reader.get("seconds") or 0)
            saved_tokens += float(reader.get("prompt_tokens") or 0)
        own = record["answer"] if chain is None else chain
        f1_reader.append(best(f1, record["answer"], answers, dataset))
        f1_chain.append(best(f1, own, answers, dataset))
        em_reader.append(best(exact_match, record["answer"], answers))
        em_chain.append(best(exact_match, own, answers))
    mean, interval = paired_bootstrap([c - r for c, r in zip(f1_chain, f1_reader, strict=True)])
    low, high = interval or (0.0, 0.0)
    cells = [
        dataset, name, n, concluded, differs, _pct(f1_reader), _pct(f1_chain),
        f"{100 * (mean or 0):+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]", _pct(em_reader), _pct(em_chain),
        f"{reader_seconds / n:.1f}", f"{saved_seconds / n:.1f}", f"{saved_tokens / n:,.0f}",
    ]  # fmt: skip
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _pct(values: list[float]) -> str:
    return f"{100 * sum(values) / len(values):.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
