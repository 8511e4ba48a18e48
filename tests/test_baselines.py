"""The papers' baselines (CoT, Self-Ask, Iter-RetGen), each end to end on the MuSiQue sample with the fast
packaged model (SmolLM2-135M, llama.cpp) and a real Lucene index: what the record says each step did, read
the way the released code reads it, and the trace `ask` draws."""

from __future__ import annotations

import pytest

from mhindex.cli import main
from mhindex.methods.efficientrag import json_answer

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
