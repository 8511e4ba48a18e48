"""The search agents trained with RL (Search-R1, R1-Searcher) and FLARE's active retrieval, each end to end on the
MuSiQue sample with the fast packaged model (SmolLM2-135M, llama.cpp) and a real Lucene index: the loop runs as
the release runs it (the small model does not answer well, and need not), every step of the record read again with
the release's own reading (their readings of real outputs are held in tests/test_readings.py)."""

from __future__ import annotations

import pytest

from conftest import HANG_S
from mhindex.cli import main
from mhindex.methods.flare import first_sentence, masked_query
from mhindex.methods.r1searcher import END_QUERY, STOPPED, UNKNOWN, documents, read_round, released_prompt, stopped
from mhindex.methods.searchr1 import (
    INVALID,
    PROMPT,
    answer_from,
    cut_response,
    extract_solution,
    read_action,
    released_question,
)

QUESTION = "Who founded the company that made the Van Hook Township"


@pytest.fixture
def musique(home):
    assert main(["--quiet", "build", "musique"]) == 0
    return home


@pytest.mark.slow
def test_searchr1_writes_its_turn_as_the_release_and_reads_its_answer_from_it(mh, musique):
    record = mh("ask", QUESTION, "--method", "searchr1", "--max-turns", "3", "--step-tokens", "64", "--json").json()
    details, steps = record["searchr1"], record["steps"]
    prompt = PROMPT.format(question=released_question(QUESTION))
    assert prompt.endswith("Question: Who founded the company that made the Van Hook Township?\n")
    # The prompt as one user turn through the GGUF's chat template (llama.cpp renders it), the assistant's opened.
    assert record["method"] == "searchr1" and details["opening"].startswith("<|im_start|>")
    assert prompt in details["opening"] and details["opening"].endswith("<|im_start|>assistant\n")
    # One call a turn, at most max_turns + 1; the turn is each response as the release cuts it, then what came back.
    responses, rebuilt, searched, invalid = details["responses"], "", iter(steps), 0
    assert record["lm_calls"] == len(responses) <= 4
    for number, written in enumerate(responses):
        response = cut_response(written)
        rebuilt += response
        action, content = read_action(response)
        if action == "answer" or number == len(responses) - 1:
            break
        if action == "search":
            step = next(searched)
            assert step["query"] == content and len(step["retrieved_ids"]) <= 3
            assert details["turn"].startswith(rebuilt + "\n\n<information>")
            rebuilt = details["turn"][: details["turn"].index("</information>\n\n", len(rebuilt)) + 16]
        else:
            invalid += 1
            rebuilt += INVALID
    assert rebuilt == details["turn"] and next(searched, None) is None
    assert details["searches"] == len(steps) and details["invalid"] == invalid
    # How many searches it made and why it stopped, said in the record and under `ask` (#78: it rarely searches)
    stopped = "it answered (<answer>)" if details["answered"] else "the turn limit (--max-turns 3) with no <answer>"
    assert record["agent"] == {"searches": len(steps), "stopped": stopped, "invalid_turns": invalid}
    # The answer: the release's extract_solution over what the model continued and its whole turn.
    assert record["answer"] == (extract_solution(details["opening"] + details["turn"]) or "")
    assert details["extracted"] == (extract_solution(details["opening"] + details["turn"]) is not None)
    shown = " ".join(mh("ask", QUESTION, "--method", "searchr1", "--max-turns", "3", "--step-tokens", "64").out.split())
    assert "The assistant's turn" in shown and f"searched {len(steps)} time" in shown and f"stopped: {stopped}" in shown
    plain = mh("ask", QUESTION, "--method", "searchr1", "--template", "plain", "--max-turns", "0", "--step-tokens",
               "8", "--json").json()  # fmt: skip
    assert plain["searchr1"]["opening"] == prompt and plain["lm_calls"] == 1


def test_searchr1_says_when_the_answer_the_release_reads_is_not_the_model_s():
    """The release's extract_solution reads its own invalid-action note ("... between <answer> and </answer>") as an
    answer, "and"; mhindex answers as the release does, and the record says whose answer it is, never passing the
    note's word or the prompt's example off as the model's."""
    opening = PROMPT.format(question="Who?")
    rambled = "I think about it." + INVALID  # no action of the model's: the loop wrote its note
    assert extract_solution(opening + rambled) == "and" and answer_from(rambled, "and") == "the invalid-action note"
    answered = rambled + "<answer> Paris </answer>"
    assert extract_solution(opening + answered) == "Paris" and answer_from(answered, "Paris") == "the model"
    # The prompt holds two matches of the release's pattern ("<answer> and </answer>", "<answer> Beijing </answer>",
    # Search-R1 infer.py at a14dc3a): a turn with no answer is read as the example's.
    assert (
        extract_solution(opening + "nothing") == "Beijing"
        and answer_from("nothing", "Beijing") == "the prompt's example"
    )
    assert extract_solution("nothing") is None and answer_from("nothing", None) == "nobody"
    assert answer_from("I say <answer> Beijing </answer>", "Beijing") == "the model"


