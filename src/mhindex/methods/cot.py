"""CoT: chain-of-thought prompting, no retrieval, as EfficientRAG's table runs it (Zhuang et al., EMNLP
2024; microsoft/EfficientRAG @6b2489f, `src/baseline/direct/direct_prompt.py`, `--mode cot`).

The released prompt of the corpus's dataset (`COT_PROMPT_HOTPOTQA`, `_WIKIMQA`, `_MUSIQUE`: three
demonstrations whose answer is a JSON object with "thought" and "answer") is sent as one user turn after
the system message "You are a helpful assistant." (`language_models/llama.py`), and the answer is the
first `{...}` of the reply's "answer" (`utils/model.py`, `ask_model` with `type="json"`). A corpus of
another dataset takes MuSiQue's prompt, as EfficientRAG's own answer step does.

Deviations, each forced: calls are greedy (the release samples at the server's default temperature), so
its three tries of an invalid reply would give the same reply; where the reply holds no JSON answer, its
first line is the answer (the release drops the question) and the record says `"json": false`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mhindex.backends.base import Retriever
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import Answer, Clock, Meter, Method, MethodContext, Query, TraceStep, trace_step
from mhindex.methods.efficientrag import SYSTEM, BaselineSettings, json_answer, released_prompt
from mhindex.options import option


@dataclass(frozen=True)
class CoTSettings(BaselineSettings):
    answer_tokens: int = option(256, "Most tokens for the JSON reply (thought and answer).", min=1)


class CoT(Method):
    name = "cot"
    title = "CoT"
    paper = "Chain-of-thought prompting, as EfficientRAG's baseline (Zhuang et al., EMNLP 2024; microsoft/EfficientRAG)"
    tables = {"EfficientRAG": {}, "SearChain": {}}
    paper_metrics = ("efficientrag_em",)
    Settings = CoTSettings
    needs_retriever = False

    settings: CoTSettings

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: CoTSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)
        self.prompt_name = settings.prompts_for(context.dataset)
        self.prompt = released_prompt(f"cot_{self.prompt_name}")

    def answer(self, query: Query) -> Answer:
        clock, meter = Clock(), Meter(self.lm)
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": self.prompt.format(question=query.question)},
        ]
        reply = meter.chat(messages, self.settings.answer_tokens, stop=[], label="thinking step by step").text.strip()
        answer, parsed = json_answer(reply)
        thought = parsed.get("thought") if parsed else None
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
            details={
                "cot": {
                    "prompt": self.prompt_name,
                    "thought": thought if isinstance(thought, str) else None,
                    "json": parsed is not None and "answer" in parsed,
                    "reply": reply,
                }
            },
        )

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """The thought, the answer read from it, and whether the reply was the JSON the prompt asks for."""
        cot = record.get("cot")
        if not isinstance(cot, dict):
            return super().trace_steps(record)
        rows = [["thought", str(cot["thought"])]] if cot.get("thought") else [["reply", str(cot.get("reply", ""))]]
        rows.append(["answer", str(record.get("answer", "")) + ("" if cot.get("json") else " (no JSON: first line)")])
        return [trace_step(f"Chain of thought ({cot.get('prompt')}'s prompt)", rows)]
