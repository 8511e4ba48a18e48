"""The papers' baselines (CoT, Self-Ask, Iter-RetGen, ReAct, Decompose), each end to end on the MuSiQue sample
with the fast packaged model (SmolLM2-135M, llama.cpp) and a real Lucene index: what the record says each step did,
read the way the released code reads it, and the trace `ask` draws; then all of them over HTTP on bm25s."""

from __future__ import annotations

import pytest

from mhindex.cli import main
from mhindex.methods.efficientrag import json_answer
from mhindex.methods.selfask import final_answer, press_answer, released_reading

QUESTION = "Who founded the company that made the Van Hook Township?"


@pytest.fixture
def musique(home):
    assert main(["--quiet", "build", "musique"]) == 0
    return home


@pytest.mark.slow
def test_cot_answers_from_the_released_prompt_without_retrieval(mh, musique):
    record = mh("ask", QUESTION, "--method", "cot", "--answer-tokens", "96", "--json").json()
    cot = record["cot"]
    assert record["method"] == "cot" and record["lm_calls"] == 1 and record["retrieved"] == []
    assert cot["prompt"] == "musique" and record["answer"] == json_answer(cot["reply"])[0]
    assert cot["json"] == (json_answer(cot["reply"])[1] is not None)
    shown = " ".join(mh("ask", QUESTION, "--method", "cot", "--answer-tokens", "96").out.split())
    assert "Chain of thought (musique's prompt)" in shown and "1 LM call" in shown
    # Another dataset's released prompt on request; one the release has none for is refused in one line.
    asked = mh("ask", QUESTION, "--method", "cot", "--prompt-from", "hotpotqa", "--answer-tokens", "8", "--json")
    assert asked.json()["cot"]["prompt"] == "hotpotqa"
    refused = mh("ask", QUESTION, "--method", "cot", "--prompt-from", "iirc")
    assert refused.code == 2 and "--prompt-from must be one of 2wikimultihopqa, hotpotqa, musique" in refused.err


@pytest.mark.slow
def test_selfask_asks_follow_ups_of_the_retriever_and_says_when_the_format_breaks(mh, musique):
    fast = ["-k", "3", "--max-follow-ups", "2", "--answer-tokens", "48", "--json"]
    record = mh("ask", QUESTION, "--method", "selfask", *fast).json()
    details, steps = record["selfask"], record["steps"]
    assert record["method"] == "selfask" and details["prompt"] == "musique"
    # One completion to start, then per follow-up its answer and the next completion, then the final answer.
    assert details["follow_ups"] == len(steps) <= 2 and record["lm_calls"] == 2 + 2 * len(steps)
    history = details["history"]
    for step in steps:  # each follow-up was written by the LM and sent to the retriever as it was written
        assert f"Follow up: {step['query']}" in history and len(step["retrieved_ids"]) == 3
        assert step["text"].rpartition("Intermediate answer: ")[2] + "." in history
    # The final completion is read as the release reads it (its raw text holds the newline that ends it), so the
    # answer is the LM's own final answer, with no departure from the release's reading.
    final = details["completions"][-1]
    assert "\n" in final.lstrip() and not record.get("departures") and record["answer"]
    assert record["answer"] == final_answer("So the final answer is:" + released_reading(final, "\n"))
    assert history.endswith("So the final answer is:" + final.lstrip().split("\n")[0])
    assert len(details["completions"]) == 2 + len(steps)
    assert {r["id"] for r in record["retrieved"]} == {i for s in steps for i in s["retrieved_ids"]}

    # SearChain's row: Press et al.'s own four demonstrations.
    press = mh("ask", QUESTION, "--method", "selfask", "--demos", "press", *fast).json()
    assert press["selfask"]["prompt"] == "press" and press["selfask"]["reading"] == "press"
    assert not press.get("departures") and press["answer"]
    # Completions too short to reach the format's stop strings are invalid, as in the release: no follow-up,
    # no final answer (the release answers "" there too, so it is no departure), instead of looping or failing.
    broken = mh("ask", QUESTION, "--method", "selfask", "--step-tokens", "1", *fast).json()
    assert broken["steps"] == [] and broken["answer"] == "" and not broken.get("departures")
    assert broken["selfask"]["completions"] and all(len(c) <= 8 for c in broken["selfask"]["completions"])
    # Press's loop cut the same way: his extract_answer over what was written; where it fails (IndexError on
    # nothing after the colon) we answer "" and the record says so.
    cut = mh("ask", QUESTION, "--method", "selfask", "--demos", "press", "--step-tokens", "1", *fast).json()
    read = press_answer(cut["selfask"]["history"])
    departed = any("extract_answer" in d for d in cut.get("departures") or [])
    assert cut["answer"] == (read or "") and (read is None) == departed
    assert press_answer("So the final answer is:") is None and press_answer("So the final answer is: ") is None
    assert press_answer("Follow up: x\nSo the final answer is: Paris.") == "Paris"