@pytest.mark.slow
def test_r1searcher_rounds_end_as_the_release_ends_them(mh, musique):
    asked = ["ask", QUESTION, "--method", "r1searcher", "--max-rounds", "3", "--step-tokens", "128", "--json"]
    for lm in ("local:smollm2-135m", "local:qwen2.5-0.5b"):  # the one never writes the format; the other answers
        record = mh(*asked, "--lm", lm).json()
        details, steps = record["r1searcher"], record["steps"]
        assert record["method"] == "r1searcher" and details["prompt"] == "v0"
        written, reason = details["written"], details["stop_reason_final"]
        assert record["lm_calls"] == len(written) <= 3
        assert len(steps) == len(written) - (reason != "many_retrieve")
        for text, step in zip(written, steps):  # each round that searched: its query read as the release reads it
            assert read_round(text, END_QUERY) == ("query", step["query"]) and len(step["retrieved_ids"]) <= 5
        assert record["reasoning"].count("<|begin_of_documents|>") == len(steps)
        assert record["answer"] == (details["pred_ans"].strip() if reason == "finished" else UNKNOWN)
        assert record["agent"] == {"searches": len(steps), "stopped": STOPPED[reason].format(rounds=3)}
        if lm == "local:smollm2-135m":
            assert reason == "shot_down" and details["history"] == ""
        else:  # what it wrote, as the release stores it (gen_text_store), ends with the "</answer>" it stopped at
            assert reason == "finished" and details["history"].endswith(f"<answer>{details['pred_ans']}</answer>")
            assert record["answer"] and record["answer"] != UNKNOWN
    assert released_prompt("v0").endswith("User:{question}\nAssistant: <think>")


def test_r1searchers_reading_of_a_round_and_its_documents():
    """`main`'s branches, on the text vLLM returns (the stop string left out) and which stop it was."""
    assert stopped("I need <|begin_of_query|> a\tb <|end_of_query|> more") == (
        "I need <|begin_of_query|> a\tb ",
        "<|end_of_query|>",
    )
    assert stopped("no stop at all") == ("no stop at all", None)
    assert stopped("x</answer>y<|im_end|>") == ("x", "</answer>")
    assert read_round('I need <|begin_of_query|> "Van"\tHook... ', END_QUERY) == ("query", " Van Hook ")
    assert read_round("<|begin_of_query|>", END_QUERY) == ("query_inst_error", UNKNOWN)
    assert read_round("so <answer> Paris ", "</answer>") == ("finished", " Paris ")
    assert read_round("so <answer> Paris ", None) == ("shot_down", UNKNOWN)  # the model ended without </answer>
    assert read_round("<|begin_of_query|> x", "</answer>") == ("shot_down", UNKNOWN)
    assert documents([]) == "None"


@pytest.mark.slow
def test_each_agent_over_llama_cpps_openai_server_takes_the_steps_it_takes_in_process(mh, musique, tmp_path):
    """The same GGUF in process and behind llama.cpp's OpenAI-compatible server on 127.0.0.1 (scripts/lm_server.py),
    greedy both ways: the same opening (the server renders its chat template at /apply-template), turns, searches,
    FLARE's token probabilities and the answer."""
    import json
    import subprocess
    import sys

    from mhindex.lm.packaged import packaged_model_path
    from servers import llama_server

    quick = {
        "searchr1": ("smollm2-135m", ["--max-turns", "2", "--step-tokens", "48"]),
        "r1searcher": ("qwen2.5-0.5b", ["--max-rounds", "2", "--step-tokens", "128"]),
        "flare": ("smollm2-135m", ["--max-rounds", "2"]),  # the tokens' log-probabilities over HTTP too
    }

    def kept(record: dict) -> dict:
        steps = [(s["text"], s["query"], s["retrieved_ids"]) for s in record["steps"]]
        own = {k: v for k, v in record[record["method"]].items()}
        return {"answer": record["answer"], "steps": steps, "calls": record["lm_calls"], "own": own}

    for method, (model, options) in quick.items():
        asked = ["ask", QUESTION, "--method", method, *options, "--json"]
        with llama_server(packaged_model_path(model, tmp_path / "models")) as url:
            # In a process of its own: a llama.cpp server this process already ran reuses what its cache holds, and
            # a token near a tie may then go the other way (FLARE's low-probability tokens are such).
            local = subprocess.run([sys.executable, "-m", "mhindex", *asked, "--lm", f"local:{model}", "--lm-threads",
                                    "1"], capture_output=True, text=True, timeout=HANG_S)  # fmt: skip
            remote = mh(*asked, "--lm", f"openai:{model}@{url}")
            assert local.returncode == remote.code == 0, (method, local.stderr, remote.err)
            assert kept(remote.json()) == kept(json.loads(local.stdout)), method
            assert remote.json()["lm"]["calls_from_cache"] == 0  # every call went over HTTP
            chat = mh(*asked, "--lm", f"openai-chat:{model}@{url}")
            if method == "searchr1":  # it continues the assistant's turn: a chat endpoint cannot
                assert chat.code != 0 and "is a chat endpoint" in chat.err and len(chat.err.strip().splitlines()) == 1


