"""Answer F1 of each reader on the stored benchmark predictions, side by side, on eval's nested
question sample: the evidence behind `--reader auto` (Direct for small models).

    .venv/bin/python scripts/reader_table.py [--limit 20] [--model qwen2.5-0.5b]

Rows: NoR, OneR and IRCoT with the CoT reader (benchmarks/results/<model>/), IRCoT's CoT reader
falling back to its chain's own "answer is" when the reader never concludes (what mhindex does
now; computed from the same stored generations), and the Direct reader: measured runs where they
exist (benchmarks/results/<model>-reader-direct/), else the stored run's paragraphs read again by
a Direct reader (benchmarks/results/<model>-reread-direct/, scripts/reread.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from mhindex.eval.metrics import aggregate, best, f1
from mhindex.methods.prompts import concludes, extract_answer

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
DATASETS = ("hotpotqa", "2wikimultihopqa", "musique")


def load(path: Path) -> dict[str, dict]:
    if not path.is_file():
        return {}
    return {r["id"]: r for r in (orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()) if "error" not in r}


def chain_fallback(record: dict) -> dict:
    """The CoT reader's answer, or the chain's when the reader never reached "answer is"."""
    chain, _, reader = record.get("reasoning", "").partition("[reader] ")
    generation = reader or chain
    sentences = [s["text"] for s in record.get("steps", []) if s.get("text")]
    if not concludes(generation) and sentences and "answer is" in sentences[-1].lower():
        return {**record, "answer": extract_answer(sentences[-1])}
    return record


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--seed", type=int, default=13370)
    parser.add_argument("--model", default="qwen2.5-0.5b")
    args = parser.parse_args()
    print(f"| dataset | reader | NoR | OneR | IRCoT |  (answer F1 ±95%, {args.limit} questions, {args.model})")
    print("|---|---|---|---|---|")
    for dataset in DATASETS:
        stored = {m: load(RESULTS / args.model / dataset / f"{m}.jsonl") for m in ("nor", "oner", "ircot")}
        sample = _sample(dataset, args.limit, args.seed)

        # Measured runs first; the re-read fills in the questions they have not reached.
        direct = {m: {**load(RESULTS / f"{args.model}-reread-direct" / dataset / f"{m}.jsonl"), **load(RESULTS / f"{args.model}-reader-direct" / dataset / f"{m}.jsonl")} for m in ("nor", "oner", "ircot")}
        print(f"| {dataset} | CoT | {_cell(sample, stored['nor'])} | {_cell(sample, stored['oner'])} | {_cell(sample, stored['ircot'])} |")
        print(f"| {dataset} | CoT, else the chain's answer | | | {_cell(sample, {i: chain_fallback(r) for i, r in stored['ircot'].items()})} |")
        print(f"| {dataset} | Direct | {_cell(sample, direct['nor'])} | {_cell(sample, direct['oner'])} | {_cell(sample, direct['ircot'])} |")
        both = [i for i in sample if i in direct["ircot"] and i in stored["ircot"]]
        if both:
            agree = sum(best(f1, direct["ircot"][i]["answer"], sample[i]["answers"]) >= best(f1, chain_fallback(stored["ircot"][i])["answer"], sample[i]["answers"]) for i in both)
            print(f"|  | (Direct ≥ CoT-with-chain on {agree} of {len(both)} IRCoT questions) | | | |")
    return 0


def _cell(sample: dict[str, dict], records: dict[str, dict]) -> str:
    if not all(i in records for i in sample):
        return "-"
    summary = aggregate([records[i] for i in sample], sample)
    return f"{summary['f1'] * 100:.1f} ±{summary['f1_ci95'] * 100:.1f}"


def _sample(dataset: str, limit: int, seed: int) -> dict[str, dict]:
    """eval's nested question sample of the bundled sample's questions, by id."""
    import tempfile

    from mhindex.corpora import DATASETS as REGISTRY
    from mhindex.corpora import default_inputs
    from mhindex.corpora.build import build_corpus
    from mhindex.eval.run import sample_questions

    spec = REGISTRY[dataset]
    files, _ = default_inputs(spec, Path("/nonexistent"))
    with tempfile.TemporaryDirectory() as home:
        return {q["id"]: q for q in sample_questions(build_corpus(spec, files, Path(home)).corpus, limit, seed)}


if __name__ == "__main__":
    raise SystemExit(main())
