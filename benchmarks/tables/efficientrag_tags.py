"""Where EfficientRAG's recall goes: gold paragraphs its retrieval reached against those its Tagger kept.

    .venv/bin/python benchmarks/tables/efficientrag_tags.py FOLDER [FOLDER ...] [--home .mhindex-eval]

EfficientRAG answers from (and the release's evaluation/retrieve.py scores recall over) the chunks not tagged
<Terminate>, so a gold paragraph that a round retrieved but the Tagger marked <Terminate> is lost. For each
`mhindex eval` folder's reported questions this prints the gold paragraphs, how many its first round's top K
held, how many any round met, how many of those some round kept (<Continue>), and the share of all chunks
kept: a Tagger that keeps gold chunks no more often than others cannot tell them apart.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from mhindex.eval.run import read_predictions, read_questions

ROOT = Path(__file__).resolve().parents[2]
CONTINUE = "<Continue>"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+", help="`mhindex eval` folders with efficientrag.jsonl")
    parser.add_argument("--home", type=Path, default=ROOT / ".mhindex-eval")
    args = parser.parse_args()
    print(
        f"{'dataset':16} {'n':>3} {'gold':>5} {'round 1':>8} {'met':>5} {'kept':>5} {'gold kept':>10} {'all kept':>9}"
    )
    for folder in args.folders:
        report = orjson.loads((folder / "metrics.json").read_bytes())
        questions = read_questions(args.home / report["corpus"] / "questions.jsonl")
        asked = set(report["question_ids"])
        records = [
            r for r in read_predictions(folder / "efficientrag.jsonl") if r.get("id") in asked and "error" not in r
        ]
        gold = first = met = kept = chunks = continued = 0
        for record in records:
            wanted = set(questions[record["id"]].get("gold_ids") or [])
            rounds = record["efficientrag"]["rounds"]
            tags: dict[str, set[str]] = {}
            for round_ in rounds:
                for chunk in round_["chunks"]:
                    chunks += 1
                    continued += chunk["tag"] == CONTINUE
                    if chunk["id"] in wanted:
                        tags.setdefault(chunk["id"], set()).add(chunk["tag"])
            gold += len(wanted)
            first += len(wanted & {c["id"] for c in rounds[0]["chunks"]}) if rounds else 0
            met += len(tags)
            kept += sum(CONTINUE in t for t in tags.values())
        print(
            f"{report['dataset']:16} {len(records):>3} {gold:>5} {first:>8} {met:>5} {kept:>5} "
            f"{100 * kept / max(met, 1):>9.1f}% {100 * continued / max(chunks, 1):>8.1f}%"
        )


if __name__ == "__main__":
    main()
