"""Iter-RetGen: iterative retrieval-generation synergy (Shao et al., Findings of EMNLP 2023), as EfficientRAG's
table runs it (microsoft/EfficientRAG @6b2489f, `src/baseline/retrieve/iter-retgen.py`).

For T iterations (the release's `--max_iter`, 3): retrieve the top K paragraphs for the question (from the
second iteration on, the question and the last generation's "thought", `construct_prompt`), put their texts,
one a line, in the released prompt of the corpus's dataset, and ask for a JSON reply with "thought" and
"answer" as one chat turn after the released system message. The answer is the last iteration's "answer".

Deviations, each forced or said: calls are greedy (the release samples, so its three tries of an invalid
reply would give the same one here); and where a reply holds no JSON "thought" and "answer" the release
fails the question, while here the reply stands for the thought, its JSON answer or first line for the
answer, and the record says which iterations those were (`"no_json"`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mhindex.backends.base import Hit, Retriever
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import Answer, Clock, Meter, Method, MethodContext, Query, Step, TraceStep, trace_step
from mhindex.methods.efficientrag import BaselineSettings, answer_step, json_answer, released_prompt
from mhindex.options import option


@dataclass(frozen=True)
class IterRetGenSettings(BaselineSettings):
    iterations: int = option(3, "T: retrieval-generation iterations (the release's max_iter).", min=1)
    k: int = option(10, "Paragraphs retrieved in each iteration (the release's topk).", flag="-k", min=1)
    answer_tokens: int = option(256, "Most tokens for each JSON reply (thought and answer).", min=1)
    max_paragraph_words: int = option(350, "Paragraphs are cut to this many words in prompts.", min=1)


class IterRetGen(Method):
    name = "iterretgen"
    title = "Iter-RetGen"
    paper = "Iter-RetGen (Shao et al., Findings of EMNLP 2023), as EfficientRAG's baseline (microsoft/EfficientRAG)"
    tables = {"EfficientRAG": {"Iter-RetGen": {}}}
    paper_metrics = ("efficientrag_em",)
    Settings = IterRetGenSettings

    settings: IterRetGenSettings

    @classmethod
    def most_calls(cls, settings: Any) -> int | None:
        return int(settings.iterations)

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: IterRetGenSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)
        self.prompt_name = settings.prompts_for(context.dataset)
        self.prompt = released_prompt(f"iterretgen_{self.prompt_name}")
        self.system = released_prompt("iterretgen_system")

    def answer(self, query: Query) -> Answer:
        s, clock, meter = self.settings, Clock(), Meter(self.lm)
        steps: list[Step] = []
        found: dict[str, Hit] = {}
        thought: str | None = None
        answer, no_json, replies = "", [], []
        for iteration in range(1, s.iterations + 1):
            started, before = clock(), (meter.prompt_tokens, meter.completion_tokens)
            sent = query.question if thought is None else f"{query.question} {thought}"
            hits = self.retriever.search(sent, s.k)
            found.update({h.id: h for h in hits if h.id not in found})
            reply, _ = answer_step(
                meter,
                self.prompt,
                query.question,
                [h.text for h in hits],
                answer_tokens=s.answer_tokens,
                max_words=s.max_paragraph_words,
                system=self.system,
                slot="documents",
            )
            replies.append(reply)
            answer, parsed = json_answer(reply)
            if parsed is not None and "answer" in parsed and "thought" in parsed:  # the release's check_if_valid
                thought = str(parsed["thought"])
            else:
                no_json.append(iteration)
                thought = reply
            steps.append(
                Step(
                    f"thought: {thought} / answer: {answer}",
                    sent,
                    [h.id for h in hits],
                    [h.title for h in hits],
                    clock() - started,
                    meter.prompt_tokens - before[0],
                    meter.completion_tokens - before[1],
                )
            )
        return Answer(
            query.id,
            query.question,
            answer,
            [{"id": h.id, "title": h.title} for h in found.values()],
            steps,
            meter.calls,
            meter.prompt_tokens,
            meter.completion_tokens,
            clock(),
            thought or "",
            self.name,
            departures=["a reply without a JSON thought and answer stood for them (the release fails the question)"]
            if no_json
            else [],
            details={
                "iterretgen": {
                    "prompt": self.prompt_name,
                    "iterations": len(steps),
                    "no_json": no_json,
                    "replies": replies,
                }
            },  # fmt: skip
        )

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """Each iteration's query, the paragraphs it brought and what the LM thought and answered; which replies
        held no JSON."""
        steps = super().trace_steps(record)
        for number, step in enumerate(steps, 1):
            step["title"] = f"iteration {number}"
        details = record.get("iterretgen")
        if isinstance(details, dict) and details.get("no_json"):
            missing = ", ".join(map(str, details["no_json"]))
            note = f"no JSON thought and answer in iteration {missing}: the reply stands for the thought"
            steps.append(trace_step("Note", [["", note]]))
        return steps
