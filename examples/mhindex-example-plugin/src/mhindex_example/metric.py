"""token_recall: the share of the gold answer's words that the prediction contains (after the official
normalisation), a lenient measure for long answers; `eval`, `score` and `report` add it as a column."""

from __future__ import annotations

from mhindex.plugins import AnswerMetric, normalize_answer


def token_recall(prediction: str, gold: str) -> float:
    truth = normalize_answer(gold).split()
    if not truth:
        return 0.0
    said = set(normalize_answer(prediction).split())
    return sum(1 for word in truth if word in said) / len(truth)


TOKEN_RECALL = AnswerMetric(
    "token_recall", "Tok. recall", "the share of the gold answer's words in the prediction", token_recall
)
