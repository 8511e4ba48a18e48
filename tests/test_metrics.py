"""Answer and retrieval metrics on hand-made cases."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from mhindex.eval.metrics import (
    aggregate,
    best,
    ci95_half_width,
    cover_exact_match,
    cover_substring,
    exact_match,
    f1,
    first_answer_exact_match,
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
    assert cover_exact_match("anything", "") == 0.0 and first_answer_exact_match("", "") == 0.0


def test_unicode():
    assert exact_match("Zürich", "zürich") == 1.0
    assert exact_match("Zurich", "Zürich") == 0.0  # the official scripts do not strip accents
    assert f1("Ōsaka Castle", "Ōsaka") == pytest.approx(2 / 3)
    assert cover_exact_match("It lies in 東京 Japan", "東京") == 1.0


def test_cover_em_and_first_answer_exact_match():
    assert cover_exact_match("So the capital is Paris, France.", "Paris") == 1.0
    assert cover_exact_match("Parisian cafés", "Paris") == 0.0  # whole words only
    # SearChain's variant (its released match_or_not): any substring, after normalisation.
    assert cover_substring("Parisian cafés", "Paris") == 1.0
    assert cover_substring("So the final answer is The Beatles.", "beatles") == 1.0
    assert cover_substring("1,844", "1844") == 1.0 and cover_substring("London", "Paris") == 0.0
    assert cover_substring("anything", "the") == 0.0  # a gold answer that normalises to nothing covers nothing
    assert first_answer_exact_match("Paris; London", "Paris") == 1.0
    assert first_answer_exact_match("Paris; London", "London") == 0.0  # only the first answer counts
    assert first_answer_exact_match("The Beatles", "beatles") == 1.0


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
        {
            "id": "q1",
            "answer": "Paris",
            "retrieved": [{"id": "p1"}, {"id": "x"}],
            "lm_calls": 3,
            "prompt_tokens": 100,
            "completion_tokens": 10,
            "seconds": 2.0,
        },
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
    empty = [
        {"id": q, "answer": "", "retrieved": [], "steps": [{"query": "x", "retrieved_ids": []}]} for q in questions
    ]
    assert aggregate(empty, questions)["recall"] == 0.0


def test_f1_and_recall_carry_their_95_percent_interval():
    assert ci95_half_width([0.0, 1.0] * 25) == pytest.approx(1.96 * math.sqrt((50 * 0.25 / 49) / 50))
    assert ci95_half_width([0.4] * 10) == pytest.approx(0.0, abs=1e-12)
    assert ci95_half_width([0.7]) is None and ci95_half_width([]) is None
    questions = {f"q{i}": {"answers": ["Paris"], "gold_ids": ["p1", "p2"]} for i in range(4)}
    predictions = [
        {"id": f"q{i}", "answer": "Paris" if i % 2 else "Lyon", "retrieved": [{"id": "p1"}, {"id": "p2"}][: i % 3]}
        for i in range(4)
    ]
    summary = aggregate(predictions, questions)
    assert summary["f1_ci95"] == pytest.approx(ci95_half_width([0.0, 1.0, 0.0, 1.0]))
    assert summary["recall_ci95"] == pytest.approx(ci95_half_width([0.0, 0.5, 1.0, 0.0]))
    nor = aggregate([{"id": q, "answer": "Paris", "retrieved": []} for q in questions], questions)
    assert nor["recall"] is None and nor["recall_ci95"] is None and nor["f1_ci95"] == 0.0


def test_the_table_shows_the_interval_beside_f1_and_recall():
    from rich.console import Console

    from mhindex.eval.report import table

    summary = {
        "em": 0.2,
        "f1": 0.25,
        "f1_ci95": 0.081,
        "cover_em": 0.3,
        "cover_em_substring": 0.4,
        "first_answer_em": 0.2,
        "recall": None,
        "recall_ci95": None,
        "paragraph_budget": 15,
        "retrieved_per_question": 0.0,
        "questions": 50,
        "failed": 0,
        "lm_calls_per_question": 1.0,
        "prompt_tokens_per_question": 1000.0,
        "completion_tokens_per_question": 50.0,
        "seconds_per_question": 2.0,
    }
    console = Console(width=200, record=True)
    console.print(table({"nor": summary}, "t"))
    text = console.export_text()
    row = next(line for line in text.splitlines() if "nor" in line)
    assert "25.0 ±8.1" in row and "20.0" in row and " - " in row and "1,050" in row
    assert "95% interval" in text


def test_each_dataset_is_scored_by_its_official_rules():
    # MuSiQue's script uses SQuAD's compute_f1: no yes/no rule, and two empty answers score 1.
    # "no man's land" normalises to [no, mans, land]: precision 1, recall 1/3, F1 0.5.
    assert f1("no", "no man's land", "musique") == pytest.approx(0.5)
    assert f1("the", "a", "musique") == 1.0
    # HotpotQA's script, and 2WikiMultihopQA's adapted from it, give 0 to a yes/no that differs.
    for dataset in ("hotpotqa", "2wikimultihopqa"):
        assert f1("no", "no man's land", dataset) == 0.0
        assert f1("the", "a", dataset) == 0.0
        assert f1("yes", "yes", dataset) == 1.0
    questions = {
        "m": {"answers": ["no man's land"], "gold_ids": [], "dataset": "musique"},
        "h": {"answers": ["no man's land"], "gold_ids": [], "dataset": "hotpotqa"},
    }
    predictions = [{"id": "m", "answer": "no"}, {"id": "h", "answer": "no"}]
    assert aggregate(predictions, questions)["f1"] == pytest.approx(0.25)


def test_every_registered_answer_metric_is_a_column_and_a_score():
    from rich.console import Console

    from mhindex.eval.metrics import ANSWER_METRICS
    from mhindex.eval.report import table

    questions = {"q": {"answers": ["Paris"], "gold_ids": ["p"], "dataset": "hotpotqa"}}
    summary = aggregate([{"id": "q", "answer": "Paris", "retrieved": [{"id": "p"}]}], questions)
    console = Console(width=300, record=True)
    console.print(table({"oner": summary}, "t"))
    header = console.export_text().splitlines()[2]
    for metric in ANSWER_METRICS:
        assert summary[metric.key] == 1.0 and metric.column in header


def test_rounds_are_averaged_where_a_method_reports_them():
    questions = {"a": {"answers": ["Paris"]}, "b": {"answers": ["Rome"]}}
    searchain = aggregate(
        [{"id": "a", "answer": "Paris", "rounds": 1}, {"id": "b", "answer": "x", "rounds": 4}], questions
    )
    assert searchain["rounds_per_question"] == 2.5
    assert "rounds_per_question" not in aggregate([{"id": "a", "answer": "Paris"}], questions)


def test_searchain_s_cover_em_over_everything_the_lm_wrote():
    # Its released client adds every chain to `predict_answer` (SearChain_w_IR.py, xsc1234/Search-in-the-Chain
    # @a2e2e51); its server's match_or_not is substring containment after SQuAD's normalisation.
    questions = {"a": {"question": "Is Paris the capital of France?", "answers": ["Paris"]}, "b": {"answers": ["Rome"]}}
    predictions = [
        {"id": "a", "answer": "Lyon", "generated": "[Query 1]: Is Paris the capital of France?\n[Answer 1]: Yes."},
        {"id": "b", "answer": "Milan", "generated": "[Final Content]: So the final answer is Milan."},
    ]
    summary = aggregate(predictions, questions)
    assert (
        summary["cover_em_generated"] == 0.5 and summary["cover_em_substring"] == 0.0
    )  # a gold named in the question counts
    assert "cover_em_generated" not in aggregate([{"id": "a", "answer": "Paris"}], questions)


def test_efficientrag_s_exact_match_is_containment_in_the_answer():
    # src/evaluation/correctness.py of microsoft/EfficientRAG@6b2489f: `normalized_prediction in normalized_answer`.
    questions = {q: {"answers": ["12", "twelve"]} for q in "abcd"}
    predictions = [
        {"id": "a", "answer": "1"},
        {"id": "b", "answer": "12"},
        {"id": "c", "answer": ""},
        {"id": "d", "answer": "twelve"},
    ]
    summary = aggregate(predictions, questions)
    assert summary["efficientrag_em"] == 0.75 and summary["em"] == 0.5  # "1" and "" count; an alias does not
    assert aggregate([], questions)["efficientrag_em"] == 0.0  # no answer at all is not an empty one
    verdicts = aggregate(predictions, questions, verdicts={"a": False, "b": True, "d": True})
    assert verdicts["accuracy_llm"] == 0.5 and "accuracy_llm" not in summary


def test_paper_columns_appear_with_their_method():
    from rich.console import Console

    from mhindex.eval.report import table

    questions = {"a": {"answers": ["Paris"]}}
    rows = {
        "oner": aggregate([{"id": "a", "answer": "Paris"}], questions),
        "efficientrag": aggregate([{"id": "a", "answer": "Paris"}], questions),
    }
    console = Console(width=400, record=True)
    console.print(table(rows, "t"))
    assert "EM (EfficientRAG)" in console.export_text()
    console = Console(width=400, record=True)
    console.print(table({"oner": rows["oner"]}, "t"))
    assert "EM (EfficientRAG)" not in console.export_text() and "Cover-EM (all LM text)" not in console.export_text()
    # A paper's table shows its own measures: SearChain's has no EfficientRAG column, though Self-Ask declares one
    # (it is a row of EfficientRAG's table too); EfficientRAG's own table has it.
    from mhindex.eval.tables import plan_table

    selfask = {"selfask": rows["efficientrag"]}
    for name, shown in (("SearChain", False), ("EfficientRAG", True)):
        console = Console(width=400, record=True)
        console.print(table(selfask, "t", plan_table(name, "hotpotqa").record()))
        assert ("EM (EfficientRAG)" in console.export_text()) is shown, name


def test_paired_bootstrap_interval():
    """The interval of a constant difference is that constant; for a large sample it matches the normal
    approximation of the mean's spread; and it is reproducible."""
    import random
    import statistics

    from mhindex.eval.metrics import paired_bootstrap

    assert paired_bootstrap([0.5] * 40) == (0.5, (0.5, 0.5))
    rng = random.Random(3)
    values = [rng.choice([-1.0, 0.0, 0.0, 1.0, 1.0]) for _ in range(400)]
    mean, (low, high) = paired_bootstrap(values)
    assert mean == pytest.approx(statistics.mean(values))
    normal = 1.96 * statistics.stdev(values) / len(values) ** 0.5
    assert low < mean < high
    assert (high - low) / 2 == pytest.approx(normal, rel=0.1)
    assert paired_bootstrap(values) == (mean, (low, high))


