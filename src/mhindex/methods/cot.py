"""CoT: chain-of-thought prompting, no retrieval: EfficientRAG's row as its release runs it (Zhuang et al., EMNLP
2024; microsoft/EfficientRAG @6b2489f, `src/baseline/direct/direct_prompt.py`, `--mode cot`), and SearChain's
(Xu et al., WWW 2024, Table 1), four-shot (its Table 8).

`--style json` (EfficientRAG's): the released prompt of the corpus's dataset (`COT_PROMPT_HOTPOTQA`, `_WIKIMQA`,
`_MUSIQUE`: three demonstrations whose answer is a JSON object with "thought" and "answer") is sent as one user
turn after the system message "You are a helpful assistant." (`language_models/llama.py`), and the answer is the
first `{...}` of the reply's "answer" (`utils/model.py`, `ask_model` with `type="json"`). A corpus of another
dataset takes MuSiQue's prompt, as EfficientRAG's own answer step does. Deviations, each forced: calls are greedy
(the release samples at the server's default temperature), so its three tries of an invalid reply would give
the same reply; where the reply holds no JSON answer, its first line is the answer (the release drops the
question) and the record says `"json": false`.

`--style plain` (SearChain's row): neither SearChain's paper nor its release gives its CoT prompt; its shots
(Table 8) are those of ReAct's, whose CoT prompt for HotpotQA is released (ysymyth/ReAct @6bdb3a1,
`prompts/prompts_naive.json` `cotqa_simple6`: "Question: / Thought: Let's think step by step. ... / Answer:"),
so that is the prompt here, its first `--max-demos` demonstrations (SearChain: 4), completed until the answer's
line ends; the answer is what follows the first "Answer:". `self_consistent` samples several such chains
(ReAct's CoT-SC, which its React->CoT-SC row falls back on) and takes the majority answer.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from mhindex.backends.base import Retriever
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import Answer, Clock, Meter, Method, MethodContext, Query, TraceStep, trace_step
from mhindex.methods.efficientrag import NO_JSON, SYSTEM, BaselineSettings, json_answer, released_prompt
from mhindex.options import option
from mhindex.text import normalize_answer

STYLES = ("json", "plain")
#: where a plain chain's answer line ends: the completion stops there
_ANSWERED = re.compile(r"(?:^|\n)Answer:[^\n]*\n")


@dataclass(frozen=True)
class CoTSettings(BaselineSettings):
    style: str = option(
        "json",
        "json: EfficientRAG's released prompt (a JSON thought and answer); plain: ReAct's CoT demonstrations "
        "(Question / Thought / Answer), SearChain's row.",
        choices=STYLES,
    )
    max_demos: int | None = option(None, "plain: the first this many of ReAct's six demonstrations \\[default: all].",
                                   min=1, max=6)  # fmt: skip
    answer_tokens: int = option(256, "Most tokens for the reply (thought and answer).", min=1)


@cache
def plain_demonstrations() -> tuple[str, ...]:
    """ReAct's six CoT demonstrations (`cotqa_simple6`), each "Question: ...\\nThought: ...\\nAnswer: ...\\n"."""
    text = resources.files("mhindex").joinpath("prompts", "react", "cotqa_simple6.txt").read_text("utf-8")
    return tuple("Question:" + part for part in text.split("Question:")[1:])


def plain_prompt(question: str, demos: int | None) -> str:
    return "".join(plain_demonstrations()[:demos]) + f"Question: {question}\nThought:"


def plain_answer(written: str) -> str:
    """A plain chain's answer: what follows its first "Answer:", to the end of that line ("" where none)."""
    found = re.search(r"(?:^|\n)Answer:([^\n]*)", written)
    return found.group(1).strip() if found else ""


def plain_chain(meter: Meter, question: str, demos: int | None, tokens: int) -> str:
    """One greedy chain of thought in ReAct's CoT format: what the LM wrote after "Thought:"."""
    return meter.complete(plain_prompt(question, demos), tokens, stop=["\nQuestion:"], label="thinking step by step",
                          stop_when=lambda text: _ANSWERED.search(text) is not None).text  # fmt: skip


