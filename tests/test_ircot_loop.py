"""IRCoT's loop, step by step: when it stops (answer, repeated sentence, step limit), the paragraph
budget, duplicate hits, IIRC's page scope and the chain's answer when the reader rambles.

The language model here is a scripted stand-in, said so on purpose: these rules are about the
loop, and a real model cannot be made to write a chosen sentence on a chosen step. Everything
else is real: a Lucene index of the bundled samples, IRCoT's released demonstrations, the reader.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from conftest import SAMPLES, read_jsonl
from mhindex.backends import BackendSpec, build_index, open_retriever
from mhindex.corpora import DATASETS
from mhindex.corpora.build import build_corpus
from mhindex.lm.base import Completion, LanguageModel
from mhindex.methods import MethodContext, Query, make_method
from mhindex.methods.ircot import IRCoTSettings
from mhindex.methods.queries import retrieval_query
from peers import ircot_client


class ScriptedLM(LanguageModel):
    """Answers each call with the next scripted text; words stand in for tokens."""

    name = "scripted"
    context_length = 100_000

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    def complete(
        self,
        prompt: str,
        max_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        logprobs: bool = False,
        stop_when=None,
        keep: int = 0,
    ) -> Completion:
        self.prompts.append(prompt)
        text = self.replies.pop(0) if self.replies else "So the answer is: nothing."
        return Completion(text, len(prompt.split()), len(text.split()), 0.0)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.fixture(scope="module")
def musique(tmp_path_factory):
    corpus = build_corpus(
        DATASETS["musique"],
        [SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"],
        tmp_path_factory.mktemp("loop"),
    ).corpus
    build_index(corpus, BackendSpec.parse("lucene"))
    retriever = open_retriever(corpus, BackendSpec.parse("lucene"))
    yield corpus, retriever
    retriever.close()


def ircot(retriever, replies, **settings):
    lm = ScriptedLM(replies)
    options = {"max_demos": 1, "max_paragraph_words": 40, "reader": "cot", **settings}
    return make_method("ircot", retriever, lm, IRCoTSettings(**options), MethodContext(dataset="musique")), lm


QUESTION = "Who is the employer of the person Mach's principle was named after?"


def test_stops_on_the_answer_and_reads_once(musique):
    method, lm = ircot(
        musique[1],
        [
            "Mach's principle is named after Ernst Mach.",
            "Ernst Mach worked at Charles University.",
            "So the answer is: Charles University.",
            "So the answer is: Charles University.",
        ],
        k=3,
    )
    answer = method.answer(Query("q", QUESTION))
    assert [s.text for s in answer.steps] == [
        "",
        "Mach's principle is named after Ernst Mach.",
        "Ernst Mach worked at Charles University.",
        "So the answer is: Charles University.",
    ]
    cleaned = [ircot_client.remove_wh_words(q) for q in (QUESTION, answer.steps[1].text, answer.steps[2].text)]
    assert [s.query for s in answer.steps] == [*cleaned, ""]  # the answer is not a query
    assert answer.lm_calls == 4 and answer.answer == "Charles University"
    assert all(len(s.retrieved_ids) <= 3 for s in answer.steps)
    # Demonstrations first, then the paragraphs in retrieval order, each prompt extending the last one's paragraphs.
    assert lm.prompts[1].startswith(lm.prompts[0].split("\n\nQ: " + QUESTION)[0])


SENTENCES = [
    "Who is Ernst Mach?",
    "Mach's principle is named after Ernst Mach.",
    "So Mach is the person.",
    "Thus, he is Austrian.",
    "Ernst Mach was employed by Charles University.",
    "1,200 + 300 = 1,500 students.",
    "That is, the university in Prague.",
    "Hence the employer is Charles University.",
    "What does Prague have?",
    "therefore",
    "so",
    "How is X related to Y",
    "",
    "Charles University in Prague is where Mach taught.",
    "2 + 2 = 4",
    "Which university is in Prague?",
]


def test_queries_are_built_as_the_released_code_builds_them():
    # StonyBrookNLP/ircot@3c1820f: remove_wh_words of the last sentence that is not reasoning, else of the question.
    for n in range(len(SENTENCES) + 1):
        so_far = SENTENCES[:n]
        released = ircot_client.remove_wh_words(ircot_client.question_or_last_generated_sentence(QUESTION, so_far))
        assert retrieval_query(QUESTION, so_far) == released, so_far
        assert retrieval_query(QUESTION, so_far, clean=False) == (so_far[-1] if so_far else QUESTION)


def test_a_reasoning_step_retrieves_with_the_last_factual_sentence(musique):
    replies = [
        "Mach's principle is named after Ernst Mach.",
        "So Mach is the person who matters.",
        "Ernst Mach was employed by Charles University.",
        "So the answer is: Charles University.",
        "Charles University",
    ]
    method, _ = ircot(musique[1], replies, k=2)
    answer = method.answer(Query("q", QUESTION))
    queries = [s.query for s in answer.steps]
    fact = "Mach's principle named after Ernst Mach."  # "is" goes, as in the release
    assert queries == [
        ircot_client.remove_wh_words(QUESTION),
        fact,
        fact,
        "Ernst Mach was employed by Charles University.",
        "",
    ]
    assert answer.steps[2].retrieved_ids == []  # the reasoning step's query found nothing new
    # --no-clean-queries: each sentence as generated, the question as asked.
    method, _ = ircot(musique[1], replies, k=2, clean_queries=False)
    assert [s.query for s in method.answer(Query("q", QUESTION)).steps] == [QUESTION, *replies[:3], ""]


def test_a_repeated_sentence_ends_the_reasoning(musique):
    method, _ = ircot(musique[1], ["Mach was a physicist.", "Mach was a physicist.", "Charles University"], k=2)
    answer = method.answer(Query("q", QUESTION))
    assert [s.text for s in answer.steps] == ["", "Mach was a physicist."] and answer.lm_calls == 3


def test_the_step_limit_holds(musique):
    sentences = [f"Fact number {i} about Ernst Mach." for i in range(10)]
    method, _ = ircot(musique[1], [*sentences, "Charles University"], k=1, max_steps=3)
    answer = method.answer(Query("q", QUESTION))
    assert len(answer.steps) == 1 + 3 and answer.lm_calls == 4


def test_the_paragraph_budget_and_no_duplicates(musique):
    sentences = [f"Ernst Mach and Charles University, fact {i}." for i in range(8)]
    method, _ = ircot(musique[1], [*sentences, "So the answer is: x."], k=4, max_paragraphs=6, max_steps=8)
    answer = method.answer(Query("q", QUESTION))
    ids = [r["id"] for r in answer.retrieved]
    assert len(ids) == len(set(ids)) <= 6
    spent = 0
    for step in answer.steps:
        if spent >= 6:
            assert step.query == "" and step.retrieved_ids == []  # reasoning goes on, retrieval does not
        spent += len(step.retrieved_ids)


def test_a_rambling_cot_reader_gives_way_to_the_chains_answer(musique):
    method, _ = ircot(
        musique[1],
        ["So the answer is: Charles University.", "Ernst Mach was an Austrian physicist who worked in Prague and"],
        k=2,
    )
    assert method.answer(Query("q", QUESTION)).answer == "Charles University"
    # A reader that concludes keeps its own answer.
    method, _ = ircot(
        musique[1],
        [
            "So the answer is: Charles University.",
            "Mach taught in Prague. So the answer is: Karl-Ferdinands-Universität.",
        ],
        k=2,
    )
    assert method.answer(Query("q", QUESTION)).answer == "Karl-Ferdinands-Universität"


def test_iirc_pages_scope_the_retrieval(tmp_path):
    home = tmp_path / "home"
    files = [SAMPLES / "iirc" / f for f in DATASETS["iirc"].samples]
    corpus = build_corpus(DATASETS["iirc"], files, home).corpus
    build_index(corpus, BackendSpec.parse("lucene"))
    retriever = open_retriever(corpus, BackendSpec.parse("lucene"))
    question = read_jsonl(corpus.questions)[0]
    lm = ScriptedLM(
        [
            '["Charles Babbage", "Lord Byron"]',
            "Babbage studied at Trinity College.",
            "So the answer is: Trinity College.",
            "Trinity College",
        ]
    )
    method = make_method(
        "ircot", retriever, lm, IRCoTSettings(max_demos=1, k=3, reader="direct"), MethodContext(dataset="iirc")
    )
    answer = method.answer(Query.from_record(question, "1"))
    retriever.close()
    assert answer.scope == ["Charles Babbage", "Lord Byron"]
    assert answer.retrieved and {r["title"] for r in answer.retrieved} <= set(answer.scope)
    assert question["main_passage"]["text"][:60] in lm.prompts[1]  # the main passage is in every prompt