def test_paired_differences_compare_methods_question_by_question():
    from mhindex.eval.metrics import paired_differences

    questions = {
        f"q{i}": {"id": f"q{i}", "question": "?", "answers": ["Paris"], "gold_ids": ["g"], "dataset": "musique"}
        for i in range(40)
    }
    # a answers 30 right and retrieves the gold paragraph for all; b answers 10 of those 30 right
    # (and fails one question outright: it scores 0, as in the table) and retrieves it for half.
    a = [
        {"id": q, "answer": "Paris" if i < 30 else "Rome", "retrieved": [{"id": "g"}]} for i, q in enumerate(questions)
    ]
    b = [
        {"id": q, "answer": "Paris" if i < 10 else "Rome", "retrieved": [{"id": "g" if i % 2 else "x"}]}
        for i, q in enumerate(questions)
        if i != 5
    ]
    b.append({"id": "q5", "error": "timed out"})
    rows = {row["metric"]: row for row in paired_differences({"a": a, "b": b}, questions)}
    em = rows["em"]
    assert em["difference"] == pytest.approx(21 / 40)  # q5 is right for a, failed for b
    assert em["ci95"][0] > 0.3 and em["ci95"][1] < 0.7
    assert (em["a_better"], em["b_better"], em["questions"]) == (21, 0, 40)
    assert rows["recall"]["difference"] == pytest.approx(21 / 40)  # the odd ones found by b, but not q5


