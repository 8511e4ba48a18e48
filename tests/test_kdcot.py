"""KD-CoT on a real Lucene index of the bundled WebQSP sample.

The loop's rules (the verifier replacing an answer, Finish never verified, the round limit) are
tested with a scripted stand-in for the LM, said so here: no real model writes a given Thought,
reader answer and verdict on demand. Retrieval, prompts, demonstration choice (the packaged
MiniLM) and the scoring are real; the last test runs the whole method with the packaged model.
"""

from __future__ import annotations

import json

import pytest

from conftest import SAMPLES
from mhindex.backends import BackendSpec, build_index, open_retriever
from mhindex.corpora import DATASETS
from mhindex.corpora.build import build_corpus
from mhindex.eval.metrics import aggregate, kdcot_scores
from mhindex.lm.base import Completion, LanguageModel
from mhindex.methods import MethodContext, Query, make_method
from mhindex.methods.kdcot import (
    DemoPicker,
    KDCoT,
    KDCoTSettings,
    Turn,
    action_name,
    finish_answer,
    matched_answer,
    read_demos,
    read_round,
    verified_answer,
)

QUESTION = "where did mary bell live?"


class ScriptedLM(LanguageModel):
    """Stand-in LM: each prompt kind (a round, the reader, the verifier) gets its scripted replies in turn."""

    name = "scripted"
    context_length = 100_000

    def __init__(self, rounds: list[str], reads: list[str], verdicts: list[str]) -> None:
        self.script = {"round": rounds, "read": reads, "verify": verdicts}
        self.prompts: list[tuple[str, str]] = []

    def complete(
        self, prompt, max_tokens=256, stop=(), temperature=0.0, logprobs=False, stop_when=None, keep=0
    ) -> Completion:
        kind = (
            "verify" if prompt.startswith("Which is the correct answer") else "read" if "\nQ: " in prompt else "round"
        )
        self.prompts.append((kind, prompt))
        return Completion(self.script[kind].pop(0), 10, 5, 0.0)

    def chat(self, messages, **kwargs) -> Completion:
        raise AssertionError("KD-CoT completes; it does not chat")

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.fixture(scope="module")
def webqsp(tmp_path_factory):
    home = tmp_path_factory.mktemp("kdcot")
    spec = DATASETS["webqsp"]
    built = build_corpus(spec, [SAMPLES / "webqsp" / f for f in spec.samples], home)
    build_index(built.corpus, BackendSpec.parse("lucene"))
    retriever = open_retriever(built.corpus, BackendSpec.parse("lucene"))
    yield home, retriever
    retriever.close()


def kdcot(retriever, lm, **settings):
    return make_method("kdcot", retriever, lm, KDCoTSettings(**settings), MethodContext(dataset="webqsp"))


def test_the_verifier_replaces_the_lm_answer_and_the_next_round_sees_it(webqsp):
    _, retriever = webqsp
    lm = ScriptedLM(
        rounds=[
            # Each round as the LM writes it, up to the next round's Thought (the release reads that marker).
            "I need to find where Mary Bell lived.\nAction 1 Question[Where did Mary Bell live?]\nAnswer 1 London.\n"
            "Thought 2",
            "Mary Bell lived in Newcastle upon Tyne.\nAction 2 Finish[Newcastle upon Tyne]",
        ],
        reads=["Newcastle upon Tyne"],
        verdicts=["Neither, the correct answer should be Newcastle upon Tyne"],
    )
    answer = kdcot(retriever, lm).answer(Query("q", QUESTION))
    assert answer.answer == "Newcastle upon Tyne" and answer.lm_calls == 4
    [round_] = answer.details["trace"]
    assert (round_["lm_answer"], round_["reader_answer"], round_["verdict"], round_["answer"]) == (
        "London",
        "Newcastle upon Tyne",
        "replaced",
        "Newcastle upon Tyne",
    )
    assert round_["argument"] == "Where did Mary Bell live" and "Mary Bell" in [p["title"] for p in round_["passages"]]
    kinds = [k for k, _ in lm.prompts]
    assert kinds == ["round", "read", "verify", "round"]  # Finish is never verified
    verify, second = lm.prompts[2][1], lm.prompts[3][1]
    assert (
        verify == "Which is the correct answer for the question Where did Mary Bell live\nLondon or Newcastle upon "
        "Tyne\nAssistant:"
    )
    assert second.endswith(
        f"Question {QUESTION}\nThought 1 I need to find where Mary Bell lived.\nAction 1 Question[Where did "
        "Mary Bell live]\nAnswer 1 Newcastle upon Tyne\nThought 2"
    )
    assert [p["title"] for p in answer.retrieved] == [p["title"] for p in round_["passages"]]


