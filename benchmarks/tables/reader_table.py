"""Answer F1 of each reader on the stored benchmark predictions, side by side, on eval's nested
question sample: the evidence behind `--reader auto` (Direct for small models).

    .venv/bin/python benchmarks/tables/reader_table.py [--limit 20] [--model qwen2.5-0.5b]

Rows: NoR, OneR and IRCoT with the CoT reader (benchmarks/results/<model>/), IRCoT's CoT reader
falling back to its chain's own "answer is" when the reader never concludes (what mhindex does
now; computed from the same stored generations), and the Direct reader: measured runs where they
exist (benchmarks/results/<model>-reader-direct/), else the stored run's paragraphs read again by
a Direct reader (benchmarks/results/<model>-reread-direct/, benchmarks/tables/reread.py).
"""

from __future__ import annotations

from mhindex.eval.metrics import aggregate, best, f1
from tables import DATASETS, RESULTS, arguments, chain_fallback, direct, load, sample


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    print(f"| dataset | reader | NoR | OneR | IRCoT |  (answer F1 ±95%, {args.limit} questions, {args.model})")
    print("|---|---|---|---|---|")
    for dataset in DATASETS:
        stored = {m: load(RESULTS / args.model / dataset / f"{m}.jsonl") for m in ("nor", "oner", "ircot")}
        questions = sample(dataset, args.limit, args.seed)
        # Measured runs first; the re-read fills in the questions they have not reached.
        read_directly = {m: direct(args.model, dataset, m) for m in ("nor", "oner", "ircot")}
        print(
            f"| {dataset} | CoT | {_cell(questions, stored['nor'])} | {_cell(questions, stored['oner'])} | "
            f"{_cell(questions, stored['ircot'])} |"
        )
        print(
            f"| {dataset} | CoT, else the chain's answer | | | "
            f"{_cell(questions, {i: chain_fallback(r) for i, r in stored['ircot'].items()})} |"
        )
        print(
            f"| {dataset} | Direct | {_cell(questions, read_directly['nor'])} | "
            f"{_cell(questions, read_directly['oner'])} | {_cell(questions, read_directly['ircot'])} |"
        )
        both = [i for i in questions if i in read_directly["ircot"] and i in stored["ircot"]]
        if both:
            agree = sum(
                best(f1, read_directly["ircot"][i]["answer"], questions[i]["answers"])
                >= best(f1, chain_fallback(stored["ircot"][i])["answer"], questions[i]["answers"])
                for i in both
            )
            print(f"|  | (Direct ≥ CoT-with-chain on {agree} of {len(both)} IRCoT questions) | | | |")
    return 0


def _cell(questions: dict[str, dict], records: dict[str, dict]) -> str:
    if not all(i in records for i in questions):
        return "-"
    summary = aggregate([records[i] for i in questions], questions)
    return f"{summary['f1'] * 100:.1f} ±{summary['f1_ci95'] * 100:.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