def self_consistent(
    meter: Meter, question: str, demos: int | None, tokens: int, samples: int, temperature: float, seed: int
) -> tuple[str, list[dict[str, Any]]]:
    """CoT-SC (Wang et al., 2023), as ReAct's paper runs it: `samples` chains sampled at `temperature`, each seeded
    (seed, seed + 1, ...), and the answer most of them give (compared after the SQuAD normalisation; a tie goes
    to the answer given first; chains with no answer do not vote). The answer and each chain with its answer."""
    prompt, chains = plain_prompt(question, demos), list[dict[str, Any]]()
    for number in range(samples):
        written = meter.sample(prompt, tokens, ["\nQuestion:"], temperature, seed + number,
                               f"sampling chain {number + 1} of {samples}",
                               lambda text: _ANSWERED.search(text) is not None).text  # fmt: skip
        chains.append({"seed": seed + number, "chain": written, "answer": plain_answer(written)})
    votes = Counter(normalize_answer(c["answer"]) for c in chains if c["answer"].strip())
    if not votes:
        return "", chains
    top = max(votes.values())
    winner = next(c["answer"] for c in chains if c["answer"].strip() and votes[normalize_answer(c["answer"])] == top)
    return winner, chains


class CoT(Method):
    name = "cot"
    title = "CoT"
    paper = (
        "Chain-of-thought prompting, as EfficientRAG's baseline (microsoft/EfficientRAG) and SearChain's (ReAct's CoT "
        "demonstrations)"
    )
    tables = {"EfficientRAG": {"CoT": {}}, "SearChain": {"CoT": {"style": "plain", "max_demos": 4}}}
    paper_metrics = ("efficientrag_em",)
    Settings = CoTSettings
    needs_retriever = False

    settings: CoTSettings

    @classmethod
    def most_calls(cls, settings: Any) -> int | None:
        return 1

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: CoTSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)
        self.prompt_name = settings.prompts_for(context.dataset)
        self.prompt = released_prompt(f"cot_{self.prompt_name}")

    def answer(self, query: Query) -> Answer:
        clock, meter, s = Clock(), Meter(self.lm), self.settings
        if s.style == "plain":
            reply = plain_chain(meter, query.question, s.max_demos, s.answer_tokens)
            answer, thought = plain_answer(reply), reply.partition("\nAnswer:")[0].strip()
            details = {"style": "plain", "demos": len(plain_demonstrations()[: s.max_demos]), "thought": thought}
        else:
            messages = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": self.prompt.format(question=query.question)},
            ]
            reply = meter.chat(messages, s.answer_tokens, stop=[], label="thinking step by step").text.strip()
            answer, parsed = json_answer(reply)
            said = parsed.get("thought") if parsed else None
            details = {"prompt": self.prompt_name, "thought": said if isinstance(said, str) else None,
                       "json": parsed is not None and "answer" in parsed}  # fmt: skip
        return Answer(
            query.id,
            query.question,
            answer,
            [],
            [],
            meter.calls,
            meter.prompt_tokens,
            meter.completion_tokens,
            clock(),
            reply,
            self.name,
            details={"cot": {**details, "reply": reply}},
            departures=[NO_JSON] if details.get("json") is False else [],
        )

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """The thought, the answer read from it, and whether the reply was the JSON the prompt asks for."""
        cot = record.get("cot")
        if not isinstance(cot, dict):
            return super().trace_steps(record)
        rows = [["thought", str(cot["thought"])]] if cot.get("thought") else [["reply", str(cot.get("reply", ""))]]
        plain = cot.get("style") == "plain"
        note = "" if plain or cot.get("json") else " (no JSON: first line)"
        rows.append(["answer", str(record.get("answer", "")) + note])
        title = f"ReAct's CoT, {cot.get('demos')} demonstrations" if plain else f"{cot.get('prompt')}'s prompt"
        return [trace_step(f"Chain of thought ({title})", rows)]