def test_agreement_needs_no_verifier_and_the_round_limit_forces_a_finish(webqsp):
    _, retriever = webqsp
    ask = (
        "I need to know more.\nAction {n} Question[Where did Mary Bell live?]\nAnswer {n} Newcastle upon Tyne\nThought"
    )
    lm = ScriptedLM(
        rounds=[
            ask.format(n=1) + " 2",
            ask.format(n=2) + " 3",
            "Done.\nAction 3 Multi_Answr_Question[x]\nAnswer 3 y\nThought 4 so\nAction 4 Finish[Newcastle upon Tyne.]",
        ],
        reads=["newcastle upon tyne", "Newcastle upon Tyne"],
        verdicts=[],
    )
    answer = kdcot(retriever, lm, rounds=2).answer(Query("q", QUESTION))
    assert [r["verdict"] for r in answer.details["trace"]] == ["agreed", "agreed"]
    assert answer.answer == "Newcastle upon Tyne" and answer.details["rounds"] == 2 and answer.lm_calls == 5
    # The trace ends with how it ended: here the round limit, the answer read from the last reply.
    last = KDCoT.trace_steps(answer.record())[-1]
    assert last["title"] == "Finish" and last["rows"][1] == [
        "ended",
        "at the round limit: the answer read from its last reply",
    ]
    assert last["rows"][2] == ["answer", "Newcastle upon Tyne"]


def test_a_reply_with_no_step_ends_the_answer_and_the_trace_says_so(webqsp):
    """An LM that never writes a Thought and an Action: one call, an answer read from its text, and the trace
    says why there were no rounds, instead of showing nothing."""
    _, retriever = webqsp
    lm = ScriptedLM(rounds=["I am not sure what you mean by that."], reads=[], verdicts=[])
    answer = kdcot(retriever, lm, rounds=2).answer(Query("q", QUESTION))
    assert answer.details["rounds"] == 0 and answer.lm_calls == 1
    (finish,) = KDCoT.trace_steps(answer.record())
    assert finish["rows"][0] == ["wrote", "I am not sure what you mean by that."]
    assert finish["rows"][1][1].startswith("no Thought and Action could be read from the reply")


def test_a_round_is_read_as_the_released_code_reads_it():
    """GPT_inference_steps.py's reading, quirks kept (tests/test_readings.py holds it to the release on real
    outputs): names matched by edit distance, a sub-question cut at its "?", a "]." left after a Finish."""
    assert (
        action_name("Multi_Answr_Question") == "Multi_Answer_Question"
        and action_name("Finsh") == "Finish"
        and action_name("Questio") == "Question"
    )
    turn = read_round(
        "Thinking.\nAction 2\nMulti_Answer_Qestion[Who are the children of X? and more]\nAnswer 2 A\nB.\nThought 3 z", 2
    )
    assert isinstance(turn, Turn)
    assert (turn.thought, turn.action, turn.argument, turn.lm_answer) == (
        "Thinking.",
        "Multi_Answer_Question",
        "Who are the children of X",
        "A,B",
    )
    # No next round's Thought: the question ends, its answer what follows the last Finish[ (else the text).
    assert read_round("no action at all", 1) == "no action at all"
    assert read_round("so\nAction 1 Finish[Paris]\nAnswer 1 Paris\nThought 2 done", 1) == "Paris"
    assert finish_answer("Thought 2 so\nAction 2 Finish[Paris].") == "Paris]"  # the release drops "." then no "]"