def test_intervals_stay_inside_0_100_and_tables_export_as_markdown_and_latex(tmp_path):
    from mhindex.eval.metrics import aggregate
    from mhindex.eval.report import bar_chart, method_name, run_title, table_text
    from mhindex.methods.session import titles

    questions = {
        q: {"id": q, "question": "?", "answers": ["Paris"], "gold_ids": ["g"], "dataset": "musique"} for q in ("a", "b")
    }
    perfect = aggregate([{"id": q, "answer": "Paris", "retrieved": [{"id": "g"}]} for q in questions], questions)
    assert perfect["f1_interval"] == (1.0, 1.0) and perfect["recall_interval"] == (1.0, 1.0)  # never past 100%
    half = aggregate(
        [{"id": "a", "answer": "Paris", "retrieved": [{"id": "g"}]}, {"id": "b", "answer": "Rome"}], questions
    )
    assert 0.0 <= half["f1_interval"][0] <= half["f1"] <= half["f1_interval"][1] <= 1.0
    metrics = {"oner@k=5": perfect, "ircot": half}
    assert method_name("oner@k=5") == "OneR (k=5)" and method_name("kdcot") == "KD-CoT"
    title = run_title("musique", 2, *titles("local:qwen2.5-0.5b", "lucene+dense"))  # as the session names them
    assert title == "MuSiQue: 2 questions, Qwen2.5-0.5B (local), BM25 (Lucene) + dense (FAISS)"

    markdown = table_text(metrics, title, "md").splitlines()
    assert markdown[2].startswith("| Method | n |") and "Recall (≤15)" in markdown[2]
    assert markdown[4].startswith("| OneR (k=5) | 2 | ") and "100.0" in markdown[4]
    latex = table_text(metrics, title, "latex")
    assert (
        r"\begin{tabular}" in latex
        and r"IRCoT & 2 &" in latex
        and r"$\pm$" in latex
        and "%" not in latex.replace(r"\%", "")
    )
    assert bar_chart({"musique": metrics}, tmp_path / "chart.png", title).stat().st_size > 5000