@pytest.mark.slow
def test_direct_and_direct_r_answer_in_one_call_as_the_rows_of_each_paper(mh, musique):
    from mhindex.methods.direct import zero_shot_answer

    # EfficientRAG's Direct: its released few-shot prompt of the dataset, the JSON reply's answer.
    record = mh("ask", QUESTION, "--method", "direct", "--answer-tokens", "48", "--json").json()
    details = record["direct"]
    assert record["lm_calls"] == 1 and record["retrieved"] == [] and record["steps"] == []
    assert details["prompt"] == "json" and details["prompt_from"] == "musique"
    assert record["answer"] == json_answer(details["reply"])[0] and details["json"] == (
        json_answer(details["reply"])[1] is not None and "answer" in json_answer(details["reply"])[1]
    )
    # SearChain's Direct Prompting: zero-shot, the reply's first line.
    zero = mh("ask", QUESTION, "--method", "direct", "--prompt", "zero-shot", "--answer-tokens", "24", "--json").json()
    assert zero["answer"] == zero_shot_answer(zero["direct"]["reply"]) and "json" not in zero["direct"]
    # EfficientRAG's Direct-R (its released direct.py): the question as it is, top K, the dataset's QA prompt.
    retrieved = mh("ask", QUESTION, "--method", "direct-r", "-k", "3", "--answer-tokens", "48", "--json").json()
    (step,) = retrieved["steps"]
    assert step["query"] == QUESTION and len(step["retrieved_ids"]) == 3 and retrieved["direct"]["read"] == 3
    assert [r["id"] for r in retrieved["retrieved"]] == step["retrieved_ids"] and retrieved["lm_calls"] == 1
    shown = " ".join(mh("ask", QUESTION, "--method", "direct-r", "-k", "3", "--answer-tokens", "48").out.split())
    assert "Answer (musique's released prompt)" in shown and "read 3 paragraphs" in shown


@pytest.mark.slow
def test_cot_in_reacts_format_and_react_falling_back_to_self_consistent_cot(mh, musique):
    from mhindex.methods.cot import plain_answer

    record = mh("ask", QUESTION, "--method", "cot", "--style", "plain", "--max-demos", "2", "--answer-tokens", "64",
                "--json").json()  # fmt: skip
    cot = record["cot"]
    assert cot["style"] == "plain" and cot["demos"] == 2 and record["answer"] == plain_answer(cot["reply"])
    # ReAct never finishes in one step of three tokens: CoT-SC answers, each chain sampled with its own seed.
    sc = ["--method", "react", "--max-steps", "1", "--step-tokens", "3", "--fallback", "cot-sc", "--sc-samples", "3",
          "--sc-tokens", "48", "--max-demos", "2", "--json"]  # fmt: skip
    first = mh("ask", QUESTION, *sc).json()
    fallback = first["react"]["cot_sc"]
    assert not first["react"]["finished"] and [c["seed"] for c in fallback["chains"]] == [0, 1, 2]
    assert all(c["answer"] == plain_answer(c["chain"]) for c in fallback["chains"])
    votes = [c["answer"] for c in fallback["chains"] if c["answer"]]
    assert first["answer"] == fallback["answer"] and (not votes or first["answer"] in votes)
    assert first["lm_calls"] == first["react"]["bad_calls"] + 1 + 3
    # Seeded: the same chains again (a sampled call is never answered from the call cache); other seeds, others.
    again = mh("ask", QUESTION, *sc).json()
    assert [c["chain"] for c in again["react"]["cot_sc"]["chains"]] == [c["chain"] for c in fallback["chains"]]
    # A chain may reuse what the model's slot holds of its prompt, but never reads its last prompt tokens one alone:
    # its logits come out as from the whole prompt (batch-invariant kernels; lm/slots.py, tests/test_determinism.py).
    for run in (first, again):
        sampled = [c for c in run["lm"]["calls"] if c["label"].startswith("sampling chain")]
        assert len(sampled) == 3 and all(2 <= c["read"] <= c["prompt_tokens"] for c in sampled), sampled
    other = mh("ask", QUESTION, *sc, "--sc-seed", "100").json()
    assert [c["chain"] for c in other["react"]["cot_sc"]["chains"]] != [c["chain"] for c in fallback["chains"]]


