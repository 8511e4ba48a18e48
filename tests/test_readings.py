"""mhindex reads each model output as the papers' released code reads it: real outputs from stored runs (awkward
ones included), each with the reading the released function gave it, run on that output outside mhindex
(benchmarks/readings/make_readings.py, which names the release, commit, file and function in each table). A
reading that differs from the release's on any case fails here, naming the case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mhindex.eval.metrics import cover_substring
from mhindex.lm.base import Completion, LanguageModel, cut_at_stop
from mhindex.methods import r1searcher, searchr1
from mhindex.methods.decompose import listed_sub_questions
from mhindex.methods.efficientrag import json_answer, parse_json_object
from mhindex.methods.kdcot import finish_answer, matched_answer, read_round, verified_answer
from mhindex.methods.prompts import extract_answer
from mhindex.methods.react import parse_action
from mhindex.methods.searchain import Chain
from mhindex.methods.selfask import _after_colon, final_answer, released_reading

READINGS = Path(__file__).parent / "readings"


def table(name: str) -> list[dict[str, Any]]:
    read = json.loads((READINGS / f"{name}.json").read_text(encoding="utf-8"))
    release = read["release"]
    assert release["repo"] and len(release["commit"]) == 40 and release["file"] and release["function"]
    assert read["cases"], f"{name}: no cases"
    return read["cases"]


def disagreements(cases: list[dict[str, Any]], ours: Any) -> list[str]:
    """The cases where mhindex's reading (`ours(case)`) is not the release's (`case["release"]`, or what `ours`
    compares it to), one line each."""
    found = []
    for case in cases:
        mine, theirs = ours(case)
        if mine != theirs:
            found.append(f"{case['output']!r} ({case.get('from')}): ours {mine!r}, the release's {theirs!r}")
    return found


def test_efficientrag_s_baselines_read_a_json_reply_as_the_release_does():
    """utils/model.py's parser and each baseline's check: an answer where the release reads one (whatever its
    type, as Python writes it), a reply the release fails marked so (`json: false`) rather than read."""

    def ours(case):
        parsed, keys = parse_json_object(case["output"]), case["keys"]
        valid = isinstance(parsed, dict) and all(key in parsed for key in keys)
        mine: dict[str, Any] = {"valid": valid}
        theirs: dict[str, Any] = {"valid": case["release"]["valid"]}
        if valid and case["release"]["valid"]:
            value = case["release"]["value"]
            if "answer" in keys:
                mine["answer"], theirs["answer"] = json_answer(case["output"])[0], str(value["answer"])
            if keys == ["decomposed_questions"]:
                mine["searched"] = listed_sub_questions(case["output"], 1000)
                theirs["searched"] = value["decomposed_questions"]
        return mine, theirs

    cases = table("efficientrag_json")
    assert {c["method"] for c in cases} >= {"cot", "iterretgen", "decompose", "decompose-answer", "efficientrag"}
    assert any(not c["release"]["valid"] for c in cases)  # the awkward replies are there
    assert disagreements(cases, ours) == []


def test_selfask_reads_each_completion_as_the_releases_call_model_does():
    def ours(case):
        stop = case["stop"] if isinstance(case["stop"], str) else tuple(case["stop"])
        read = released_reading(case["output"], stop) or ""
        mine = {"call_model": read}
        if "extract_answer" in case["release"]:
            mine["extract_answer"] = final_answer("Q\nSo the final answer is:" + read)
        if "extract_question" in case["release"]:
            mine["extract_question"] = _after_colon(read)
        return mine, case["release"]

    cases = table("selfask")
    assert any(c["stop"] == "\n" for c in cases) and any("extract_question" in c["release"] for c in cases)
    assert disagreements(cases, ours) == []


class _Scripted(LanguageModel):
    """The model as the release saw it: each completion the recorded one (whole, as the release's call returned
    it), cut where mhindex's own call would have ended it (its stop strings, or the first point `stop_when` holds:
    a real call ends there or a token later, and the reading must not depend on which); each chat turn (a
    follow-up's answer) a JSON reply of the recorded intermediate answer."""

    name, context_length = "replayed", 1 << 20

    def __init__(self, completions: list[str], answers: list[str]) -> None:
        self.completions, self.answers = iter(completions), iter(answers)

    def complete(self, prompt, max_tokens=256, stop=(), temperature=0.0, logprobs=False, stop_when=None, keep=0,
                 seed=None) -> Completion:  # fmt: skip
        text = cut_at_stop(next(self.completions), stop)
        if stop_when is not None:
            text = next((text[:end] for end in range(1, len(text) + 1) if stop_when(text[:end])), text)
        return Completion(text, 0, 0, 0.0)

    def chat(self, messages, max_tokens=256, stop=(), temperature=0.0, logprobs=False, stop_when=None, keep=0,
             seed=None) -> Completion:  # fmt: skip
        return Completion(json.dumps({"answer": next(self.answers)}), 0, 0, 0.0)

    def count_tokens(self, text: str) -> int:
        return len(text) // 4


class _Nothing:
    def search(self, query: str, k: int) -> list:
        return []


def _replayed(case: dict[str, Any], demos: str, dataset: str | None, **settings: Any) -> dict[str, Any]:
    """mhindex's Self-Ask loop on the case's recorded outputs: its answer, history and departures."""
    from mhindex.methods.base import MethodContext, Query
    from mhindex.methods.selfask import SelfAsk, SelfAskSettings

    model = _Scripted(case["completions"], case["intermediates"])
    asker = SelfAsk(_Nothing(), model, SelfAskSettings(demos=demos, **settings), MethodContext(dataset=dataset))
    return asker.answer(Query("q", case["question"])).record()


def test_selfask_s_whole_loop_answers_as_efficientrag_s_on_whole_completions():
    """EfficientRAG's `infer_sample` itself, replayed on whole completions (made with $MHINDEX_WHOLE_COMPLETIONS=1,
    as its API call returns them, invalid final completions among them), and mhindex's loop on the same outputs,
    each completion cut where mhindex's call ends early: the same answer and the same text after the prompt."""
    datasets = {"musique": "musique", "hotpotqa": "hotpotqa", "2wikimultihopqa": "2wikimultihopqa"}

    def ours(case):
        record = _replayed(case, "dataset", datasets[case["prompt"]])
        return {"answer": record["answer"], "text": record["selfask"]["history"]}, case["release"]

    cases = table("selfask_loop")
    assert any(c["release"]["answer"] == "" for c in cases)  # an invalid final completion: the release answers nothing
    assert any(not c["completions"][-1].strip().endswith(".") and "\n" not in c["completions"][-1] for c in cases)
    assert disagreements(cases, ours) == []


def test_selfask_press_answers_as_press_s_own_loop_and_extract_answer():
    """SearChain's row: Press et al.'s `promptf` and `extract_answer` replayed on the row's own completions (the
    0.5B runs of benchmarks/readings/selfask_runs.sh; the 1.5B row's re-run, paper_tables.sh TABLES=searchain-press,
    adds its own as it is made), and mhindex's `--demos press` loop on the same: the same final answer (the model's
    own, where the fallback of before read the last intermediate answer in 85 of 90), an IndexError of Press's an
    empty answer with its departure said, a question mhindex stops asking at its follow-up limit said too."""

    def ours(case):
        record = _replayed(case, "press", None, step_tokens=256)
        said = record.get("departures") or []
        if case["release"].get("beyond_limit"):
            return any("follow-ups" in d for d in said), True
        if case["release"].get("error"):
            return (record["answer"], any("IndexError" in d for d in said)), ("", True)
        return record["answer"], case["release"]["answer"]

    cases = table("selfask_press")
    assert len(cases) >= 8
    assert disagreements(cases, ours) == []


def test_selfask_press_at_its_follow_up_limit_asks_for_the_final_answer():
    """A model looping on follow-ups, its completion holding a "So the final answer is:" line of a question it made up
    before the next "Follow up:": at mhindex's limit (a departure: Press's loop has none) the final answer is asked
    for, as the module says, not read off the last line, which is the next follow-up question (7 of the first 16
    HotpotQA answers of the 1.5B re-run were such questions)."""
    looping = "Follow up: Who was the first president?"
    again = (" He was.\nSo the final answer is: George Washington\n\nQuestion: Who was the first president?\n"
             "Are follow up questions needed here: Yes.\nFollow up: Who was the first president?")  # fmt: skip
    case = {"completions": [f" Yes.\n{looping}", again, " Madrid"], "intermediates": ["George Washington"],
            "question": "Where?"}  # fmt: skip
    record = _replayed(case, "press", None, step_tokens=256, max_follow_ups=1)
    assert record["answer"] == "Madrid"
    assert any("stopped at 1 follow-ups" in d for d in record["departures"])


def test_ircot_s_reader_answers_as_the_release_writes_its_answer():
    """With --no-short-answer (the papers' tables' runs): commaqa's LLMQAModel, AnswerExtractor (CoT reader) and
    the final answer model_search.py writes."""
    cases = table("ircot_reader")
    assert {c["reader"] for c in cases} == {"direct", "cot"}
    assert disagreements(cases, lambda case: (extract_answer(case["output"]), case["release"])) == []


def test_searchain_reads_a_chain_as_the_released_server_does_and_scores_as_its_client():
    def ours(case):
        if case["kind"] == "confident":
            return _first_fed_back(case)
        if case["kind"] != "chain":
            return [cover_substring(case["output"], gold) > 0 for gold in case["golds"]], case["release"]
        nodes = [["Unsolved" if node.unsolved else "Query", node.query] for node in Chain.parse(case["output"]).nodes]
        theirs = [["Unsolved" if "Unsolved" in kind else "Query", query.strip()] for kind, query in case["release"]]
        # The server stops at the first node it feeds back, an unsolved one here (its stand-in reader never is
        # confident): the nodes after it are not read that round.
        return nodes[: len(theirs)] if theirs and theirs[-1][0] == "Unsolved" else nodes, theirs

    cases = table("searchain")
    assert {c["kind"] for c in cases} == {"chain", "answer", "generated", "confident"}
    confident = [c for c in cases if c["kind"] == "confident"]
    assert any(c["release"]["message"].startswith("[Query]") for c in confident)  # a confident correction
    assert any(c["release"]["message"].startswith("[Unsolved") for c in confident)
    assert disagreements(cases, ours) == []


def _first_fed_back(case: dict[str, Any]) -> tuple[Any, Any]:
    """SearChain's verification with a confident reader (the case's answers, relevance above the server's 1.5):
    mhindex's first node fed back (its kind and query), or that it passed over an empty node, against the
    server's message."""
    from mhindex.methods.searchain import NodeCheck, SearChain

    walker = object.__new__(SearChain)
    walker.threshold = 1.5
    mine: Any = None
    for node in Chain.parse(case["output"]).nodes:
        if not node.query:
            mine = "passed over an empty node (a departure)"
            break
        said = case["answers"].get(node.query.strip(), "")  # as the generator's stand-in reader answers a query
        check = NodeCheck(node.query, {"id": "p", "title": "T", "passage": "PASSAGE"}, said, 2.0)
        if walker._verdict(node, check) in ("completed", "corrected"):
            mine = ["Unsolved" if node.unsolved else "Query", node.query]
            break
    message = case["release"]["message"]
    if not case["release"]["fed_back"]:
        return mine, None
    kind, _, rest = message.partition("]:")
    query = rest.split("<SEP>")[0].strip()
    theirs = "passed over an empty node (a departure)" if not query else ["Unsolved" if "Unsolved" in kind else
                                                                          "Query", query]  # fmt: skip
    return mine, theirs


def test_react_reads_each_action_as_the_released_environment_does():
    def ours(case):
        kind, argument = parse_action(case["output"][:1].lower() + case["output"][1:])
        release = case["release"]
        if "fails" in release:  # an empty action: the release's webthink fails on it, mhindex's calls it invalid
            return kind, ""
        observation = release["observation"]
        theirs = (
            ("search", observation.removeprefix("SEARCHED ")) if observation.startswith("SEARCHED ") else
            ("lookup", observation.partition("LOOKED UP ")[2]) if "LOOKED UP " in observation else
            ("finish", release["answer"]) if release["answer"] is not None else
            ("think", argument) if observation == "Nice thought." else ("", "")
        )  # fmt: skip
        return (kind, argument), theirs

    cases = table("react")
    assert {parse_action(c["output"][:1].lower() + c["output"][1:])[0] for c in cases} >= {"search", "finish", ""}
    assert disagreements(cases, ours) == []


@pytest.mark.parametrize("name", ["kdcot_rounds", "kdcot_verifier"])
def test_kdcot_reads_its_rounds_and_its_verifier_as_the_release_does(name):
    def rounds(case):
        read = case["output"].replace("\t", "\n")
        turn = finish_answer(read) if case["last"] else read_round(read, case["round"])
        mine = {"final": turn} if isinstance(turn, str) else {
            "action": [turn.action, turn.argument], "answer": turn.lm_answer, "thought": turn.thought}  # fmt: skip
        if case["release"] == {"final": None}:  # an empty Finish: the release returns before writing anything back
            return mine, {"final": ""}
        return mine, case["release"]

    def verifier(case):
        if case["kind"] == "match":
            return matched_answer(case["output"], case["lm_answer"]), case["release"]
        return verified_answer(case["output"], case["lm_answer"], case["reader_answer"]), case["release"]

    cases = table(name)
    assert disagreements(cases, rounds if name == "kdcot_rounds" else verifier) == []


def test_searchr1_reads_a_turn_and_its_answer_as_the_releases_functions_do():
    """`_postprocess_responses` (where a turn's response is cut), `postprocess_predictions` (its action and query)
    and `qa_em.extract_solution` (the answer over the opening and the whole turn), run on the 1.5B model's turns."""

    def ours(case):
        if case.get("whole"):
            return {"extract_solution": searchr1.extract_solution(case["output"])}, case["release"]
        response = searchr1.cut_response(case["output"])
        action, content = searchr1.read_action(response)
        return {"response": response, "action": action, "content": content}, case["release"]

    cases = table("searchr1")
    assert {c["release"].get("action") for c in cases if not c.get("whole")} >= {"search", "answer"}
    # the awkward ones: turns with neither action, and answers read from the invalid-action note a model copied back
    assert any(c["release"]["action"] is None for c in cases if not c.get("whole"))
    assert any(c["release"]["extract_solution"] == "and" for c in cases if c.get("whole"))
    assert disagreements(cases, ours) == []


def test_r1searcher_reads_a_finished_search_as_the_releases_evaluation_stored_it():
    """The answer of each stored finished search (the release's own models' last rounds), as `main` read it."""

    def ours(case):
        what, answer = r1searcher.read_round(*r1searcher.stopped(case["output"] + case["stop"]))
        return {"pred_ans": answer if what == "finished" else None}, case["release"]

    cases = table("r1searcher")
    assert len({c["from"] for c in cases}) >= 3
    assert disagreements(cases, ours) == []


def test_flare_judges_a_look_ahead_as_flashrags_functions_do(tmp_path):
    """`get_next_sentence` (the first sentence, and how many of the look-ahead's tokens are its own: FlashRAG
    re-encodes it, mhindex asks the model's tokenizer) and `judge_sent_confidence` (kept, or the masked query), on
    the Qwen2.5 models' look-aheads. Where re-encoding the sentence does not give back the generated tokens,
    FlashRAG pairs the re-encoded ids with the generated tokens' probabilities and its query is not the masked
    sentence: there the query is not compared (the deviation docs/methods.md names), all else is."""
    from mhindex.lm import load_lm
    from mhindex.methods.flare import first_sentence, judged

    cases = table("flare")
    assert {c["release"]["kept"] for c in cases} == {True, False}
    assert any(c["output"] != c["release"]["sentence"] for c in cases)  # a look-ahead of more than one sentence
    assert sum(not c["same_tokens"] for c in cases) <= 3  # 3 of the 115: the deviation stays rare
    with load_lm("local:qwen2.5-0.5b", home=tmp_path, threads=1, cache=False) as lm:  # the cases' tokenizer

        def ours(case):
            sentence = first_sentence(case["output"])
            tokens = [(t, lp) for t, lp in case["tokens"][: lm.count_tokens(sentence) if sentence else 0]]
            kept, query = judged(tokens, 0.2)
            mine = {"sentence": sentence, "sentence_tokens": len(tokens), "kept": kept}
            theirs = {key: case["release"][key] for key in mine}
            if not kept and case["same_tokens"]:  # a kept sentence's query is never used (FlashRAG's is '')
                mine["query"], theirs["query"] = query, case["release"]["query"]
            return mine, theirs

        assert disagreements(cases, ours) == []
