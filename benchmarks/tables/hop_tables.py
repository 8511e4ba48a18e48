"""Which hop each method missed, on the evidence run's 30 reported questions a dataset (OneR and IRCoT as tuned,
SearChain, EfficientRAG from benchmarks/results/<model>-wikipedia; Iter-RetGen and Self-Ask, read as released,
from <model>-paper-tables/efficientrag), as Markdown for benchmarks/README.md.

    .venv/bin/python benchmarks/tables/hop_tables.py [--model qwen2.5-1.5b]

Offline: the stored answers scored by `mhindex.score` against questions that carry their gold hops (the bundled
samples built afresh in a temporary data root: the same question and paragraph ids as the evidence corpus, whose
questions.jsonl predates the hops), each file cut to the reported questions.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import mhindex

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _cut(source: Path, ids: set[str], target: Path) -> Path:
    lines = [line for line in source.read_text().splitlines() if line and json.loads(line)["id"] in ids]
    target.write_text("".join(line + "\n" for line in lines))
    return target


def table(dataset: str, model: str, home: Path, work: Path) -> str:
    evidence = RESULTS / f"{model}-wikipedia" / dataset
    metrics = json.loads((evidence / "metrics.json").read_text())
    ids = set(metrics["question_ids"])
    corpus = mhindex.build(dataset, home=home, backend=None)
    questions = _cut(corpus.path / "questions.jsonl", ids, work / f"{dataset}.questions.jsonl")
    released = RESULTS / f"{model}-paper-tables" / "efficientrag" / dataset
    sources = [evidence / f"{name}.jsonl" for name in metrics["methods"]]
    sources += [released / "iterretgen.jsonl", released / "selfask.jsonl"]
    folder = work / dataset
    folder.mkdir()
    files = [_cut(source, ids, folder / source.name) for source in sources]
    scored = mhindex.score(files, questions)
    depth = max(len(m["hops"]["recall"]) - 1 for m in scored.values())
    counts = next(iter(scored.values()))["hops"]["with_hop"]
    hops = [f"hop {n} (n={counts[str(n)]})" for n in range(1, depth + 1)]
    lines = [
        f"| {dataset} | "
        + " | ".join([*hops, "all hops", *(f"hop {n} step" for n in range(1, depth + 1))])
        + " | steps/miss |",
        "|---" * (depth * 2 + 3) + "|",
    ]
    for name, summary in scored.items():
        found = summary["hops"]
        cells = [f"{found['recall'][str(n)] * 100:.1f}" for n in range(1, depth + 1)]
        cells.append(f"{found['recall']['all'] * 100:.1f}")
        steps = [found["first_step"].get(str(n)) for n in range(1, depth + 1)]
        cells += ["-" if step is None else f"{step:.2f}" for step in steps]
        cells.append("-" if found["steps_when_missed"] is None else f"{found['steps_when_missed']:.1f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-1.5b")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        for dataset in ("musique", "2wikimultihopqa", "hotpotqa"):
            work = root / "work"
            work.mkdir(exist_ok=True)
            print(table(dataset, args.model, root / "home", work) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