@pytest.mark.slow
def test_flare_retrieves_when_a_looked_ahead_token_is_uncertain_with_the_uncertain_ones_masked(mh, musique):
    import math

    record = mh("ask", QUESTION + "?", "--method", "flare", "--max-rounds", "3", "--json").json()
    rounds, steps = record["flare"]["rounds"], record["steps"]
    assert record["method"] == "flare" and 1 <= len(rounds) <= 3
    assert record["answer"] == "".join(r["kept"] for r in rounds)  # FlashRAG joins the sentences as they are
    searched = iter(steps)
    for taken in rounds:
        assert taken["output"].startswith(taken["looked_ahead"])  # the whole look-ahead, and its first sentence
        tokens = [(token, logprob) for token, logprob in taken["tokens"][: taken["sentence_tokens"]]]
        assert "".join(token for token, _ in tokens).startswith(taken["looked_ahead"][:1])  # the sentence's own
        sure = all(math.exp(logprob) > 0.2 for _, logprob in tokens)
        query = masked_query(tokens, 0.2)
        assert taken["confident"] == (sure or not query)
        if taken["confident"]:
            assert taken["kept"] == taken["looked_ahead"] and taken["query"] is None
        else:  # the query is the sentence without its uncertain tokens; the sentence is written again from its hits
            step = next(searched)
            assert step["query"] == taken["query"] == query and len(step["retrieved_ids"]) == 5
            assert step["text"] == taken["kept"] == first_sentence(taken["kept"])
    assert next(searched, None) is None and any(not r["confident"] for r in rounds)  # it did retrieve
    assert record["lm_calls"] == len(rounds) + len(steps)
    empty = sum(1 for taken in rounds if not taken["looked_ahead"].strip())
    assert record["agent"]["searches"] == len(steps) and record["agent"].get("empty_look_aheads", 0) == empty
    assert record["agent"]["stopped"] in ("--max-rounds 3 rounds done", "--max-length 256 tokens written")
    shown = " ".join(mh("ask", QUESTION + "?", "--method", "flare", "--max-rounds", "3").out.split())
    assert "round 1" in shown and "looked ahead" in shown and f"searched {len(steps)} time" in shown


@pytest.mark.slow
def test_flare_refuses_a_model_that_gives_no_token_probabilities(home):
    import mhindex

    class WithoutProbabilities(mhindex.LanguageModel):
        """The packaged model behind an endpoint that returns no log-probabilities."""

        def __init__(self, inner: mhindex.LanguageModel) -> None:
            self.inner, self.name, self.context_length = inner, "plain:" + inner.name, inner.context_length

        def complete(self, prompt, max_tokens=256, stop=(), temperature=0.0, logprobs=False, stop_when=None, keep=0):
            made = self.inner.complete(prompt, max_tokens, stop, temperature, False, stop_when, keep)
            assert made.token_logprobs is None
            return made

        def count_tokens(self, text: str) -> int:
            return self.inner.count_tokens(text)

    corpus = mhindex.build("musique")
    with mhindex.Asker("nor", corpus, answer_tokens=4) as packaged:
        with mhindex.Asker("flare", corpus, lm=WithoutProbabilities(packaged.lm)) as asker:
            answer = asker.ask(QUESTION)
    # one line, saying why (the answer of a question that failed: no traceback, nothing half-done)
    assert not answer.ok and answer.error == (
        f"flare judges each token's probability, and the model plain:{packaged.lm.name} gives none"
    )
