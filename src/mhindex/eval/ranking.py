"""Ranking measures of a retrieval evaluation: a corpus whose questions are judged (qrels) but have no
answers, as a BEIR dataset's, is scored on the paragraphs each method retrieved.

The measures are computed by ir_measures (pytrec_eval underneath: trec_eval's own code), not by formulas
of ours, so that a table matches what BEIR's `EvaluateRetrieval`, Pyserini's `trec_eval` and
`ir_measures` print for the same run. Two choices are mhindex's, and said in the table's caption:
- the ranked list is the first `budget` paragraphs a method retrieved, in the order it retrieved them
  (the same cut as the recall column; a paragraph retrieved twice counts where it first came);
- a question with no retrieval (a failed answer) scores 0, as `trec_eval -c` counts it, where plain
  `trec_eval` would leave it out of the mean.
Graded relevance is kept as the qrels give it (BEIR's 0/1/2): nDCG uses the grades, the others count
a grade above 0 as relevant.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from mhindex.errors import BadInput

#: (metrics.json key, column, ir_measures name)
RANKING_METRICS = (
    ("ndcg_10", "nDCG@10", "nDCG@10"),
    ("map", "MAP", "AP"),
    ("mrr", "MRR", "RR"),
)


def judged(question: Mapping[str, Any]) -> dict[str, int]:
    """A question's relevance judgements: the graded ones a BEIR corpus keeps, else each gold paragraph at 1."""
    graded = question.get("relevance")
    if isinstance(graded, dict) and graded:
        return {str(doc): int(grade) for doc, grade in graded.items()}
    return {str(doc): 1 for doc in question.get("gold_ids") or []}


def scores_retrieval(questions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether an evaluation of these questions is scored on retrieval alone: none has an answer, and
    some are judged."""
    return not any(q.get("answers") for q in questions) and any(judged(q) for q in questions)


def ranked_ids(prediction: Mapping[str, Any], budget: int | None) -> list[str]:
    """The paragraphs a prediction retrieved, first occurrence first, cut at `budget`."""
    ids = list(dict.fromkeys(str(r["id"]) for r in prediction.get("retrieved") or [] if "id" in r))
    return ids[:budget] if budget is not None else ids


def ranking_scores(
    predictions: Mapping[str, Mapping[str, Any]], questions: Mapping[str, Mapping[str, Any]], budget: int | None
) -> dict[str, dict[str, float]]:
    """Each judged question's ranking measures (RANKING_METRICS keys), from ir_measures; a question with no
    prediction or no retrieval scores 0 on each."""
    import ir_measures

    measures = {ir_measures.parse_measure(name): key for key, _, name in RANKING_METRICS}
    qrels = [ir_measures.Qrel(qid, doc, grade) for qid, q in questions.items() for doc, grade in judged(q).items()]
    run = []
    for qid in questions:
        ranked = ranked_ids(predictions.get(qid) or {}, budget)
        # Scores falling with the rank: trec_eval orders by score (ties by document id), never by input order.
        run += [ir_measures.ScoredDoc(qid, doc, float(len(ranked) - rank)) for rank, doc in enumerate(ranked)]
    scores = {qid: dict.fromkeys(measures.values(), 0.0) for qid, q in questions.items() if judged(q)}
    for metric in ir_measures.iter_calc(list(measures), qrels, run):
        if metric.query_id in scores:
            scores[metric.query_id][measures[metric.measure]] = float(metric.value)
    return scores


def run_predictions(path: Path) -> list[dict[str, Any]] | None:
    """A TREC run (`qid Q0 docid rank score tag`, as `mhindex search - --output-format trec` and Pyserini
    write) or `mhindex search -` JSONL ({"id", "hits"}), as predictions that retrieved each query's paragraphs
    in the run's order; None for a file of neither kind (predictions of `ask --json`). A TREC run is ordered by
    score as trec_eval orders it (ties: the larger document id first); read here rather than by ir_measures'
    reader so that a bad line is named by its number."""
    with open(path, "rb") as handle:
        first = next((line for line in handle if line.strip()), b"")
    try:
        record = orjson.loads(first)
    except orjson.JSONDecodeError:
        record = None
    if isinstance(record, dict):
        return _search_lines(path) if "hits" in record else None
    fields = first.split()
    if len(fields) != 6:
        return None
    ranked: dict[str, list[tuple[float, str]]] = {}
    with open(path, encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 6:
                raise BadInput(f"{path} line {number}: a TREC run line has 6 fields (qid Q0 docid rank score tag)")
            try:
                score = float(parts[4])
            except ValueError:
                raise BadInput(f"{path} line {number}: field 'score' should be a number, got {parts[4]!r}") from None
            if not math.isfinite(score):  # trec_eval and ir_measures order nan otherwise than here: no run holds one
                raise BadInput(f"{path} line {number}: field 'score' should be a finite number, got {parts[4]!r}")
            ranked.setdefault(parts[0], []).append((score, parts[2]))
    return [
        {
            "id": qid,
            "answer": "",
            "answered": False,
            "retrieved": [{"id": doc} for _, doc in sorted(docs, reverse=True)],
        }
        for qid, docs in ranked.items()
    ]


def _search_lines(path: Path) -> list[dict[str, Any]]:
    from mhindex.files import parse_jsonl

    found = []
    with open(path, "rb") as handle:
        for number, record, problem in parse_jsonl(handle):
            if isinstance(record, dict) and "error" in record:
                continue  # a line `search -` could not read: no query, so no prediction
            hits = record.get("hits") if isinstance(record, dict) else None
            if problem or not isinstance(hits, list) or not isinstance(record.get("id"), str):
                raise BadInput(f"{path} line {number}: {problem or 'a search result has an id and a list of hits'}")
            if not all(isinstance(h, dict) and isinstance(h.get("id"), str) for h in hits):
                raise BadInput(f"{path} line {number}: field 'hits' should be a list of objects with an id")
            found.append(
                {"id": record["id"], "answer": "", "answered": False, "retrieved": [{"id": h["id"]} for h in hits]}
            )
    return found
