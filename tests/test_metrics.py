"""Answer and retrieval metrics on hand-made cases."""

from __future__ import annotations

import pytest

from mhindex.eval.metrics import (
    aggregate,
    best,
    cover_exact_match,
    exact_match,
    f1,
    hit_at_1,
    normalize_answer,
    retrieval_recall,
)


def test_official_normalisation():
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("An apple, a pear.") == "apple pear"
    assert normalize_answer("Theatre") == "theatre"  # articles only as whole words
    assert normalize_answer("") == ""


def test_exact_match_takes_the_best_alias():
    answers = ["United States of America", "USA", "the US"]
    assert best(exact_match, "U.S.A.", answers) == 1.0
    assert best(exact_match, "US", answers) == 1.0
    assert best(exact_match, "America", answers) == 0.0


def test_f1_partial_overlap():
    assert f1("Barack Obama", "Obama") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert f1("the cat sat", "cat sat down") == pytest.approx(2 * 1 * (2 / 3) / (1 + 2 / 3))
    assert best(f1, "Paris France", ["Lyon", "Paris"]) == pytest.approx(2 / 3)


def test_yes_no_as_the_official_script():
    assert f1("yes", "no") == 0.0
    assert f1("yes", "Yes.") == 1.0
    assert f1("yes it is", "yes") == 0.0  # a yes/no gold matches only the bare word
    assert f1("no", "no answer") == 0.0


def test_empty_predictions_and_answers():
    assert best(exact_match, "", ["Paris"]) == 0.0
    assert best(f1, "", ["Paris"]) == 0.0
    assert best(cover_exact_match, "", ["Paris"]) == 0.0
    assert best(f1, "Paris", []) == 0.0
    assert cover_exact_match("anything", "") == 0.0 and hit_at_1("", "") == 0.0


def test_unicode():
    assert exact_match("Zürich", "zürich") == 1.0
    assert exact_match("Zurich", "Zürich") == 0.0  # the official scripts do not strip accents
    assert f1("Ōsaka Castle", "Ōsaka") == pytest.approx(2 / 3)
    assert cover_exact_match("It lies in 東京 Japan", "東京") == 1.0


def test_cover_em_and_hit_at_1():
    assert cover_exact_match("So the capital is Paris, France.", "Paris") == 1.0
    assert cover_exact_match("Parisian cafés", "Paris") == 0.0  # whole words only
    assert hit_at_1("Paris; London", "Paris") == 1.0
    assert hit_at_1("Paris; London", "London") == 0.0  # only the first answer counts
    assert hit_at_1("The Beatles", "beatles") == 1.0


def test_retrieval_recall():
    assert retrieval_recall(["a", "b", "c"], ["a", "z"]) == 0.5
    assert retrieval_recall(["a", "z"], ["a", "z"]) == 1.0
    assert retrieval_recall([], ["a"]) == 0.0
    assert retrieval_recall(["a"], []) is None


def test_aggregate_counts_missing_and_failed_as_zero():
    questions = {
        "q1": {"answers": ["Paris"], "gold_ids": ["p1", "p2"]},
        "q2": {"answers": ["yes"], "gold_ids": ["p3"]},
        "q3": {"answers": ["Rome"], "gold_ids": []},
    }
    predictions = [
        {"id": "q1", "answer": "Paris", "retrieved": [{"id": "p1"}, {"id": "x"}], "lm_calls": 3, "prompt_tokens": 100, "completion_tokens": 10, "seconds": 2.0},
        {"id": "q2", "error": "LM server down"},
    ]
    summary = aggregate(predictions, questions, budget=15)
    assert summary["questions"] == 3 and summary["failed"] == 2
    assert summary["em"] == pytest.approx(1 / 3)
    assert summary["recall"] == pytest.approx((0.5 + 0.0) / 2)  # q3 has no gold paragraphs
    assert summary["retrieved_per_question"] == pytest.approx(2 / 3)
    assert summary["lm_calls_per_question"] == pytest.approx(1.0)
    assert summary["paragraph_budget"] == 15


def test_a_method_that_never_retrieves_has_no_recall():
    questions = {"q1": {"answers": ["Paris"], "gold_ids": ["p1"]}, "q2": {"answers": ["Rome"], "gold_ids": ["p2"]}}
    nor = [{"id": q, "answer": "Paris", "retrieved": [], "steps": []} for q in questions]
    assert aggregate(nor, questions)["recall"] is None and aggregate(nor, questions)["em"] == 0.5
    # A retrieval method that found nothing keeps its recall of 0: that is a result, not a gap.
    empty = [{"id": q, "answer": "", "retrieved": [], "steps": [{"query": "x", "retrieved_ids": []}]} for q in questions]
    assert aggregate(empty, questions)["recall"] == 0.0