@pytest.mark.slow
def test_iterretgen_retrieves_with_the_question_and_the_last_thought(mh, musique):
    record = mh(
        "ask", QUESTION, "--method", "iterretgen", "--iterations", "2", "-k", "3", "--answer-tokens", "48", "--json"
    ).json()
    steps = record["steps"]
    assert record["method"] == "iterretgen" and record["lm_calls"] == len(steps) == 2
    assert steps[0]["query"] == QUESTION and all(len(s["retrieved_ids"]) == 3 for s in steps)
    first_thought, _, _ = steps[0]["text"].removeprefix("thought: ").rpartition(" / answer: ")
    assert steps[1]["query"] == f"{QUESTION} {first_thought}"  # the release's construct_prompt
    assert record["answer"] == steps[1]["text"].rpartition(" / answer: ")[2]
    assert [r["id"] for r in record["retrieved"]] == list(dict.fromkeys(i for s in steps for i in s["retrieved_ids"]))
    details = record["iterretgen"]
    assert details["prompt"] == "musique" and set(details["no_json"]) <= {1, 2}
    again = ["--iterations", "2", "-k", "3", "--answer-tokens", "48"]  # the same calls: from the call cache
    shown = " ".join(mh("ask", QUESTION, "--method", "iterretgen", *again).out.split())
    assert "iteration 2" in shown and "2 LM calls" in shown


def test_react_acts_on_the_corpus_as_its_wikipedia_environment_does(musique_lucene):
    """Search, Lookup, Finish and an invalid action on a real Lucene index, as `WikiEnv.step` answers them."""
    from mhindex.methods.base import MethodContext
    from mhindex.methods.react import ReAct, ReActSettings, _Env, page_observation

    corpus, retriever = musique_lucene
    react = ReAct(retriever, None, ReActSettings(), MethodContext())  # the environment needs no LM
    env = _Env()
    title = "Van Hook Township, Mountrail County, North Dakota"
    observation, opened = react._act(env, f"search[{title.upper()}]")  # titles compare as IRCoT compares them
    assert opened and {h.title for h in opened} == {title}
    assert observation == page_observation(env.page) and observation.count(".") <= 5 + observation.count(". ")
    missing, none = react._act(env, "search[Van Hook]")
    assert none == [] and missing.startswith("Could not find Van Hook. Similar: ['") and title in missing
    word = env.page.split()[0]
    first, _ = react._act(env, f"lookup[{word}]")  # the page opened before the failed search stays open
    assert first.startswith("(Result 1 / ") and word.lower() in first.lower()
    total = int(first.split(" / ")[1].split(")")[0])
    for _ in range(total - 1):
        react._act(env, f"lookup[{word}]")
    assert react._act(env, f"lookup[{word}]")[0] == "No more results.\n"
    assert react._act(env, "Search Van Hook")[0] == "Invalid action: Search Van Hook"
    assert react._act(env, "finish[1898]")[0] == "Episode finished, reward = 0\n" and env.answer == "1898"


@pytest.mark.slow
def test_react_writes_thoughts_and_actions_and_says_when_it_never_finishes(mh, musique):
    record = mh("ask", QUESTION, "--method", "react", "--max-steps", "2", "--step-tokens", "48", "--json").json()
    details, steps = record["react"], record["steps"]
    assert record["method"] == "react" and 1 <= len(steps) == len(details["trajectory"]) <= 2
    assert record["lm_calls"] == len(steps) + details["bad_calls"]
    for taken, step in zip(details["trajectory"], steps):
        assert f"Action {steps.index(step) + 1}: {taken['action']}" in step["text"]
    opened = [i for s in steps for i in s["retrieved_ids"]]
    assert [r["id"] for r in record["retrieved"]] == list(dict.fromkeys(opened))
    assert details["finished"] == (record["answer"] != "" or "Finish[]" in steps[-1]["text"])
    # Three tokens hold neither a thought and its action nor a whole Finish[...]: a bad call each step, no
    # answer after the last, and the trace says so instead of looping or failing.
    cut = ["--method", "react", "--max-steps", "1", "--step-tokens", "3"]
    short = mh("ask", QUESTION, *cut, "--json").json()
    assert short["react"]["bad_calls"] == 1 and not short["react"]["finished"] and short["answer"] == ""
    shown = " ".join(mh("ask", QUESTION, *cut).out.split())
    assert "no Finish[] in 1 steps: no answer" in shown and "the action was asked for alone" in shown


