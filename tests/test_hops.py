"""Which hop a method missed: the hops the converters keep, held against the releases' own fields, and the
diagnosis of an answer's steps checked by hand."""

from __future__ import annotations

import json

from conftest import SAMPLES, read_jsonl
from mhindex.cli import main
from mhindex.corpora.records import Paragraph
from mhindex.eval.hops import diagnose, hop_summary
from mhindex.eval.metrics import aggregate, paired_differences

MUSIQUE = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
HOTPOT = SAMPLES / "hotpotqa" / "hotpot_dev_distractor_v1.sample.json"


def test_the_hops_of_each_question_are_the_releases(tmp_path):
    home = str(tmp_path)
    assert main(["--quiet", "--home", home, "corpus", "musique", "--input", str(MUSIQUE)]) == 0
    assert main(["--quiet", "--home", home, "corpus", "hotpotqa", "--input", str(HOTPOT)]) == 0
    # MuSiQue: each hop of question_decomposition, its sub-question, answer and supporting paragraph, in order.
    built = {q["id"]: q for q in read_jsonl(tmp_path / "musique" / "questions.jsonl")}
    for line in MUSIQUE.read_text().splitlines():
        release = json.loads(line)
        paragraphs = release["paragraphs"]
        expected = [
            {
                "question": hop["question"],
                "answer": hop["answer"],
                "paragraph_ids": [
                    Paragraph(
                        paragraphs[hop["paragraph_support_idx"]]["title"],
                        paragraphs[hop["paragraph_support_idx"]]["paragraph_text"],
                    ).id
                ],
            }
            for hop in release["question_decomposition"]
        ]
        assert built[release["id"]]["gold_hops"] == expected, release["id"]
        assert {i for hop in expected for i in hop["paragraph_ids"]} == set(built[release["id"]]["gold_ids"])
    # HotpotQA: one hop a supporting page, in the order of supporting_facts.
    built = {q["id"]: q for q in read_jsonl(tmp_path / "hotpotqa" / "questions.jsonl")}
    for release in json.loads(HOTPOT.read_text()):
        titles = list(dict.fromkeys(fact[0] for fact in release["supporting_facts"]))
        hops = built[release["_id"]]["gold_hops"]
        assert [hop["title"] for hop in hops] == titles
        assert [i for hop in hops for i in hop["paragraph_ids"]] == built[release["_id"]]["gold_ids"]


QUESTION = {
    "id": "q",
    "question": "What is the seat of the county where Van Hook Township is located?",
    "answers": ["Stanley"],
    "gold_ids": ["p-county", "p-seat"],
    "gold_hops": [
        {"question": "Van Hook Township >> county", "answer": "Mountrail County", "paragraph_ids": ["p-county"]},
        {"question": "#1 >> capital", "answer": "Stanley", "paragraph_ids": ["p-seat"]},
    ],
}


def test_an_ircot_answer_is_diagnosed_hop_by_hop():
    """Checked by hand: hop 1 found at step 1 (rank 2 of what it brought), hop 2 never; a chain that found both."""
    missed = {
        "id": "q",
        "answer": "Muskegon",
        "retrieved": [{"id": i} for i in ("p-x", "p-county", "p-y", "p-z")],
        "steps": [
            {"query": "seat of the county Van Hook Township", "retrieved_ids": ["p-x", "p-county"]},
            {"query": "Van Hook Township located in Muskegon County.", "retrieved_ids": ["p-y"]},
            {"query": "", "retrieved_ids": ["p-z"]},
        ],
    }
    assert diagnose(missed, QUESTION, 15) == [
        {"hop": 1, "kept": True, "step": 1, "query": "seat of the county Van Hook Township", "rank": 2},
        {"hop": 2, "kept": False, "step": None, "query": None, "rank": None},
    ]
    found = {**missed, "retrieved": [{"id": "p-county"}, {"id": "p-seat"}]}
    found["steps"] = [missed["steps"][0], {"query": "Mountrail County seat", "retrieved_ids": ["p-seat"]}]
    assert [(h["kept"], h["step"], h["rank"]) for h in diagnose(found, QUESTION, 15)] == [(True, 1, 2), (True, 2, 1)]
    # Kept only within the budget, as recall counts: the seat's paragraph is second, beyond a budget of 1.
    assert [(h["kept"], h["step"]) for h in diagnose(found, QUESTION, 1)] == [(True, 1), (False, 2)]
    # A question without hops (an own corpus) is not diagnosed.
    assert diagnose(found, {"id": "q", "gold_ids": ["p-seat"]}, 15) is None

    questions = {"q": QUESTION, "r": {**QUESTION, "id": "r"}}
    summary = hop_summary({"q": missed, "r": {**found, "id": "r"}}, questions, 15)
    assert summary == {
        "questions": 2,
        "with_hop": {"1": 2, "2": 2},
        "recall": {"1": 1.0, "2": 0.5, "all": 0.5},
        "first_step": {"1": 1.0, "2": 2.0},
        "missed": 1,
        "steps_when_missed": 3.0,
    }
    # In the metrics eval and score write, beside recall; a failed answer found no hop.
    metrics = aggregate([missed], questions, 15)
    assert metrics["hops"]["recall"] == {"1": 0.5, "2": 0.0, "all": 0.0}

    # Paired, as the other metrics: every hop kept or not, question by question.
    paired = paired_differences({"found": [found], "missed": [missed]}, {"q": QUESTION}, 15)
    row = next(row for row in paired if row["metric"] == "hops_all")
    assert (row["difference"], row["a_better"], row["b_better"]) == (1.0, 1, 0)