def test_a_paired_difference_on_too_few_questions_is_starred_nowhere():
    """Two questions that both moved by a whole answer give a bootstrap interval of [+100, +100]: it "excludes 0"
    and says nothing. Under FEWEST_FOR_AN_INTERVAL questions no table stars it, and the interval says why."""
    from rich.console import Console

    from mhindex.eval.metrics import FEWEST_FOR_AN_INTERVAL, paired_differences
    from mhindex.eval.report import paired_table

    def compared(count: int) -> tuple[dict, str]:
        ids = [f"q{n}" for n in range(count)]
        questions = {q: {"id": q, "question": "?", "answers": ["Paris"], "gold_ids": []} for q in ids}
        answers = {
            "right": [{"id": q, "answer": "Paris"} for q in ids],
            "wrong": [{"id": q, "answer": "Rome"} for q in ids],
        }
        rows = paired_differences(answers, questions)
        console = Console(record=True, width=160)
        console.print(paired_table(rows))
        return next(r for r in rows if r["metric"] == "em"), console.export_text()

    few, shown = compared(2)
    assert few["difference"] == 1.0 and few["ci95"] is None and few["excludes_zero"] is False
    assert few["no_interval"] == "too few questions (under 10)"
    assert "+100.0 *" not in shown and "Paired differences: too few questions (under 10) in each of" in shown
    # The Python API follows the same rule, for a record written before it too (which kept the [+100, +100]).
    import mhindex

    recorded = {**few, "ci95": [1.0, 1.0]}
    evaluation = mhindex.Evaluation(Path("."), {"methods": {"right": {}, "wrong": {}}, "paired": [recorded]})
    (pair,) = [row for row in evaluation.paired(as_frame=False) if row["metric"] == "em"]
    assert pair["difference"] == 100.0 and pair["ci95"] is None and pair["no_interval"] == few["no_interval"]
    enough, shown = compared(FEWEST_FOR_AN_INTERVAL)
    assert enough["excludes_zero"] is True and "+100.0 *" in shown and "too few" not in shown
