"""IRCoT against OneR at the same paragraph budget, on the reported questions of a tuned evaluation.

    .venv/bin/python benchmarks/tables/equal_budget.py FOLDER [FOLDER ...] [--budget 5 7 10] [--home .mhindex-eval]

A tuned `mhindex eval` reports each method at its chosen setting only (OneR at K = 15 against IRCoT's ~7
paragraphs), so the recall in its table compares two budgets. IRCoT's Figure 3 compares them at one.
OneR's paragraphs are BM25's ranking of the question, so its first B paragraphs at K = 15 are exactly what
it retrieves at K = B; recall counted over each method's first B paragraphs (eval's own `--budget` scorer)
then compares both at B, on the same questions, with eval's paired bootstrap. Where OneR was reported at a
K below the largest budget (a tuning that chose K = 5), its ranking is read on to that budget from the
folder's own index with OneR's own query, after checking that the first K paragraphs are the ones it
retrieved (else the script stops). Prints, per folder and budget: each method's recall (<= B), its mean
paragraphs counted, and the paired difference.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from mhindex.eval.metrics import paired_differences, score_one
from mhindex.eval.run import read_predictions, read_questions
from mhindex.eval.sweep import base_method

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+", help="tuned `mhindex eval` folders")
    parser.add_argument("--budget", type=int, nargs="+", default=[5, 7, 10])
    parser.add_argument("--home", type=Path, default=ROOT / ".mhindex-eval")
    args = parser.parse_args()
    print(f"{'dataset':16} {'B':>3} {'method':12} {'n':>3} {'recall':>7} {'paras':>6}   first - second [95% paired]")
    for folder in args.folders:
        report = orjson.loads((folder / "metrics.json").read_bytes())
        by_id = read_questions(args.home / report["corpus"] / "questions.jsonl")
        questions = {qid: by_id[qid] for qid in report["question_ids"]}  # the reported sample, in its order
        predictions = {
            name: [p for p in read_predictions(folder / f"{name}.jsonl") if p.get("id") in questions]
            for name in report["methods"]
        }
        run = orjson.loads((folder / "run.json").read_bytes())
        for name, records in predictions.items():
            if base_method(name) == "oner" and run["settings"][name]["k"] < max(args.budget):
                predictions[name] = ranked_on(records, questions, args.home, report, run["settings"][name], args.budget)
                print(f"{report['dataset']}: {name} read on to {max(args.budget)} paragraphs from its index")
        for budget in args.budget:
            pairs = [p for p in paired_differences(predictions, questions, budget) if p["metric"] == "recall"]
            for name, records in predictions.items():
                recall = mean_recall(records, questions, budget)
                if recall is None:
                    continue  # a method that retrieves nothing (NoR), or no answers yet
                paragraphs = sum(min(len(p.get("retrieved") or []), budget) for p in records) / len(records)
                row = f"{report['dataset']:16} {budget:>3} {name:12} {len(records):>3}"
                print(f"{row} {recall:>7.1f} {paragraphs:>6.1f}")
            for pair in pairs:
                low, high = (100 * x for x in pair["ci95"])
                print(
                    f"{'':16} {budget:>3} {pair['a']} - {pair['b']}: {100 * pair['difference']:+.1f} "
                    f"[{low:+.1f}, {high:+.1f}]{' *' if low > 0 or high < 0 else ''}, "
                    f"n {pair['questions']}, wins {pair['a_better']}:{pair['b_better']}"
                )


def ranked_on(
    records: list[dict], questions: dict[str, dict], home: Path, report: dict, settings: dict, budget: list[int]
) -> list[dict]:
    """OneR's records with its ranking read on to the largest budget: the same query (methods/oner.py) on the
    same index, checked to give the paragraphs it retrieved first, in their order."""
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import open_corpus
    from mhindex.methods.queries import retrieval_query

    corpus = open_corpus(home, report["corpus"])
    if corpus.manifest().get("corpus_sha256") != report["corpus_sha256"]:
        raise SystemExit(f"{corpus.root}: not the corpus the folder was answered on (its sha256 differs)")
    retriever = open_retriever(corpus, BackendSpec.parse(report["backend"]))
    try:
        ranked = []
        for record in records:
            if "error" in record:
                ranked.append(record)
                continue
            query = retrieval_query(questions[record["id"]]["question"], [], settings["clean_queries"])
            hits = retriever.search(query, max(budget))
            kept = [r["id"] for r in record.get("retrieved") or []]
            if [h.id for h in hits[: len(kept)]] != kept:
                raise SystemExit(f"{record['id']}: the index ranks OneR's query otherwise than the stored answer")
            ranked.append({**record, "retrieved": [{"id": h.id, "title": h.title} for h in hits]})
        return ranked
    finally:
        retriever.close()


def mean_recall(records: list[dict], questions: dict[str, dict], budget: int) -> float | None:
    """As eval's table: a failed answer scores 0; questions without gold paragraphs are left out."""
    if not any(p.get("retrieved") for p in records):
        return None
    scores = [score_one({} if "error" in p else p, questions[p["id"]], budget)["recall"] for p in records]
    known = [s for s in scores if s is not None]
    return 100 * sum(known) / len(known) if known else None


if __name__ == "__main__":
    main()