def test_the_verifier_reply_maps_to_an_answer_as_the_released_code_does():
    assert verified_answer("Neither, the correct answer should be Oslo", "London", "Paris") == "Oslo"
    assert verified_answer("Neither", "London", "Paris") == "London"
    assert verified_answer("Paris", "London", "Paris") == "Paris"
    assert verified_answer("London", "London", "Paris") == "London"
    assert verified_answer("Tyne", "Newcastle upon Tyne", "Tyne and Wear") == "Tyne and Wear"  # in both: the shorter
    assert verified_answer("something else", "London", "Paris") == "London"


def test_demonstrations_come_from_a_collection_and_match_the_question(tmp_path):
    shipped = read_demos(None, "webqsp")
    assert len(shipped) >= 20 and len(read_demos(None, "cwq")) >= 20
    assert all(d.text.startswith(f"Question {d.question}\nThought 1 ") and "Finish[" in d.text for d in shipped)
    picker = DemoPicker(shipped, None)  # the packaged MiniLM
    assert picker.pick("what language do people in brazil speak?").question == "what language do they speak in brazil?"
    assert (
        picker.pick("what language do they speak in brazil?").question != "what language do they speak in brazil?"
    )  # never itself
    # KD-CoT's own files: a list of {question, gpt_out} (the chain may lack "Thought 1"),
    # or JSON lines of {input, target}.
    listed = tmp_path / "webqsp.json"
    listed.write_text(
        json.dumps(
            [
                {
                    "question": "what continent is australia in?",
                    "gpt_out": "I need the continent.\nAction 1 Question[What continent is Australia "
                    "in?]\nAnswer 1 Oceania\nThought 2 ok\nAction 2 Finish[Oceania]",
                }
            ]
        )
    )
    assert read_demos(str(listed), None)[0].text.startswith(
        "Question what continent is australia in?\nThought 1 I need the continent."
    )
    lines = tmp_path / "train.json"
    lines.write_text(
        json.dumps(
            {
                "input": "Solve ...\nQuestion: what sport is popular in china? Let's think step by step: ",
                "target": "Thought 1 x\nAction 1 Finish[Table tennis]",
            }
        )
        + "\n"
    )
    assert read_demos(str(lines), None)[0].question == "what sport is popular in china?"


def test_kdcot_scores_as_its_released_script():
    # Containment, not equality; NFKD-to-ASCII and a dropped article on the gold side.
    assert kdcot_scores("Newcastle upon Tyne, England", ["Newcastle upon Tyne"], "where did mary bell live?") == (
        1.0,
        1.0,
    )
    assert kdcot_scores("Queretaro", ["Querétaro F.C."], "q") == (0.0, 0.0)  # the prediction is not normalised
    assert kdcot_scores("queretaro f c", ["Querétaro F.C."], "q") == (1.0, 1.0)
    assert kdcot_scores("beatles", ["The Beatles"], "q") == (1.0, 1.0)
    hit, f1 = kdcot_scores("Writer", ["Writer", "Physician", "Philosopher"], "what did st augustine do")
    assert hit == 1.0 and f1 == pytest.approx(2 * (1 / 3) / (1 + 1 / 3))
    # A "year" question counts a gold's year found in the prediction once more (recall can pass 1).
    assert kdcot_scores("in 1994", ["1994 NBA Finals"], "In what year did they win?") == (
        1.0,
        pytest.approx(2 * 1 / (1 + 1)),
    )
    assert kdcot_scores("1994 NBA Finals", ["1994 NBA Finals"], "what year?")[1] == pytest.approx(2 * 2 / 3)
    assert kdcot_scores("anything", [], "q") == (1.0, 1.0)  # no gold: scored against [""]
    questions = {
        "a": {"answers": ["Paris"], "dataset": "webqsp", "question": "q"},
        "b": {"answers": ["Rome"], "dataset": "musique", "question": "q"},
    }
    summary = aggregate([{"id": "a", "answer": "in Paris"}, {"id": "b", "answer": "Rome"}], questions)
    assert summary["kdcot_hit1"] == 1.0 and summary["first_answer_em"] == 0.5  # KD-CoT's only over its datasets