@pytest.mark.slow
def test_decompose_searches_each_sub_question_and_answers_from_all_they_brought(mh, musique):
    record = mh("ask", QUESTION, "--method", "decompose", "-k", "3", "--answer-tokens", "32", "--json").json()
    details, steps = record["decompose"], record["steps"]
    assert record["method"] == "decompose" and record["lm_calls"] == 2 and details["prompt"] == "musique"
    # With the paper's decomposition prompt (its Appendix B) SmolLM2 lists sub-questions as JSON: each is searched
    # as written, and the paragraphs they bring, each once, are read.
    from mhindex.methods.decompose import DecomposeSettings, listed_sub_questions

    subs = details["sub_questions"]
    assert subs and subs == listed_sub_questions(details["reply"], DecomposeSettings().max_sub_questions)
    assert details["fallback"] is None
    assert [s["query"] for s in steps] == subs and all(len(s["retrieved_ids"]) == 3 for s in steps)
    assert [r["id"] for r in record["retrieved"]] == list(dict.fromkeys(i for s in steps for i in s["retrieved_ids"]))
    assert details["read"] == len(record["retrieved"])
    # A reply cut before it lists anything: the question itself is searched, and the record and the trace say so.
    cut = ("ask", QUESTION, "--method", "decompose", "-k", "3", "--answer-tokens", "32", "--decompose-tokens", "2")
    fell_back = mh(*cut, "--json").json()["decompose"]
    assert fell_back["sub_questions"] == [QUESTION] and fell_back["fallback"].startswith("the reply listed no")
    shown = " ".join(mh(*cut).out.split())
    assert "Decomposition" in shown and "sub-question 1" in shown and "note: the reply listed no sub-questions" in shown


def test_decompose_reads_the_sub_questions_as_the_release_writes_them():
    from mhindex.methods.decompose import listed_sub_questions

    listed = '```json\n{"decomposed_questions": ["Who made X?", "Where is Y?", "Who made X?"]}\n```'
    # Each searched as written, a repeated one again (the release searches the list as is; its paragraphs are the
    # same, and kept once).
    assert listed_sub_questions(listed, 6) == ["Who made X?", "Where is Y?", "Who made X?"]
    assert listed_sub_questions(listed, 1) == ["Who made X?"]
    synthesis = '{"question": "q", "decomposed_questions": {"1": {"sub_question": "A?"}, "2": {"sub_question": "B?"}}}'
    assert listed_sub_questions(synthesis, 6) == []  # the release reads the first {...}: a nested object fails
    assert listed_sub_questions("The answer to the question is:", 6) == []
    assert listed_sub_questions('{"decomposed_questions": "not a list"}', 6) == []


# Each baseline's quick settings: the fewest calls that still take every step of its loop.
QUICK = {
    "cot": ["--answer-tokens", "32"],
    "selfask": ["-k", "2", "--max-follow-ups", "2", "--answer-tokens", "32"],
    "iterretgen": ["--iterations", "2", "-k", "2", "--answer-tokens", "32"],
    "react": ["--max-steps", "2", "--step-tokens", "48"],
    "decompose": ["-k", "2", "--answer-tokens", "32"],
}


@pytest.mark.slow
def test_each_baseline_answers_over_http_on_bm25s_as_in_process(mh, musique, tmp_path):
    """Every baseline with another backend (bm25s) and a remote LM (llama.cpp's OpenAI-compatible server on
    127.0.0.1, scripts/lm_server.py) answers as with the same model in process: greedy llama.cpp both ways, so the
    same steps, searches and answer, and a trace drawn from what came over HTTP."""
    from mhindex.lm.packaged import packaged_model_path
    from servers import llama_server

    assert mh("--quiet", "index", "musique", "--backend", "bm25s").code == 0
    model = packaged_model_path("smollm2-135m", tmp_path / "models")

    def kept(record: dict) -> dict:
        steps = [(s["text"], s["query"], s["retrieved_ids"]) for s in record["steps"]]
        return {"answer": record["answer"], "steps": steps, "calls": record["lm_calls"], "method": record["method"]}

    with llama_server(model) as url:
        for method, quick in QUICK.items():
            asked = ["ask", QUESTION, "--method", method, "--backend", "bm25s", *quick]
            local = mh(*asked, "--lm", "local:smollm2-135m", "--lm-threads", "1", "--json")
            remote = mh(*asked, "--lm", f"openai:smollm2@{url}", "--json")
            assert local.code == remote.code == 0, (method, remote.err)
            assert kept(remote.json()) == kept(local.json()), method
            # over HTTP but for a prompt repeated within the question (Iter-RetGen's second iteration where its
            # retrieval brings the same paragraphs), answered by the call cache in process alike
            cached = local.json()["lm"]["calls_from_cache"]
            assert remote.json()["lm_calls"] >= 1 and remote.json()["lm"]["calls_from_cache"] == cached, method
            shown = mh(*asked, "--lm", f"openai:smollm2@{url}")  # the calls again, from the call cache
            assert shown.code == 0 and f"{remote.json()['lm_calls']} LM call" in " ".join(shown.out.split())