def test_kdcot_end_to_end_with_the_packaged_model(mh):
    assert mh("--quiet", "build", "webqsp").code == 0
    result = mh("--quiet", "ask", QUESTION, "--method", "kdcot", "--corpus", "webqsp", "--rounds", "2", "--json")
    assert result.code == 0, result.err
    record = result.json()
    assert record["method"] == "kdcot" and isinstance(record["answer"], str)
    assert record["lm_calls"] >= 1 and record["demonstration"] and record["rounds"] == len(record["trace"]) <= 2
    assert len(record["steps"]) == record["rounds"]
    for round_ in record["trace"]:
        assert round_["action"] in ("Question", "Multi_Answer_Question") and round_["verdict"] in (
            "agreed",
            "completed",
            "kept",
            "replaced",
            "unchecked",
        )
        assert round_["answer"] in (round_["lm_answer"], round_["reader_answer"]) or round_["verifier_reply"]


def test_the_papers_ablations_run_as_the_released_justify_code_makes_them(webqsp):
    """Table 2's rows without the verifier (`add_fid_answer`: the reader's answer, always), without
    retrieve-then-read (`get_match_input`: the verifier of the LM's answer alone, "No, the answer should be X"),
    and the vanilla CoT with no QA system (the LM's chain as it wrote it, in one completion)."""
    _, retriever = webqsp
    asked = "I need the place.\nAction 1 Question[Where did Mary Bell live?]\nAnswer 1 London.\nThought 2"
    done = "So it is.\nAction 2 Finish[Newcastle upon Tyne]"
    lm = ScriptedLM(rounds=[asked, done], reads=["Newcastle upon Tyne"], verdicts=[])
    reader = kdcot(retriever, lm, qa="reader").answer(Query("q", QUESTION))
    [round_] = reader.details["trace"]
    assert (round_["verdict"], round_["answer"]) == ("the reader's", "Newcastle upon Tyne")
    assert [k for k, _ in lm.prompts] == ["round", "read", "round"]  # no verifier

    class Matching(ScriptedLM):
        def complete(self, prompt, **kwargs) -> Completion:
            if prompt.startswith("For the question "):
                self.prompts.append(("match", prompt))
                return Completion("No, the answer should be Newcastle upon Tyne", 10, 5, 0.0)
            return super().complete(prompt, **kwargs)

    lm = Matching(rounds=[asked, done], reads=[], verdicts=[])
    matched = kdcot(retriever, lm, qa="verifier").answer(Query("q", QUESTION))
    [round_] = matched.details["trace"]
    assert round_["passages"] == [] and (round_["verdict"], round_["answer"]) == ("replaced", "Newcastle upon Tyne")
    assert lm.prompts[1] == ("match", "For the question Where did Mary Bell live, is the answer London correct? "
                                      "Response: ")  # fmt: skip
    assert matched_answer("Yes", "London") == "London" and matched_answer("No", "London") == "London"

    lm = ScriptedLM(rounds=[asked + " so\nAction 2 Finish[Durham]"], reads=[], verdicts=[])
    alone = kdcot(retriever, lm, qa="none").answer(Query("q", QUESTION))
    assert alone.answer == "Durham" and alone.lm_calls == 1 and alone.details["trace"] == []
    assert alone.details["finish"]["ended"] == "no QA system: the answer read from the LM's chain"
